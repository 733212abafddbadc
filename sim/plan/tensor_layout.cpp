#include "sim/plan/tensor_layout.hpp"

#include "sim/plan/attention_flops.hpp"

namespace zsim {

TensorLayout tensor_layout(const Plan& p) {
  TensorLayout l;
  Elements flat = 0, persistent = 0, partition = 0;
  for (const FetchUnit& u : p.units) {
    auto& f = l.flat.emplace_back();
    auto& pa = l.partition.emplace_back();
    auto& g = l.gathered.emplace_back();
    auto& pe = l.persistent.emplace_back();
    Elements gathered = 0;
    size_t next_gathered = 0;  // gathered_tensors is the ordered subsequence of tensors that is gathered
    for (const TensorShape& t : u.tensors) {
      f.push_back(flat);
      flat += t.numel();
      pa.push_back(p.stage == 3 ? partition : -1);
      if (p.stage == 3) partition += partition_numel(t.numel(), p.dp);
      const bool is_gathered = p.stage == 3 && next_gathered < u.gathered_tensors.size() &&
                               u.gathered_tensors[next_gathered].name == t.name;
      if (is_gathered) {
        ++next_gathered;
        g.push_back(gathered);
        gathered += t.numel();
        pe.push_back(-1);
      } else {
        g.push_back(-1);
        pe.push_back(p.stage == 3 ? persistent : -1);
        if (p.stage == 3) persistent += t.numel();
      }
    }
  }
  return l;
}

ScheduleModel schedule_model(const Scenario& s, const Plan& p) {
  const ModelSpec& m = s.model;
  ScheduleModel out;
  out.name = m.name;
  out.model_type = m.arch.model_type;
  out.layers = m.layers;
  out.hidden = m.hidden;
  out.ffn_hidden = m.ffn_hidden;
  out.heads = m.heads;
  out.kv_heads = m.kv_heads;
  out.vocab = m.vocab;
  out.max_position_embeddings = m.max_position_embeddings;
  out.tie_word_embeddings = p.tied_head;
  out.gated_mlp = m.mlp == MlpKind::gated;
  out.bias = m.bias;
  out.micro_batch = s.training.micro_batch;
  out.seq_len = s.training.seq_len;
  out.grad_accum = s.training.grad_accum;
  out.dtype = p.dtype;
  out.checkpointing = p.checkpointing;
  for (const FetchUnit& u : p.units) {
    ModelUnit mu{u.name, u.layer, {}, {}};
    for (const TensorShape& t : u.tensors) mu.tensors.push_back({t.name, t.rows, t.cols});
    // The memory-bound kernels of its ops (schedule_builder.cpp's hbm_bytes): the lookup, a norm, eager attention's
    // softmax over the scores, the MLP's activation, the head's loss.
    if (u.is_embedding) mu.hbm_kind = "copy";
    else if (u.is_head) mu.hbm_kind = "cross_entropy";
    else if (u.vectors_only()) mu.hbm_kind = "norm";
    else if (u.attention_core && s.model.attention == Attention::eager) mu.hbm_kind = "softmax";
    else if (u.activation != FetchUnit::ActivationPart::none) mu.hbm_kind = "activation";
    // Under DeepSpeed the other units' bytes are transformers' elementwise ops (RoPE, the heads' merge copy, the
    // residual adds and dropouts: sim/plan/transformers_kernels.hpp), torch's vectorized elementwise kernels as the
    // activation's are; zrun's have none of their own.
    else if (p.runtime == RuntimeKind::deepspeed) mu.hbm_kind = "activation";
    if (u.attention_core) {  // eager attention's batched GEMM calls (flash: none)
      AttentionGemmCalls core = attention_core_gemm_calls(s.model, s.training);
      mu.forward_gemms = std::move(core.forward);
      mu.backward_gemms = std::move(core.backward);
    }
    out.units.push_back(std::move(mu));
  }
  return out;
}

}  // namespace zsim
