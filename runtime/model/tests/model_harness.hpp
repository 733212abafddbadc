// Test/driver harness around zrun's Model: plans a scenario with zsim, allocates every unit's parameters
// and gradients and the activation buffers on the device, and runs one micro-step unit by unit in the
// plan's order (recompute before a checkpointed layer's backward), as the executor will. Tests and
// train_check only.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/half_convert.hpp"
#include "runtime/model/init.hpp"
#include "runtime/model/model.hpp"
#include "runtime/model/synthetic_data.hpp"
#include "sim/plan/plan.hpp"

namespace zrun::model::test {

inline std::vector<std::uint16_t> to_half16(const std::vector<float>& v, DType dt) {
  std::vector<std::uint16_t> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = dt == DType::bf16 ? zk::float_to_bf16(v[i]) : zk::float_to_fp16(v[i]);
  return out;
}
inline float from_half16(std::uint16_t h, DType dt) { return dt == DType::bf16 ? zk::bf16_to_float(h) : zk::fp16_to_float(h); }
// The value x has once stored in dtype dt.
inline float round_to(float x, DType dt) {
  if (dt == DType::fp32) return x;
  return dt == DType::bf16 ? zk::bf16_to_float(zk::float_to_bf16(x)) : zk::fp16_to_float(zk::float_to_fp16(x));
}

class Harness {
 public:
  explicit Harness(const zsim::Scenario& s, std::uint64_t data_seed = 1234)
      : plan(zsim::make_plan(s)), cfg(model_config(s, plan)), data(cfg.vocab, data_seed) {
    ZK_CUDA_CHECK(cudaStreamCreate(&stream));
    model = std::make_unique<Model>(cfg, plan.units);
    const std::size_t n = plan.units.size();
    params.resize(n), grads.resize(n);
    for (std::size_t u = 0; u < n; ++u)
      for (const auto& t : plan.units[u].tensors) {
        params[u].push_back(alloc(t.numel() * cfg.elem_bytes()));
        grads[u].push_back(alloc(t.numel() * cfg.elem_bytes()));
      }
    if (cfg.tied_head) {  // the head uses the embedding's tokens table
      params[n - 1] = {params[0][0]};
      grads[n - 1] = {grads[0][0]};
    }
    const ActivationLayout& L = model->layout();
    for (int l = 0; l < cfg.layers; ++l) acts.layer.push_back(alloc(L.layer_bytes(cfg.checkpointing)));
    if (cfg.checkpointing) acts.work = alloc(L.work_bytes());
    acts.head = alloc(L.head_bytes());
    acts.grad = alloc(L.grad_bytes());
    tokens = static_cast<std::int32_t*>(alloc(cfg.tokens() * 4));
    targets = static_cast<std::int32_t*>(alloc(cfg.tokens() * 4));
    acts.tokens = tokens, acts.targets = targets;
  }
  ~Harness() {
    for (void* p : owned_) cudaFree(p);
    cudaStreamDestroy(stream);
  }

  // Element count of tensor i of unit u, and its model-wide name.
  std::int64_t numel(int u, int i) const { return plan.units[u].tensors[i].numel(); }
  std::string full_name(int u, int i) const { return tensor_full_name(plan.units[u].name, plan.units[u].tensors[i].name); }

