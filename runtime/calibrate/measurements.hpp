// What zrun calibrate measured on one machine (filled by the GPU benchmarks, or synthetically by tests), and
// the hardware profile built from it: every fitted value with its residual and the measurements behind it.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/calibrate/fit.hpp"
#include "sim/scenario/scenario.hpp"

namespace zrun::calibrate {

// A side-stream kernel timed alone and beside back-to-back GEMMs on another stream (beside_compute.cpp).
struct BesideSample {
  std::string kind;  // "memcpy" (cudaMemcpyAsync D2D), "kernel" (a copy kernel), "collective" (one-rank NCCL),
                     // "link_collective" (an all-gather among 2+ ranks, GEMMs on every rank)
  double bytes = 0;
  double alone_s = 0;
  double beside_s = 0;
  std::int64_t gemm = 4096;  // the load's square GEMM size
  double gemm_rate = 0;      // the fraction of their alone rate the GEMMs kept while it ran (0: not measured)
  double gemm_s = 0;         // one load GEMM's time alone (0: not recorded, records before 2026-11-29)
  int pieces = 1;            // memcpy: as many cudaMemcpyAsync calls of bytes / pieces back to back (recorded only)
};

struct Measurements {
  std::string gpu_name;
  std::int64_t hbm_bytes = 0;
  int sms = 0;
  int gpus = 0;                       // GPUs the run used
  std::int64_t host_memory_bytes = 0;
  int host_cores = 0;
  bool quick = false;
  // How the GPU figures were timed: "gpu_alone" (behind a spin kernel, since 2026-11-27) or "host_inclusive" (older
  // records, which carry no key). Only a GPU-alone record writes efficiency.host_issue.
  std::string timing = "gpu_alone";
  std::map<std::string, std::vector<GemmSample>> gemm;     // "bf16", "fp16", "fp32"
  std::vector<KernelSample> kernels;
  std::vector<FlashSample> flash;     // zrun's flash attention forward and backward (empty: not measured, an older record)
  std::vector<SizeSample> h2d_pinned, d2h_pinned, h2d_pageable, d2h_pageable;
  // kernels/cpu Adam at each thread count calibrate timed (cpu_adam_thread_counts; empty: not measured), on one rank
  // and, on 2+ GPUs, on every rank at once (CpuAdamSample::ranks). A record written before calibrate measured several
  // thread counts holds one sample, on every hardware thread.
  std::vector<CpuAdamSample> cpu_adam;
  std::vector<SizeSample> nvme_read, nvme_write;  // 1 MiB .. 1 GiB transfers: many 1 MiB requests in flight
  std::vector<SizeSample> nvme_read_one, nvme_write_one;  // 4 KiB .. 1 MiB transfers: one request each
  std::string nvme_path;              // the temp file's directory
  bool nvme_direct = false;           // O_DIRECT was used
  int nvme_moments = 0;               // moments the disk was sampled at (0: an older record, one moment)
  double nvme_moments_apart_s = 0;    // seconds from the first moment to the last
  double kernel_launch_s = 0;         // an empty kernel, launch to launch
  double kernel_launch_host_inclusive_s = 0;  // the same, issued as it comes (0: not recorded)
  double gemm_launch_s = 0;           // a 1 x 1 x 1 GEMM, launch to launch
  // The host's time to enqueue one call of each kind, as zrun's executor makes it (0: not measured, an older record):
  // what efficiency.host_issue charges the issuing thread.
  struct HostIssue {
    double kernel_s = 0;      // an empty kernel's launch
    double gemm_s = 0;        // a cuBLASLt GEMM (zrun's GemmRunner::run), the median over the bf16 grid's shapes
    double collective_s = 0;  // an NCCL call on a one-rank communicator (the median over sizes and kinds)
    double memcpy_s = 0;      // a cudaMemcpyAsync device to device
    double event_s = 0;       // a cudaEventRecord (zrun records and waits on events around its ops)
    // A cuBLASLt GEMM issued as a step issues them, each call another shape (the bf16 grid's in turn, rounds of it;
    // records since 2026-11-29, else 0): where given, the profile's price of a GEMM call.
    double gemm_in_turn_s = 0;
    // An NCCL call among the GPUs: the median of the host's enqueue over the collectives the schedules use (all-reduce,
    // all-gather, reduce-scatter, all-to-all) on the world group, every size (2+ GPUs, records since 2026-11-29; else 0).
    double link_collective_s = 0;
  } host_issue;
  std::map<std::string, std::vector<CollectiveSample>> collectives;  // link class "nvlink" / "ib"
  // How the collectives among ranks were timed: "gpu_alone" (behind a spin, since 2026-11-29) or "host_inclusive"
  // (issued as they come: older records, whose calibration.collectives carry no timing key).
  std::string collectives_timing = "gpu_alone";
  std::string collectives_note;       // why a link class has no measurements
  // NCCL on a one-rank communicator as zrun calls it where data moves (all_gather out of place, reduce_scatter and
  // all_reduce averaging in place): what a one-GPU run's bucket all-reduces and gathers cost.
  std::vector<CollectiveSample> one_rank;
  std::vector<BesideSample> beside;
};

// The key of calibration.cpu_adam's samples of one rank, each [threads, params, median step in microseconds].
inline constexpr const char* kCpuAdamSamplesKey = "samples [threads, params, us]";
// The key of its samples of several ranks at once, each [ranks, threads per rank, params per rank, the median of the
// slowest rank's step in microseconds].
inline constexpr const char* kCpuAdamTogetherKey = "together [ranks, threads, params, us]";

// One `cluster:` value of the profile: dotted key below cluster, YAML scalar text, its comment (source).
struct ProfileEntry {
  std::string key;
  std::string value;
  std::string comment;
};

struct CalibratedProfile {
  std::vector<std::string> header;    // comment lines at the top
  std::vector<ProfileEntry> cluster;  // grouped so that entries of a block are contiguous
  nlohmann::json calibration;         // the `calibration:` record (zsim does not read it)
};

// Builds the profile: measured and fitted values where there are measurements, the base profile's values
// (marked "not calibrated") elsewhere. Throws std::invalid_argument when a fit has too few measurements.
CalibratedProfile build_profile(const Measurements& m, const zsim::ClusterSpec& base, const std::string& base_name);

// The YAML text: header comments, `cluster:` with one commented value per line, `calibration:` (JSON flow
// values inside block maps, which YAML reads).
std::string profile_yaml(const CalibratedProfile& p);

// The measurements recorded in the `calibration:` block of a profile zrun calibrate wrote (what build_profile
// needs to fit again, e.g. after a change of the models: zrun calibrate --refit). Throws zsim::InputError naming
// the file when it has no record or a malformed one.
Measurements measurements_from_profile(const std::string& file);

// The data-sheet profile of a GPU name ("NVIDIA H100 80GB HBM3" -> "h100-hgx-ib400"); "" when unknown.
std::string base_profile_for_gpu(const std::string& gpu_name);

}  // namespace zrun::calibrate

namespace zrun::calibrate {

// The cluster of hardware profile `name` (searched as zsim searches cluster.profile, plus extra_dir first),
// loaded through zsim's scenario loader. Throws zsim::InputError when there is no such profile or it is bad.
zsim::ClusterSpec load_profile_cluster(const std::string& name, const std::string& extra_dir = "");

}  // namespace zrun::calibrate
