// Scenario: everything a user states about one training setup (model, training, cluster, ZeRO config),
// fully resolved (presets expanded, "auto" resolved, defaults applied). Pure data; parsing lives in
// scenario_parse.*, validation in scenario_validate.*.
#pragma once
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cost_models/gemm_model.hpp"
#include "sim/common/units.hpp"

namespace zsim {

enum class Precision { bf16, fp16, fp32 };
enum class Checkpointing { none, full };
enum class MlpKind { plain, gated };  // plain: GPT GeLU MLP (2 matrices); gated: SwiGLU (3 matrices)
enum class OffloadDevice { none, cpu, nvme };
// flash: a fused causal kernel (FlashAttention, PyTorch SDPA) that keeps no s x s tensor, only the per-row
// softmax statistics, and recomputes the scores in backward; eager: the scores and probabilities
// materialised (Hugging Face "eager", Megatron's unfused path, zrun's model today).
enum class Attention { flash, eager };
inline std::optional<Attention> attention_from_name(std::string_view v) {
  if (v == "flash") return Attention::flash;
  if (v == "eager") return Attention::eager;
  return std::nullopt;
}
// transformers' attn_implementation values.
inline std::optional<Attention> attention_from_hf_implementation(std::string_view v) {
  if (v == "eager") return Attention::eager;
  if (v == "sdpa" || v == "flash_attention_2" || v == "flash_attention_3" || v == "flex_attention")
    return Attention::flash;
  return std::nullopt;
}
constexpr const char* to_string(Attention a) { return a == Attention::flash ? "flash" : "eager"; }

// What runs the training step, and so whose memory and calls zsim predicts: DeepSpeed with a Hugging Face
// transformers model on PyTorch (what users run: transformers' modeling code as autograd keeps its tensors,
// docs/deepspeed-memory.md), or zrun (its own lean layers, the buffers the schedule gives it).
enum class RuntimeKind { deepspeed, zrun };
inline std::optional<RuntimeKind> runtime_from_name(std::string_view v) {
  if (v == "deepspeed") return RuntimeKind::deepspeed;
  if (v == "zrun") return RuntimeKind::zrun;
  return std::nullopt;
}
constexpr const char* to_string(RuntimeKind r) { return r == RuntimeKind::deepspeed ? "deepspeed" : "zrun"; }

// Bytes per element of the training precision (weights/grads as seen by forward/backward).
constexpr Bytes bytes_per_element(Precision p) { return p == Precision::fp32 ? 4 : 2; }

// How transformers builds a family's decoder layer, as hf_config.cpp reads it from a config.json (each family after
// its models/<family>/modeling_<family>.py in transformers 5.17; docs/architectures.md). The defaults are Llama's;
// a model given by preset or by numbers derives it from ModelSpec::bias and ::mlp (complete_architecture).
enum class NormKind {
  rms,        // LlamaRMSNorm: x.float() * rsqrt(mean(x^2) + eps), cast back, times weight
  rms_gemma,  // GemmaRMSNorm: all in fp32, times (1 + weight), cast back at the end
  rms_weight_fp32,  // Olmo2RMSNorm: weight * (x * rsqrt) in fp32, cast back after
  layer,      // nn.LayerNorm: weight and bias
  layer_no_bias,  // CohereLayerNorm: mean and variance in fp32, times weight, no bias
};
enum class QkNorm {
  none,
  per_head,    // Qwen3, Gemma-3: an RMSNorm of head_dim on each head of q and k
  full_width,  // OLMo-2: an RMSNorm over all of q (heads x head_dim) and all of k (kv heads x head_dim)
};
enum class BlockKind {
  pre_norm,  // x + attn(norm1(x)); then + mlp(norm2(.)) (Llama, GPT-2, OPT, Phi-3, StarCoder2)
  sandwich,  // Gemma-2/3: x + norm2(attn(norm1(x))); then + norm4(mlp(norm3(.)))
  post_norm, // OLMo-2: x + norm1(attn(x)); then + norm2(mlp(.))
  parallel,  // GPT-NeoX (use_parallel_residual): x + attn(norm1(x)) + mlp(norm2(x))
  parallel_shared_norm,  // Cohere: x + attn(norm1(x)) + mlp(norm1(x)), one norm
};
enum class ActKind {
  silu,       // SiLU (gated: silu(gate) * up)
  gelu_tanh,  // gelu_pytorch_tanh: one fused kernel
  gelu,       // exact GELU
  gelu_new,   // GPT-2's NewGELUActivation: five elementwise Python ops
  relu,
};
struct ArchSpec {
  std::string model_type;      // transformers' model_type; empty for a preset or a model given by numbers
  std::int64_t head_dim = 0;   // 0: hidden / heads
  bool qkv_bias = false;       // q, k, v (or the fused qkv) carry biases
  bool o_bias = false;         // the attention output projection carries one
  bool mlp_bias = false;       // the MLP's projections carry them
  NormKind norm = NormKind::rms;
  QkNorm qk_norm = QkNorm::none;
  BlockKind block = BlockKind::pre_norm;
  ActKind act = ActKind::silu;
  bool fused_qkv = false;      // one projection to q | k | v (GPT-2 c_attn, GPT-NeoX query_key_value, Phi-3 qkv_proj)
  bool fused_gate_up = false;  // Phi-3's gate_up_proj
  std::int64_t position_offset = 0;  // learned positions: extra rows (OPT: 2)
  double embedding_dropout = 0.0;    // dropout on the embeddings' output (GPT-2 embd_pdrop, StarCoder2)
  double rotary_fraction = 1.0;      // of each head that RoPE turns (GPT-NeoX rotary_pct); learned positions: unused
  bool attn_softcapping = false;     // eager attention soft-caps its scores (Gemma-2 attn_logit_softcapping)
  bool final_softcapping = false;    // the logits are soft-capped (Gemma-2 final_logit_softcapping)
  // Layers whose attention slides a window of sliding_window tokens (Mistral, Phi-3, StarCoder2: all; Gemma-2:
  // every other; Gemma-3: five of six); 0 = none. Under sdpa each such layer saves its own mask at s >= the window.
  std::int64_t sliding_window = 0;
  std::int64_t sliding_layers = 0;
  // A mixture of experts in every layer's MLP (Mixtral, Qwen3-MoE; 0 experts: dense): a router (experts x hidden)
  // and the experts as transformers 5.17 declares them, two 3-D parameters of one module (gate_up_proj [experts, 2 x
  // expert_ffn, hidden], down_proj [experts, hidden, expert_ffn]); each token goes to experts_per_token of them.
  std::int64_t experts = 0;
  std::int64_t experts_per_token = 0;
  std::int64_t expert_ffn = 0;
  bool router_weights_fp32 = false;  // Mixtral keeps the top-k weights in fp32; Qwen3-MoE casts them to the dtype
  bool norm_topk_prob = false;       // the top-k weights renormalized to sum to 1 (a sum saved per token)
  bool operator==(const ArchSpec&) const = default;
};

struct ModelSpec {
  std::string name = "custom";  // preset name, HF config path, or "custom"
  std::int64_t layers = 0;
  std::int64_t hidden = 0;
  std::int64_t ffn_hidden = 0;
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;           // = heads without grouped-query attention
  std::int64_t vocab = 0;
  std::int64_t max_position_embeddings = 0;  // learned absolute positions (GPT-2/3); 0 = rotary / ALiBi
  bool tie_word_embeddings = false;
  MlpKind mlp = MlpKind::gated;
  bool bias = false;                   // linear layers and norms carry biases (GPT-2/3, BLOOM)
  Attention attention = Attention::flash;
  double attention_dropout = 0.0;      // dropout on the attention probabilities; 0 = no mask kept
  double hidden_dropout = 0.0;         // dropout after the attention and MLP outputs; 0 = no masks kept
  ArchSpec arch;                       // read from a config.json (hf_config.cpp); architecture(m) for any model
  // deepspeed.utils.set_z3_leaf_modules(model, [classes]) as the training script calls it: a mixture-of-experts
  // block named here is fetched by stage 3 as one module (its router with its experts). Empty: none.
  std::string z3_leaf_modules;
  bool operator==(const ModelSpec&) const = default;
};

// transformers 5.17's class of a mixture-of-experts block and of its experts, by model_type ("" for a dense model).
inline std::string moe_block_class(const std::string& model_type) {
  if (model_type == "mixtral") return "MixtralSparseMoeBlock";
  if (model_type == "qwen3_moe") return "Qwen3MoeSparseMoeBlock";
  return "";
}
inline std::string moe_experts_class(const std::string& model_type) {
  if (model_type == "mixtral") return "MixtralExperts";
  if (model_type == "qwen3_moe") return "Qwen3MoeExperts";
  return "";
}
// Whether stage 3 fetches each layer's mixture-of-experts block as one module (its class set as a leaf).
inline bool moe_block_is_leaf(const ModelSpec& m) {
  return m.arch.experts > 0 && !m.z3_leaf_modules.empty() && m.z3_leaf_modules == moe_block_class(m.arch.model_type);
}

// The width of one attention head: the config's head_dim where it gives one (Qwen3, Gemma, Mistral-Nemo), else
// hidden / heads.
inline std::int64_t head_dim(const ModelSpec& m) {
  if (m.arch.head_dim > 0) return m.arch.head_dim;
  return m.heads > 0 ? m.hidden / m.heads : 0;
}

// The model's architecture: a config.json's as read (hf_config.cpp); a model without one (a preset, or numbers)
// derives it from `bias` and `mlp` (a plain MLP is the GPT family: LayerNorms, gelu_new, the embeddings' dropout at
// hidden_dropout; biases everywhere with `bias`).
inline ArchSpec architecture(const ModelSpec& m) {
  if (!m.arch.model_type.empty()) return m.arch;
  ArchSpec a;
  a.qkv_bias = a.o_bias = a.mlp_bias = m.bias;
  a.norm = m.bias ? NormKind::layer : NormKind::rms;
  a.act = m.mlp == MlpKind::gated ? ActKind::silu : ActKind::gelu_new;
  a.embedding_dropout = m.mlp == MlpKind::plain ? m.hidden_dropout : 0.0;
  return a;
}

struct TrainingSpec {
  std::int64_t micro_batch = 1;
  std::int64_t grad_accum = 1;
  std::int64_t seq_len = 2048;
  Precision precision = Precision::bf16;
  // DeepSpeed's top-level communication_data_type: the dtype of the gradient reductions (unset: the training
  // dtype, engine.py DeepSpeedEngine.communication_data_type).
  std::optional<Precision> communication_data_type;
  Checkpointing activation_checkpointing = Checkpointing::full;
  bool operator==(const TrainingSpec&) const = default;
};

struct GpuSpec {
  std::string name = "custom";
  Bytes hbm_bytes = 0;
  double hbm_GBps = 0;            // peak HBM bandwidth
  double peak_tflops = 0;         // dense bf16/fp16 tensor-core peak
  double peak_fp32_tflops = 0;    // dense fp32 (non-tensor) peak, used when precision is fp32
};

struct HostSpec {                 // per node
  Bytes memory_bytes = 0;
  int cores = 0;
};

struct NvmeSpec {                 // per node
  Bytes bytes = 0;
  double read_GBps = 0;
  double write_GBps = 0;
  double read_latency_us = 0;      // per transfer (one nvme_read / nvme_write op), beside its bytes at the rate
  double write_latency_us = 0;
  // A transfer of at most one request (kNvmeRequestBytes: DeepSpeed's aio block_size default, zrun's request size)
  // takes its own line where given (> 0): a single request's latency and rate, as measured on 4 KiB .. 1 MiB, which
  // the line above, fitted on 1 MiB .. 1 GiB of requests in flight together, does not hold.
  double one_request_read_latency_us = 0;
  double one_request_read_GBps = 0;
  double one_request_write_latency_us = 0;
  double one_request_write_GBps = 0;
  // Measured per size where given (nvme.read_GBps_by_size / write_GBps_by_size.<size>, GB/s: a transfer's bytes over
  // its whole time, latency included): a transfer of more than one request moves at the figure interpolated at its
  // size (log-log, the nearest figure beyond them) in place of the line above, which one latency and one rate do not
  // hold on every disk (zrun calibrate's fit residual). (bytes, GBps) points in ascending size.
  std::vector<std::pair<double, double>> read_GBps_by_size{};
  std::vector<std::pair<double, double>> write_GBps_by_size{};
};
inline constexpr Bytes kNvmeRequestBytes = Bytes{1} << 20;

struct LinkSpec {                 // per GPU, one direction
  double nvlink_GBps = 0;
  double pcie_GBps = 0;
  double ib_GBps = 0;
  double nvlink_latency_us = 2.0;
  double pcie_latency_us = 2.0;
  double ib_latency_us = 5.0;
  double ib_oversubscription = 1.0;  // fat tree leaf->spine oversubscription ratio (>= 1)
  int nodes_per_leaf = 0;            // nodes under one leaf switch; 0 = all nodes on one leaf
};

// Achieved / peak HBM bandwidth per kind of memory-bound kernel (zrun calibrate measures each kind); 0 = not
// given, the kernel runs at efficiency.hbm. softmax: eager attention's causal row softmax over the s x s scores;
// cross_entropy: the loss's softmax over the vocabulary (rows of `vocab` logits). The *_backward kinds are the
// backward kernels of norm, softmax, activation and cross_entropy (a backward op's bytes); 0 = the forward kind's.
enum class HbmKind {
  norm, softmax, activation, adam, quantize, copy, cross_entropy,
  norm_backward, softmax_backward, activation_backward, cross_entropy_backward
};
struct HbmByKind {
  double norm = 0, softmax = 0, activation = 0, adam = 0, quantize = 0, copy = 0, cross_entropy = 0;
  double norm_backward = 0, softmax_backward = 0, activation_backward = 0, cross_entropy_backward = 0;
  double& of(HbmKind k) {
    switch (k) {
      case HbmKind::norm: return norm;
      case HbmKind::softmax: return softmax;
      case HbmKind::activation: return activation;
      case HbmKind::adam: return adam;
      case HbmKind::quantize: return quantize;
      case HbmKind::copy: return copy;
      case HbmKind::cross_entropy: return cross_entropy;
      case HbmKind::norm_backward: return norm_backward;
      case HbmKind::softmax_backward: return softmax_backward;
      case HbmKind::activation_backward: return activation_backward;
      case HbmKind::cross_entropy_backward: return cross_entropy_backward;
    }
    return copy;
  }
  double of(HbmKind k) const { return const_cast<HbmByKind*>(this)->of(k); }
  bool operator==(const HbmByKind&) const = default;
};
inline constexpr HbmKind kHbmKinds[] = {HbmKind::norm,          HbmKind::softmax,          HbmKind::activation,
                                        HbmKind::adam,          HbmKind::quantize,         HbmKind::copy,
                                        HbmKind::cross_entropy, HbmKind::norm_backward,    HbmKind::softmax_backward,
                                        HbmKind::activation_backward, HbmKind::cross_entropy_backward};
constexpr const char* to_string(HbmKind k) {
  switch (k) {
    case HbmKind::norm: return "norm";
    case HbmKind::softmax: return "softmax";
    case HbmKind::activation: return "activation";
    case HbmKind::adam: return "adam";
    case HbmKind::quantize: return "quantize";
    case HbmKind::copy: return "copy";
    case HbmKind::cross_entropy: return "cross_entropy";
    case HbmKind::norm_backward: return "norm_backward";
    case HbmKind::softmax_backward: return "softmax_backward";
    case HbmKind::activation_backward: return "activation_backward";
    case HbmKind::cross_entropy_backward: return "cross_entropy_backward";
  }
  return "?";
}
// The kind of a backward op's bytes for a unit whose forward bytes are `k` (k itself where the kind has no backward
// kernel of its own: the embedding's copy).
constexpr HbmKind backward_of(HbmKind k) {
  switch (k) {
    case HbmKind::norm: return HbmKind::norm_backward;
    case HbmKind::softmax: return HbmKind::softmax_backward;
    case HbmKind::activation: return HbmKind::activation_backward;
    case HbmKind::cross_entropy: return HbmKind::cross_entropy_backward;
    default: return k;
  }
}
// The forward kind of a backward kind (k itself for the others).
constexpr HbmKind forward_of(HbmKind k) {
  switch (k) {
    case HbmKind::norm_backward: return HbmKind::norm;
    case HbmKind::softmax_backward: return HbmKind::softmax;
    case HbmKind::activation_backward: return HbmKind::activation;
    case HbmKind::cross_entropy_backward: return HbmKind::cross_entropy;
    default: return k;
  }
}

// Achieved / peak tensor FLOPs of a fused attention kernel (zrun's flash attention, runtime/model/flash_attention.cu;
// zrun calibrate fits them), per direction: forward (also a recompute's) and backward (with its recomputation of the
// scores). Fractions of the peak that applies (peak_tflops; fp32 runs: peak_fp32_tflops); 0 = not given, the kernel's
// FLOPs run at its unit's GEMM efficiency.
struct FlashAttentionEfficiency {
  double forward = 0;
  double backward = 0;
  bool operator==(const FlashAttentionEfficiency&) const = default;
};

// The sizes of efficiency.nvlink_busbw's keys (zrun calibrate's collective sizes, 1 KiB x 4^i) and the collective
// kinds it may hold.
inline constexpr std::array<std::pair<const char*, double>, 11> kNvlinkBusbwSizes{{{"1KiB", 1024.0},
                                                                                   {"4KiB", 4096.0},
                                                                                   {"16KiB", 16384.0},
                                                                                   {"64KiB", 65536.0},
                                                                                   {"256KiB", 262144.0},
                                                                                   {"1MiB", 1048576.0},
                                                                                   {"4MiB", 4194304.0},
                                                                                   {"16MiB", 16777216.0},
                                                                                   {"64MiB", 67108864.0},
                                                                                   {"256MiB", 268435456.0},
                                                                                   {"1GiB", 1073741824.0}}};
inline constexpr std::array<const char*, 6> kNvlinkBusbwKinds{"all_gather", "reduce_scatter", "all_reduce",
                                                              "all_to_all", "broadcast",      "reduce"};

// The group shapes efficiency.group_busbw may hold (its block names, "ranks_<N>_nodes_<K>"): N ranks over K nodes,
// N and K powers of two, 2 <= K <= N <= 64.
inline std::string group_busbw_shape(int ranks, int nodes) {
  return "ranks_" + std::to_string(ranks) + "_nodes_" + std::to_string(nodes);
}
inline std::vector<std::pair<int, int>> group_busbw_shapes() {
  std::vector<std::pair<int, int>> v;
  for (int n = 2; n <= 64; n *= 2)
    for (int k = 2; k <= n; k *= 2) v.emplace_back(n, k);
  return v;
}

// Achieved fractions of peak and host throughputs; defaults from the hardware profile, overridable by
// calibration (timing issue).
struct EfficiencySpec {
  double gemm = 0.6;                 // achieved / peak tensor FLOPs for forward/backward GEMMs
  double hbm = 0.8;                  // achieved / peak HBM bandwidth for memory-bound kernels
  double cpu_adam_params_per_s_per_core = 1.0e8;
  double pageable_pcie_fraction = 0.5;  // pageable host memory bandwidth / pinned
  // Host-to-device pageable copies apart, where measured apart (absent: pageable_pcie_fraction both ways).
  std::optional<double> pageable_h2d_pcie_fraction{};
  double pageable_fraction(bool h2d) const {
    return h2d ? pageable_h2d_pcie_fraction.value_or(pageable_pcie_fraction) : pageable_pcie_fraction;
  }
  HbmByKind hbm_by_kind{};           // after the scalars (aggregate init): per kind of kernel where measured (0: hbm)
  // A kind's figure; a backward kind without one its forward kind's; else hbm.
  double hbm_for(HbmKind k) const {
    if (hbm_by_kind.of(k) > 0) return hbm_by_kind.of(k);
    return forward_of(k) != k ? hbm_for(forward_of(k)) : hbm;
  }
  // Measured GEMM models (zrun calibrate; cost_models/gemm_model.hpp): when present, GEMM-bound ops run at the
  // efficiency the model gives their unit's GEMM shapes instead of `gemm`. 16-bit and fp32 training.
  GemmModel gemm_model{};
  GemmModel gemm_model_fp32{};
  // Fixed cost of one kernel launch in a compute op (zrun calibrate: an empty kernel, launch to launch), charged
  // per launch the op makes beyond the GEMMs the GEMM model prices (docs/timing.md); 0 = launches cost nothing.
  double launch_us = 0;
  // A collective on a group of one rank that moves data (zrun calibrate: NCCL on a one-rank communicator as zrun calls it):
  // latency_us + bytes / GBps. GBps 0 = not measured: the engine prices it as a device copy of its bytes.
  // Per kind (all_gather out of place, reduce_scatter and all_reduce averaging in place) where calibrate fitted one;
  // a kind with GBps 0 takes the line over all kinds.
  struct OneRankLine {
    double latency_us = 0;
    double GBps = 0;
  };
  struct OneRankCollective {
    double latency_us = 0;
    double GBps = 0;
    OneRankLine all_gather{}, reduce_scatter{}, all_reduce{};
  } one_rank_collective{};
  // Bus bandwidth NCCL reached among the ranks of one node, per collective kind at calibrate's sizes (zrun calibrate:
  // efficiency.nvlink_busbw.<kind>.<size>, GB/s). A collective on one node whose kind has figures moves its bus bytes
  // at the figure interpolated at its size (cost_models' interpolated_busbw), in place of the links.nvlink_* latency +
  // bandwidth line, which NCCL does not follow on NVLink (its protocol and channels change with the size). Kind name
  // -> (bytes, GBps) points in ascending size; a kind absent takes the line.
  std::map<std::string, std::vector<std::pair<double, double>>> nvlink_busbw{};
  // The same for a group over several nodes, per group shape (zrun calibrate on 2+ nodes, or virtual nodes of one host:
  // efficiency.group_busbw.ranks_<N>_nodes_<K>.<kind>.<size>, GB/s): a collective on a group of that shape whose kind
  // has figures moves its bus bytes at the figure interpolated at its size, over the route the network model gives it,
  // in place of the links.ib_* line. Shape (group_busbw_shape) -> kind -> (bytes, GBps) points in ascending size.
  std::map<std::string, std::map<std::string, std::vector<std::pair<double, double>>>> group_busbw{};
  // The fraction of its alone rate a kernel of a side stream keeps while the compute stream runs (zrun calibrate:
  // each kind timed alone and beside back-to-back GEMMs); 0 = not measured (its alone rate). memcpy: a plain d2d copy
  // run as a cudaMemcpyAsync per piece (torch's copy_); kernel: a copy kernel (torch.cat, casts, add_); collective: a
  // one-rank NCCL collective that moves data; link_collective: a collective among 2+ ranks (its flow over the links,
  // measured as an all-gather of the world while every rank runs GEMMs).
  struct BesideCompute {
    double memcpy = 0, kernel = 0, collective = 0, link_collective = 0;
    // Each class's figure beside its key name.
    std::array<std::pair<double, const char*>, 4> by_class() const {
      return {{{memcpy, "memcpy"}, {kernel, "kernel"}, {collective, "collective"}, {link_collective, "link_collective"}}};
    }
  } beside_compute{};
  // The other way: the fraction of its alone rate the compute stream's forward, backward and recompute ops keep while a
  // side-stream op of each class runs (zrun calibrate: back-to-back GEMMs timed with each kind beside them); the
  // lowest of the classes running applies; 0 = not measured (unaffected).
  BesideCompute compute_beside{};
  // Measured efficiency of the fused attention kernel (ComputeOp::fused_attention_flops); 0 = as the unit's GEMMs.
  FlashAttentionEfficiency flash_attention{};
  // The issuing thread's time per call (zrun calibrate: the host's time to enqueue each kind while the GPU is held),
  // where a profile gives it: the engine then issues each step's ops in program order from one host thread, and an
  // op starts no earlier than the host has issued it (docs/timing.md "Host issue"). All 0 = no host model (the
  // figures above then include the host's launch cost, as calibrate measured them before 2026-11-26).
  struct HostIssue {
    double kernel_us = 0;      // a kernel launch (also a host function: CPU and NVMe ops)
    double gemm_us = 0;        // a cuBLASLt GEMM call
    double collective_us = 0;  // an NCCL call
    double memcpy_us = 0;      // a cudaMemcpyAsync
    double event_us = 0;       // a cudaEventRecord or cudaStreamWaitEvent
    // An NCCL call on a group of 2+ ranks (calibrate's enqueue among the GPUs; 0: collective_us prices it too).
    double link_collective_us = 0;
    // A collective's call on a group of `ranks`.
    double collective_call_us(int ranks) const { return ranks > 1 && link_collective_us > 0 ? link_collective_us : collective_us; }
    bool present() const { return kernel_us > 0 || gemm_us > 0 || collective_us > 0 || memcpy_us > 0 || event_us > 0; }
  } host_issue{};
  // CPU Adam's ceiling for the whole node, params/s (zrun calibrate: the fit of CPU Adam at several thread counts): the
  // node's memory bandwidth, shared by every rank's CPU Adam; a rank runs at min(its cores x
  // cpu_adam_params_per_s_per_core, this / gpus_per_node) (cost_models/compute_cost.hpp). 0 = no ceiling. Last, so
  // that the aggregate initialisations of the scalars above stay as they are.
  double cpu_adam_node_params_per_s = 0;
  // CPU Adam's rate per rank as zrun calibrate measured it (efficiency.cpu_adam_measured.ranks_<R>.threads_<T>,
  // params/s): R ranks of the node each running it at once on T threads, the slowest rank's rate (R = 1: one rank
  // alone). Where the node's rank count (gpus_per_node) has figures, a rank runs at the figure interpolated at its cores
  // (cost_models' cpu_adam_measured_params_per_s), in place of the fit above, whose sharp bend misses the measured curve
  // between its two parts (record AD: rms 21.5%, worst 55% on calibrate's own samples). Ranks -> (threads, params/s)
  // in ascending threads.
  std::map<int, std::vector<std::pair<double, double>>> cpu_adam_measured{};
  // The wait of a side-stream kernel issued while the compute stream runs a GEMM, as a fraction of that GEMM's time
  // (zrun calibrate: the intercept of each kind's time beside back-to-back 4096^3 GEMMs over its sizes, over the GEMM's
  // time): the side kernel gets no SM until the running kernel has dispatched its last blocks, then moves its bytes at
  // efficiency.beside_compute (the slope of the same line). The classes of efficiency.beside_compute; 0 = no wait.
  BesideCompute beside_compute_wait{};
  // The host's time to run a DeepSpeed + PyTorch eager step (a schedule of runtime deepspeed: ScheduleMeta::framework),
  // fitted from the phase-timed micro-runs of validate/deepspeed (list fit; validate/deepspeed/fit_host.py; one H200: validate/deepspeed/host-h200.yaml): the Python
  // thread issues each op's kernels after its share of these, in program order (sim/engine/deepspeed_host.hpp), so a
  // step is as long as the host or the GPU, whichever binds. Microseconds; all 0 = no such model (the engine then
  // uses host_issue, or none). Per micro-step: a decoder layer's forward and backward (transformers' modeling code,
  // Llama family or GPT-2), the rest of the model's forward (embedding, final norm, head and the loss) and backward;
  // under gradient checkpointing a layer's forward (torch.utils.checkpoint's wrapper) and its recompute; at stage 3
  // each submodule's hooks (parameter_offload.py's pre/post hooks and the fetch coordinator) in forward (and each
  // recompute) and backward. Per step: DeepSpeed's optimizer step, fixed and per parameter tensor (stage 3 apart).
  // Stage 3 under checkpointing may price its hooks apart (optional figures, each stage3_forward_module_us when not
  // given): in a checkpointed layer's forward and in its recompute.
  struct DeepSpeedHost {
    double llama_forward_layer_us = 0, gpt2_forward_layer_us = 0, forward_fixed_us = 0;
    double llama_backward_layer_us = 0, gpt2_backward_layer_us = 0, backward_fixed_us = 0;
    double checkpoint_forward_layer_us = 0, recompute_layer_us = 0;
    double stage3_forward_module_us = 0, stage3_backward_module_us = 0;
    double step_fixed_us = 0, step_param_us = 0, stage3_step_param_us = 0;
    // Stages 1-2: DeepSpeed's reduction of each parameter tensor's gradient (stage_1_and_2.py
    // reduce_ready_partitions_and_remove_grads: the bucket's bookkeeping, the copy into the bucket and into the
    // partition), in backward's hooks every micro-step at stage 2, after the boundary's backward at stage 1.
    double stage12_reduce_param_us = 0;
    // Stages 1-2 with the optimizer on the CPU: copy_grads_in_partition's work for each parameter tensor at the
    // boundary (stage_1_and_2.py: the gradient's float64 norm, the overflow check whose float(x.float().sum()) waits
    // for the GPU, the fp32 cast and its copy down), on the tensor's `.to_fp32` op, the host waiting for the GPU first.
    double stage12_offload_param_us = 0;
    // A decoder layer with eager attention (transformers' eager_attention_forward: the scores' matmul, the scale, the
    // mask's add, the softmax in fp32 and its cast, dropout, the matmul by V; Llama's repeat_kv), beyond what an SDPA
    // layer's figure holds: in its forward (and its recompute) and its backward (their autograd nodes).
    double eager_forward_layer_us = 0, eager_backward_layer_us = 0;
    // Each figure beside its key name (cluster.efficiency.deepspeed_host.<name>).
    std::array<std::pair<double*, const char*>, 17> fields() {
      return {{{&llama_forward_layer_us, "llama_forward_layer_us"}, {&gpt2_forward_layer_us, "gpt2_forward_layer_us"},
               {&forward_fixed_us, "forward_fixed_us"}, {&llama_backward_layer_us, "llama_backward_layer_us"},
               {&gpt2_backward_layer_us, "gpt2_backward_layer_us"}, {&backward_fixed_us, "backward_fixed_us"},
               {&checkpoint_forward_layer_us, "checkpoint_forward_layer_us"}, {&recompute_layer_us, "recompute_layer_us"},
               {&stage3_forward_module_us, "stage3_forward_module_us"},
               {&stage3_backward_module_us, "stage3_backward_module_us"}, {&step_fixed_us, "step_fixed_us"},
               {&step_param_us, "step_param_us"}, {&stage3_step_param_us, "stage3_step_param_us"},
               {&stage12_reduce_param_us, "stage12_reduce_param_us"},
               {&stage12_offload_param_us, "stage12_offload_param_us"},
               {&eager_forward_layer_us, "eager_forward_layer_us"},
               {&eager_backward_layer_us, "eager_backward_layer_us"}}};
    }
    std::array<std::pair<double, const char*>, 17> fields() const {
      auto f = const_cast<DeepSpeedHost*>(this)->fields();
      std::array<std::pair<double, const char*>, 17> out{};
      for (size_t i = 0; i < f.size(); ++i) out[i] = {*f[i].first, f[i].second};
      return out;
    }
    // Stage 3's hooks per submodule in a checkpointed layer's forward (torch.utils.checkpoint's; measured cheaper than
    // a plain forward's, fitted apart) and in its recompute during backward. Not given: stage3_forward_module_us (the
    // effective_ accessors below, the one place that says so).
    std::optional<double> stage3_checkpoint_forward_module_us{}, stage3_recompute_module_us{};
    double effective_stage3_checkpoint_forward_module_us() const {
      return stage3_checkpoint_forward_module_us.value_or(stage3_forward_module_us);
    }
    double effective_stage3_recompute_module_us() const {
      return stage3_recompute_module_us.value_or(stage3_forward_module_us);
    }
    // Stage 1's reduction of each parameter tensor, apart from stage 2's: the same loop, run by engine.py
    // allreduce_gradients on the main thread after backward (reduce_gradients) where stage 2 runs it in autograd's
    // gradient hooks; measured far cheaper (docs/deepspeed-time.md). Not given: stage12_reduce_param_us.
    std::optional<double> stage1_reduce_param_us{};
    double effective_stage1_reduce_param_us() const { return stage1_reduce_param_us.value_or(stage12_reduce_param_us); }
    // The optional figures beside their key names.
    std::array<std::pair<std::optional<double>*, const char*>, 3> optional_fields() {
      return {{{&stage3_checkpoint_forward_module_us, "stage3_checkpoint_forward_module_us"},
               {&stage3_recompute_module_us, "stage3_recompute_module_us"},
               {&stage1_reduce_param_us, "stage1_reduce_param_us"}}};
    }
    // Optional fields' values beside their names.
    template <size_t N>
    static std::array<std::pair<std::optional<double>, const char*>, N> values_of(
        const std::array<std::pair<std::optional<double>*, const char*>, N>& f) {
      std::array<std::pair<std::optional<double>, const char*>, N> out{};
      for (size_t i = 0; i < N; ++i) out[i] = {*f[i].first, f[i].second};
      return out;
    }
    std::array<std::pair<std::optional<double>, const char*>, 3> optional_fields() const {
      return values_of(const_cast<DeepSpeedHost*>(this)->optional_fields());
    }
    bool present() const {
      for (auto [v, name] : fields()) if (v > 0) return true;
      for (auto [v, name] : optional_fields()) if (v.value_or(0) > 0) return true;
      return false;
    }
    // The host's speed (docs/deepspeed-time.md, "The host's speed"). The figures above hold on a host whose
    // reference loop (validate/deepspeed/host_cpu.py reference_work_seconds: a fixed pure-Python loop) takes
    // reference_loop_us; on a host whose loop takes loop_us every figure is multiplied by
    // (loop_us / reference_loop_us) ^ loop_speed_exponent (fitted with the figures: how much of a slower loop DeepSpeed's
    // Python follows). Any of the three not given: the figures as they are (scale 1).
    // Two threads, two speeds: the backward's Python (autograd's nodes, the recompute, stage 3's backward hooks, stage
    // 2's gradient hooks) runs on autograd's device thread, whose vCPU keeps its own speed; autograd_loop_us is the
    // same loop timed there (host_cpu.py reference_work_seconds_in_backward), and those figures scale with it in
    // place of loop_us. Not given: loop_us.
    std::optional<double> reference_loop_us{}, loop_speed_exponent{}, loop_us{}, autograd_loop_us{};
    std::array<std::pair<std::optional<double>*, const char*>, 4> host_speed_fields() {
      return {{{&reference_loop_us, "reference_loop_us"}, {&loop_speed_exponent, "loop_speed_exponent"},
               {&loop_us, "loop_us"}, {&autograd_loop_us, "autograd_loop_us"}}};
    }
    std::array<std::pair<std::optional<double>, const char*>, 4> host_speed_fields() const {
      return values_of(const_cast<DeepSpeedHost*>(this)->host_speed_fields());
    }
    // The main thread's scale (the forward, the optimizer step, stage 1's reduce_gradients).
    double host_speed_scale() const { return speed_scale_at(loop_us); }
    // Autograd's thread's scale (the backward pass's figures).
    double autograd_host_speed_scale() const { return speed_scale_at(autograd_loop_us ? autograd_loop_us : loop_us); }
    double speed_scale_at(std::optional<double> loop) const {
      if (!reference_loop_us || !loop_speed_exponent || !loop || !(*reference_loop_us > 0) || !(*loop > 0))
        return 1.0;
      return std::pow(*loop / *reference_loop_us, *loop_speed_exponent);
    }
  } deepspeed_host{};
  // GPU memory a training process holds outside PyTorch's caching allocator (the CUDA context with its modules,
  // cuBLAS / cuDNN handles, NCCL's communicators and buffers), measured per process (the harness's
  // memory.device: driver-level used minus the allocator's reserved); absent = not given (a given 0 stays 0). Under
  // runtime deepspeed the GPU verdict compares the allocator's reserved peak plus this with the GPU's memory, and the
  // allocator may reserve only the GPU's memory less this (sim/report: walk_memory_of); not given, zsim takes
  // kDeepSpeedOutsideAllocatorDefaultBytes and the report says so. Last, so that the aggregate initialisations above
  // stay as they are.
  std::optional<Bytes> outside_allocator_bytes{};
  // Under runtime deepspeed, a GEMM with a dimension that is not a multiple of 16 bytes' elements (cost_models'
  // gemm_aligned: GPT-2's 50,257-wide head) runs on torch's narrow-load cuBLAS kernels at this fraction of peak, per
  // direction (a recompute runs the forward), measured by validate/deepspeed/probes/probe_vocab_alignment.py; 0 = not
  // measured (such a GEMM runs as an aligned one). zrun's cuBLASLt calls are calibrated apart and keep their models.
  struct MisalignedGemm {
    double forward = 0, backward = 0;
    bool present() const { return forward > 0 || backward > 0; }
  } torch_misaligned_gemm{};
};

// What a DeepSpeed process holds outside PyTorch's caching allocator where no profile or scenario gives
// cluster.efficiency.outside_allocator_bytes (runtime deepspeed; the report says it is this default): the largest of
// record DS-A's one-rank runs on one H200 (validate/results/h200-deepspeed/runs/*-w1-*.json, the harness's
// memory.device: 1.28-1.30 GiB at stages 0-2, 1.66-1.69 GiB at stage 3), the figure validate/deepspeed/host-h200.yaml
// gives every stage. validate/deepspeed/calibrate_node.py measures a machine's own.
inline constexpr Bytes kDeepSpeedOutsideAllocatorDefaultBytes = 1816985600;

// The rank and thread counts efficiency.cpu_adam_measured may hold (calibrate's thread counts are powers of two).
inline constexpr std::array<int, 5> kCpuAdamMeasuredRanks{1, 2, 4, 8, 16};
inline constexpr std::array<int, 10> kCpuAdamMeasuredThreads{1, 2, 4, 8, 16, 32, 64, 128, 256, 512};

// The software and machine a profile's measured figures were fitted under (cluster.fitted_under, written by
// validate/deepspeed/calibrate_node.py; validate/deepspeed/host-h200.yaml): zsim's report names them and `zsim validate`
// warns where a DeepSpeed run's recorded versions differ. Strings as written; empty = not given.
struct FittedUnder {
  std::string deepspeed, torch, transformers, python, cuda, gpu, date;
  // Each field beside its key name (cluster.fitted_under.<name>).
  std::array<std::pair<std::string*, const char*>, 7> fields() {
    return {{{&deepspeed, "deepspeed"}, {&torch, "torch"}, {&transformers, "transformers"}, {&python, "python"},
             {&cuda, "cuda"}, {&gpu, "gpu"}, {&date, "date"}}};
  }
  std::array<std::pair<std::string, const char*>, 7> fields() const {
    auto f = const_cast<FittedUnder*>(this)->fields();
    std::array<std::pair<std::string, const char*>, 7> out{};
    for (size_t i = 0; i < f.size(); ++i) out[i] = {*f[i].first, f[i].second};
    return out;
  }
  bool present() const {
    for (const auto& [v, name] : fields())
      if (!v.empty()) return true;
    return false;
  }
  bool operator==(const FittedUnder&) const = default;
};

struct ClusterSpec {
  std::string profile;            // hardware profile name it was based on ("" = none)
  int nodes = 1;
  int gpus_per_node = 1;
  GpuSpec gpu;
  HostSpec host;
  NvmeSpec nvme;
  LinkSpec links;
  EfficiencySpec efficiency;
  FittedUnder fitted_under;       // the stack its measured figures were fitted under (empty: not recorded)
  int world_size() const { return nodes * gpus_per_node; }
};

struct OffloadOptimizerConfig {
  OffloadDevice device = OffloadDevice::none;
  bool pin_memory = false;
  std::string nvme_path;
  int buffer_count = 4;
  double ratio = 1.0;             // fraction of the optimizer step done on the CPU
  bool operator==(const OffloadOptimizerConfig&) const = default;
};

struct OffloadParamConfig {
  OffloadDevice device = OffloadDevice::none;
  bool pin_memory = false;
  std::string nvme_path;
  int buffer_count = 5;
  Elements buffer_size = 100'000'000;
  Elements max_in_cpu = 1'000'000'000;
  bool operator==(const OffloadParamConfig&) const = default;
};

struct LocoConfig {
  bool enabled = false;           // true when zeropp_loco_param is given
  double err_beta = 0.8;
  int reset_T = 1024;
  bool operator==(const LocoConfig&) const = default;
};

// DeepSpeed's zero_optimization block; same names, same meanings, sizes in elements as DeepSpeed has them.
struct ZeroConfig {
  int stage = 0;
  bool overlap_comm = false;
  bool contiguous_gradients = true;
  Elements reduce_bucket_size = 500'000'000;
  Elements allgather_bucket_size = 500'000'000;
  bool reduce_scatter = true;
  bool use_multi_rank_bucket_allreduce = true;  // stages 1-2: all-reduce each bucket (else a reduce per owner)
  bool round_robin_gradients = false;           // stages 1-2: flat order deals tensors round robin to ranks
  Elements stage3_prefetch_bucket_size = 50'000'000;
  Elements stage3_max_live_parameters = 1'000'000'000;
  Elements stage3_max_reuse_distance = 1'000'000'000;
  Elements stage3_param_persistence_threshold = 100'000;
  Elements sub_group_size = 1'000'000'000;
  OffloadOptimizerConfig offload_optimizer;
  OffloadParamConfig offload_param;
  int zero_hpz_partition_size = 1;
  bool zero_quantized_weights = false;
  bool zero_quantized_gradients = false;
  LocoConfig zeropp_loco_param;
  bool stage3_allgather_sequential = false;
  bool stage3_use_all_reduce_for_fetch_params = false;  // fetch by all-reduce of a zero-padded buffer
  bool operator==(const ZeroConfig&) const = default;
};

struct Scenario {
  std::string source_file;        // the YAML it was read from ("" if built in code)
  ModelSpec model;
  TrainingSpec training;
  ClusterSpec cluster;
  ZeroConfig zero;
  RuntimeKind runtime = RuntimeKind::deepspeed;  // the top-level key `runtime`
  std::vector<std::string> warnings;  // keys accepted but not modelled, etc.

  int world_size() const { return cluster.world_size(); }
};

}  // namespace zsim
