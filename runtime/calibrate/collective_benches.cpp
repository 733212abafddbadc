#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <ostream>
#include <vector>

#include <fmt/format.h>

#include "cost_models/collective_cost.hpp"
#include "runtime/calibrate/benches.hpp"
#include "runtime/calibrate/device_buffer.hpp"
#include "runtime/calibrate/gpu_timing.hpp"
#include "runtime/comm/check.hpp"
#include "runtime/comm/communicators.hpp"

namespace zrun::calibrate {

namespace {

using zsim::CollectiveKind;

// One collective of nccl-tests size `bytes` (bf16) on communicator c of n ranks.
void run_collective(CollectiveKind kind, ncclComm_t c, int n, int me, std::size_t bytes, void* send, void* recv,
                    cudaStream_t s) {
  const std::size_t count = bytes / 2;  // bf16 elements of the nccl-tests size
  switch (kind) {
    case CollectiveKind::all_reduce:
      ZRUN_NCCL_CHECK(ncclAllReduce(send, recv, count, ncclBfloat16, ncclSum, c, s));
      break;
    case CollectiveKind::all_gather:  // size = output
      ZRUN_NCCL_CHECK(ncclAllGather(send, recv, count / n, ncclBfloat16, c, s));
      break;
    case CollectiveKind::reduce_scatter:  // size = input
      ZRUN_NCCL_CHECK(ncclReduceScatter(send, recv, count / n, ncclBfloat16, ncclSum, c, s));
      break;
    case CollectiveKind::broadcast:
      ZRUN_NCCL_CHECK(ncclBroadcast(send, recv, count, ncclBfloat16, 0, c, s));
      break;
    case CollectiveKind::reduce:
      ZRUN_NCCL_CHECK(ncclReduce(send, recv, count, ncclBfloat16, ncclSum, 0, c, s));
      break;
    case CollectiveKind::all_to_all: {  // size = the whole send buffer
      const std::size_t per = count / n;
      ZRUN_NCCL_CHECK(ncclGroupStart());
      for (int p = 0; p < n; ++p) {
        ZRUN_NCCL_CHECK(ncclSend(static_cast<char*>(send) + p * per * 2, per, ncclBfloat16, p, c, s));
        ZRUN_NCCL_CHECK(ncclRecv(static_cast<char*>(recv) + p * per * 2, per, ncclBfloat16, p, c, s));
      }
      ZRUN_NCCL_CHECK(ncclGroupEnd());
      break;
    }
  }
  (void)me;
}

// Seconds per call of the `reps` calls between events a and b.
double per_call_s(cudaEvent_t a, cudaEvent_t b, int reps) {
  ZRUN_CUDA_CHECK(cudaEventSynchronize(b));
  float ms = 0;
  ZRUN_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  return ms * 1e-3 / reps;
}

}  // namespace

void measure_collectives(Measurements& m, Communicators& comms, const std::vector<zsim::ProcessGroup>& groups,
                         int rank, bool quick, std::ostream& log) {
  const std::size_t max_bytes = quick ? (64u << 20) : (1u << 30);
  cudaStream_t s;
  ZRUN_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  void *send = nullptr, *recv = nullptr;
  ZRUN_CUDA_CHECK(cudaMalloc(&send, max_bytes));
  ZRUN_CUDA_CHECK(cudaMalloc(&recv, max_bytes));
  ZRUN_CUDA_CHECK(cudaMemset(send, 0, max_bytes));
  cudaEvent_t a, b;
  ZRUN_CUDA_CHECK(cudaEventCreate(&a));
  ZRUN_CUDA_CHECK(cudaEventCreate(&b));
  const CollectiveKind kinds[] = {CollectiveKind::all_reduce, CollectiveKind::all_gather, CollectiveKind::reduce_scatter,
                                  CollectiveKind::broadcast, CollectiveKind::reduce, CollectiveKind::all_to_all};
  std::vector<double> world_enqueue_s;  // the host's enqueue per call on the world group (host_issue.link_collective_s)
  for (std::size_t gi = 0; gi < groups.size(); ++gi) {
    const zsim::ProcessGroup& g = groups[gi];
    if (g.size < 2) continue;
    const std::string cls = !g.crosses_nodes() ? "nvlink" : g.ranks_per_node == 1 ? "ib" : "";
    const ncclComm_t c = comms.group(static_cast<int>(gi));
    int me = 0;
    ZRUN_NCCL_CHECK(ncclCommUserRank(c, &me));
    for (CollectiveKind kind : kinds)
      for (std::size_t bytes = 1024; bytes <= max_bytes; bytes *= quick ? 16 : 4) {
        if (bytes / 2 < static_cast<std::size_t>(g.size) * g.size) continue;
        const int reps = bytes <= (1u << 20) ? 20 : bytes <= (64u << 20) ? 5 : 2;
        auto one = [&] { run_collective(kind, c, g.size, me, bytes, send, recv, s); };
        // Every member starts together: a one-element all-reduce on the group first.
        auto meet = [&] {
          ZRUN_CUDA_CHECK(cudaStreamSynchronize(s));
          ZRUN_NCCL_CHECK(ncclAllReduce(send, recv, 1, ncclBfloat16, ncclSum, c, s));
        };
        for (int w = 0; w < 2; ++w) one();
        // Issued as they come: where the host's enqueue of a call (several us for NCCL) is slower than its kernel, the
        // batch runs at the host's rate. Logged beside, and the host's time per call sizes the spin below.
        std::vector<double> inclusive, host, alone;
        for (int t = 0; t < 3; ++t) {
          meet();
          ZRUN_CUDA_CHECK(cudaEventRecord(a, s));
          const auto h0 = std::chrono::steady_clock::now();
          for (int r = 0; r < reps; ++r) one();
          host.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - h0).count() / reps);
          ZRUN_CUDA_CHECK(cudaEventRecord(b, s));
          inclusive.push_back(per_call_s(a, b, reps));
        }
        // On the GPU alone, as the profile's other figures (gpu_timing.hpp): the calls enqueued behind a spin, led by
        // one that every member meets at, then timed back to back, as a step's prefetched calls run with the host
        // ahead (the H200's 2-rank all-gathers of 4 KiB: 9.7-11 us a call issued as they come, about 5 us in the
        // suite's steps).
        const double host_s = median(host);
        if (gi == 0 && kind != CollectiveKind::broadcast && kind != CollectiveKind::reduce)
          world_enqueue_s.push_back(host_s);
        for (int t = 0; t < 3; ++t) {
          meet();
          alone.push_back(time_behind_spin(one, reps, host_s, s, one));
        }
        const double t = median(alone);
        if (rank == 0) {
          const CollectiveSample sample{kind, g.size, g.nodes_spanned(), static_cast<double>(bytes), t};
          m.collectives[cls.empty() ? "mixed:" + g.name : cls].push_back(sample);
          log << fmt::format("  {} on {} (size {}, {} node(s)) {} B: {:.1f} us, busbw {:.1f} GB/s (issued as they come "
                             "{:.1f} us, the host's enqueue {:.1f} us)\n",
                             zsim::to_string(kind), g.name, g.size, g.nodes_spanned(), bytes, t * 1e6,
                             zsim::bus_bytes(kind, static_cast<double>(bytes), g.size) / t / 1e9,
                             median(inclusive) * 1e6, host_s * 1e6);
        }
      }
  }
  if (rank == 0 && !world_enqueue_s.empty()) {
    m.host_issue.link_collective_s = median(world_enqueue_s);
    log << fmt::format("  NCCL host issue per call among the GPUs (the median enqueue on {} over {} kinds and sizes): "
                       "{:.2f} us\n", groups.front().name, world_enqueue_s.size(), m.host_issue.link_collective_s * 1e6);
  }
  ZRUN_CUDA_CHECK(cudaEventDestroy(a));
  ZRUN_CUDA_CHECK(cudaEventDestroy(b));
  ZRUN_CUDA_CHECK(cudaFree(send));
  ZRUN_CUDA_CHECK(cudaFree(recv));
  ZRUN_CUDA_CHECK(cudaStreamDestroy(s));
}

