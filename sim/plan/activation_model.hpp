// Activation memory of one transformer layer after Korthikanti et al. 2022 (arXiv 2205.05198, sec. 4.1),
// generalised to ffn != 4h, gated MLPs and grouped-query attention. Pure formulas; see
// docs/schedule-semantics.md ("Activations") for the derivation.
#pragma once
#include "sim/common/units.hpp"
#include "sim/scenario/scenario.hpp"

namespace zsim {

struct ActivationBytes {
  Bytes per_layer_no_recompute = 0;  // everything one layer keeps for its backward
  Bytes per_layer_checkpoint = 0;    // full checkpointing: the layer input only (2sbh at 16 bits)
  Bytes head_logits = 0;             // output logits kept for the loss backward
};

// 16-bit activations (2 bytes) with 1-byte dropout masks, no tensor/sequence parallelism:
//   attention: 2sbh (q/k/v input) + 2sbh (Q) + 4sb*kv_dim (K, V) + 2sbh (out-proj input)
//              + sbh (dropout mask) + 5 a s^2 b (scores 2, softmax-dropout output 2, mask 1)
//   plain MLP: 2sbh (input) + 2sbf (GeLU input) + 2sbf (GeLU output) + sbh (dropout mask)
//   gated MLP: 2sbh (input) + 2sbf each for gate, up, act(gate), act(gate)*up + sbh (mask)
//   norms:     2sbh each for 2 norms
// For kv_dim == h and plain f == 4h this is Korthikanti's sbh(34 + 5as/h).
ActivationBytes activation_bytes(const ModelSpec& m, const TrainingSpec& t);

}  // namespace zsim
