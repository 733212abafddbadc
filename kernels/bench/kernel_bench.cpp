// Bandwidth benchmark of the kernels in kernels/ on the current GPU: per kernel, the median time of
// repeated launches on random data, bytes read + written, GB/s and the share of a device-to-device
// copy measured in the same run. Usage: kernel_bench [--quick] (quick: small sizes, for sanitizers), or
// kernel_bench --qwz N... (qwZ's kernels at given sizes).
#include <cuda_runtime_api.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/fused_adam.hpp"
#include "kernels/half_convert.hpp"
#include "kernels/qgz_quant.hpp"
#include "kernels/qwz_quant.hpp"

namespace {

using namespace zk;

struct Dev {
  void* p = nullptr;
  explicit Dev(size_t bytes) { ZK_CUDA_CHECK(cudaMalloc(&p, bytes)); }
  ~Dev() { cudaFree(p); }
  template <class T> T* as() const { return static_cast<T*>(p); }
};

// Fill with bytes from a fast LCG, then (for 16-bit floats) with finite random values.
void fill_random_half(void* dst, size_t n, uint64_t seed) {
  std::vector<uint16_t> h(n);
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (auto& x : h) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const float f = static_cast<float>(static_cast<int32_t>(s >> 32)) * (1.0f / 2147483648.0f);
    x = float_to_bf16(f);
  }
  ZK_CUDA_CHECK(cudaMemcpy(dst, h.data(), n * 2, cudaMemcpyHostToDevice));
}
void fill_random_bytes(void* dst, size_t bytes, uint64_t seed) {
  std::vector<uint8_t> h(bytes);
  uint64_t s = seed;
  for (auto& x : h) { s = s * 6364136223846793005ull + 1442695040888963407ull; x = static_cast<uint8_t>(s >> 56); }
  ZK_CUDA_CHECK(cudaMemcpy(dst, h.data(), bytes, cudaMemcpyHostToDevice));
}
void fill_float(float* dst, size_t n, float lo, float hi, uint64_t seed) {
  std::vector<float> h(n);
  uint64_t s = seed;
  for (auto& x : h) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = lo + (hi - lo) * static_cast<float>(s >> 40) / 16777216.0f;
  }
  ZK_CUDA_CHECK(cudaMemcpy(dst, h.data(), n * 4, cudaMemcpyHostToDevice));
}

// Median of `reps` single launches, each timed with events around it; `before` (untimed) runs ahead of each.
double median_ms(const std::function<void()>& launch, int reps, const std::function<void()>& before = {}) {
  cudaEvent_t a, b;
  ZK_CUDA_CHECK(cudaEventCreate(&a));
  ZK_CUDA_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) launch();
  ZK_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    if (before) before();
    ZK_CUDA_CHECK(cudaEventRecord(a));
    launch();
    ZK_CUDA_CHECK(cudaEventRecord(b));
    ZK_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    ZK_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  ZK_CUDA_CHECK(cudaEventDestroy(a));
  ZK_CUDA_CHECK(cudaEventDestroy(b));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Row { std::string name; double bytes, ms, target; };

}  // namespace

