#include "sim/plan/kernel_launches.hpp"

#include <algorithm>
#include <string>

namespace zsim {

std::optional<ModelUnitKind> model_unit_kind(std::string_view name) {
  if (name == "embedding") return ModelUnitKind::embedding;
  if (name == "final.norm") return ModelUnitKind::final_norm;
  if (name == "head") return ModelUnitKind::head;
  // "L<l>.<module>"
  if (name.size() < 3 || name[0] != 'L') return std::nullopt;
  const std::size_t dot = name.find('.');
  if (dot == std::string_view::npos || dot == 1) return std::nullopt;
  for (std::size_t i = 1; i < dot; ++i)
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
  const std::string_view mod = name.substr(dot + 1);
  static constexpr std::pair<std::string_view, ModelUnitKind> kModules[] = {
      {"attn.norm", ModelUnitKind::attn_norm}, {"attn.q", ModelUnitKind::attn_q},     {"attn.k", ModelUnitKind::attn_k},
      {"attn.v", ModelUnitKind::attn_v},       {"attn.o", ModelUnitKind::attn_o},     {"mlp.norm", ModelUnitKind::mlp_norm},
      {"mlp.gate", ModelUnitKind::mlp_gate},   {"mlp.up", ModelUnitKind::mlp_up},     {"mlp.down", ModelUnitKind::mlp_down}};
  for (const auto& [m, k] : kModules)
    if (mod == m) return k;
  return std::nullopt;
}

UnitKernelLaunches unit_kernel_launches(ModelUnitKind kind, const ModelSpec& m, const TrainingSpec& t) {
  const int bias = m.bias ? 1 : 0;
  // A linear layer: the forward GEMM (bias in its epilogue); backward the input and weight gradients' GEMMs and,
  // with a bias, its column partials and their sum (runtime/model/gemm.cu, column_sums.cu).
  const UnitKernelLaunches linear{1, 2 + 2 * bias, 1};
  const UnitKernelLaunches norm{1, 3 + bias, 1};  // norm.cu: forward 1; backward dx, partials, dw sum (+ db sum)
  switch (kind) {
    case ModelUnitKind::embedding: {
      const std::int64_t tokens = t.micro_batch * t.seq_len;
      const int sort = tokens <= kCubSingleTileItems ? 1 : 12;  // embedding.cu: cub::DeviceRadixSort::SortPairs
      return {1, 1 + sort + 1 + (m.max_position_embeddings > 0 ? 1 : 0), 0};
    }
    case ModelUnitKind::attn_norm:
    case ModelUnitKind::mlp_norm: return norm;
    case ModelUnitKind::final_norm: return {norm.forward, norm.backward, 0};
    case ModelUnitKind::attn_q:
    case ModelUnitKind::attn_k:
    case ModelUnitKind::attn_v: return linear;
    case ModelUnitKind::mlp_gate:
      // SwiGLU's gate half of the activation backward; a plain MLP has no gate unit.
      return {linear.forward, linear.backward + 1, linear.recompute};
    case ModelUnitKind::mlp_up:  // + the activation (SwiGLU or GeLU) and its backward
      return {linear.forward + 1, linear.backward + 1, linear.recompute + 1};
    case ModelUnitKind::mlp_down:  // model.cpp: the recompute skips it (the next layer kept its output)
      return {linear.forward, linear.backward, 0};
    case ModelUnitKind::attn_o: {
      int fwd = 0, bwd = 0;
      if (m.attention == Attention::eager) {
        // attention.cu: per sequence and query head of a kv group, one strided-batched GEMM over the kv heads.
        const std::int64_t group = m.kv_heads > 0 ? std::max<std::int64_t>(1, m.heads / m.kv_heads) : 1;
        const int calls = static_cast<int>(t.micro_batch * group);
        fwd = 2 * calls + 1;  // scores, causal softmax, probabilities x values
        bwd = 4 * calls + 1;  // d(probs) and dV, the softmax backward, dQ and dK
      } else {
        fwd = kFlashForwardLaunches;   // flash_attention.cu: the forward kernel
        bwd = kFlashBackwardLaunches;  // dq accumulator memset, delta, the backward kernel, dq conversion
      }
      return {linear.forward + fwd, linear.backward + bwd, linear.recompute + fwd};
    }
    case ModelUnitKind::head:
      // GEMM, cross-entropy rows and mean (head_loss.cu), zrun's copy of the loss; backward the cross-entropy's
      // gradient in place and the two GEMMs (tied or not).
      return {4, 3, 0};
  }
  return {};
}

}  // namespace zsim
