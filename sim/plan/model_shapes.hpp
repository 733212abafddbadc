// Model shapes: the weight tensors of a transformer described by ModelSpec (per layer, embeddings,
// head), their parameter counts, and the largest layer / module. Pure arithmetic, no I/O.
#pragma once
#include <string>
#include <vector>

#include "sim/common/units.hpp"
#include "sim/scenario/scenario.hpp"

namespace zsim {

// One weight tensor. A matrix has rows x cols elements; a vector (norm weight, bias) has cols == 0.
struct TensorShape {
  std::string name;   // e.g. "attn.q", "mlp.down.bias"
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  Elements numel() const { return cols == 0 ? rows : rows * cols; }
  bool is_matrix() const { return cols != 0; }
};

// The tensors one module group owns (a transformer layer, the embeddings, the head + final norm).
struct ModuleShapes {
  std::string name;
  std::vector<TensorShape> tensors;
  Elements params() const;
  Elements matrix_params() const;  // params in matrices (those a GEMM multiplies)
};

struct ModelShapes {
  ModuleShapes embedding;          // token embeddings (+ learned positions)
  ModuleShapes layer;              // one transformer layer (all layers are identical)
  std::int64_t layers = 0;
  ModuleShapes head;               // final norm + output projection (projection absent when tied)
  bool tied_head = false;          // the head multiplies by the embedding matrix
  Elements vocab = 0;
  Elements hidden = 0;

  Elements total_params() const;   // tied weights counted once
  Elements largest_layer_params() const;   // max over embedding, one layer, head
  Elements largest_module_params() const;  // max over single weight matrices with their bias:
                                           // DeepSpeed's "largest_layer_params" (one nn.Module)
  // The parameters a token's forward multiplies: a mixture of experts' experts_per_token of its experts.
  Elements active_params(std::int64_t experts, std::int64_t experts_per_token) const;
};

// The module a tensor belongs to (DeepSpeed's stage-3 fetch unit): its name without ".weight" / ".bias"; the experts'
// 3-D parameters "mlp.experts" (or "mlp.moe" with the router, where the block is a leaf module).
std::string module_name(const std::string& tensor);
// A mixture of experts' per-expert parameters (gate_up_proj, down_proj: experts x their width).
bool is_expert_tensor(const std::string& tensor);

ModelShapes model_shapes(const ModelSpec& m);

}  // namespace zsim
