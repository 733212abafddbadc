// The synthetic training data: a deterministic token stream with learnable structure. Sample i (a global
// sample index, the same on every world size and stage) is a walk on a fixed random bigram table: each
// token has two likely successors (45% each) and 10% of tokens are uniform noise. A model that learns the
// table reaches about 2*0.45*ln(1/0.45) + 0.1*ln(vocab/0.1) nats; the untrained loss is ln(vocab).
#pragma once
#include <cstdint>

namespace zrun::model {

class SyntheticData {
 public:
  explicit SyntheticData(std::int64_t vocab, std::uint64_t seed = 1234);

  // len tokens of sample `sample_index`.
  void sample(std::int64_t sample_index, std::int64_t len, std::int32_t* out) const;

  // A micro-batch of samples first_sample .. first_sample + micro_batch - 1, row-major [micro_batch, seq_len]:
  // tokens = the sample's first seq_len tokens, targets = the next token at each position.
  void batch(std::int64_t first_sample, std::int64_t micro_batch, std::int64_t seq_len, std::int32_t* tokens,
             std::int32_t* targets) const;

  // One of the two likely successors (j = 0 or 1) of token `prev`.
  std::int32_t successor(std::int32_t prev, int j) const;

  // The expected loss (nats per token) of a model that knows the table: the floor training approaches.
  double entropy_floor_nats() const;

 private:
  std::int64_t vocab_;
  std::uint64_t seed_;
};

}  // namespace zrun::model
