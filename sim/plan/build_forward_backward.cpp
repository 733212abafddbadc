// The schedule builder's forward and backward of one micro-step: compute ops, activations, checkpointing,
// and where gradient buckets fill.
#include "sim/plan/schedule_builder_state.hpp"

namespace zsim::build {

std::vector<OpId> Builder::compute_deps(std::vector<OpId> deps) {
  if (serial_dep_ >= 0) deps.push_back(serial_dep_);
  serial_dep_ = -1;
  deps.insert(deps.end(), step_end_.begin(), step_end_.end());
  step_end_.clear();  // every later op of the step follows this compute
  return deps;
}

// The backward of unit u, cut into segments where gradient buckets fill, so that each bucket is
// reduced (and its buffer reused) while the rest of the backward goes on, as DeepSpeed's hooks do.
// `annotate` adds the uses every segment shares (weights, saved activations).
// `after_last` (if set) runs right after the unit's last compute op, before that segment's bucket reduction.
OpId Builder::backward(int u, std::vector<OpId> deps, const std::function<void(OpId)>& annotate, const std::function<void(OpId)>& after_last) {
  const FetchUnit& U = p_.units[u];
  const Phase ph = Phase::backward;
  const Flops flops = backward_flops(u);
  const Bytes hbm = backward_hbm(u);
  Elements left = U.params;
  if (left == 0) {  // a tied head: its gradient lands in the embedding's, reduced with it
    // Stages 2-3 keep no whole gradient buffer: the embedding weight's gradient is held from here until the
    // embedding's backward adds its own part and its bucket takes it (autograd accumulates, then the hook fires).
    const Bytes tied_bytes = e_ * p_.units[0].tensors[0].numel();
    if (p_.stage >= 2)
      tied_grad_ = alloc("grads.tied" + tag(), Tier::gpu, MemCategory::grads, "tied", tied_bytes, ph, compute_);
    const OpId c = compute("bwd." + U.name, ComputeKind::backward, ph, deps, flops, hbm, 0, U.layer);
    sch_.ops[c].unit = u;
    sch_.ops[c].compute.kernel_launches = launches_[u].backward;
    annotate(c);
    if (p_.stage >= 2)
      use(c, tied_grad_, 0, tied_bytes, Role::grad, Access::write, 0, 0);
    else
      use(c, grads_, e_ * flat_offset(0, 0), tied_bytes, Role::grad, Access::read_write, 0, 0);
    if (after_last) after_last(c);
    return c;
  }
  OpId bwd = -1;
  for (int part = 0; left > 0; ++part) {
    Elements seg = left;
    bool closes = false;
    if (next_reduce_ < p_.buckets.size() && p_.buckets[next_reduce_].closes_after == u) {
      seg = std::min(left, p_.buckets[next_reduce_].closing_elements);
      closes = true;
    }
    open_current_bucket(u);
    const double share = static_cast<double>(seg) / static_cast<double>(U.params);
    const bool whole = part == 0 && seg == left;
    bwd = compute(whole ? "bwd." + U.name : "bwd." + U.name + ".part" + std::to_string(part), ComputeKind::backward,
                  ph, part == 0 ? deps : compute_deps({}), flops * share, static_cast<Bytes>(hbm * share), 0,
                  U.layer);
    sch_.ops[bwd].unit = u;
    if (part == 0) sch_.ops[bwd].compute.kernel_launches = launches_[u].backward;  // zrun runs it all in the first
    sch_.ops[bwd].compute.gemm_hbm_bytes = static_cast<Bytes>(backward_gemm_hbm(u) * share);
    sch_.ops[bwd].compute.fused_attention_flops = backward_fused_attention_flops(u) * share;
    annotate(bwd);
    use_grads(bwd, u, next_reduce_);
    if (U.is_embedding && tied_grad_ >= 0) use_whole(bwd, tied_grad_, Role::grad, Access::read);
    left -= seg;
    if (left == 0 && after_last) after_last(bwd);
    if (closes) reduce_current_bucket(u, bwd);
  }
  return bwd;
}

void Builder::forward_backward() {
  next_reduce_ = 0;
  live_.clear();                    // stage 3: gathered units
  calls_.clear();
  shared_.clear();
  std::map<int, OpId> acts, work;   // per layer (head logits under -2): saved activations, recompute set
  std::map<int, OpId> fwd_work;     // full checkpointing: per layer, the working set of its forward
  OpId grads = -1;                  // the backward's activation gradients
  OpId shared = -1;                 // saved once for every layer (transformers: RoPE's cos / sin, ids)
  constexpr int kHead = -2;
  for (size_t i = 0; i < p_.trace.size(); ++i) {
    const FetchStep& st = p_.trace[i];
    const FetchUnit& U = p_.units[st.unit];
    const int layer = st.layer;
    // fetch_sub_module: the module's call, the wait for its params, then the prefetch batch's call.
    std::vector<Member> now, ahead;
    // A recompute step stands for the layer's modules run one by one: one call per module, each after its own reads
    // (a module released after the recompute gives its pool buffers to the next: plan.cpp make_trace).
    run_fetch_actions(st);  // runtime deepspeed: DeepSpeed's coordinator (FetchStep::actions; fetch is then empty)
    if (!st.recompute) read_swap_ins(st.swap_in, st.phase, last_compute_);
    for (int u : st.fetch) {
      now.push_back({u, st.phase, false});
      if (!st.recompute) continue;
      std::vector<SwapIn> own;
      for (const SwapIn& r : st.swap_in)
        if (r.unit == u) own.push_back(r);
      read_swap_ins(own, st.phase, last_compute_);
      fetch(now, last_compute_), now.clear();
    }
    if (!now.empty()) fetch(now, last_compute_);
    for (int u : st.uses)
      if (live_.count(u)) await_unit(u, last_compute_);
    for (size_t k = 0; k < st.prefetch.size(); ++k) ahead.push_back({st.prefetch[k], st.prefetch_phase[k], true});
    if (!ahead.empty()) fetch(ahead, last_compute_);
    read_swap_ins(st.swap_in_ahead, st.phase, last_compute_);
    std::vector<OpId> deps;
    for (int u : st.uses)
      if (live_.count(u)) deps.push_back(live_[u].done);
    deps = compute_deps(deps);
    if (host_wait_ >= 0) deps.push_back(host_wait_);  // issued once the host's wait for NVMe reads is over
    host_wait_ = -1;
    // The weights of every unit the step uses, and the saved activations of its layer (or the logits).
    auto annotate = [&](OpId op) {
      for (int u : st.uses) use_params(op, u);
      const int key = in_head(st.unit) ? kHead : layer;
      if (acts.count(key)) use_whole(op, acts[key], Role::activation, st.phase == Phase::forward ? Access::read_write
                                                                                                  : Access::read);
      if (st.phase == Phase::forward && fwd_work.count(layer))
        use_whole(op, fwd_work[layer], Role::activation, Access::read_write);
      if (st.phase == Phase::backward && !st.recompute && work.count(layer))
        use_whole(op, work[layer], Role::activation, Access::read);
      if (st.phase == Phase::backward && !st.recompute && grads >= 0)
        use_whole(op, grads, Role::activation, Access::read_write);
    };
    // The last backward step (the embedding's) frees the activation gradients right after its compute.
    const bool last_backward = st.phase == Phase::backward && !st.recompute && i + 1 == p_.trace.size();
    OpId c;
    if (st.recompute) {
      const std::string name = "L" + std::to_string(layer);
      work[layer] = alloc("recompute." + name + tag(), Tier::gpu, MemCategory::activations, "recompute",
                          p_.activations.per_layer_work_bytes, st.phase, compute_, {}, layer);
      c = compute("recompute." + name, ComputeKind::recompute, st.phase, deps, layer_forward_flops(layer),
                  layer_forward_hbm(layer), 0, layer);
      for (int u = p_.layers[layer].first; u <= p_.layers[layer].last; ++u)
        sch_.ops[c].compute.kernel_launches += launches_[u].recompute;
      sch_.ops[c].compute.gemm_hbm_bytes = layer_forward_gemm_hbm(layer);
      sch_.ops[c].compute.fused_attention_flops = layer_forward_fused_attention_flops(layer);
      for (int u : st.uses) use_params(c, u);
      use_whole(c, acts.at(layer), Role::activation, Access::read);
      use_whole(c, work[layer], Role::activation, Access::write);
    } else if (st.phase == Phase::forward) {
      // A layer's activation buffer starts with its input, which the unit before it writes (the embedding,
      // or the previous layer's last unit): it is allocated just before that unit computes. So is the head's
      // (final norm and head: the last layer's output, the logits), which the last layer's last unit feeds.
      const int next = st.unit + 1;
      int feeds = -1;  // the activation key (layer, or kHead) this unit's output starts
      if (next < static_cast<int>(p_.units.size()) && first_of_layer(next)) feeds = p_.units[next].layer;
      if (next < static_cast<int>(p_.units.size()) && in_head(next) && !in_head(st.unit)) feeds = kHead;
      if (feeds >= 0) acts[feeds] = alloc_layer_acts(feeds);
      if (feeds == kHead)
        acts[kHead] = alloc("act.logits" + tag(), Tier::gpu, MemCategory::activations, "logits",
                            p_.activations.head_bytes, st.phase, compute_);
      if (first_of_layer(st.unit) && !acts.count(layer)) acts[layer] = alloc_layer_acts(layer);
      // Full checkpointing: the layer's forward computes its working set before keeping only its input (zrun: the
      // whole set; transformers' non-reentrant checkpoint: its transients). Without it, a layer's forward transient
      // above what it saves (transformers' eager scores; none in zrun).
      const Bytes fwd_work_bytes =
          ckpt_ ? p_.activations.per_layer_forward_work_bytes : p_.activations.per_layer_forward_transient;
      if (first_of_layer(st.unit) && fwd_work_bytes > 0)
        fwd_work[layer] = alloc("act.fwd_work.L" + std::to_string(layer) + tag(), Tier::gpu, MemCategory::activations,
                                "forward_work", fwd_work_bytes, st.phase, compute_, {}, layer);
      // Saved once for every layer (RoPE's cos / sin, eager's mask, token ids): from the embedding's forward to its
      // backward.
      if (U.is_embedding && p_.activations.shared_bytes > 0)
        shared = alloc("act.shared" + tag(), Tier::gpu, MemCategory::activations, "shared",
                       p_.activations.shared_bytes, st.phase, compute_);
      // The head's forward transient (transformers: the logits and their fp32 copy while the loss is taken).
      OpId head_work = -1;
      if (U.is_head && p_.activations.head_forward_transient > 0)
        head_work = alloc("act.head_work" + tag(), Tier::gpu, MemCategory::activations, "head_work",
                          p_.activations.head_forward_transient, st.phase, compute_);
      c = compute("fwd." + U.name, ComputeKind::forward, st.phase, deps, forward_flops(st.unit),
                  forward_hbm(st.unit), 0, layer);
      sch_.ops[c].compute.kernel_launches = launches_[st.unit].forward;
      sch_.ops[c].compute.gemm_hbm_bytes = forward_gemm_hbm(st.unit);
      sch_.ops[c].compute.fused_attention_flops = forward_fused_attention_flops(st.unit);
      annotate(c);
      if (feeds != -1) use_whole(c, acts[feeds], Role::activation, Access::write);
      if (head_work >= 0) {
        use_whole(c, head_work, Role::activation, Access::write);
        release(head_work, st.phase, compute_, {c});
      }
      if (layer >= 0 && p_.layers[layer].last == st.unit && fwd_work.count(layer)) {
        release(fwd_work[layer], st.phase, compute_, {c});
        fwd_work.erase(layer);
      }
    } else {
      if (!st.recompute && grads < 0) open_ipg_buffers();  // DeepSpeed's engine.backward, before the loss's
      // The first backward op writes the first activation gradient; under DeepSpeed (transformers) the loss's
      // backward holds its own fp32 gradients (loss_work), and the layers' transients start after it.
      const bool head_loss = deepspeed() && (U.is_head || in_head(st.unit));
      if (!st.recompute && grads < 0 && !head_loss)
        grads = alloc("act.grad" + tag(), Tier::gpu, MemCategory::activations, "grad",
                      p_.activations.backward_grad_bytes, st.phase, compute_);
      // The loss backward's transient (transformers: nll_loss's and log_softmax's fp32 gradients) around the head's.
      OpId loss_work = -1;
      if (U.is_head && p_.activations.loss_backward_transient > 0)
        loss_work = alloc("act.loss_work" + tag(), Tier::gpu, MemCategory::activations, "loss_work",
                          p_.activations.loss_backward_transient, st.phase, compute_);
      c = backward(st.unit, deps, annotate,
                   last_backward ? std::function<void(OpId)>([&](OpId last) {
                     release(grads, Phase::backward, compute_, {last});
                     if (shared >= 0) release(shared, Phase::backward, compute_, {last});
                   })
                                 : nullptr);
      if (loss_work >= 0) {
        use_whole(c, loss_work, Role::activation, Access::read_write);
        release(loss_work, st.phase, compute_, {c});
      }
      last_bwd_ = c;
      if (U.is_embedding && tied_grad_ >= 0) {
        release(tied_grad_, st.phase, compute_, {c});
        tied_grad_ = -1;
      }
      if (first_of_layer(st.unit)) {
        if (work.count(layer)) release(work[layer], st.phase, compute_, {c});
        if (acts.count(layer)) release(acts[layer], st.phase, compute_, {c});
        work.erase(layer);
        acts.erase(layer);
      }
      if (in_head(st.unit) && !in_head(st.unit - 1) && acts.count(kHead)) {  // the first head unit's backward
        release(acts[kHead], st.phase, compute_, {c});
        acts.erase(kHead);
      }
    }
    for (int u : st.release) {
      for (OpId b : live_[u].buffers)
        if (!shared_.count(b) || --shared_[b] == 0) release(b, st.phase, compute_, {c});
      live_.erase(u);
      for (int k = 0; k < static_cast<int>(p_.units[u].tensors.size()); ++k) swapped_.erase({u, k});
    }
    sch_.ops[c].unit = st.recompute ? -1 : st.unit;
    last_compute_ = c;
  }
  emit_deferred_reductions();
  flush_bucket_free();
  if (!ipg_.empty()) close_ipg_buffers({reduce_done_.empty() ? last_bwd_ : std::max(last_bwd_, reduce_done_.back())});
}

OpId Builder::alloc_layer_acts(int layer) {
  return alloc("act.L" + std::to_string(layer) + tag(), Tier::gpu, MemCategory::activations, "",
               ckpt_ ? p_.activations.per_layer_checkpoint : p_.activations.per_layer_no_recompute, Phase::forward,
               compute_, {}, layer);
}

}  // namespace zsim::build
