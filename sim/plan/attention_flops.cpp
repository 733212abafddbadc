#include "sim/plan/attention_flops.hpp"

#include <algorithm>

namespace zsim {

AttentionFlops attention_core_flops(const ModelSpec& m, const TrainingSpec& t) {
  const double s = static_cast<double>(t.seq_len);
  const double full = 4.0 * static_cast<double>(t.micro_batch) * s * s * static_cast<double>(m.hidden);
  if (m.attention == Attention::eager) return {full, 2.0 * full};
  const double causal = full / 2;
  return {causal, 2.5 * causal};
}

AttentionScoresBytes attention_scores_hbm_bytes(const ModelSpec& m, const TrainingSpec& t) {
  if (m.attention != Attention::eager) return {};
  const Bytes e = bytes_per_element(t.precision);
  const Bytes n = m.heads * t.seq_len * t.seq_len * t.micro_batch;
  const Bytes dropout = m.attention_dropout > 0 ? (2 * e + 1) * n : 0;
  return {4 * e * n + dropout, 7 * e * n + dropout, 2 * e * n, 4 * e * n};
}

AttentionGemmCalls attention_core_gemm_calls(const ModelSpec& m, const TrainingSpec& t) {
  if (m.attention != Attention::eager || m.heads <= 0 || m.kv_heads <= 0) return {};
  const std::int64_t s = t.seq_len, d = head_dim(m), kv = m.kv_heads;
  const std::int64_t calls = t.micro_batch * std::max<std::int64_t>(1, m.heads / m.kv_heads);
  const GemmCalls scores{s, s, d, kv, calls}, by_values{d, s, s, kv, calls};
  return {{scores, by_values}, {scores, by_values, by_values, by_values}};
}

}  // namespace zsim
