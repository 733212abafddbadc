// The schedule builder's gradient buckets and ZeRO-1/2 reductions as DeepSpeed's stage_1_and_2.py issues them,
// with ZeRO-Offload's gradient copies to the CPU.
#include "sim/plan/schedule_builder_state.hpp"

namespace zsim::build {

// The bucket now filling (the first one not yet reduced) gets its buffer when its first gradient is
// produced (stages 2-3; stages 0-1 reduce in place in the whole gradient buffer).
void Builder::open_current_bucket(int u) {
  if (p_.stage < 2 || next_reduce_ >= p_.buckets.size() || open_.count(next_reduce_)) return;
  // DeepSpeed: a bucket that fits fills its ipg buffer (the next of two with overlap_comm); a larger one (a tensor
  // past reduce_bucket_size) keeps its gradients where autograd put them (stage3.py __add_grad_to_ipg_bucket,
  // stage_1_and_2.py reduce_independent_p_g_buckets_and_remove_grads: `param.grad` itself), a buffer of its own here.
  if (!ipg_.empty() && e_ * p_.buckets[next_reduce_].elements <= sch_.ops[ipg_.front()].mem.bytes) {
    open_[next_reduce_] = ipg_[static_cast<size_t>(ipg_next_)];
    ipg_next_ = (ipg_next_ + 1) % static_cast<int>(ipg_.size());
    return;
  }
  open_[next_reduce_] = alloc("bucket." + std::to_string(next_reduce_) + tag(), Tier::gpu, MemCategory::buffers,
                              "bucket", e_ * p_.buckets[next_reduce_].elements, Phase::backward, compute_, {},
                              p_.units[u].layer);
  flush_bucket_free();
}

// DeepSpeed at stages 1-2 (stage_1_and_2.py backward, with contiguous_gradients): `self.ipg_buffer` of
// reduce_bucket_size elements of the training dtype, a second with overlap_comm, allocated as each backward starts
// whatever the model's size, and released after the backward's reductions (_release_ipg_buffers in the epilogue).
void Builder::open_ipg_buffers() {
  if (!deepspeed() || (p_.stage != 1 && p_.stage != 2) || !s_.zero.contiguous_gradients || !ipg_.empty()) return;
  for (int k = 0; k < (p_.overlap_comm ? 2 : 1); ++k)
    ipg_.push_back(alloc("ipg_buffer." + std::to_string(k) + tag(), Tier::gpu, MemCategory::buffers, "bucket",
                         e_ * s_.zero.reduce_bucket_size, Phase::backward, compute_));
  ipg_next_ = 0;
}

void Builder::close_ipg_buffers(const std::vector<OpId>& after) {
  if (p_.stage != 1 && p_.stage != 2) return;  // stage 3's is held for the run
  for (OpId b : ipg_) release(b, Phase::backward, compute_, after);
  ipg_.clear();
}

// With overlap_comm a bucket's buffer is still being reduced while the next one fills (double
// buffering): its free is placed after the next bucket's alloc. Without it the free follows at once.
void Builder::flush_bucket_free() {
  if (pending_free_) release(pending_free_->first, Phase::backward, rs_, {pending_free_->second});
  pending_free_.reset();
}

// Reduces the bucket now filling, which the backward segment `bwd` of unit u has completed.
void Builder::reduce_current_bucket(int u, OpId bwd) {
  const size_t i = next_reduce_++;
  if (!reduces_this_micro_step()) return;
  if (defer_reductions()) {
    deferred_.push_back({i, u});
    return;
  }
  emit_reduction(i, u, bwd);
}

void Builder::emit_deferred_reductions() {
  if (p_.stage == 1 && !deferred_.empty()) {
    // Stage 1 without overlap_comm: reduce_gradients walks the parameters in model order after the
    // backward pass, so its buckets fill in that order (not the backward order of the hooks).
    for (size_t k = 0; k < boundary_calls_.size(); ++k) {
      const OpId done = emit_zero12_calls(boundary_calls_[k], "bwd.bucket" + std::to_string(k), last_bwd_, -1,
                                          flat_home());
      if (optimizer_offloaded())
        reduce_done_.push_back(copy_grads_to_cpu(boundary_ordinals_[k], "bwd.bucket" + std::to_string(k), done, -1,
                                                 -1));
      else
        reduce_done_.push_back(done);
      serial_dep_ = done;
    }
    deferred_.clear();
    return;
  }
  for (auto [i, u] : deferred_) emit_reduction(i, u, last_bwd_);
  deferred_.clear();
}

// ZeRO-1/2: DeepSpeed's calls per bucket (sim/plan/grad_reduction.hpp), for the plan's buckets
// (backward order, as the gradient hooks fill them) and, for stage 1 without overlap_comm, the buckets
// reduce_gradients fills in model order.
void Builder::plan_zero12_reductions() {
  const auto& z = s_.zero;
  const FlatGradLayout layout = flat_grad_layout(p_, z.round_robin_gradients);
  flat_layout_ = layout;
  bucket_ordinals_ = bucket_tensor_ordinals(p_);
  ReductionSettings rs;
  rs.reduce_scatter = z.reduce_scatter;
  rs.multi_rank_bucket_allreduce = z.use_multi_rank_bucket_allreduce;
  rs.contiguous_gradients = z.contiguous_gradients || optimizer_offloaded();
  rs.reduce_bucket_size = z.reduce_bucket_size;
  sequential_calls_ = rs.contiguous_gradients && (rs.multi_rank_bucket_allreduce || !rs.reduce_scatter);
  for (const auto& ts : bucket_ordinals_) bucket_calls_.push_back(bucket_reduction_calls(ts, layout, rs));
  if (p_.stage == 1 && !p_.overlap_comm) {
    std::vector<int> model_order(layout.numel.size());
    for (size_t t = 0; t < model_order.size(); ++t) model_order[t] = static_cast<int>(t);
    for (const auto& ts : fill_buckets(model_order, layout, z.reduce_bucket_size)) {
      boundary_calls_.push_back(bucket_reduction_calls(ts, layout, rs));
      boundary_ordinals_.push_back(ts);
    }
  }
}

Builder::GradHome Builder::bucket_home(size_t i) const {
  GradHome h{open_.at(i), {}};
  Elements at = 0;
  for (int t : bucket_ordinals_.at(i)) {
    h.at[t] = at;
    at += flat_layout_.numel[t];
  }
  return h;
}

Builder::GradHome Builder::flat_home() const {
  GradHome h{grads_, {}};
  for (size_t t = 0; t < flat_layout_.offset.size(); ++t) h.at[static_cast<int>(t)] = flat_layout_.offset[t];
  return h;
}

// A copy op's pairs: each piece from `from` (at its place there) to `to` (consecutively from `to_first`), or back.
void Builder::use_pieces(OpId op, const std::vector<GradPiece>& pieces, const GradHome& home, OpId flat, Elements flat_first, bool to_flat) {
  Elements pos = flat_first;
  for (const GradPiece& g : pieces) {
    const Bytes a = e_ * home.where(g), b = e_ * pos, n = e_ * g.elements;
    if (to_flat) {
      use(op, home.buffer, a, n, Role::input, Access::read);
      use(op, flat, b, n, Role::output, Access::write);
    } else {
      use(op, flat, b, n, Role::input, Access::read);
      use(op, home.buffer, a, n, Role::output, Access::write);
    }
    pos += g.elements;
  }
}

// The first element of the pieces in `home` when they fill one range there (in any order), else -1: a collective
// that DeepSpeed runs on a view can run in place on that range (a reduction is elementwise).
Elements Builder::contiguous_range(std::vector<GradPiece> pieces, const GradHome& home) {
  if (pieces.empty()) return -1;
  std::sort(pieces.begin(), pieces.end(),
            [&](const GradPiece& a, const GradPiece& b) { return home.where(a) < home.where(b); });
  for (size_t k = 1; k < pieces.size(); ++k)
    if (home.where(pieces[k - 1]) + pieces[k - 1].elements != home.where(pieces[k])) return -1;
  return home.where(pieces.front());
}

// A gradient reduction in place on `n` elements at byte `offset` of `buffer` (-1: no uses written), in the
// communication dtype: when it differs from the training dtype, DeepSpeed reduces `tensor.to(comm dtype)`, a new
// buffer, and copies the result back into the tensor on the ranks that receive it (stage_1_and_2.py
// allreduce_bucket, gradient_reduction_w_predivide; engine.py allreduce_bucket): a cast buffer, a cast copy in,
// the collective, a cast copy back (on the root only for a reduce), the buffer freed.
OpId Builder::reduce_in_place(const std::string& name, CollectiveKind kind, int root, OpId buffer, Bytes offset, Elements n, std::vector<OpId> deps, int layer) {
  const Phase ph = Phase::backward;
  const bool uses = buffer >= 0;
  const bool reduce = kind == CollectiveKind::reduce;
  const std::string cname = name + (reduce ? ".reduce" : ".all_reduce");
  if (p_.comm_dtype == p_.dtype) {
    const OpId c = collective(cname, kind, world_, e_ * n, 0, p_.dtype, ph, rs_, deps, layer);
    sch_.ops[c].collective.root = root;
    if (uses) {
      use(c, buffer, offset, e_ * n, Role::input, Access::read);
      use(c, buffer, offset, e_ * n, Role::output, Access::write);
    }
    return c;
  }
  const Bytes cb = dtype_bits(p_.comm_dtype) / 8;
  const OpId buf = alloc("comm_cast." + name + tag(), Tier::gpu, MemCategory::buffers, "comm_cast", cb * n, ph, rs_,
                         deps, layer);
  const OpId in = copy(name + ".cast", CopyKind::d2d, cb * n, true, ph, rs_, {buf}, layer);
  set_cast(in, p_.dtype, p_.comm_dtype);
  const OpId c = collective(cname, kind, world_, cb * n, 0, p_.comm_dtype, ph, rs_, {in}, layer);
  sch_.ops[c].collective.root = root;
  const OpId back = copy(name + ".cast_back", CopyKind::d2d, e_ * n, true, ph, rs_, {c}, layer);
  set_cast(back, p_.comm_dtype, p_.dtype);
  sch_.ops[back].copy.rank = reduce ? root : -1;
  if (uses) {
    use(in, buffer, offset, e_ * n, Role::input, Access::read);
    use(in, buf, 0, cb * n, Role::output, Access::write);
    use(c, buf, 0, cb * n, Role::input, Access::read);
    use(c, buf, 0, cb * n, Role::output, Access::write);
    use(back, buf, 0, cb * n, Role::input, Access::read);
    use(back, buffer, offset, e_ * n, Role::output, Access::write);
  }
  return release(buf, ph, rs_, {back});
}

void Builder::set_cast(OpId op, DType from, DType to) {
  sch_.ops[op].copy.cast = true;
  sch_.ops[op].copy.cast_from = from;
  sch_.ops[op].copy.cast_to = to;
}

// One op per DeepSpeed call: per ReductionCall, the flat buffer and its torch.cat (d2d), the all_reduce or
// reduce (with its casts to and from communication_data_type), and the copy of each slice back out of the flat
// buffer (on its owner only). `home`: where the call's gradient pieces lie (buffer -1: no uses written).
OpId Builder::emit_zero12_calls(const std::vector<ReductionCall>& calls, const std::string& name, OpId bwd, int layer, const GradHome& home) {
  const Phase ph = Phase::backward;
  OpId last = bwd;
  const bool uses = home.buffer >= 0;
  for (size_t k = 0; k < calls.size(); ++k) {
    const ReductionCall& c = calls[k];
    const std::string cname = calls.size() > 1 ? name + ".call" + std::to_string(k) : name;
    std::vector<OpId> deps{bwd};
    std::optional<OpId> flat, staged;
    OpId target = -1;  // the buffer the collective runs in, in place
    Bytes at = 0;
    if (c.flatten) {
      flat = alloc("flat." + cname + tag(), Tier::gpu, MemCategory::buffers, "reduce_flat", e_ * c.elements, ph,
                   rs_, deps, layer);
      deps = {copy(cname + ".flatten", CopyKind::d2d, e_ * c.elements, true, ph, rs_, {*flat}, layer)};
      cat_kernels(deps[0], static_cast<std::int64_t>(c.pieces.size()));  // self.flatten: torch.cat
      if (uses) use_pieces(deps[0], c.pieces, home, *flat, 0, true);
      target = *flat;
    } else if (uses) {
      const Elements first = contiguous_range(c.pieces, home);
      if (first >= 0) {
        target = home.buffer;
        at = e_ * first;
      } else {
        // Stage 1 with round_robin_gradients: the call's gradients are not one range of the flat buffer. DeepSpeed
        // reduces them in its ipg bucket buffer, into which the hook copied each gradient
        // (reduce_independent_p_g_buckets_and_remove_grads: `new_grad_tensor.copy_(grad_reduc)`); so does the
        // schedule (a `bucket` buffer and a `.to_bucket` copy), and it copies the result back into `grads` on the
        // ranks that receive it, where the step reads it (DeepSpeed: copy_grads_in_partition).
        staged = alloc("ipg." + cname + tag(), Tier::gpu, MemCategory::buffers, "bucket", e_ * c.elements, ph, rs_,
                       deps, layer);
        deps = {copy(cname + ".to_bucket", CopyKind::d2d, e_ * c.elements, true, ph, rs_, {*staged}, layer)};
        per_tensor_kernels(deps[0], static_cast<std::int64_t>(c.pieces.size()));  // each hook's copy_
        use_pieces(deps[0], c.pieces, home, *staged, 0, true);
        target = *staged;
      }
    }
    last = reduce_in_place(cname, c.kind, c.root, target, at, c.elements, deps, layer);
    if (staged) {
      last = copy(cname + ".from_bucket", CopyKind::d2d, e_ * c.elements, true, ph, rs_, {last}, layer);
      per_tensor_kernels(last, static_cast<std::int64_t>(c.pieces.size()));
      sch_.ops[last].copy.rank = c.kind == CollectiveKind::reduce ? c.root : -1;
      use_pieces(last, c.pieces, home, *staged, 0, false);
      last = release(*staged, ph, rs_, {last});
    }
    const OpId coll = last;
    Elements pos = 0;
    for (size_t j = 0; j < c.copy_out.size(); ++j) {
      last = copy(cname + ".copy_out" + std::to_string(j), CopyKind::d2d, e_ * c.copy_out[j].elements, true, ph,
                  rs_, {coll}, layer);
      sch_.ops[last].copy.rank = c.copy_out[j].owner;
      per_tensor_kernels(last, static_cast<std::int64_t>(c.copy_out[j].pieces.size()));  // buf.copy_(synced) each
      if (uses) use_pieces(last, c.copy_out[j].pieces, home, *flat, pos, false);  // back to its place
      pos += c.copy_out[j].elements;
    }
    if (flat) last = release(*flat, ph, rs_, {last});
  }
  return last;
}

// Stage 2: copy_grads_in_partition (stage_1_and_2.py reduce_ipg_grads): each rank copies the reduced
// gradients it owns out of the bucket into its gradient partition, adding to what earlier micro-steps left
// there (DeepSpeed: the next micro-step's autograd accumulates into the partition's views). One copy per
// (tensor, owner) overlap, run by that owner.
OpId Builder::copy_grads_in_partition(size_t i, const std::string& name, OpId done, int layer) {
  const Elements P = p_.param_partition;
  if (grad_partition_ < 0)  // DeepSpeed: `if self.grads_in_partition is None: ... torch.empty(total_size)`
    grad_partition_ = alloc("grads.partition" + tag(), Tier::gpu, MemCategory::grads, "", e_ * p_.optimizer_partition,
                            Phase::backward, rs_, {done}, layer);
  Elements at = 0;  // the tensor's first element in the bucket
  OpId last = done;
  int k = 0;
  for (int t : bucket_ordinals_.at(i)) {
    const Elements begin = flat_layout_.offset[t];
    for_each_owned_piece(t, [&](int owner, Elements a, Elements b) {
      const OpId c = copy(name + ".copy_grads_in_partition" + std::to_string(k++), CopyKind::d2d, e_ * (b - a), true,
                          Phase::backward, rs_, {done}, layer);
      sch_.ops[c].copy.rank = owner;
      if (open_.count(i)) {
        use(c, open_.at(i), e_ * (at + a - begin), e_ * (b - a), Role::input, Access::read);
        use(c, grad_partition_, e_ * (a - owner * P), e_ * (b - a), Role::output, Access::read_write);
      }
      last = c;
    });
    at += flat_layout_.numel[t];
  }
  return last;
}

// ZeRO-1/2 with optimizer offload: copy_grads_in_partition (stage_1_and_2.py), run after each reduction on the
// reduction's stream (reduce_ipg_grads), per tensor with elements in a rank's partition, by that rank:
// - grad_accum > 1, async_accumulate_grad_in_cpu_via_gpu, on the whole tensor (param.numel()) in 16 bits: at
//   micro-step 0 a d2h into the tensor's pinned host buffer (accumulated_grads_in_cpu); after, an h2d of that buffer
//   into temp_grad_buffer_for_gpu_offload and an add into the reduced gradient on the GPU. DeepSpeed's current code
//   copies the sum back down at micro-step 0 only; the schedule copies it back at every micro-step before the
//   boundary, as DeepSpeed's earlier releases did (`if not self.is_gradient_accumulation_boundary`), so that the host
//   copy is the running sum for any grad_accum (for 2 micro-steps the two agree).
// - at the boundary, async_inplace_copy_grad_to_fp32_buffer_from_gpu: the partition's elements are converted on the
//   GPU (`src_tensor.to(master_weights_and_grads_dtype)`: a transient fp32 tensor, here one buffer per bucket reused
//   tensor after tensor) and copied down in fp32 into the CPU optimizer's gradients.
// `bucket`: the bucket's buffer (stage 2, tensors in `ordinals` order), or -1: the whole gradient buffer (stage 1).
OpId Builder::copy_grads_to_cpu(const std::vector<int>& ordinals, const std::string& name, OpId done, int layer, OpId bucket) {
  const Phase ph = Phase::backward;
  const Elements P = p_.param_partition;
  const bool accumulate = s_.training.grad_accum > 1, uses = sequential_calls_ || bucket < 0;
  const bool pinned = s_.zero.offload_optimizer.pin_memory;
  const OpId src = bucket >= 0 ? bucket : grads_;
  Elements widest = 0;  // the largest (tensor, owner) piece: the fp32 conversion's buffer
  for (int t : ordinals) for_each_owned_piece(t, [&](int, Elements a, Elements b) { widest = std::max(widest, b - a); });
  OpId last = done, fp32 = -1;
  if (last_micro_)
    last = fp32 = alloc("grads.to_fp32." + name + tag(), Tier::gpu, MemCategory::buffers, "offload_cast",
                        kFp32 * widest, ph, rs_, {done}, layer);
  Elements at = 0;  // the tensor's first element in the bucket
  int k = 0;
  for (int t : ordinals) {
    const Elements begin = flat_layout_.offset[t], numel = flat_layout_.numel[t];
    const Bytes from = e_ * (bucket >= 0 ? at : begin);  // the tensor's gradient in `src`
    for_each_owned_piece(t, [&](int owner, Elements a, Elements b) {
      const std::string piece = name + ".t" + std::to_string(k++);
      auto on_owner = [&](OpId c) {
        sch_.ops[c].copy.rank = owner;
        return last = c;
      };
      if (accumulate) {
        const Bytes acc = accum_at_.at({t, owner});
        auto down = [&](const std::string& what) {
          const OpId c = on_owner(copy(piece + what, CopyKind::d2h, e_ * numel, pinned, ph, rs_, {last}, layer));
          if (uses) use_copy(sch_.ops[c], {src, from, e_ * numel}, {grads_accum_, acc, e_ * numel});
        };
        if (micro_ == 0) {
          down(".accum_d2h");
        } else {
          const OpId up = on_owner(copy(piece + ".accum_h2d", CopyKind::h2d, e_ * numel, pinned, ph, rs_, {last},
                                        layer));
          const OpId add = on_owner(copy(piece + ".accum_add", CopyKind::d2d, e_ * numel, true, ph, rs_, {up}, layer));
          if (uses) {
            use_copy(sch_.ops[up], {grads_accum_, acc, e_ * numel}, {offload_temp_, 0, e_ * numel});
            use(add, offload_temp_, 0, e_ * numel, Role::input, Access::read);
            use(add, src, from, e_ * numel, Role::output, Access::read_write);
          }
          if (!last_micro_) down(".accum_d2h");
        }
      }
      if (last_micro_) {
        const OpId cast = on_owner(copy(piece + ".to_fp32", CopyKind::d2d, kFp32 * (b - a), true, ph, rs_, {last},
                                        layer));
        set_cast(cast, p_.dtype, DType::fp32);
        const OpId d = on_owner(copy(piece + ".d2h", CopyKind::d2h, kFp32 * (b - a), pinned, ph, rs_, {cast}, layer));
        if (uses) {
          use_copy(sch_.ops[cast], {src, from + e_ * (a - begin), e_ * (b - a)}, {fp32, 0, kFp32 * (b - a)});
          use_copy(sch_.ops[d], {fp32, 0, kFp32 * (b - a)}, {grads_fp32_, kFp32 * (a - owner * P), kFp32 * (b - a)});
        }
      }
    });
    at += numel;
  }
  if (fp32 >= 0) last = release(fp32, ph, rs_, {last});
  return last;
}

void Builder::emit_reduction(size_t i, int u, OpId bwd) {
  const GradBucket& b = p_.buckets[i];
  const std::string name = "bwd.bucket" + std::to_string(i);
  const int layer = p_.units[u].layer;
  OpId done;
  if (p_.stage == 1 || p_.stage == 2) {
    // Stage 2 reduces in the bucket's buffer (its tensors in bucket order); stage 1 with overlap_comm in the whole
    // gradient buffer, each gradient at its flat offset.
    done = emit_zero12_calls(bucket_calls_[i], name, bwd, layer, p_.stage == 2 ? bucket_home(i) : flat_home());
    // Stage 2 keeps the reduced gradients of its partition: copy_grads_in_partition with contiguous_gradients;
    // without, the in-partition param.grad tensors stay and the step flattens them (reduce_ipg_grads,
    // independent_gradient_partition_epilogue -> get_flat_partition): the same bytes, into grads.partition here.
    if (p_.stage == 2 && !optimizer_offloaded()) done = copy_grads_in_partition(i, name, done, layer);
  } else if (p_.stage == 0) {
    // In place in the whole gradient buffer: a bucket is a run of consecutive tensors in model order.
    Elements first = p_.params;
    for (const auto& [mu, k] : b.members) first = std::min(first, flat_offset(mu, k));
    done = reduce_in_place(name, CollectiveKind::all_reduce, -1, grads_, e_ * first, b.elements, {bwd}, layer);
  } else if (p_.qgz) {
    done = qgz_reduce(i, name, bwd, layer);
  } else {
    done = zero3_reduce(i, all_members(b), name, bwd, layer);
  }
  if (optimizer_offloaded() && (p_.stage == 1 || p_.stage == 2)) {
    done = copy_grads_to_cpu(bucket_ordinals_.at(i), name, done, layer, p_.stage == 2 ? open_.at(i) : -1);
  }
  if (open_.count(i) && std::find(ipg_.begin(), ipg_.end(), open_[i]) != ipg_.end()) {
    open_.erase(i);  // DeepSpeed's ipg buffer: freed with the backward (stages 1-2) or held for the run (stage 3)
  } else if (open_.count(i)) {
    pending_free_ = {open_[i], done};
    if (!p_.overlap_comm) flush_bucket_free();
    open_.erase(i);
  }
  reduce_done_.push_back(done);
  if (!p_.overlap_comm) serial_dep_ = done;
}

}  // namespace zsim::build
