// Least-squares fits of zrun calibrate's measurements to zsim's cost models (Eigen): a latency + bandwidth
// line (host copies, NVMe), latency per step + bus bandwidth of a link class from collectives of every kind,
// the GEMM model of cost_models/gemm_model.hpp, and the efficiency of zrun's flash attention kernel. Fits minimise the RELATIVE error of each measurement
// (small and large sizes count alike) and keep coefficients non-negative (a term that comes out negative is
// dropped and the rest refitted). Host code: no CUDA.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <Eigen/Dense>

#include "cost_models/gemm_model.hpp"
#include "sim/schedule/schedule.hpp"

namespace zrun::calibrate {

// Residuals of a fit over its measurements: (predicted - measured) / measured.
struct FitResidual {
  double rms_rel = 0;      // root mean square
  double max_abs_rel = 0;  // worst |error|
  int samples = 0;
};

struct LinearFit {
  Eigen::VectorXd coef;    // one per column of X; 0 for a dropped (would-be negative) term
  FitResidual residual;
};

// min over coef >= 0 of sum_i ((X coef - y)_i / y_i)^2. y > 0. Throws std::invalid_argument on empty or
// mismatched input, or a non-positive measurement.
LinearFit fit_relative_nonnegative(const Eigen::MatrixXd& X, const Eigen::VectorXd& y);
// The same with a weight per measurement: min of sum_i (w_i (X coef - y)_i / y_i)^2 (the residual reported is
// unweighted). w > 0, one per row.
LinearFit fit_relative_nonnegative(const Eigen::MatrixXd& X, const Eigen::VectorXd& y, const Eigen::VectorXd& w);

// seconds = latency_s + bytes / (GBps x 1e9).
struct SizeSample {
  double bytes = 0;
  double seconds = 0;
};
struct LatencyBandwidthFit {
  double latency_s = 0;
  double GBps = 0;         // 0 when the measurements show no bandwidth term
  FitResidual residual;
};
LatencyBandwidthFit fit_latency_bandwidth(const std::vector<SizeSample>& samples);

// One collective measured on a group of n ranks over k (virtual) nodes, nccl-tests size convention.
struct CollectiveSample {
  zsim::CollectiveKind kind = zsim::CollectiveKind::all_reduce;
  int n = 2;
  int k = 1;
  double size_bytes = 0;
  double seconds = 0;
};
// seconds = steps x latency_per_step + bandwidth_bytes / (GBps x 1e9), with zsim's ring steps and bytes
// (cost_models/collective_cost.hpp): the figures zsim's links.*_latency_us and *_GBps hold.
struct LinkFit {
  double latency_per_step_s = 0;
  double GBps = 0;
  FitResidual residual;
};
LinkFit fit_link(const std::vector<CollectiveSample>& samples);

// One GEMM call D[m x n] = A[m x k] B[k x n] measured: `batch` GEMMs of that shape in one strided-batched call.
// `product` names an eager-attention call (runtime/model/layers.hpp AttentionProduct: "scores", "probs_v", "dv");
// empty for calibrate's grid of single GEMMs.
struct GemmSample {
  std::int64_t m = 0, n = 0, k = 0;
  double seconds = 0;
  std::int64_t batch = 1;
  std::string product{};
  bool batched_attention() const { return !product.empty(); }
};
struct GemmFit {
  zsim::GemmModel model;
  FitResidual residual;   // over every sample
  FitResidual grid;       // over calibrate's grid of single GEMMs (samples 0 when none)
  FitResidual batched;    // over eager attention's batched calls (samples 0 when none)
};
// Fits cost_models/gemm_model.hpp for the GPU's SM count: launch_us, max_efficiency and io_GBps by least squares
// for each tile (64, 128, 256 each way), split-K depth (none, 128 .. 1024) and io_overlap (0, 0.25 .. 1: how much
// of the smaller of the FLOP and operand-traffic times hides under the larger), keeping the setting of least rms
// relative residual (cuBLASLt picks its tiles and split-K per shape; the model stands for its typical choice).
// With io_overlap > 0 the model is linear in its coefficients once each sample's bound (FLOPs or traffic) is
// known: the fit alternates solving and re-deciding the bounds until they settle. When the samples hold both
// calibrate's grid and eager attention's batched calls, each family weighs alike in the fit (every sample by
// 1 / sqrt(its family's count)), so the attention grid's size does not outvote the weights' GEMMs; the model's
// attention_shapes then says it was fitted on them.
GemmFit fit_gemm_model(const std::vector<GemmSample>& samples, int bytes_per_element, double peak_tflops,
                       std::int64_t sms);

// A memory-bound kernel at one size: bytes read + written, median seconds.
struct KernelSample {
  std::string name;        // "rmsnorm.fwd", "swiglu.fwd", "qwz.quantize", "fused_adam", "copy.d2d", ...
  std::string kind;        // "norm", "softmax" (attention's causal softmax), "cross_entropy" (the loss over the vocab),
                           // "activation", "quantization", "adam", "copy"; the backward kernels of the first four
                           // "norm_backward", "softmax_backward", "cross_entropy_backward", "activation_backward"
  double bytes = 0;
  double seconds = 0;            // on the GPU alone (gpu_timing.hpp; host-inclusive in records before 2026-11-27)
  double host_inclusive_s = 0;   // issued as it comes (0: not recorded)
  int launches = 1;              // kernels the call runs (a norm's backward: dx, the weight's partial sums, their sum)
};

// The memory-bound kernels' fixed cost and rates: every sample's seconds = launches x latency + bytes / rate of its
// kernel (by name), one latency for all kernels (what a kernel costs the GPU beyond its bytes: the launch, its blocks' start and
// its first memory round trips), by least squares of the relative residual with nonnegative terms. Throws
// std::invalid_argument unless some kernel has two sizes.
struct KernelLatencyFit {
  double latency_s = 0;
  std::map<std::string, double> GBps;  // per kernel name (0: no rate fitted)
  FitResidual residual;
};
KernelLatencyFit fit_kernel_latency(const std::vector<KernelSample>& samples);

// zrun's flash attention (runtime/model/flash_attention.cu), causal, timed on one shape: the median seconds of one
// flash_attention_forward or one flash_attention_backward call (q, k, v, out: [b, seq, heads or kv_heads, head_dim]).
struct FlashSample {
  std::string dtype;       // "bf16" or "fp16"
  std::string direction;   // "forward" or "backward"
  std::int64_t b = 0, heads = 0, kv_heads = 0, seq = 0, head_dim = 0;
  double seconds = 0;
  bool backward() const { return direction == "backward"; }
};
// The FLOPs zsim's schedule charges the call (sim/plan/attention_flops.hpp, causal flash): forward 2 b seq^2 x heads x
// head_dim, backward 2.5 x that (the scores recomputed).
double flash_flops(const FlashSample& s);
// The kernels the call launches (sim/plan/kernel_launches.hpp kFlashForwardLaunches / kFlashBackwardLaunches: the
// counts zsim charges efficiency.launch_us for).
int flash_launches(const FlashSample& s);
struct FlashFit {
  double efficiency = 0;   // achieved / peak tensor FLOPs of the kernel
  FitResidual residual;    // over every sample
  std::map<std::int64_t, FitResidual> by_head_dim;  // of the one efficiency, per head dim
  std::map<std::string, FitResidual> by_dtype;
  int launch_bound = 0;    // samples no longer than their launches: in the residual, not in the fit
};
// The efficiency e of least relative error over samples of one direction: seconds = launches x launch_s + flops /
// (peak_tflops x 1e12 x e), launch_s the measured empty kernel's launch to launch (Measurements::kernel_launch_s,
// what zsim charges per launch), launches and flops as zsim counts them. One e for every shape: the residual per head
// dim and dtype says how far that holds. Samples no longer than their launches are left out of the fit (they say
// nothing of the FLOPs). Throws std::invalid_argument on no samples, mixed directions, or no sample beyond its launches.
FlashFit fit_flash_efficiency(const std::vector<FlashSample>& samples, double peak_tflops, double launch_s);

// kernels/cpu Adam timed on `threads` OpenMP threads: the median step over `params` parameters; with ranks > 1, every
// rank of the host ran it at once on `threads` threads over `params` each, and `seconds` is the slowest rank's.
struct CpuAdamSample {
  int threads = 0;
  double params = 0;
  double seconds = 0;
  int ranks = 1;
  double params_per_s() const { return params / seconds; }               // one rank's
  double node_params_per_s() const { return ranks * params / seconds; }  // every rank's together
  int node_threads() const { return ranks * threads; }
};
// CPU Adam is memory-bandwidth bound: each thread adds its rate until the node's memory bandwidth is spent,
// rate(t) = min(t x per_core, node_params_per_s), zsim's model (cost_models/compute_cost.hpp cpu_adam_params_per_s:
// every rank of a node at once gets min(its threads x per_core, node_params_per_s / ranks)).
// The slope and, without samples of several ranks, the ceiling come from the one-rank samples: the fit runs on their
// rates' running maximum over the thread counts: a sample slower than one at fewer threads (a thread of the team
// descheduled when OpenMP's threads fill every hardware thread: 32 threads ran 4M parameters 10x slower than 16 on
// the 32-thread H200 host) says nothing of the memory bandwidth, which the fewer threads already reached. It tries every split of the thread counts into a low part (on the slope) and a high part
// (on the ceiling): the slope by least squares of the relative error of the low part's rates (r = t x per_core), the
// ceiling the same over the high part's (r = node_params_per_s), and keeps the split whose model min(t x per_core,
// ceiling) has the least rms relative residual over those rates.
// Samples of several ranks at once (a data-parallel step's optimizer, as fast as its slowest rank) give the ceiling
// instead: least squares of the relative error of their rates all together (ranks x the slowest rank's) over those
// beyond the slope's part (ranks x threads > its largest count; all of them where none is), as measured (no running
// maximum: a rank slower than the rest is what the step waits for).
// The residual reported is against every measured rate (all together for several ranks). Samples of one thread
// count (a record before calibrate measured several): the slope alone, no ceiling (node_params_per_s 0) unless
// samples of several ranks give one. Throws std::invalid_argument on no one-rank sample or a sample with threads < 1,
// ranks < 1 or a non-positive measurement.
struct CpuAdamFit {
  double per_core = 0;            // params/s per thread
  double node_params_per_s = 0;   // the ceiling; 0 = none fitted
  int slope_up_to = 0;            // the largest thread count of the slope's part
  int ceiling_ranks = 1;          // the ranks at once of the samples the ceiling came from
  std::vector<int> ceiling_threads;  // their threads per rank, ascending (empty: the ceiling is one rank's)
  FitResidual residual;           // of the rates min(t x per_core, ceiling) against the measured ones
  std::vector<int> raised;        // thread counts whose rate the fit took at fewer threads' (slower than those)
};
CpuAdamFit fit_cpu_adam(const std::vector<CpuAdamSample>& samples);
// The thread counts calibrate times CPU Adam at: 1, 2, 4, ... below hardware_threads, then hardware_threads.
std::vector<int> cpu_adam_thread_counts(int hardware_threads);

// Residuals of a model over samples: predicted[i] against measured[i].
FitResidual residual_of(const std::vector<double>& predicted, const std::vector<double>& measured);

// The median (of an even count, the mean of the two middle values); 0 for none.
double median(std::vector<double> v);

}  // namespace zrun::calibrate
