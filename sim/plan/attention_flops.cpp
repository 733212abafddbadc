#include "sim/plan/attention_flops.hpp"

namespace zsim {

AttentionFlops attention_core_flops(const ModelSpec& m, const TrainingSpec& t) {
  const double s = static_cast<double>(t.seq_len);
  const double full = 4.0 * static_cast<double>(t.micro_batch) * s * s * static_cast<double>(m.hidden);
  if (m.attention == Attention::eager) return {full, 2.0 * full};
  const double causal = full / 2;
  return {causal, 2.5 * causal};
}

}  // namespace zsim