void measure_one_rank_collectives(Measurements& m, bool quick, std::ostream& log) {
  const std::size_t max_bytes = quick ? (64u << 20) : (1u << 30);
  ncclUniqueId id;
  ZRUN_NCCL_CHECK(ncclGetUniqueId(&id));
  ncclComm_t c = nullptr;
  ZRUN_NCCL_CHECK(ncclCommInitRank(&c, 1, id, 0));
  cudaStream_t s;
  ZRUN_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  DeviceBuffer in(max_bytes), out(max_bytes);
  void *a = in.p, *b = out.p;
  ZRUN_CUDA_CHECK(cudaMemset(a, 0, max_bytes));
  // The calls of zrun's executor (runtime/exec/executor.cpp run_collective) that move data on one rank: an all-gather
  // into another buffer (a single parameter's gather into its own tensor) and the averaging reductions (ncclAvg: a
  // PreMulSum kernel over the buffer), in place. An all-gather in place moves nothing (NCCL returns at once).
  log << "zrun calibrate: collectives on a one-rank communicator (all-gather out of place, averaging reductions in place)\n";
  std::vector<double> host;  // the host's enqueue time per call
  for (CollectiveKind kind : {CollectiveKind::all_gather, CollectiveKind::reduce_scatter, CollectiveKind::all_reduce})
    for (std::size_t bytes = 1024; bytes <= max_bytes; bytes *= quick ? 16 : 4) {
      const std::size_t count = bytes / 2;  // bf16
      const CallTime call = time_call(
          [&] {
            if (kind == CollectiveKind::all_gather)
              ZRUN_NCCL_CHECK(ncclAllGather(a, b, count, ncclBfloat16, c, s));
            else if (kind == CollectiveKind::reduce_scatter)
              ZRUN_NCCL_CHECK(ncclReduceScatter(a, a, count, ncclBfloat16, ncclAvg, c, s));
            else
              ZRUN_NCCL_CHECK(ncclAllReduce(a, a, count, ncclBfloat16, ncclAvg, c, s));
          },
          s);
      const double t = call.gpu_s;
      host.push_back(call.host_s);
      m.one_rank.push_back({kind, 1, 1, static_cast<double>(bytes), t});
      log << fmt::format("  one-rank {} {} B: {:.1f} us, {:.1f} GB/s\n", zsim::to_string(kind), bytes, t * 1e6,
                         static_cast<double>(bytes) / t / 1e9);
    }
  std::sort(host.begin(), host.end());
  m.host_issue.collective_s = host[host.size() / 2];
  log << fmt::format("  one-rank NCCL host issue per call (median): {:.2f} us\n", m.host_issue.collective_s * 1e6);
  ZRUN_CUDA_CHECK(cudaStreamDestroy(s));
  ZRUN_NCCL_CHECK(ncclCommDestroy(c));
}

}  // namespace zrun::calibrate
