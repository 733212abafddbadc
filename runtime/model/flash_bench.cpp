// zrun_flash_bench: times zrun's flash attention (flash_attention.cu) forward and forward + backward with CUDA
// events (3 warm-up runs, median of 20), causal, and prints the achieved TFLOPS one line per shape:
//   RESULT zrun b=4 h=32 kv=32 s=2048 d=128 fwd_ms=... fwdbwd_ms=... fwd_tflops=... fwdbwd_tflops=...
// FLOPs as FlashAttention's benchmarks count them: forward 4 b h s^2 d / 2 (two GEMMs, half the scores under
// the causal mask), backward 2.5 x forward (five GEMMs). runtime/scripts/bench_flash.py prints torch's SDPA
// flash backend in the same format; runtime/scripts/bench_flash.sh sets the two side by side.
//   zrun_flash_bench                       # the default shapes (bf16, head dim 128, MHA and GQA kv 8)
//   zrun_flash_bench B H KV S D [fp16]     # one shape
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/half_convert.hpp"
#include "runtime/model/layers.hpp"

using namespace zrun::model;

namespace {

struct Shape {
  std::int64_t b, h, kv, s, d;
};

void* device_random(std::int64_t n, DType dt, std::uint64_t seed) {
  std::vector<std::uint16_t> h(n);
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& v : h) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    const float f = static_cast<float>(static_cast<double>(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    v = dt == DType::bf16 ? zk::float_to_bf16(f) : zk::float_to_fp16(f);
  }
  void* p = nullptr;
  ZK_CUDA_CHECK(cudaMalloc(&p, n * 2));
  ZK_CUDA_CHECK(cudaMemcpy(p, h.data(), n * 2, cudaMemcpyHostToDevice));
  return p;
}

template <class F>
double median_ms(F&& f, int warmup = 3, int reps = 20) {
  cudaEvent_t a, b;
  ZK_CUDA_CHECK(cudaEventCreate(&a));
  ZK_CUDA_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < warmup; ++i) f();
  std::vector<float> ms(reps);
  for (int i = 0; i < reps; ++i) {
    ZK_CUDA_CHECK(cudaEventRecord(a));
    f();
    ZK_CUDA_CHECK(cudaEventRecord(b));
    ZK_CUDA_CHECK(cudaEventSynchronize(b));
    ZK_CUDA_CHECK(cudaEventElapsedTime(&ms[i], a, b));
  }
  ZK_CUDA_CHECK(cudaEventDestroy(a));
  ZK_CUDA_CHECK(cudaEventDestroy(b));
  std::sort(ms.begin(), ms.end());
  return ms[reps / 2];
}

void run(const Shape& sh, DType dt) {
  const AttentionShape a{sh.b, sh.s, sh.h, sh.kv, sh.d};
  const std::int64_t nq = sh.b * sh.s * sh.h * sh.d, nkv = sh.b * sh.s * sh.kv * sh.d;
  void* q = device_random(nq, dt, 1);
  void* k = device_random(nkv, dt, 2);
  void* v = device_random(nkv, dt, 3);
  void* dout = device_random(nq, dt, 4);
  void *out, *dq, *dk, *dv;
  float *lse, *delta, *acc;
  ZK_CUDA_CHECK(cudaMalloc(&out, nq * 2));
  ZK_CUDA_CHECK(cudaMalloc(&dq, nq * 2));
  ZK_CUDA_CHECK(cudaMalloc(&dk, nkv * 2));
  ZK_CUDA_CHECK(cudaMalloc(&dv, nkv * 2));
  ZK_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&lse), flash_attention_lse_floats(a) * 4));
  ZK_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&delta), flash_attention_lse_floats(a) * 4));
  ZK_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&acc), nq * 4));
  auto fwd = [&] { flash_attention_forward(dt, a, q, k, v, out, lse, nullptr); };
  auto fwdbwd = [&] {
    fwd();
    flash_attention_backward(dt, a, q, k, v, out, lse, dout, delta, acc, dq, dk, dv, nullptr);
  };
  const double fwd_ms = median_ms(fwd), all_ms = median_ms(fwdbwd);
  const double fwd_flops = 4.0 * sh.b * sh.h * static_cast<double>(sh.s) * sh.s * sh.d / 2.0;
  std::printf("RESULT zrun b=%lld h=%lld kv=%lld s=%lld d=%lld fwd_ms=%.3f fwdbwd_ms=%.3f fwd_tflops=%.1f "
              "fwdbwd_tflops=%.1f\n",
              static_cast<long long>(sh.b), static_cast<long long>(sh.h), static_cast<long long>(sh.kv),
              static_cast<long long>(sh.s), static_cast<long long>(sh.d), fwd_ms, all_ms,
              fwd_flops / fwd_ms * 1e-9, 3.5 * fwd_flops / all_ms * 1e-9);
  std::fflush(stdout);
  for (void* p : {q, k, v, dout, out, dq, dk, dv}) cudaFree(p);
  for (float* p : {lse, delta, acc}) cudaFree(p);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc >= 6) {
      const DType dt = argc >= 7 && std::string(argv[6]) == "fp16" ? DType::fp16 : DType::bf16;
      run({std::atoll(argv[1]), std::atoll(argv[2]), std::atoll(argv[3]), std::atoll(argv[4]), std::atoll(argv[5])},
          dt);
      return 0;
    }
    for (const Shape& s : {Shape{4, 32, 32, 2048, 128}, Shape{4, 32, 8, 2048, 128}, Shape{1, 32, 32, 8192, 128},
                           Shape{1, 32, 8, 8192, 128}, Shape{4, 32, 32, 2048, 64}})
      run(s, DType::bf16);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zrun_flash_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
