// Options of one simulation run that are not part of the cluster or the schedule.
#pragma once
#include "sim/scenario/scenario.hpp"

namespace zsim {

// How concurrent transfers of the simulated rank use a link they share.
//  fair:    max-min fair sharing (progressive filling) among the flows active at each instant; work-conserving
//           and physically faithful, but like any dynamic sharing it admits small Graham-type anomalies
//           (a faster link can let a transfer start earlier and slow a critical one; docs/timing.md).
//  ordered: a link serves the transfers that use it one at a time, in program order (each at the full
//           rate of its route). Timing then is a max-plus system of fixed precedences, so more bandwidth
//           provably never slows a step; it can idle a link while an earlier transfer waits for its deps.
enum class SharePolicy { fair, ordered };

struct SimOptions {
  SharePolicy share = SharePolicy::ordered;
  // An alloc on the GPU tier waits (its stream stalls) until the rank's live GPU bytes plus its own fit in
  // gpu.hbm_bytes, as a caching allocator blocks until a stream frees memory. A schedule whose deps already
  // bound how far streams run ahead never waits. If every op is stuck behind such a wait, the earliest
  // waiting alloc proceeds over capacity and is counted in TimingResult::memory_overcommits.
  bool limit_gpu_memory = true;
  // Training precision: GEMM-bound ops run at gpu.peak_tflops for bf16/fp16, gpu.peak_fp32_tflops for fp32.
  Precision precision = Precision::bf16;
  // The caller has already run check_schedule() on this very schedule (the pipeline: make_report checks
  // it), so simulate() need not check it again. Speed only; a wrong `true` skips the structural checks.
  bool schedule_checked = false;
};

}  // namespace zsim
