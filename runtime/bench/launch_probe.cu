// launch_probe: what a small kernel costs on the GPU's timeline inside a stream of others, apart from the host's speed
// (docs/timing.md "Kernel launches"). Each probe enqueues a sequence of units (a unit: one or more calls) on one
// stream twice: behind a spin kernel, so the host has enqueued the whole sequence before the GPU starts it ("GPU
// alone": the GPU's own cost per unit), and without it, back to back as a step issues them ("host-inclusive": at the
// host's rate where that is slower). Prints per unit: GPU alone, host-inclusive, and the host's enqueue time. Probes
// with a timing event after each unit show that event's cost on the GPU; "cold" probes take each call's operands from
// the next of 64 buffer sets (beyond the L2), as a step's kernels find theirs (docs/timing.md "How calibrate times a
// call" has the H200's figures).
// Usage: launch_probe [units=200]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "runtime/comm/check.hpp"
#include "runtime/model/gemm.hpp"
#include "runtime/model/layers.hpp"

namespace {

__global__ void empty_kernel() {}

__global__ void spin_kernel(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

struct Result {
  double gpu_alone_s = 0, host_inclusive_s = 0, host_enqueue_s = 0;
};

double elapsed_s(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  ZRUN_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  return ms * 1e-3;
}

// Median of 5 trials of `units` units.
Result probe(const std::function<void()>& unit, int units, cudaStream_t s) {
  cudaEvent_t a, b;
  ZRUN_CUDA_CHECK(cudaEventCreate(&a));
  ZRUN_CUDA_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 10; ++i) unit();
  ZRUN_CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<double> alone, inclusive, enqueue;
  for (int t = 0; t < 5; ++t) {
    spin_kernel<<<1, 1, 0, s>>>(2000ll * 1000 * 50);  // ~25-50 ms at 1-2 GHz: longer than the host's enqueue
    ZRUN_CUDA_CHECK(cudaEventRecord(a, s));
    const auto h0 = std::chrono::steady_clock::now();
    for (int u = 0; u < units; ++u) unit();
    enqueue.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - h0).count() / units);
    ZRUN_CUDA_CHECK(cudaEventRecord(b, s));
    ZRUN_CUDA_CHECK(cudaEventSynchronize(b));
    alone.push_back(elapsed_s(a, b) / units);
    ZRUN_CUDA_CHECK(cudaEventRecord(a, s));
    for (int u = 0; u < units; ++u) unit();
    ZRUN_CUDA_CHECK(cudaEventRecord(b, s));
    ZRUN_CUDA_CHECK(cudaEventSynchronize(b));
    inclusive.push_back(elapsed_s(a, b) / units);
  }
  ZRUN_CUDA_CHECK(cudaGetLastError());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  auto med = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  return {med(alone), med(inclusive), med(enqueue)};
}

}  // namespace