  void upload(void* dst, const std::vector<float>& v) {
    if (cfg.dtype == DType::fp32) {
      ZK_CUDA_CHECK(cudaMemcpy(dst, v.data(), v.size() * 4, cudaMemcpyHostToDevice));
    } else {
      const auto h = to_half16(v, cfg.dtype);
      ZK_CUDA_CHECK(cudaMemcpy(dst, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
    }
  }
  std::vector<float> download(const void* src, std::int64_t n) const {
    ZK_CUDA_CHECK(cudaStreamSynchronize(stream));
    std::vector<float> out(n);
    if (cfg.dtype == DType::fp32) {
      ZK_CUDA_CHECK(cudaMemcpy(out.data(), src, n * 4, cudaMemcpyDeviceToHost));
    } else {
      std::vector<std::uint16_t> h(n);
      ZK_CUDA_CHECK(cudaMemcpy(h.data(), src, n * 2, cudaMemcpyDeviceToHost));
      for (std::int64_t i = 0; i < n; ++i) out[i] = from_half16(h[i], cfg.dtype);
    }
    return out;
  }

  // Every tensor from init_tensor (the model's deterministic initialisation).
  void init_params() {
    for (std::size_t u = 0; u < plan.units.size(); ++u)
      for (std::size_t i = 0; i < plan.units[u].tensors.size(); ++i) {
        std::vector<float> v(numel(u, i));
        init_tensor(cfg, full_name(u, i), 0, v.size(), v.data());
        upload(params[u][i], v);
      }
  }

  void zero_grads() {
    for (std::size_t u = 0; u < plan.units.size(); ++u)
      for (std::size_t i = 0; i < plan.units[u].tensors.size(); ++i)
        ZK_CUDA_CHECK(cudaMemsetAsync(grads[u][i], 0, numel(u, i) * cfg.elem_bytes(), stream));
  }

  // The micro-batch of global samples first_sample ...
  void load_batch(std::int64_t first_sample) {
    host_tokens.resize(cfg.tokens()), host_targets.resize(cfg.tokens());
    data.batch(first_sample, cfg.micro_batch, cfg.seq_len, host_tokens.data(), host_targets.data());
    ZK_CUDA_CHECK(cudaMemcpy(tokens, host_tokens.data(), cfg.tokens() * 4, cudaMemcpyHostToDevice));
    ZK_CUDA_CHECK(cudaMemcpy(targets, host_targets.data(), cfg.tokens() * 4, cudaMemcpyHostToDevice));
  }

  void forward() {
    for (std::size_t u = 0; u < plan.units.size(); ++u) model->forward_unit(static_cast<int>(u), cparams(u), acts, stream);
  }
  float loss() const {
    float l = 0;
    ZK_CUDA_CHECK(cudaStreamSynchronize(stream));
    ZK_CUDA_CHECK(cudaMemcpy(&l, model->loss(acts), 4, cudaMemcpyDeviceToHost));
    return l;
  }
  std::vector<float> logits() const { return download(model->logits(acts), cfg.tokens() * cfg.vocab); }

  void backward() {
    for (int u = static_cast<int>(plan.units.size()) - 1; u >= 0; --u) {
      const int l = plan.units[u].layer;
      if (cfg.checkpointing && l >= 0 && plan.layers[l].last == u) {
        std::vector<UnitParams> lp;
        for (int v = plan.layers[l].first; v <= plan.layers[l].last; ++v) lp.push_back(cparams(v));
        model->recompute_layer(l, lp, acts, stream);
      }
      model->backward_unit(u, cparams(u), grads[u], acts, stream);
    }
  }

  UnitParams cparams(std::size_t u) const { return UnitParams(params[u].begin(), params[u].end()); }

  zsim::Plan plan;
  ModelConfig cfg;
  SyntheticData data;
  std::unique_ptr<Model> model;
  cudaStream_t stream = nullptr;
  std::vector<std::vector<void*>> params, grads;  // per unit, per tensor (tied head: the embedding's)
  Activations acts;
  std::int32_t* tokens = nullptr;
  std::int32_t* targets = nullptr;
  std::vector<std::int32_t> host_tokens, host_targets;

 private:
  void* alloc(std::int64_t bytes) {
    void* p = nullptr;
    ZK_CUDA_CHECK(cudaMalloc(&p, bytes > 0 ? bytes : 1));
    ZK_CUDA_CHECK(cudaMemset(p, 0xFF, bytes > 0 ? bytes : 1));  // poison: NaN in every float format
    owned_.push_back(p);
    return p;
  }
  std::vector<void*> owned_;
};

}  // namespace zrun::model::test
