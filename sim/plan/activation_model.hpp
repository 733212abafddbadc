// Activation memory of one transformer layer after Korthikanti et al. 2022 (arXiv 2205.05198, sec. 4.1),
// generalised to ffn != 4h, gated MLPs, grouped-query attention, flash attention and dropout-free models, plus
// the working sets a layer's forward and backward hold. Pure formulas; see docs/schedule-semantics.md
// ("Activations") for the derivation.
#pragma once
#include "sim/common/units.hpp"
#include "sim/scenario/scenario.hpp"

namespace zsim {

struct ActivationBytes {
  Bytes per_layer_no_recompute = 0;  // everything one layer keeps for its backward, its input included
  Bytes per_layer_checkpoint = 0;    // full checkpointing: the layer input only (2sbh at 16 bits)
  Bytes per_layer_work_bytes = 0;    // a layer's working set: what it keeps minus its input (the recompute set,
                                     // and under full checkpointing what its forward computes before dropping it)
  Bytes backward_grad_bytes = 0;     // the activation gradients one layer's backward holds at once
  Bytes head_bytes = 0;              // final norm's input, output and statistics; logits (+ their fp32 copy)
  // Under full checkpointing, what a layer's forward holds before it drops all but its input (zrun: its working
  // set; transformers' non-reentrant checkpoint keeps nothing, so only its transients).
  Bytes per_layer_forward_work_bytes = 0;
  // Without checkpointing, a layer's forward transient above what it saves (transformers' eager scores); 0: none.
  Bytes per_layer_forward_transient = 0;
  // Saved once per micro-step for every layer (RoPE's cos / sin, eager's mask, token ids), alive from the first
  // forward to the last backward; 0: none (zrun).
  Bytes shared_bytes = 0;
  // The head's forward transient above head_bytes (the logits and their fp32 copy while the loss is taken), and the
  // loss backward's (its fp32 gradients); 0: none (zrun keeps the logits in head_bytes).
  Bytes head_forward_transient = 0;
  Bytes loss_backward_transient = 0;
};

// e-byte activations (2 at 16 bits), 1-byte dropout masks, no tensor/sequence parallelism, T = sb tokens:
//   attention: e·sbh (q/k/v input) + e·sbh (Q) + 2e·sb·kv_dim (K, V) + e·sbh (out-proj input)
//              + sbh (output dropout mask, hidden_dropout > 0)
//              eager: + e·as²b (softmax output) + (1 + e)·as²b (its dropout mask and the dropped-out
//                     probabilities, attention_dropout > 0)
//              flash: + 4·asb (fp32 log-sum-exp per head and row; dropout is regenerated, no mask)
//   plain MLP: e·sbh (input) + 2e·sbf (GeLU input, output) + sbh (dropout mask, hidden_dropout > 0)
//   gated MLP: e·sbh (input) + 4e·sbf (gate, up, act(gate), act(gate)*up) + sbh (mask, hidden_dropout > 0)
//   norms:     e·sbh (input) + 8·sb (fp32 mean and rstd per token) each for 2 norms
// For kv_dim == h, plain f == 4h, eager and both dropouts on, this is Korthikanti's sbh(34 + 5as/h) + 16sb.
// Working set of a layer: the above minus its input (e·sbh).
// Backward's activation gradients (one layer at a time; the residual stream's gradient carries over):
//   4e·sbh (residual stream, a norm output, the attention output, dQ) + 2e·sb·kv_dim (dK, dV) + 2e·sbf (the
//   down projection's input gradient and the one of the projection being back-propagated)
//   eager: + e·as²b (d(probs), then d(scores) in place); flash: + 4·asb (delta, fp32 per head and row)
//   + 4·sbh (FlashAttention-2's fp32 dQ accumulator)
// Head: 2e·sbh (final norm input and output) + 8·sb (its statistics) + (e + 4)·sb·vocab (logits, fp32 copy).
ActivationBytes activation_bytes(const ModelSpec& m, const TrainingSpec& t);

// The same figures for the runtime that runs the step: zrun's layers (activation_bytes above), or a Hugging Face
// transformers model under PyTorch autograd (transformers_activations.hpp) for DeepSpeed.
ActivationBytes activation_bytes(const ModelSpec& m, const TrainingSpec& t, RuntimeKind runtime);

}  // namespace zsim
