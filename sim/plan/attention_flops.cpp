#include "sim/plan/attention_flops.hpp"

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
  return {4 * e * n + dropout, 7 * e * n + dropout};
}

}  // namespace zsim
