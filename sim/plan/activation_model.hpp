// Activation memory of one transformer layer after Korthikanti et al. 2022 (arXiv 2205.05198, sec. 4.1),
// generalised to ffn != 4h, gated MLPs, grouped-query attention, flash attention and dropout-free models.
// Pure formulas; see docs/schedule-semantics.md ("Activations") for the derivation.
#pragma once
#include "sim/common/units.hpp"
#include "sim/scenario/scenario.hpp"

namespace zsim {

struct ActivationBytes {
  Bytes per_layer_no_recompute = 0;  // everything one layer keeps for its backward
  Bytes per_layer_checkpoint = 0;    // full checkpointing: the layer input only (2sbh at 16 bits)
  Bytes head_logits = 0;             // output logits kept for the loss backward
};

// e-byte activations (2 at 16 bits), 1-byte dropout masks, no tensor/sequence parallelism:
//   attention: e·sbh (q/k/v input) + e·sbh (Q) + 2e·sb·kv_dim (K, V) + e·sbh (out-proj input)
//              + sbh (output dropout mask, hidden_dropout > 0)
//              eager: + e·as²b (softmax output) + (1 + e)·as²b (its dropout mask and the dropped-out
//                     probabilities, attention_dropout > 0)
//              flash: + 4·asb (fp32 log-sum-exp per head and row; dropout is regenerated, no mask)
//   plain MLP: e·sbh (input) + 2e·sbf (GeLU input, output) + sbh (dropout mask, hidden_dropout > 0)
//   gated MLP: e·sbh (input) + 4e·sbf (gate, up, act(gate), act(gate)*up) + sbh (mask, hidden_dropout > 0)
//   norms:     e·sbh each for 2 norms
// For kv_dim == h, plain f == 4h, eager and both dropouts on, this is Korthikanti's sbh(34 + 5as/h).
ActivationBytes activation_bytes(const ModelSpec& m, const TrainingSpec& t);

}  // namespace zsim
