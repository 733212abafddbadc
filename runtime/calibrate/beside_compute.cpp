// zrun calibrate: how fast the kernels of the side streams run while the compute stream runs GEMMs, and how fast the
// GEMMs run beside them; on 2+ GPUs also an all-gather among the ranks while every GPU runs GEMMs. A one-rank NCCL
// reduction or a cudaMemcpyAsync beside back-to-back GEMMs runs several times slower than alone on the H200 (the
// stage-3 bucket's reduce-scatter and partition copy of the suite's medium run: 2.2 ms beside the backward, 0.6-0.7
// ms alone); a copy kernel of many blocks much less so. Each kind is timed alone and beside a stream of square bf16
// GEMMs (4096 at 4-256 MiB, then 8192 at the largest) that covers it; the profile builder fits each kind's sizes as a
// wait for the running GEMM plus a rate after it. A copy of many pieces is timed too (recorded only).
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <ostream>
#include <vector>

#include <fmt/format.h>

#include "runtime/calibrate/benches.hpp"
#include "runtime/calibrate/calibrate_kernels.hpp"
#include "runtime/calibrate/device_buffer.hpp"
#include "runtime/calibrate/fit.hpp"
#include "runtime/calibrate/gpu_timing.hpp"
#include "runtime/comm/check.hpp"
#include "runtime/exec/batched_copy.hpp"
#include "runtime/model/gemm.hpp"

