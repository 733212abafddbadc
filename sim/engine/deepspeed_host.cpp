#include "sim/engine/deepspeed_host.hpp"

#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "sim/engine/simulate.hpp"

namespace zsim {

namespace {

bool gpt2_family(const ScheduleModel& m) { return !m.gated_mlp; }

bool layer_work(const Op& op) {
  return op.kind == OpKind::compute && op.compute.device == Device::gpu &&
         (op.compute.what == ComputeKind::forward || op.compute.what == ComputeKind::backward ||
          op.compute.what == ComputeKind::recompute);
}

// Stage 3's forward hooks per submodule in a forward or a recompute: a checkpointed layer's forward and a
// recompute each have their own figure (not given: the forward's); the model's own modules (layer -1) the forward's.
double stage3_forward_hooks_us(ComputeKind what, bool layer, bool checkpointing,
                               const EfficiencySpec::DeepSpeedHost& h) {
  if (what == ComputeKind::recompute) return h.effective_stage3_recompute_module_us();
  if (layer && checkpointing) return h.effective_stage3_checkpoint_forward_module_us();
  return h.stage3_forward_module_us;
}

// What the figures count of one decoder layer (layer -1: the rest of the model).
struct LayerFacts {
  int tensors = 0;     // transformers' parameter tensors
  bool eager = false;  // eager attention: its attention core's kernels are the softmax over the s x s scores
};
// Every layer's facts (and the rest's, -1), in one pass over the model's units.
std::map<int, LayerFacts> layer_facts(const ScheduleModel& m) {
  std::map<int, LayerFacts> out;
  for (int layer = -1; layer < static_cast<int>(m.layers); ++layer) out[layer] = {};
  for (const ModelUnit& u : m.units) {
    LayerFacts& f = out[u.layer];
    // A GPT model given by numbers (no config.json) splits q, k, v, which transformers' GPT-2 fuses in c_attn: k's
    // and v's tensors are not tensors of their own there. A config.json's units are transformers' already.
    const bool fused_in_c_attn = gpt2_family(m) && m.model_type.empty() &&
                                 (u.name.ends_with(".attn.k") || u.name.ends_with(".attn.v"));
    if (!fused_in_c_attn) f.tensors += static_cast<int>(u.tensors.size());
    f.eager = f.eager || (u.layer >= 0 && u.hbm_kind == "softmax");
  }
  return out;
}

int total_tensors(const std::map<int, LayerFacts>& facts) {
  int n = 0;
  for (const auto& [layer, f] : facts) n += f.tensors;
  return n;
}

// The figures at each thread's speed: the main thread's (the forward, the optimizer step, stage 1's
// reduce_gradients) and autograd's device thread's (the backward pass, the recompute, stage 2's gradient hooks).
struct HostFigures {
  EfficiencySpec::DeepSpeedHost main, autograd;
};

// Stages 1-2: DeepSpeed's reduction of the pass's parameter tensors' gradients (stage_1_and_2.py: stage 2's hooks
// every micro-step on autograd's thread, stage 1's reduce_gradients on the main thread after the boundary's backward
// only, each at its own figure).
double reduce_us(const Op& op, const ScheduleModel& m, int stage, int tensors, const HostFigures& h) {
  if (stage == 2) return tensors * h.autograd.stage12_reduce_param_us;
  if (stage == 1 && op.micro_step == m.grad_accum - 1) return tensors * h.main.effective_stage1_reduce_param_us();
  return 0;
}

// The host's microseconds of one pass over one decoder layer (or, layer -1, over the rest of the model).
double pass_us(const Op& op, const ScheduleModel& m, int stage, const LayerFacts& facts, const HostFigures& both) {
  const EfficiencySpec::DeepSpeedHost& h = op.compute.what == ComputeKind::forward ? both.main : both.autograd;
  const bool eager = facts.eager;
  const bool gpt2 = gpt2_family(m);
  const bool layer = op.layer >= 0;
  const double hooks = layer ? kHooksPerLayer : model_level_modules(m);
  const bool z3 = stage == 3;
  const double z3_forward_us = z3 ? hooks * stage3_forward_hooks_us(op.compute.what, layer, m.checkpointing, h) : 0;
  const double z3_backward_us = z3 ? hooks * h.stage3_backward_module_us : 0;
  switch (op.compute.what) {
    case ComputeKind::forward:
      if (!layer) return h.forward_fixed_us + z3_forward_us;
      return (gpt2 ? h.gpt2_forward_layer_us : h.llama_forward_layer_us) +
             (m.checkpointing ? h.checkpoint_forward_layer_us : 0) + (eager ? h.eager_forward_layer_us : 0) +
             z3_forward_us;
    case ComputeKind::backward:
      if (!layer) return h.backward_fixed_us + z3_backward_us + reduce_us(op, m, stage, facts.tensors, both);
      return (gpt2 ? h.gpt2_backward_layer_us : h.llama_backward_layer_us) + (eager ? h.eager_backward_layer_us : 0) +
             z3_backward_us + reduce_us(op, m, stage, facts.tensors, both);
    case ComputeKind::recompute: return h.recompute_layer_us + (eager ? h.eager_forward_layer_us : 0) + z3_forward_us;
    default: return 0;
  }
}

// Stage 3: after each backward, engine.py's allreduce_gradients runs the optimizer's gradient epilogue
// (overlapping_partition_gradients_reduce_epilogue -> stage3.py independent_gradient_partition_epilogue), which
// synchronizes the reduce-and-partition stream; that stream waited for the compute stream before each bucket
// (__add_grad_to_ipg_bucket's wait_stream), so the host issues nothing after a backward until its work is done: the
// first op after each micro-step's backward waits for the GPU.
void wait_after_each_backward(const Schedule& s, const std::vector<int>& step_of, std::vector<HostIssue>& out) {
  for (size_t i = 1; i < s.ops.size(); ++i)
    if (step_of[i] >= 0 && step_of[i] == step_of[i - 1] && s.ops[i - 1].phase == Phase::backward &&
        s.ops[i].phase != Phase::backward)
      out[i].waits_for_gpu = true;
}

// Stages 1-2 with the optimizer on the CPU: at the boundary copy_grads_in_partition runs, per parameter tensor, the
// gradient's float64 norm, an overflow check (_has_inf_or_nan: float(x.float().sum()), which waits for the GPU) and
// the fp32 cast and copy down (stage_1_and_2.py lines 1327-1340), so the host issues each tensor's `.to_fp32` op (the
// schedule's cast; its `.d2h` follows) after its Python and once the GPU has done all before it.
void price_offloaded_gradients(const Schedule& s, const EfficiencySpec::DeepSpeedHost& h, std::vector<HostIssue>& out) {
  if (h.stage12_offload_param_us <= 0) return;
  for (const Op& op : s.ops) {
    if (op.kind != OpKind::copy || op.phase != Phase::backward || !op.name.ends_with(".to_fp32")) continue;
    const Seconds python_s = out[op.id].total_s + h.stage12_offload_param_us * 1e-6;
    out[op.id] = {python_s, python_s, true};  // the cast is launched at the end of the tensor's Python
  }
}

// The figures on this host: each multiplied by `scale` (a thread's reference loop against the fit's).
EfficiencySpec::DeepSpeedHost at_host_speed(EfficiencySpec::DeepSpeedHost h, double scale) {
  for (auto [v, name] : h.fields()) *v *= scale;
  for (auto [v, name] : h.optional_fields())
    if (*v) **v *= scale;
  return h;
}

HostFigures at_host_speeds(const EfficiencySpec::DeepSpeedHost& h) {
  return {at_host_speed(h, h.host_speed_scale()), at_host_speed(h, h.autograd_host_speed_scale())};
}

}  // namespace

int model_level_modules(const ScheduleModel& m) { return gpt2_family(m) ? 7 : 6; }

bool eager_attention(const ScheduleModel& m, int layer) { return layer_facts(m).at(layer).eager; }

int hf_parameter_tensors(const ScheduleModel& m, int layer) { return layer_facts(m).at(layer).tensors; }

int hf_parameter_tensors(const ScheduleModel& m) { return total_tensors(layer_facts(m)); }

bool deepspeed_host_applies(const Schedule& s, const ClusterSpec& c) {
  return s.meta.framework == "deepspeed" && c.efficiency.deepspeed_host.present();
}

std::vector<HostIssue> deepspeed_host_issue(const Schedule& s, const ClusterSpec& c) {
  std::vector<HostIssue> out(s.ops.size());
  if (!deepspeed_host_applies(s, c)) return out;
  const HostFigures both = at_host_speeds(c.efficiency.deepspeed_host);
  const EfficiencySpec::DeepSpeedHost& h = both.main;
  const int stage = s.meta.zero_stage;

  // A pass's figure is split evenly over its ops: (step, micro-step, compute kind, layer) -> the ops; steps as the
  // engine segments them (find_steps).
  const std::vector<int> step_of = find_steps(s, nullptr);
  std::map<std::tuple<int, int, int, int>, std::vector<OpId>> passes;
  for (const Op& op : s.ops)
    if (layer_work(op))
      passes[{step_of[op.id], op.micro_step, static_cast<int>(op.compute.what), op.layer}].push_back(op.id);
  const std::map<int, LayerFacts> facts = layer_facts(s.model);
  for (const auto& [key, ids] : passes) {
    const Op& first = s.ops[ids.front()];
    const double us = pass_us(first, s.model, stage, facts.at(first.layer), both) / static_cast<double>(ids.size());
    for (OpId id : ids) out[id] = {us * 1e-6, 0.0};  // the GPU work starts as the host begins the op
  }

  // The optimizer step's Python, on each step's first optimizer op.
  const double step_us =
      h.step_fixed_us + total_tensors(facts) * (stage == 3 ? h.stage3_step_param_us : h.step_param_us);
  std::set<int> stepped;
  for (const Op& op : s.ops)
    if (op.kind == OpKind::compute && op.compute.what == ComputeKind::optimizer && step_of[op.id] >= 0 &&
        stepped.insert(step_of[op.id]).second)
      out[op.id] = {out[op.id].total_s + step_us * 1e-6, 0.0};
  // stage 2's in its gradient hooks (autograd's thread), stage 1's in reduce_gradients (the main thread)
  if (stage == 1 || stage == 2) price_offloaded_gradients(s, stage == 2 ? both.autograd : both.main, out);
  if (stage == 3) wait_after_each_backward(s, step_of, out);
  return out;
}

}  // namespace zsim
