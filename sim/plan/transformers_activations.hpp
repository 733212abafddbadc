// Activation memory of a Hugging Face transformers 5 causal LM as PyTorch autograd runs it: the tensors each op of
// the modeling code saves for backward (by the ops' derivative formulas), what non-reentrant gradient checkpointing
// keeps, and the transient peaks of the forward and backward. Pure formulas; docs/deepspeed-memory.md derives every
// line from transformers 5.17's models/llama/modeling_llama.py and models/gpt2/modeling_gpt2.py (torch 2.11) and gives
// the measurement that checks it.
//
// Families (ModelSpec::arch, hf_families.cpp): a gated MLP follows Llama's layer and its backward (Llama, Mistral,
// Qwen2 measured under DeepSpeed; Qwen3, Gemma-1/2/3, Phi-3, OLMo-2, Cohere, Granite, Mixtral and Qwen3-MoE with their
// own norms, q/k norms, block layout, fused projections, mixture of experts), a plain MLP GPT-2's (GPT-2 measured;
// GPT-NeoX, OPT, StarCoder2 with their activations, rotary and parallel block): each family's saved tensors are
// checked against transformers' own (record transformers-zoo, docs/architectures.md). Attention::flash stands for
// transformers' "sdpa" (on an H100/H200 in torch 2.11 the cuDNN backend: q, k, v, the output and an fp32 log-sum-exp
// per head and row), Attention::eager for "eager" (the s x s scores materialised).
#pragma once
#include <string>
#include <vector>

#include "sim/common/units.hpp"
#include "sim/scenario/scenario.hpp"

namespace zsim {

struct NamedBytes {
  std::string name;
  Bytes bytes = 0;  // negative in a transient's breakdown: a saved tensor already freed at the peak
  bool operator==(const NamedBytes&) const = default;
};

// A size with its parts; total is the sum of parts.
struct BytesBreakdown {
  Bytes total = 0;
  std::vector<NamedBytes> parts;
  void add(std::string name, Bytes bytes);
  // The part named `name` (0 if absent).
  Bytes of(const std::string& name) const;
};

enum class HfFamily { llama, gpt2 };

struct TransformersActivations {
  HfFamily family = HfFamily::llama;
  // One decoder layer without checkpointing: every distinct storage autograd saves (parameters excluded).
  BytesBreakdown layer_saved;
  // One decoder layer under transformers' gradient_checkpointing_enable (non-reentrant torch.utils.checkpoint per
  // layer): its input hidden states, kept until the layer's backward.
  BytesBreakdown layer_checkpoint_kept;
  // Kept once for all layers under checkpointing (the recompute closures hold the layer kwargs): eager's 4-D mask.
  BytesBreakdown checkpoint_shared;
  // What a layer's recompute holds when its backward starts: layer_saved less what is already kept (its input).
  BytesBreakdown layer_recompute;
  // The forward's peak above the saved tensors within one layer (eager: the masked scores and their fp32 copy).
  BytesBreakdown layer_forward_transient;
  // The peak of one layer's backward above what the layer holds at its start (its saved set and the incoming
  // gradient), with the parts live at that peak; weight gradients are counted while in flight (DeepSpeed's hooks
  // move each away after accumulation), negative parts are saved tensors already freed.
  BytesBreakdown layer_backward_transient;
  // Shared by all layers, saved once per step: RoPE's cos and sin ([1, s, head_dim], batch 1).
  BytesBreakdown shared_saved;
  // Without checkpointing, every sliding-window layer's own sdpa mask (once the sequence reaches the window).
  BytesBreakdown sliding_masks_saved;
  // Alive through the forward of every layer (not saved): eager's additive causal mask [b, 1, s, s].
  BytesBreakdown forward_mask;
  BytesBreakdown embedding_saved;  // token ids (and GPT-2's position ids and embedding dropout mask)
  // Final norm, the LM head's input, the loss's fp32 log-softmax output (saved by log_softmax and nll_loss).
  BytesBreakdown head_saved;
  // The logits in the training dtype: not saved by autograd, alive while the caller holds the model output.
  BytesBreakdown logits_output;
  // The loss forward's peak above head_saved + logits_output: logits.float() while log_softmax writes its output.
  BytesBreakdown head_forward_transient;
  // The loss backward's peak above head_saved + logits_output: nll_loss's and log_softmax's fp32 gradients.
  BytesBreakdown loss_backward_transient;
  // Totals of one micro-batch's forward without checkpointing (layers x layer_saved + the rest), and with it.
  Bytes saved_no_checkpointing = 0;
  Bytes saved_with_checkpointing = 0;
};

HfFamily hf_family(const ModelSpec& m);

TransformersActivations transformers_activations(const ModelSpec& m, const TrainingSpec& t);

}  // namespace zsim