namespace zrun::calibrate {

namespace {

// `side` on stream `s` started once the first of enough `load` calls on stream `l` has finished, so that the load
// runs through the whole side call even at a tenth of its alone speed: the side call's seconds, and the fraction of
// their alone rate the loads kept while it ran (the loads' time after the first, less that many loads alone, is what
// the side call cost them: rate = 1 - that / the side call's time). Medians of 5. With `meet` (a collective among
// ranks): each trial first meets the other ranks on `s`, and the loads start behind it, so that every rank's side
// call starts at the same moment and none is timed waiting for a late peer.
struct Beside {
  double side_s = 0, load_rate = 0;
};
Beside time_beside(const std::function<void()>& side, cudaStream_t s, double side_alone_s,
                   const std::function<void()>& load, cudaStream_t l, double load_s,
                   const std::function<void()>& meet = {}) {
  cudaEvent_t first, last, a, b, met;
  ZRUN_CUDA_CHECK(cudaEventCreate(&first));
  ZRUN_CUDA_CHECK(cudaEventCreate(&last));
  ZRUN_CUDA_CHECK(cudaEventCreate(&a));
  ZRUN_CUDA_CHECK(cudaEventCreate(&b));
  ZRUN_CUDA_CHECK(cudaEventCreateWithFlags(&met, cudaEventDisableTiming));
  const int calls = 2 + static_cast<int>(std::ceil(10 * side_alone_s / load_s));
  std::vector<double> trials, rates;
  for (int t = 0; t < 5; ++t) {
    if (meet) {
      meet();
      ZRUN_CUDA_CHECK(cudaEventRecord(met, s));
      ZRUN_CUDA_CHECK(cudaStreamWaitEvent(l, met, 0));
    }
    load();
    ZRUN_CUDA_CHECK(cudaEventRecord(first, l));
    for (int i = 1; i < calls; ++i) load();
    ZRUN_CUDA_CHECK(cudaEventRecord(last, l));
    ZRUN_CUDA_CHECK(cudaStreamWaitEvent(s, first, 0));
    ZRUN_CUDA_CHECK(cudaEventRecord(a, s));
    side();
    ZRUN_CUDA_CHECK(cudaEventRecord(b, s));
    ZRUN_CUDA_CHECK(cudaDeviceSynchronize());
    float ms = 0, load_ms = 0;
    ZRUN_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    ZRUN_CUDA_CHECK(cudaEventElapsedTime(&load_ms, first, last));
    trials.push_back(ms * 1e-3);
    const double lost = load_ms * 1e-3 - (calls - 1) * load_s;
    rates.push_back(std::clamp(1.0 - lost / std::max(ms * 1e-3, 1e-9), 0.0, 1.0));
  }
  cudaEventDestroy(first);
  cudaEventDestroy(last);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaEventDestroy(met);
  std::sort(trials.begin(), trials.end());
  std::sort(rates.begin(), rates.end());
  return {trials[trials.size() / 2], rates[rates.size() / 2]};
}

// The load the side kinds are timed beside: back-to-back square bf16 GEMMs y = x w of up to gmax on a stream of its
// own, the operands random.
struct GemmLoad {
  DeviceBuffer x, w, y;
  cudaStream_t l = nullptr;
  model::Gemm gemm;
  explicit GemmLoad(std::int64_t gmax) : x(gmax * gmax * 2), w(gmax * gmax * 2), y(gmax * gmax * 2) {
    ZRUN_CUDA_CHECK(cudaStreamCreateWithFlags(&l, cudaStreamNonBlocking));
    fill_random(x.p, gmax * gmax, kFillBf16, 21, l);
    fill_random(w.p, gmax * gmax, kFillBf16, 22, l);
  }
  ~GemmLoad() { cudaStreamDestroy(l); }
  GemmLoad(const GemmLoad&) = delete;
  GemmLoad& operator=(const GemmLoad&) = delete;
  // One g x g x g GEMM on the load's stream.
  std::function<void()> call(std::int64_t g) {
    model::GemmCall c;
    c.m = c.n = c.k = g;
    c.a = x.p, c.lda = g;
    c.b = w.p, c.ldb = g;
    c.d = y.p, c.ldd = g;
    return [this, c] { gemm.run(c, model::DType::bf16, l); };
  }
};

// The side calls' sizes, smallest first: 4 MiB .. 256 MiB (quick: 4 and 64 MiB). Several, because a side call
// beside GEMMs waits for SMs to come free before it moves anything: a delay that one size cannot tell from a rate.
std::vector<std::size_t> beside_sizes(bool quick) {
  if (quick) return {4u << 20, 64u << 20};
  return {4u << 20, 16u << 20, 64u << 20, 256u << 20};
}

}  // namespace

void measure_beside_compute(Measurements& m, bool quick, std::ostream& log) {
  const std::vector<std::size_t> sizes = beside_sizes(quick);
  const std::size_t max_bytes = sizes.back();
  const std::int64_t gmax = 8192;
  GemmLoad gemms(gmax);
  const cudaStream_t l = gemms.l;
  DeviceBuffer src(max_bytes), dst(max_bytes);
  cudaStream_t s;
  ZRUN_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  ZRUN_CUDA_CHECK(cudaMemsetAsync(src.p, 0, max_bytes, s));
  ncclUniqueId id;
  ZRUN_NCCL_CHECK(ncclGetUniqueId(&id));
  ncclComm_t c = nullptr;
  ZRUN_NCCL_CHECK(ncclCommInitRank(&c, 1, id, 0));
  std::size_t bytes = max_bytes;  // the size the side calls below move, set before each is timed
  CopyPiece piece{src.p, dst.p, 0};
  const std::pair<const char*, std::function<void()>> sides[] = {
      {"memcpy", [&] { ZRUN_CUDA_CHECK(cudaMemcpyAsync(dst.p, src.p, bytes, cudaMemcpyDeviceToDevice, s)); }},
      {"kernel", [&] { batched_copy(&piece, 1, s); }},
      {"collective",
       [&] { ZRUN_NCCL_CHECK(ncclAllReduce(src.p, src.p, bytes / 2, ncclBfloat16, ncclAvg, c, s)); }},
  };
  // The load: back-to-back square bf16 GEMMs, first 4096 (a transformer layer's GEMM at a few thousand tokens:
  // the profile's figures) with every size, then 8192 (longer kernels, recorded only) with the largest.
  for (const std::int64_t g : {std::int64_t{4096}, gmax}) {
    const std::function<void()> load = gemms.call(g);
    const double load_s = time_gpu(load, l, 20);
    log << fmt::format("zrun calibrate: side-stream kernels beside GEMMs ({} x {} x {} bf16: {:.0f} us, {:.0f} TFLOPS)\n",
                       g, g, g, load_s * 1e6, 2.0 * g * g * g / load_s / 1e12);
    for (const std::size_t n : sizes) {
      if (g != 4096 && n != max_bytes) continue;
      bytes = n;
      piece.bytes = static_cast<std::int64_t>(n);
      for (const auto& [kind, side] : sides) {
        const double alone = time_gpu(side, s, 50);
        const Beside beside = time_beside(side, s, alone, load, l, load_s);
        m.beside.push_back({kind, static_cast<double>(n), alone, beside.side_s, g, beside.load_rate, load_s});
        log << fmt::format("  {} of {} MiB: {:.1f} us alone, {:.1f} us beside the GEMMs: {:.2f} of its rate; the "
                           "GEMMs kept {:.2f} of theirs\n", kind, n >> 20, alone * 1e6, beside.side_s * 1e6,
                           alone / beside.side_s, beside.load_rate);
      }
    }
  }
  // A copy of many pieces (stage 3's partition of a gradient bucket: a cudaMemcpyAsync per parameter) beside 4096^3
  // GEMMs: does each piece wait for the running GEMM? Recorded only.
  {
    const std::function<void()> load = gemms.call(4096);
    const double load_s = time_gpu(load, l, 20);
    const std::size_t total = quick ? (16u << 20) : (64u << 20);
    for (const int pieces : {16, 64}) {
      const std::size_t each = total / static_cast<std::size_t>(pieces);
      const std::function<void()> side = [&] {
        for (int i = 0; i < pieces; ++i)
          ZRUN_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(dst.p) + i * each, static_cast<const char*>(src.p) + i * each,
                                          each, cudaMemcpyDeviceToDevice, s));
      };
      const double alone = time_gpu(side, s, 20);
      const Beside beside = time_beside(side, s, alone, load, l, load_s);
      m.beside.push_back({"memcpy", static_cast<double>(total), alone, beside.side_s, 4096, beside.load_rate, load_s,
                          pieces});
      log << fmt::format("  memcpy of {} MiB in {} pieces: {:.1f} us alone, {:.1f} us beside the GEMMs\n", total >> 20,
                         pieces, alone * 1e6, beside.side_s * 1e6);
    }
  }
  ZRUN_NCCL_CHECK(ncclCommDestroy(c));
  ZRUN_CUDA_CHECK(cudaStreamDestroy(s));
}