// `--qwz N...`: qwZ's quantize and dequantize of N elements each (bf16, DeepSpeed's block for N), one line per N:
// "qwz N quantize_ms Q dequantize_ms D quantize_cold_ms QC dequantize_cold_ms DC dequantize_produced_ms DP" (the
// rates zrun's qwZ ops are held to, runtime/scripts/bench_zeropp.sh). Each call is timed as zrun's op-timed step
// times an op: from an event after the work before it to an event after it, the host having enqueued both ahead (the
// stream is held for 50 us by a host function on another stream). Q, D: the call repeated on the same buffers
// (operands below the L2's size stay in it); QC, DC: each call after a write of twice the L2's bytes, so that it
// reads its operands from HBM, as a step's quantize reads the rank's partition; DP: after that write, the int8 values
// and scales written again (copied from a second copy), as a step's dequantize finds them just after the all-gather,
// its output cold (zrun calibrate times a memory-bound kernel so: docs/timing.md "How calibrate times a call").
int qwz_sizes(int argc, char** argv) {
  int l2 = 0;
  ZK_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
  const size_t scrub_bytes = 2 * static_cast<size_t>(std::max(l2, 1 << 20));
  Dev scrub(scrub_bytes);
  cudaStream_t side;
  cudaEvent_t gate;
  ZK_CUDA_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  ZK_CUDA_CHECK(cudaEventCreateWithFlags(&gate, cudaEventDisableTiming));
  auto hold = [&] {
    ZK_CUDA_CHECK(cudaLaunchHostFunc(side, [](void*) { std::this_thread::sleep_for(std::chrono::microseconds(50)); }, nullptr));
    ZK_CUDA_CHECK(cudaEventRecord(gate, side));
    ZK_CUDA_CHECK(cudaStreamWaitEvent(nullptr, gate, 0));
  };
  auto evict = [&] {
    hold();
    ZK_CUDA_CHECK(cudaMemsetAsync(scrub.p, 0, scrub_bytes));
  };
  for (int i = 2; i < argc; ++i) {
    const int64_t n = std::atoll(argv[i]);
    const int64_t block = qwz_deepspeed_block_elems(n), nb = qwz_num_blocks(n, block);
    Dev in(n * 2), q(n), s(nb * 4), out(n * 2), q_copy(n), s_copy(nb * 4);
    fill_random_half(in.p, n, 11);
    auto quantize = [&] { qwz_quantize(in.p, Half16::bf16, n, block, q.as<int8_t>(), s.as<float>(), nullptr); };
    auto dequantize = [&] { qwz_dequantize(q.as<int8_t>(), s.as<float>(), n, block, out.p, Half16::bf16, nullptr); };
    quantize();
    ZK_CUDA_CHECK(cudaMemcpy(q_copy.p, q.p, n, cudaMemcpyDeviceToDevice));
    ZK_CUDA_CHECK(cudaMemcpy(s_copy.p, s.p, nb * 4, cudaMemcpyDeviceToDevice));
    auto produce = [&] {
      evict();
      ZK_CUDA_CHECK(cudaMemcpyAsync(q.p, q_copy.p, n, cudaMemcpyDeviceToDevice));
      ZK_CUDA_CHECK(cudaMemcpyAsync(s.p, s_copy.p, nb * 4, cudaMemcpyDeviceToDevice));
    };
    const double qm = median_ms(quantize, 20, hold), dm = median_ms(dequantize, 20, hold);
    const double qc = median_ms(quantize, 20, evict), dc = median_ms(dequantize, 20, evict);
    const double dp = median_ms(dequantize, 20, produce);
    std::printf("qwz %lld quantize_ms %.6f dequantize_ms %.6f quantize_cold_ms %.6f dequantize_cold_ms %.6f "
                "dequantize_produced_ms %.6f\n", static_cast<long long>(n), qm, dm, qc, dc, dp);
  }
  ZK_CUDA_CHECK(cudaEventDestroy(gate));
  ZK_CUDA_CHECK(cudaStreamDestroy(side));
  return 0;
}

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--qwz") == 0) return qwz_sizes(argc, argv);
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const int reps = quick ? 3 : 20;
  cudaDeviceProp prop{};
  ZK_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs, L2 %d MiB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);

  const size_t MiB = size_t{1} << 20;
  const int64_t n = quick ? (1 << 20) : int64_t{128} * MiB;  // 16-bit elements: 256 MiB input
  const int64_t block = 2048;

  // Copy ceiling: device-to-device copy of a 16-bit tensor of the same size, bytes read + written.
  Dev a(n * 2), b(n * 2);
  fill_random_half(a.p, n, 1);
  const double copy_ms = median_ms([&] { ZK_CUDA_CHECK(cudaMemcpyAsync(b.p, a.p, n * 2, cudaMemcpyDeviceToDevice)); }, reps);
  // A second copy of 4x the size; the better of the two is the ceiling (the stricter share).
  double copy_big_ms = 0, copy_big_gbps = 0;
  {
    Dev c(n * 8), d(n * 8);
    ZK_CUDA_CHECK(cudaMemset(c.p, 0x5A, n * 8));
    copy_big_ms = median_ms([&] { ZK_CUDA_CHECK(cudaMemcpyAsync(d.p, c.p, n * 8, cudaMemcpyDeviceToDevice)); }, reps);
    copy_big_gbps = 2.0 * n * 8 / (copy_big_ms * 1e6);
  }
  const double copy_small_gbps = 2.0 * n * 2 / (copy_ms * 1e6);
  const double copy_gbps = std::max(copy_small_gbps, copy_big_gbps);

  std::vector<Row> rows;
  {  // qwZ
    const int64_t nb = qwz_num_blocks(n, block);
    Dev q(n), s(nb * 4), out(n * 2);
    rows.push_back({"qwz_quantize int8 (bf16 in)", double(n) * 2 + n + nb * 4,
                    median_ms([&] { qwz_quantize(a.p, Half16::bf16, n, block, q.as<int8_t>(), s.as<float>(), nullptr); }, reps), 0.70});
    rows.push_back({"qwz_dequantize int8 (bf16 out)", double(n) + nb * 4 + n * 2.0,
                    median_ms([&] { qwz_dequantize(q.as<int8_t>(), s.as<float>(), n, block, out.p, Half16::bf16, nullptr); }, reps), 0.70});
  }
  {  // qgZ swizzled quantize, 2 nodes x 8 devices
    const QgzShape sh{n, 2, 8, block};
    const int64_t nbt = sh.world() * sh.blocks_per_partition();
    Dev q(n / 2), s(nbt * 4), err(n * 2);
    fill_random_half(err.p, n, 2);
    rows.push_back({"qgz_swizzled_quantize int4", double(n) * 2 + n / 2.0 + nbt * 4,
                    median_ms([&] { qgz_swizzled_quantize(a.p, Half16::bf16, sh, q.as<uint8_t>(), s.as<float>(), nullptr); }, reps), 0.70});
    LocoParams loco{0.8f, 1 << 30, 1};
    rows.push_back({"qgz_swizzled_quantize_loco int4", double(n) * 2 * 3 + n / 2.0 + nbt * 4,
                    median_ms([&] { qgz_swizzled_quantize_loco(a.p, Half16::bf16, err.p, loco, sh, q.as<uint8_t>(), s.as<float>(), nullptr); }, reps), 0.70});
  }
  {  // dequant-reduce-requant: k = 8 local devices, m = 2 nodes; k*m*P = 4n int4 values = 2n bytes (256 MiB)
    const int k = 8, m = 2;
    const int64_t P = 4 * n / (k * m);
    const int64_t nb = (P + block - 1) / block;
    Dev qin(int64_t{k} * m * P / 2), sin(int64_t{k} * m * nb * 4), qout(m * P / 2), sout(m * nb * 4), err(m * P * 2);
    fill_random_bytes(qin.p, int64_t{k} * m * P / 2, 3);
    fill_float(sin.as<float>(), k * m * nb, 0.01f, 1.0f, 4);
    fill_random_half(err.p, m * P, 5);
    const double bytes = double(k) * m * P / 2 + k * m * nb * 4.0 + m * P / 2.0 + m * nb * 4.0;
    rows.push_back({"qgz_dequant_reduce_requant k=8", bytes,
                    median_ms([&] { qgz_dequant_reduce_requant(qin.as<uint8_t>(), sin.as<float>(), k, m, P, block, qout.as<uint8_t>(), sout.as<float>(), nullptr); }, reps), 0.60});
    LocoParams loco{0.8f, 1 << 30, 1};
    rows.push_back({"qgz_dequant_reduce_requant_loco k=8", bytes + 4.0 * m * P,
                    median_ms([&] { qgz_dequant_reduce_requant_loco(qin.as<uint8_t>(), sin.as<float>(), k, m, P, block, err.p, Half16::bf16, loco, qout.as<uint8_t>(), sout.as<float>(), nullptr); }, reps), 0.60});
    // Final dequant-reduce: k = 2 nodes, one partition of P2 elements, bf16 out.
    const int k2 = 2;
    const int64_t P2 = int64_t{k} * m * P / k2;
    Dev out(P2 * 2);
    rows.push_back({"qgz_dequant_reduce k=2 (bf16 out)", double(k2) * P2 / 2 + k2 * ((P2 + block - 1) / block) * 4.0 + P2 * 2.0,
                    median_ms([&] { qgz_dequant_reduce(qin.as<uint8_t>(), sin.as<float>(), k2, P2, block, 0.5f, out.p, OutFormat::bf16, nullptr); }, reps), 0.60});
  }
  {  // fused Adam: n2 parameters, 28 bytes each
    const int64_t n2 = quick ? (1 << 20) : int64_t{64} * MiB;
    Dev p(n2 * 4), m(n2 * 4), v(n2 * 4), g(n2 * 2), w(n2 * 2);
    fill_float(p.as<float>(), n2, -1, 1, 6);
    fill_float(m.as<float>(), n2, -0.1f, 0.1f, 7);
    fill_float(v.as<float>(), n2, 0, 0.01f, 8);
    fill_random_half(g.p, n2, 9);
    AdamHyper h; h.lr = 1e-4f; h.weight_decay = 0.01f; h.step = 10;
    rows.push_back({"fused_adam (fp32 states, bf16 g/w)", 28.0 * n2,
                    median_ms([&] { fused_adam(p.as<float>(), m.as<float>(), v.as<float>(), g.p, Half16::bf16, w.p, Half16::bf16, n2, h, nullptr); }, reps), 0.70});
  }
  ZK_CUDA_CHECK(cudaDeviceSynchronize());

  std::printf("\n%-40s %10s %9s %9s %8s %7s\n", "kernel", "MiB moved", "ms", "GB/s", "of copy", "target");
  std::printf("%-40s %10.0f %9.3f %9.0f %7.0f%% %7s\n", "device-to-device copy", 4.0 * n / MiB, copy_ms, copy_small_gbps,
              100.0 * copy_small_gbps / copy_gbps, "");
  std::printf("%-40s %10.0f %9.3f %9.0f %7.0f%% %7s\n", "device-to-device copy, 4x larger", 16.0 * n / MiB, copy_big_ms,
              copy_big_gbps, 100.0 * copy_big_gbps / copy_gbps, "");
  std::printf("(ceiling = the faster copy: %.0f GB/s)\n", copy_gbps);
  bool all_ok = true;
  for (const auto& r : rows) {
    const double gbps = r.bytes / (r.ms * 1e6);
    const bool ok = gbps / copy_gbps >= r.target;
    all_ok = all_ok && ok;
    std::printf("%-40s %10.0f %9.3f %9.0f %7.0f%% %5.0f%% %s\n", r.name.c_str(), r.bytes / MiB, r.ms, gbps,
                100.0 * gbps / copy_gbps, 100 * r.target, ok ? "ok" : "BELOW");
  }
  std::printf("%s\n", all_ok ? "all kernels at target" : "some kernels below target");
  return 0;
}
