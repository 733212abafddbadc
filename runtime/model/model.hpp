// The transformer on the GPU at the granularity of zsim's units: the executor runs the schedule's
// fwd.<unit>, bwd.<unit> and recompute.L<l> ops one at a time with parameters ZeRO gathered into buffers it
// owns. The model owns only small scratch (cuBLASLt workspace, reduction partials, a token sort); parameters, gradients
// and activations are the caller's, with sizes the model reports (see ActivationLayout).
//
// Conventions:
//  - params/grads of a unit: one device pointer per tensor of the plan's FetchUnit::tensors, in that order,
//    in the training dtype. The tied head has no tensors: pass the embedding's {embed.tokens} (its use of
//    the embedding, as the plan's fetch_units says) and its gradient.
//  - backward ACCUMULATES into grads (+=): the caller zeroes them before the first micro-step.
//  - Forward order is the plan's unit order; backward the reverse. Under checkpointing, call
//    recompute_layer(l) before the backward of layer l's units (the schedule's recompute.L<l>).
//  - The attention core runs in attn.o's forward and backward (zsim charges it there).
//  - All calls of one Model go to one stream at a time (the scratch is shared).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/model/activation_layout.hpp"
#include "runtime/model/gemm.hpp"
#include "runtime/model/model_config.hpp"

namespace zrun::model {

using UnitParams = std::vector<const void*>;
using UnitGrads = std::vector<void*>;

// Caller-owned activation memory of one micro-step (sizes from Model::layout()).
struct Activations {
  std::vector<void*> layer;          // per layer: layout().layer_bytes(checkpointing) bytes
  void* work = nullptr;              // checkpointing only: layout().work_bytes(), the recompute working set
  void* head = nullptr;              // layout().head_bytes()
  void* grad = nullptr;              // layout().grad_bytes(): activation gradients during backward
  const std::int32_t* tokens = nullptr;   // device [micro_batch * seq_len]
  const std::int32_t* targets = nullptr;  // device [micro_batch * seq_len]
};

class Model {
 public:
  Model(const ModelConfig& c, std::vector<zsim::FetchUnit> units);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelConfig& config() const { return cfg_; }
  const ActivationLayout& layout() const { return layout_; }
  const std::vector<zsim::FetchUnit>& units() const { return units_; }
  std::int64_t scratch_bytes() const;   // what the model itself holds on the device

  void forward_unit(int u, const UnitParams& params, const Activations& a, cudaStream_t s);
  void backward_unit(int u, const UnitParams& params, const UnitGrads& grads, const Activations& a, cudaStream_t s);
  // Forward of layer l's units again from its saved input into the working set (not writing the layer's
  // output, which the next layer kept). params: per unit of the layer, in unit order.
  void recompute_layer(int l, const std::vector<UnitParams>& params, const Activations& a, cudaStream_t s);

  // Gradient of the loss the backward starts from: d(loss * scale) (e.g. 1 / grad_accum, or a loss scale).
  void set_loss_scale(float scale) { loss_scale_ = scale; }

  // Device pointers into the caller's head activations.
  float* loss(const Activations& a) const;     // fp32 [1], valid after the head's forward
  void* logits(const Activations& a) const;    // [T, vocab], valid between the head's forward and backward

 private:
  struct UnitInfo { UnitRef ref; };
  char* layer_ptr(const Activations& a, int l, std::int64_t offset) const;  // x_in or a working-set tensor
  char* head_ptr(const Activations& a, std::int64_t offset) const;
  char* grad_ptr(const Activations& a, std::int64_t offset) const;
  void* layer_output(const Activations& a, int l) const;  // next layer's x_in, or the head's x_final
  void forward_layer_unit(const UnitRef& r, const UnitParams& p, const Activations& a, bool recompute,
                          cudaStream_t s);
  void backward_layer_unit(const UnitRef& r, const UnitParams& p, const UnitGrads& g, const Activations& a,
                           cudaStream_t s);

  ModelConfig cfg_;
  ActivationLayout layout_;
  std::vector<zsim::FetchUnit> units_;
  std::vector<UnitInfo> info_;
  std::unique_ptr<Gemm> gemm_;
  float* partials_ = nullptr;        // fp32 column partial sums
  std::int64_t partials_floats_ = 0;
  void* embed_scratch_ = nullptr;    // the embedding backward's sort
  std::int64_t embed_scratch_bytes_ = 0;
  float loss_scale_ = 1.0f;
};

}  // namespace zrun::model