int main(int argc, char** argv) {
  using zrun::model::DType;
  const int units = argc > 1 ? std::atoi(argv[1]) : 200;
  cudaStream_t s;
  ZRUN_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t timing_event, plain_event;
  ZRUN_CUDA_CHECK(cudaEventCreate(&timing_event));
  ZRUN_CUDA_CHECK(cudaEventCreateWithFlags(&plain_event, cudaEventDisableTiming));

  // The small model's shapes at micro-batch 1 (validate/suite/small.yaml): 1024 tokens of hidden 768, ffn 2048.
  const std::int64_t rows = 1024, h = 768, f = 2048;
  void *x, *w, *y, *wq, *q, *big;
  float* stats;
  ZRUN_CUDA_CHECK(cudaMalloc(&x, rows * h * 2));
  ZRUN_CUDA_CHECK(cudaMalloc(&y, rows * h * 2));
  ZRUN_CUDA_CHECK(cudaMalloc(&w, h * 2));
  ZRUN_CUDA_CHECK(cudaMalloc(&wq, h * f * 2));
  ZRUN_CUDA_CHECK(cudaMalloc(&q, rows * f * 2));
  ZRUN_CUDA_CHECK(cudaMalloc(&stats, 2 * rows * 4));
  ZRUN_CUDA_CHECK(cudaMalloc(&big, 256ll << 20));
  ZRUN_CUDA_CHECK(cudaMemset(x, 0, rows * h * 2));
  ZRUN_CUDA_CHECK(cudaMemset(w, 0, h * 2));
  ZRUN_CUDA_CHECK(cudaMemset(wq, 0, h * f * 2));
  zrun::model::Gemm gemm;
  // q = x W as zrun's linear layer calls it (runtime/model/gemm.cu linear_forward), and a 16 x 16 x 16 GEMM.
  auto linear = [&](const void* in, const void* weight, void* out, std::int64_t outs) {
    zrun::model::linear_forward(gemm, DType::bf16, in, weight, nullptr, nullptr, out, rows, h, outs, s);
  };
  zrun::model::GemmCall g_tiny;
  g_tiny.m = g_tiny.n = g_tiny.k = 16;
  g_tiny.a = g_tiny.b = x;
  g_tiny.d = q;
  g_tiny.lda = g_tiny.ldb = g_tiny.ldd = 16;
  auto norm = [&] { zrun::model::norm_forward(DType::bf16, false, x, w, nullptr, y, stats, rows, h, 1e-5f, s); };
  // Cold variants: each call on the next of 64 buffer sets (~0.6 GB, beyond the 50 MB L2), as a step's kernels find
  // their weights (and often their inputs) evicted by the layers between.
  constexpr int kSets = 64;
  std::vector<void*> xs(kSets), ys(kSets), ws(kSets), qs(kSets);
  for (int i = 0; i < kSets; ++i) {
    ZRUN_CUDA_CHECK(cudaMalloc(&xs[i], rows * h * 2));
    ZRUN_CUDA_CHECK(cudaMalloc(&ys[i], rows * h * 2));
    ZRUN_CUDA_CHECK(cudaMalloc(&ws[i], h * f * 2));
    ZRUN_CUDA_CHECK(cudaMalloc(&qs[i], rows * f * 2));
    ZRUN_CUDA_CHECK(cudaMemset(xs[i], 0, rows * h * 2));
    ZRUN_CUDA_CHECK(cudaMemset(ws[i], 0, h * f * 2));
  }
  int next = 0;
  auto norm_cold = [&] {
    const int i = next++ % kSets;
    zrun::model::norm_forward(DType::bf16, false, xs[i], w, nullptr, ys[i], stats, rows, h, 1e-5f, s);
  };
  auto gemm_cold = [&](bool input_cold) {
    const int i = next++ % kSets;
    linear(input_cold ? xs[i] : x, ws[i], qs[i], h);
  };
  auto flush = [&] { ZRUN_CUDA_CHECK(cudaMemsetAsync(big, 0, 256ll << 20, s)); };

  struct Probe {
    std::string name;
    std::function<void()> unit;
  };
  const std::vector<Probe> probes = {
      {"empty kernel", [&] { empty_kernel<<<1, 1, 0, s>>>(); }},
      {"empty kernel + timing event", [&] { empty_kernel<<<1, 1, 0, s>>>(); ZRUN_CUDA_CHECK(cudaEventRecord(timing_event, s)); }},
      {"empty kernel + untimed event", [&] { empty_kernel<<<1, 1, 0, s>>>(); ZRUN_CUDA_CHECK(cudaEventRecord(plain_event, s)); }},
      {"empty kernel 132 blocks x 256", [&] { empty_kernel<<<132, 256, 0, s>>>(); }},
      {"rmsnorm 1024x768 bf16", norm},
      {"rmsnorm + timing event", [&] { norm(); ZRUN_CUDA_CHECK(cudaEventRecord(timing_event, s)); }},
      {"gemm 16^3 bf16", [&] { gemm.run(g_tiny, DType::bf16, s); }},
      {"gemm q 768x1024x768 bf16", [&] { linear(x, wq, q, h); }},
      {"gemm q + timing event", [&] { linear(x, wq, q, h); ZRUN_CUDA_CHECK(cudaEventRecord(timing_event, s)); }},
      {"gemm up 2048x1024x768 bf16", [&] { linear(x, wq, q, f); }},
      {"rmsnorm, gemm q, k, v", [&] { norm(); linear(x, wq, q, h); linear(x, wq, q, h); linear(x, wq, q, h); }},
      {"rmsnorm, gemm q, k, v, events", [&] {
         norm(); ZRUN_CUDA_CHECK(cudaEventRecord(timing_event, s));
         for (int i = 0; i < 3; ++i) { linear(x, wq, q, h); ZRUN_CUDA_CHECK(cudaEventRecord(timing_event, s)); }
       }},
      {"rmsnorm cold", norm_cold},
      {"gemm q cold", [&] { gemm_cold(true); }},
      {"gemm q, weight cold", [&] { gemm_cold(false); }},
      {"rmsnorm, gemm q, k, v cold", [&] { norm_cold(); gemm_cold(false); gemm_cold(false); gemm_cold(false); }},
      {"256 MiB memset (reference)", flush},
  };
  std::printf("%-34s %12s %15s %13s   (us per unit; %d units, median of 5)\n", "probe", "GPU alone", "host-inclusive",
              "host enqueue", units);
  for (const Probe& p : probes) {
    const int n = p.name.find("256 MiB") != std::string::npos ? 20 : units;
    const Result r = probe(p.unit, n, s);
    std::printf("%-34s %12.2f %15.2f %13.2f\n", p.name.c_str(), r.gpu_alone_s * 1e6, r.host_inclusive_s * 1e6,
                r.host_enqueue_s * 1e6);
  }
  return 0;
}
