#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <ostream>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "kernels/fused_adam.hpp"
#include "kernels/qwz_quant.hpp"
#include "runtime/calibrate/benches.hpp"
#include "runtime/calibrate/calibrate_kernels.hpp"
#include "runtime/calibrate/device_buffer.hpp"
#include "runtime/calibrate/gpu_timing.hpp"
#include "runtime/comm/check.hpp"
#include "runtime/model/gemm.hpp"
#include "runtime/model/layers.hpp"

namespace zrun::calibrate {

namespace {

using model::DType;


// The host's time per cuBLASLt call when each call is another shape, as a step's layers call them (the same shape
// back to back, as time_call repeats a call, keeps the library's per-shape state warm): rounds of `calls` (the grid's
// shapes) in turn, the stream drained between rounds; the median round's time per call.
double gemm_host_in_turn(model::Gemm& gemm, const std::vector<model::GemmCall>& calls, DType dt, cudaStream_t s) {
  std::vector<double> per_call;
  for (int round = 0; round < 6; ++round) {
    ZRUN_CUDA_CHECK(cudaStreamSynchronize(s));
    const auto t0 = std::chrono::steady_clock::now();
    for (const model::GemmCall& g : calls) gemm.run(g, dt, s);
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (round > 0) per_call.push_back(t / static_cast<double>(calls.size()));  // the first warms
  }
  ZRUN_CUDA_CHECK(cudaStreamSynchronize(s));
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

void measure_gemms(Measurements& m, bool quick, cudaStream_t s, std::ostream& log) {
  const std::vector<std::int64_t> ms = quick ? std::vector<std::int64_t>{256, 2048, 8192}
                                             : std::vector<std::int64_t>{128, 512, 2048, 8192};
  const std::vector<std::int64_t> ns = quick ? std::vector<std::int64_t>{512, 4096, 11008}
                                             : std::vector<std::int64_t>{256, 1024, 4096, 11008};
  const std::vector<std::int64_t> ks = quick ? std::vector<std::int64_t>{512, 4096}
                                             : std::vector<std::int64_t>{256, 1024, 4096};
  const std::int64_t mmax = ms.back(), nmax = ns.back(), kmax = ks.back();
  model::Gemm gemm;
  for (DType dt : {DType::bf16, DType::fp16, DType::fp32}) {
    const std::int64_t eb = model::dtype_bytes(dt);
    DeviceBuffer a(mmax * kmax * eb), b(kmax * nmax * eb), d(mmax * nmax * eb);
    const int kind = dt == DType::fp32 ? kFillF32 : dt == DType::bf16 ? kFillBf16 : kFillF16;
    fill_random(a.p, mmax * kmax, kind, 1, s);
    fill_random(b.p, kmax * nmax, kind, 2, s);
    std::vector<GemmSample>& out = m.gemm[model::dtype_name(dt)];
    std::vector<double> host;            // the host's enqueue time per call over the grid
    std::vector<model::GemmCall> calls;  // the grid's calls, in its order
    for (std::int64_t M : ms)
      for (std::int64_t N : ns)
        for (std::int64_t K : ks) {
          model::GemmCall g;
          g.m = M; g.n = N; g.k = K;
          g.a = a.p; g.lda = M;
          g.b = b.p; g.ldb = K;
          g.d = d.p; g.ldd = M;
          calls.push_back(g);
          // Cold, operands and all: with A (the activations) rewritten first, as the kernel before in a step leaves
          // them, the GEMM model fitted the grid and attention's calls at rms 12.4% / worst 40.6% (cold: 6.3% / 19.7%;
          // H200, 2026-11-26), its operand rate above HBM's: a shape it does not hold, so the GEMMs stay cold.
          const CallTime c = time_call([&] { gemm.run(g, dt, s); }, s, 200, Cache::cold);
          const double t = c.gpu_s;
          host.push_back(c.host_s);
          out.push_back({M, N, K, t});
          log << fmt::format("  gemm {} {}x{}x{}: {:.1f} us, {:.0f} TFLOPS\n", model::dtype_name(dt), M, N, K, t * 1e6,
                             2.0 * M * N * K / t / 1e12);
        }
    if (dt == DType::bf16) {
      std::sort(host.begin(), host.end());
      m.host_issue.gemm_s = host[host.size() / 2];
      log << fmt::format("  gemm host issue (median over the bf16 grid, each shape's calls back to back): {:.2f} us\n",
                         m.host_issue.gemm_s * 1e6);
      m.host_issue.gemm_in_turn_s = gemm_host_in_turn(gemm, calls, dt, s);
      log << fmt::format("  gemm host issue, the grid's shapes in turn (as a step calls them; median of 5 rounds): "
                         "{:.2f} us\n", m.host_issue.gemm_in_turn_s * 1e6);
    }
  }
  // Launch to launch of a tiny GEMM.
  DeviceBuffer t(64 * 64 * 2);
  model::GemmCall g;
  g.m = g.n = g.k = 16;
  g.a = g.b = t.p; g.d = t.p;
  g.lda = g.ldb = g.ldd = 16;
  m.gemm_launch_s = time_gpu([&] { gemm.run(g, DType::bf16, s); }, s, 2000);
}

// Eager attention's strided-batched GEMMs, made with the calls zrun's attention issues (runtime/model/attention.cu
// attention_gemm_call: one call per sequence and query-head remainder, a batch of kv heads): for each sequence s,
// head dim d and batch (kv heads) the three distinct calls, scores (m = n = s, k = d; also d(probs)'s call),
// probs_v (m = d, n = s, k = s; also dq's) and dv (m = d, n = s, k = s, B transposed; also dk's). With k = d the
// scores call writes its s x s output at HBM speed, a shape calibrate's grid (k >= 256) does not have. The GEMM
// model is fitted on these and the grid together.
void measure_attention_gemms(Measurements& m, bool quick, cudaStream_t s, std::ostream& log) {
  const std::vector<std::int64_t> seqs = quick ? std::vector<std::int64_t>{1024} : std::vector<std::int64_t>{512, 1024, 2048};
  const std::vector<std::int64_t> dims = {64, 128};
  const std::vector<std::int64_t> batches = quick ? std::vector<std::int64_t>{4, 32} : std::vector<std::int64_t>{4, 8, 16, 32};
  const std::int64_t smax = seqs.back(), dmax = dims.back(), bmax = batches.back();
  const std::pair<model::AttentionProduct, const char*> products[] = {
      {model::AttentionProduct::scores, "scores"}, {model::AttentionProduct::probs_v, "probs_v"},
      {model::AttentionProduct::dv, "dv"}};
  model::Gemm gemm;
  for (DType dt : {DType::bf16, DType::fp16, DType::fp32}) {
    const std::int64_t eb = model::dtype_bytes(dt), rows = smax * bmax * dmax;  // q, k, v, dout, out, dv: [s, b x d]
    const int kind = dt == DType::fp32 ? kFillF32 : dt == DType::bf16 ? kFillBf16 : kFillF16;
    DeviceBuffer q(rows * eb), k(rows * eb), v(rows * eb), dout(rows * eb), out(rows * eb), dv(rows * eb),
        probs(bmax * smax * smax * eb);
    fill_random(q.p, rows, kind, 11, s);
    fill_random(k.p, rows, kind, 12, s);
    fill_random(v.p, rows, kind, 13, s);
    fill_random(dout.p, rows, kind, 14, s);
    fill_random(probs.p, bmax * smax * smax, kind, 15, s);
    model::AttentionTensors t;
    t.q = q.p, t.k = k.p, t.v = v.p, t.dout = dout.p, t.probs = probs.p, t.out = out.p, t.dv = dv.p;
    std::vector<GemmSample>& rec = m.gemm[model::dtype_name(dt)];
    for (std::int64_t S : seqs)
      for (std::int64_t D : dims)
        for (std::int64_t B : batches) {
          const model::AttentionShape a{1, S, B, B, D};  // one sequence, B query heads = B kv heads
          for (const auto& [p, name] : products) {
            const model::GemmCall g = model::attention_gemm_call(p, dt, a, t, 0, 0);
            const double sec = time_gpu([&] { gemm.run(g, dt, s); }, s, 200, Cache::cold);
            rec.push_back({g.m, g.n, g.k, sec, g.batch, name});
            log << fmt::format("  attention gemm {} {} s {} d {} x{}: {}x{}x{}: {:.1f} us, {:.0f} TFLOPS, {:.0f} GB/s\n",
                               model::dtype_name(dt), name, S, D, B, g.m, g.n, g.k, sec * 1e6,
                               2.0 * g.m * g.n * g.k * B / sec / 1e12,
                               double(eb) * B * (g.m * g.k + g.k * g.n + g.m * g.n) / sec / 1e9);
          }
        }
  }
}

// zrun's flash attention (runtime/model/flash_attention.cu), causal, called as the model calls it: flash_attention_forward
// and, timed apart, flash_attention_backward (one call: its dq accumulator memset, delta kernel, kernel and dq
// conversion), in bf16 and fp16, head dim 64 and 128, seq 512, 1024 and 2048, (batch, heads, kv heads) (1, 16, 16),
// (4, 12, 12) (the suite's small model), (2, 32, 8) (GQA) and (4, 32, 32) (--quick: seq 1024, the second and third).
// The forward's timing leaves its out and lse for the backward, which overwrites dq, dk, dv and its scratch on each
// call, so it repeats alike. Each shape's TFLOPS in the log count the FLOPs as zsim's schedule does (fit.hpp
// flash_flops).
void measure_flash_attention(Measurements& m, bool quick, cudaStream_t s, std::ostream& log) {
  struct Heads {
    std::int64_t b, heads, kv_heads;
  };
  const std::vector<std::int64_t> seqs = quick ? std::vector<std::int64_t>{1024} : std::vector<std::int64_t>{512, 1024, 2048};
  const std::vector<std::int64_t> dims = {64, 128};
  const std::vector<Heads> shapes = quick ? std::vector<Heads>{{4, 12, 12}, {2, 32, 8}}
                                          : std::vector<Heads>{{1, 16, 16}, {4, 12, 12}, {2, 32, 8}, {4, 32, 32}};
  std::int64_t q_max = 0, kv_max = 0, rows_max = 0;  // elements of q (and out, dout, dq), of k (v, dk, dv), lse floats
  for (const Heads& h : shapes) {
    q_max = std::max(q_max, h.b * seqs.back() * h.heads * dims.back());
    kv_max = std::max(kv_max, h.b * seqs.back() * h.kv_heads * dims.back());
    rows_max = std::max(rows_max, h.b * seqs.back() * h.heads);
  }
  DeviceBuffer q(q_max * 2), k(kv_max * 2), v(kv_max * 2), dout(q_max * 2), out(q_max * 2), dq(q_max * 2),
      dk(kv_max * 2), dv(kv_max * 2), lse(rows_max * 4), delta(rows_max * 4), dq_accum(q_max * 4);
  for (DType dt : {DType::bf16, DType::fp16}) {
    const int kind = dt == DType::bf16 ? kFillBf16 : kFillF16;
    fill_random(q.p, q_max, kind, 21, s);
    fill_random(k.p, kv_max, kind, 22, s);
    fill_random(v.p, kv_max, kind, 23, s);
    fill_random(dout.p, q_max, kind, 24, s);
    for (std::int64_t D : dims)
      for (std::int64_t S : seqs)
        for (const Heads& h : shapes) {
          const model::AttentionShape a{h.b, S, h.heads, h.kv_heads, D};
          const double fwd = time_gpu([&] {
            model::flash_attention_forward(dt, a, q.p, k.p, v.p, out.p, lse.as<float>(), s);
          }, s, 200, Cache::cold);
          const double bwd = time_gpu([&] {
            model::flash_attention_backward(dt, a, q.p, k.p, v.p, out.p, lse.as<float>(), dout.p, delta.as<float>(),
                                            dq_accum.as<float>(), dq.p, dk.p, dv.p, s);
          }, s, 200, Cache::cold);
          for (const auto& [direction, sec] : {std::pair{"forward", fwd}, std::pair{"backward", bwd}}) {
            m.flash.push_back({model::dtype_name(dt), direction, h.b, h.heads, h.kv_heads, S, D, sec});
            log << fmt::format("  flash attention {} {} b {} heads {} kv {} s {} d {}: {:.1f} us, {:.0f} TFLOPS\n",
                               model::dtype_name(dt), direction, h.b, h.heads, h.kv_heads, S, D, sec * 1e6,
                               flash_flops(m.flash.back()) / sec / 1e12);
          }
        }
  }
}

void measure_kernels(Measurements& m, bool quick, cudaStream_t s, std::ostream& log) {
  // From a step's small kernels (a norm of 1024 tokens x 768 is 2^20 elements) to HBM-sized ones: the fixed cost of
  // a kernel and each kernel's rate (fit_kernel_latency).
  const std::vector<std::int64_t> sizes = quick ? std::vector<std::int64_t>{1 << 18, 1 << 22, 1 << 25}
                                                : std::vector<std::int64_t>{1 << 18, 1 << 20, 1 << 23, 1 << 26};
  const std::int64_t nmax = sizes.back();
  DeviceBuffer x(nmax * 2), y(nmax * 2), z(nmax * 2), f0(nmax * 4), f1(nmax * 4), f2(nmax * 4), q(nmax),
      steps((nmax / 2048 + 1) * 4);
  fill_random(x.p, nmax, kFillBf16, 3, s);
  fill_random(y.p, nmax, kFillBf16, 4, s);
  fill_random(f0.p, nmax, kFillF32, 5, s);
  ZRUN_CUDA_CHECK(cudaMemsetAsync(f1.p, 0, nmax * 4, s));
  ZRUN_CUDA_CHECK(cudaMemsetAsync(f2.p, 0, nmax * 4, s));
  auto record = [&](const char* name, const char* kind, double bytes, const CallTime& c, int launches = 1) {
    m.kernels.push_back({name, kind, bytes, c.gpu_s, c.host_inclusive_s, launches});
    log << fmt::format("  {} ({} MB): {:.1f} us, {:.0f} GB/s (host-inclusive {:.1f} us)\n", name, bytes / 1e6,
                       c.gpu_s * 1e6, bytes / c.gpu_s / 1e9, c.host_inclusive_s * 1e6);
  };
  // Each kernel at shapes a step runs: a norm over rows of 1024 (a step's tokens x a small model's hidden at 2^20),
  // the attention softmax only from 4 matrices up (a step's heads x micro-batch), the loss below at a step's rows:
  // a handful of long rows is latency-bound as no step is (a norm of 64 rows of 4096 took 14 us cold, one of 1024
  // rows of 768 6.9 us).
  // Backward kernels are kinds of their own (a backward op's bytes run at them, sim/engine/op_work.cpp), each call as a
  // step makes it, its bytes as the schedule counts them (sim/plan/schedule_builder.cpp backward_hbm).
  // Each call is timed cold but for the input the kernel before it in a step has just written (Produced: the norm's
  // x, its backward's dy, the activations' inputs, the scores, the logits, the all-gathered int8 values), which it
  // finds in L2 where it fits: timed all cold, a 4096 x 768 norm was priced 26% slower than it ran in the suite's
  // step, a 4096 x 2048 one 32%. The optimizer's and quantize's operands (state and partition since the last step)
  // and the copy's stay cold.
  for (std::int64_t n : sizes) {
    const std::int64_t h = 1024, rows = n / h;
    DeviceBuffer w(h * 2), dw(h * 2), stats(2 * rows * 4), scratch(2 * model::column_partials_floats(rows, h) * 4);
    fill_random(w.p, h, kFillBf16, 6, s);
    record("rmsnorm.fwd", "norm", 2.0 * n * 2,
           time_call([&] { model::norm_forward(DType::bf16, false, x.p, w.p, nullptr, z.p, stats.as<float>(), rows, h, 1e-5f, s); }, s, 200, Cache::cold,
                     {{x.p, n * 2}}));
    // The norm's backward adds dx into the residual stream's gradient and sums the weight's gradient over the rows: three
    // kernels (dx, the partial column sums, their sum), five activations of bytes (x and dy read twice, dx written).
    record("rmsnorm.bwd", "norm_backward", 5.0 * n * 2,
           time_call([&] { model::norm_backward(DType::bf16, false, x.p, w.p, stats.as<float>(), y.p, z.p, true, dw.p, nullptr,
                                                rows, h, scratch.as<float>(), s); }, s, 200, Cache::cold, {{y.p, n * 2}}), 3);
    // Eager attention's causal row softmax over s x s scores (attention.cu) at the suite's sequence length, in
    // place over n / s^2 matrices. Bytes as the schedule counts them (docs/schedule-semantics.md): forward reads
    // and writes the scores (2N elements), backward reads probs and d(probs) and writes d(scores) (3N), although the
    // kernels read only the causal half's N / 2 of each.
    const std::int64_t seq = 1024, matrices = n / (seq * seq);
    if (matrices >= 4) {
      fill_random(z.p, matrices * seq * seq, kFillBf16, 8, s);
      record("attention.causal_softmax.fwd (s 1024)", "softmax", 2.0 * matrices * seq * seq * 2,
             time_call([&] { model::causal_softmax_forward(DType::bf16, z.p, matrices, seq, s); }, s, 200, Cache::cold,
                       {{z.p, matrices * seq * seq * 2}}));
      record("attention.causal_softmax.bwd (s 1024)", "softmax_backward", 3.0 * matrices * seq * seq * 2,
             time_call([&] { model::causal_softmax_backward(DType::bf16, z.p, y.p, matrices, seq, s); }, s, 200, Cache::cold,
                       {{y.p, matrices * seq * seq * 2}}));
    }
    record("swiglu.fwd", "activation", 3.0 * n * 2 / 2,
           time_call([&] { model::swiglu_forward(DType::bf16, x.p, y.p, z.p, n / 2, s); }, s, 200, Cache::cold,
                     {{x.p, n}, {y.p, n}}));
    record("gelu.fwd", "activation", 2.0 * n * 2,
           time_call([&] { model::gelu_forward(DType::bf16, x.p, z.p, n, s); }, s, 200, Cache::cold, {{x.p, n * 2}}));
    // Backward (mlp.cu): SwiGLU's up half reads d(act) and gate and writes d(up), its gate half reads d(act), gate and
    // up and writes d(gate); GeLU reads d(act) and its input and writes d(input).
    record("swiglu.bwd_up", "activation_backward", 3.0 * n * 2 / 2,
           time_call([&] { model::swiglu_backward_up(DType::bf16, x.p, y.p, z.p, n / 2, s); }, s, 200, Cache::cold,
                     {{x.p, n}}));
    record("swiglu.bwd_gate", "activation_backward", 4.0 * n * 2 / 2,
           time_call([&] { model::swiglu_backward_gate(DType::bf16, x.p, y.p, static_cast<char*>(y.p) + n, z.p, n / 2, s); },
                     s, 200, Cache::cold, {{x.p, n}}));
    record("gelu.bwd", "activation_backward", 3.0 * n * 2,
           time_call([&] { model::gelu_backward(DType::bf16, x.p, y.p, z.p, n, s); }, s, 200, Cache::cold, {{x.p, n * 2}}));
    const std::int64_t block = 2048, blocks = zk::qwz_num_blocks(n, block);
    record("qwz.quantize", "quantization", n * 2.0 + n + blocks * 4.0,
           time_call([&] { zk::qwz_quantize(x.p, zk::Half16::bf16, n, block, q.as<std::int8_t>(), steps.as<float>(), s); }, s, 200, Cache::cold));
    record("qwz.dequantize", "quantization", n + blocks * 4.0 + n * 2.0,
           time_call([&] { zk::qwz_dequantize(q.as<std::int8_t>(), steps.as<float>(), n, block, z.p, zk::Half16::bf16, s); }, s, 200, Cache::cold,
                     {{q.p, n}}));  // the int8 values the all-gather has just written
    zk::AdamHyper hyper;
    record("fused_adam", "adam", 28.0 * n,
           time_call([&] { zk::fused_adam(f0.as<float>(), f1.as<float>(), f2.as<float>(), x.p, zk::Half16::bf16, z.p,
                                         zk::Half16::bf16, n, hyper, s); }, s, 200, Cache::cold));
    record("copy.d2d", "copy", 2.0 * n * 2,
           time_call([&] { ZRUN_CUDA_CHECK(cudaMemcpyAsync(z.p, x.p, n * 2, cudaMemcpyDeviceToDevice, s)); }, s, 200, Cache::cold));
  }
  // The loss over a 32k vocabulary (head_loss.cu), one block a row: forward reads the logits, backward rewrites them in
  // place. At a step's rows (its micro-batch's tokens: 1024 .. 4096 here, 8 to 31 waves of blocks on 132 SMs), where
  // it is bandwidth-bound; 256 rows (2 waves) ran at 0.44x the bytes per second of 2048 rows, a regime no step's loss
  // is in, and pulled a shared line's rate down by 16% (H200, 2026-11-26).
  {
    const std::int64_t vocab = 32768, max_rows = quick ? 2048 : 4096;
    DeviceBuffer logits(max_rows * vocab * 2), targets(max_rows * 4), lse(max_rows * 4), tl(max_rows * 4), loss(4);
    fill_random(logits.p, max_rows * vocab, kFillBf16, 7, s);
    ZRUN_CUDA_CHECK(cudaMemsetAsync(targets.p, 0, max_rows * 4, s));
    for (std::int64_t rows = 1024; rows <= max_rows; rows *= 2) {
      const double n = static_cast<double>(rows * vocab);
      record("cross_entropy.fwd (softmax over vocab)", "cross_entropy", n * 2,
             time_call([&] { model::cross_entropy_forward(DType::bf16, logits.p, targets.as<std::int32_t>(), lse.as<float>(),
                                                         tl.as<float>(), loss.as<float>(), rows, vocab, s); }, s, 200, Cache::cold,
                       {{logits.p, rows * vocab * 2}}));
      record("cross_entropy.bwd", "cross_entropy_backward", 2 * n * 2,
             time_call([&] { model::cross_entropy_backward(DType::bf16, logits.p, targets.as<std::int32_t>(), lse.as<float>(),
                                                          rows, vocab, 1.0f, s); }, s, 200, Cache::cold,
                       {{logits.p, rows * vocab * 2}}));
    }
  }
  const CallTime empty = time_call([&] { launch_empty_kernel(s); }, s, 5000);
  m.kernel_launch_s = empty.gpu_s;
  m.kernel_launch_host_inclusive_s = empty.host_inclusive_s;
  m.host_issue.kernel_s = empty.host_s;
  log << fmt::format("  empty kernel launch to launch: {:.2f} us on the GPU alone, {:.2f} us host-inclusive; "
                     "16x16x16 GEMM: {:.2f} us\n", m.kernel_launch_s * 1e6, m.kernel_launch_host_inclusive_s * 1e6,
                     m.gemm_launch_s * 1e6);
  // The host's side of the calls zrun's executor makes around and inside its ops.
  {
    DeviceBuffer a(4096), b(4096);
    cudaEvent_t ev;
    ZRUN_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    m.host_issue.event_s = time_call([&] { ZRUN_CUDA_CHECK(cudaEventRecord(ev, s)); }, s, 1000).host_s;
    m.host_issue.memcpy_s =
        time_call([&] { ZRUN_CUDA_CHECK(cudaMemcpyAsync(b.p, a.p, 4096, cudaMemcpyDeviceToDevice, s)); }, s, 1000).host_s;
    cudaEventDestroy(ev);
  }
  log << fmt::format("  host issue per call: kernel {:.2f} us, event {:.2f} us, cudaMemcpyAsync {:.2f} us\n",
                     m.host_issue.kernel_s * 1e6, m.host_issue.event_s * 1e6, m.host_issue.memcpy_s * 1e6);
}

void measure_copies(Measurements& m, bool quick, cudaStream_t s, std::ostream& log) {
  const std::int64_t max_bytes = quick ? (64ll << 20) : (256ll << 20);
  DeviceBuffer dev(max_bytes);
  void* pinned = nullptr;
  ZRUN_CUDA_CHECK(cudaHostAlloc(&pinned, max_bytes, cudaHostAllocDefault));
  std::unique_ptr<char[]> pageable(new char[max_bytes]);
  std::memset(pageable.get(), 1, max_bytes);
  std::memset(pinned, 1, max_bytes);
  for (std::int64_t bytes = 64 << 10; bytes <= max_bytes; bytes *= 4) {
    auto copy = [&](void* dst, const void* src, cudaMemcpyKind k) {
      return time_gpu([&] { ZRUN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, k, s)); }, s, 50);
    };
    const double b = static_cast<double>(bytes);
    m.h2d_pinned.push_back({b, copy(dev.p, pinned, cudaMemcpyHostToDevice)});
    m.d2h_pinned.push_back({b, copy(pinned, dev.p, cudaMemcpyDeviceToHost)});
    m.h2d_pageable.push_back({b, copy(dev.p, pageable.get(), cudaMemcpyHostToDevice)});
    m.d2h_pageable.push_back({b, copy(pageable.get(), dev.p, cudaMemcpyDeviceToHost)});
    log << fmt::format("  host copies {} KiB: pinned H2D {:.1f} / D2H {:.1f} GB/s, pageable H2D {:.1f} / D2H {:.1f} GB/s\n",
                       bytes >> 10, b / m.h2d_pinned.back().seconds / 1e9, b / m.d2h_pinned.back().seconds / 1e9,
                       b / m.h2d_pageable.back().seconds / 1e9, b / m.d2h_pageable.back().seconds / 1e9);
  }
  ZRUN_CUDA_CHECK(cudaFreeHost(pinned));
}

}  // namespace

void measure_gpu(Measurements& m, bool quick, std::ostream& log) {
  int device = 0;
  ZRUN_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp p;
  ZRUN_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  m.gpu_name = p.name;
  m.hbm_bytes = static_cast<std::int64_t>(p.totalGlobalMem);
  m.sms = p.multiProcessorCount;
  m.quick = quick;
  cudaStream_t s;
  ZRUN_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  log << "zrun calibrate: GEMMs (cuBLASLt)\n";
  measure_gemms(m, quick, s, log);
  log << "zrun calibrate: eager attention's batched GEMMs (cuBLASLt, as attention.cu calls them)\n";
  measure_attention_gemms(m, quick, s, log);
  log << "zrun calibrate: flash attention (flash_attention.cu, forward and backward apart)\n";
  measure_flash_attention(m, quick, s, log);
  log << "zrun calibrate: memory-bound kernels\n";
  measure_kernels(m, quick, s, log);
  log << "zrun calibrate: host copies\n";
  measure_copies(m, quick, s, log);
  ZRUN_CUDA_CHECK(cudaStreamDestroy(s));
}

}  // namespace zrun::calibrate