void measure_link_collective_beside_compute(Measurements& m, ncclComm_t world, int ranks, int rank, bool quick,
                                            std::ostream& log) {
  // Every rank runs the same trials on its own GPU: back-to-back 4096^3 bf16 GEMMs on one stream and, once the first is
  // done, an all-gather of the world on another (the stage-3 fetch's collective; its output `bytes`), so that the
  // collective crosses the links while every GPU computes, as in a data-parallel step. Rank 0 records.
  const std::vector<std::size_t> sizes = beside_sizes(quick);
  const std::int64_t g = 4096;
  GemmLoad gemms(g);
  const cudaStream_t l = gemms.l;
  DeviceBuffer out(sizes.back());
  cudaStream_t s;
  ZRUN_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  ZRUN_CUDA_CHECK(cudaMemsetAsync(out.p, 0, sizes.back(), s));
  std::size_t per_rank = 0;  // bf16 elements each rank contributes, set for each size
  const std::function<void()> side = [&] {
    ZRUN_NCCL_CHECK(ncclAllGather(static_cast<char*>(out.p) + rank * per_rank * 2, out.p, per_rank, ncclBfloat16,
                                  world, s));
  };
  // The call every rank meets at before a timed one (their spins and loads end at different moments).
  const std::function<void()> meet = [&] {
    ZRUN_NCCL_CHECK(ncclAllReduce(out.p, out.p, 1, ncclBfloat16, ncclSum, world, s));
  };
  const std::function<void()> load = gemms.call(g);
  const double load_s = time_gpu(load, l, 20);
  for (const std::size_t bytes : sizes) {
    per_rank = bytes / 2 / static_cast<std::size_t>(ranks);
    side();
    // Alone: on the GPU alone (behind a spin, after the call the ranks meet at), as calibrate times the collectives;
    // the median of 5 trials of one call, the spin covering 20 us of the host's enqueue (an NCCL call's is 5-11 us).
    std::vector<double> alone_trials;
    for (int t = 0; t < 5; ++t) alone_trials.push_back(time_behind_spin(side, 1, 20e-6, s, meet));
    const double alone = median(alone_trials);
    const Beside beside = time_beside(side, s, alone, load, l, load_s, meet);
    if (rank == 0) {
      m.beside.push_back(
          {"link_collective", static_cast<double>(bytes), alone, beside.side_s, g, beside.load_rate, load_s});
      log << fmt::format("zrun calibrate: an all-gather of {} MiB over {} ranks beside GEMMs on every rank ({} x {} x {} "
                         "bf16: {:.0f} us): {:.1f} us alone, {:.1f} us beside: {:.2f} of its rate; the GEMMs kept "
                         "{:.2f} of theirs\n", bytes >> 20, ranks, g, g, g, load_s * 1e6, alone * 1e6,
                         beside.side_s * 1e6, alone / beside.side_s, beside.load_rate);
    }
  }
  ZRUN_CUDA_CHECK(cudaStreamDestroy(s));
}

}  // namespace zrun::calibrate
