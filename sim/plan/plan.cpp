#include "sim/plan/plan.hpp"

#include "sim/plan/deepspeed_fetch.hpp"
#include "sim/plan/param_swap_in.hpp"
#include "sim/plan/quantization.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>

namespace zsim {

namespace {

Elements ceil_div(Elements a, Elements b) { return (a + b - 1) / b; }

DType dtype_of(Precision p) {
  switch (p) {
    case Precision::bf16: return DType::bf16;
    case Precision::fp16: return DType::fp16;
    case Precision::fp32: return DType::fp32;
  }
  return DType::bf16;
}

FetchUnit make_unit(std::string name, int layer, std::vector<TensorShape> tensors, const Scenario& s, int dp) {
  FetchUnit u;
  u.name = std::move(name);
  u.layer = layer;
  u.tensors = std::move(tensors);
  for (const auto& t : u.tensors) {
    u.params += t.numel();
    if (s.zero.stage == 3 && t.numel() <= s.zero.stage3_param_persistence_threshold) {
      u.persistent += t.numel();
    } else {
      u.gathered += t.numel();
      u.partition += ceil_div(t.numel(), dp);
      u.gathered_tensors.push_back(t);
    }
  }
  return u;
}

// Splits a module group's tensors into modules (consecutive tensors of one module), in order.
std::vector<std::pair<std::string, std::vector<TensorShape>>> modules_of(const ModuleShapes& m) {
  std::vector<std::pair<std::string, std::vector<TensorShape>>> out;
  for (const auto& t : m.tensors) {
    const std::string mod = module_name(t.name);
    if (out.empty() || out.back().first != mod) out.push_back({mod, {}});
    out.back().second.push_back(t);
  }
  return out;
}

// Units whose parameters a use of `unit` needs: the unit itself; a tied head needs the embedding.
std::vector<int> fetch_units(const Plan& p, int unit) {
  if (p.units[unit].is_head && p.tied_head) return {0};
  return {unit};
}

// Where DeepSpeed's swap-in pool runs out (offload_param nvme): the phase and unit of the fetch that finds fewer free
// buffers than it has partitions to read (swap_in asserts "Not enough buffers").
struct SwapStall {
  Phase phase = Phase::forward;
  int unit = 0;
};

// The stage-3 fetch trace of one micro-step: forward over the units, then backward in reverse.
// Prefetch: after the blocking fetches of a use, gather the next uses' units while the gathered
// elements ahead of this use stay within stage3_prefetch_bucket_size and everything gathered within
// stage3_max_live_parameters. Release after a use unless the unit's next use comes within fewer than
// stage3_max_reuse_distance elements of parameters traversed in between (DeepSpeed's
// PartitionedParameterCoordinator.__params_to_release; 0 disables reuse). offload_param nvme: which partitions
// each step reads from NVMe, into which buffers of the swapper's pool; `stall` says where the pool runs out.
std::vector<FetchStep> make_trace(const Plan& p, const ZeroConfig& z, std::optional<SwapStall>& stall) {
  const int n = static_cast<int>(p.units.size());
  std::vector<FetchStep> trace;
  for (int u = 0; u < n; ++u)
    trace.push_back({u, Phase::forward, false, p.units[u].layer, fetch_units(p, u), {}, {}, {}, {}, {}, {}, {}});
  for (int u = n - 1; u >= 0; --u) {
    const int layer = p.units[u].layer;
    if (p.checkpointing && layer >= 0 && p.layers[layer].last == u) {
      FetchStep rc{u, Phase::backward, true, layer, {}, {}, {}, {}, {}, {}, {}, {}};
      for (int v = p.layers[layer].first; v <= p.layers[layer].last; ++v) rc.uses.push_back(v);
      trace.push_back(std::move(rc));
    }
    trace.push_back({u, Phase::backward, false, layer, fetch_units(p, u), {}, {}, {}, {}, {}, {}, {}});
  }
  if (p.stage != 3) return trace;
  // runtime deepspeed: DeepSpeed's coordinator as its hooks drive it (deepspeed_fetch.hpp); where partitions are read
  // from NVMe through the swap-in pool, the trace below (the pool and its prefetch are modelled there).
  if (p.runtime == RuntimeKind::deepspeed && tensors_swapped_in(p).empty()) {
    deepspeed_fetch_trace(p, z, trace);
    return trace;
  }
  std::vector<std::vector<int>> needs(trace.size());
  for (size_t i = 0; i < trace.size(); ++i) needs[i] = trace[i].uses;

  std::set<int> live;
  Elements live_elems = 0;
  auto gather = [&](int u) {
    live.insert(u);
    live_elems += p.units[u].gathered;
  };
  // offload_param nvme: the tensors read through DeepSpeed's swap-in pool, the pool, and the tensors it holds (read,
  // their unit not yet released: their ds_tensor status INFLIGHT or AVAILABLE).
  std::map<int, std::vector<int>> on_nvme;  // unit -> its tensors read from NVMe
  for (const auto& [u, k] : tensors_swapped_in(p)) on_nvme[u].push_back(k);
  ParamSwapPool pool(p.param_swap_buffers);
  std::map<std::pair<int, int>, int> held;  // (unit, tensor) -> its pool buffer
  auto read = [&](int u, int k, std::vector<SwapIn>& out) {
    const int b = pool.take();
    held[{u, k}] = b;
    out.push_back({u, k, b});
  };
  // _partition_param -> remove_partition_and_release_buffers: unit u's partitions leave the pool.
  auto give_back = [&](int u) {
    if (const auto it = on_nvme.find(u); it != on_nvme.end())
      for (int k : it->second)
        if (const auto h = held.find({u, k}); h != held.end()) {
          pool.give_back(h->second);
          held.erase(h);
        }
  };
  // _is_currently_on_nvme: a partition of u is on NVMe and not read (status NOT_AVAILABLE).
  auto not_read = [&](int u) {
    const auto it = on_nvme.find(u);
    if (it == on_nvme.end()) return false;
    for (int k : it->second)
      if (!held.count({u, k})) return true;
    return false;
  };
  std::set<int> inflight;  // units prefetched and not yet waited for (the coordinator's __inflight_param_registry)
  // Whether unit u is released after its use at step i: not used again within stage3_max_reuse_distance elements.
  const Elements keep_window = z.stage3_max_reuse_distance;
  auto released_after = [&](size_t i, int u) {
    Elements distance = 0;
    for (size_t k = i + 1; k < trace.size() && distance < keep_window; ++k) {
      const auto& nk = needs[k];
      if (std::find(nk.begin(), nk.end(), u) != nk.end()) return false;
      for (int v : nk) distance += p.units[v].gathered;
    }
    return true;
  };
  for (size_t i = 0; i < trace.size(); ++i) {
    FetchStep& st = trace[i];
    for (int u : needs[i])
      if (p.units[u].gathered > 0 && !live.count(u)) {
        st.fetch.push_back(u);
        gather(u);
      }
    // The step's own fetch reads its partitions not yet read, and waits (swap_in(async_op=False)); DeepSpeed asserts
    // when the pool has too few free buffers for one module's call.
    // A recompute runs the layer's modules one by one: a module released after it gives its buffers back before the
    // next one reads (the schedule reads each module's partitions just before its own call).
    for (int u : st.fetch) {
      const auto it = on_nvme.find(u);
      if (it == on_nvme.end()) continue;
      for (int k : it->second) {
        if (held.count({u, k})) continue;
        if (pool.free() == 0) {
          stall = SwapStall{st.phase, u};
          return trace;
        }
        read(u, k, st.swap_in);
      }
      if (st.recompute && released_after(i, u)) give_back(u);
    }
    for (int u : needs[i]) inflight.erase(u);  // waited for by this step's fetch
    Elements ahead = 0;
    bool stop = z.stage3_prefetch_bucket_size <= 0;
    // Where the prefetch stopped: the head of DeepSpeed's __param_queue (trace step, index in its units).
    size_t queue_step = trace.size(), queue_at = 0;
    for (size_t j = i + 1; j < trace.size() && !stop; ++j) {
      for (size_t x = 0; x < needs[j].size(); ++x) {
        const int u = needs[j][x];
        if (p.units[u].gathered == 0) continue;
        const Elements e = p.units[u].gathered;
        const bool current = std::find(needs[i].begin(), needs[i].end(), u) != needs[i].end();
        if (live.count(u)) {  // already gathered: counts towards the look-ahead window
          if (!current) ahead += e;
          continue;
        }
        // "nvme prefetch is handled elsewhere. Need to break here to preserve fetch order"
        if (not_read(u) || ahead + e > z.stage3_prefetch_bucket_size ||
            live_elems + e > z.stage3_max_live_parameters) {
          stop = true;
          queue_step = j;
          queue_at = x;
          break;
        }
        ahead += e;
        st.prefetch.push_back(u);
        st.prefetch_phase.push_back(trace[j].phase);
        inflight.insert(u);
        gather(u);
      }
    }
    // __prefetch_nvme_param_partitions (only with a prefetch bucket): from the queue's head, read the partitions not
    // yet read, while the elements looked at stay within twice those in flight and the pool has free buffers.
    if (!on_nvme.empty() && z.stage3_prefetch_bucket_size > 0) {
      Elements in_flight = 0, considered = 0;
      for (int u : inflight) in_flight += p.units[u].gathered;
      std::vector<std::pair<int, int>> picks;
      bool full = false;
      for (size_t j = queue_step; j < trace.size() && !full; ++j)
        for (size_t x = j == queue_step ? queue_at : 0; x < needs[j].size() && !full; ++x) {
          const int u = needs[j][x];
          const auto it = on_nvme.find(u);
          for (int k = 0; k < static_cast<int>(p.units[u].tensors.size()); ++k) {
            if (considered > 2 * in_flight || static_cast<int>(picks.size()) >= pool.free()) {
              full = true;
              break;
            }
            const bool nvme = it != on_nvme.end() && std::count(it->second.begin(), it->second.end(), k) > 0;
            // A unit met twice within the window is read once (DeepSpeed's list could hold it twice).
            if (nvme && !held.count({u, k}) && std::find(picks.begin(), picks.end(), std::pair{u, k}) == picks.end())
              picks.push_back({u, k});
            considered += p.units[u].tensors[k].numel();
          }
        }
      for (const auto& [u, k] : picks) read(u, k, st.swap_in_ahead);
    }
    for (int u : needs[i]) {
      if (!live.count(u) || !released_after(i, u)) continue;
      st.release.push_back(u);
      live.erase(u);
      live_elems -= p.units[u].gathered;
      give_back(u);
    }
  }
  return trace;
}

// Gradient buckets in backward order (the units backward, each unit's tensors backward); `starts_new(cur, unit, tensor,
// numel)` says whether the tensor opens a new bucket after the non-empty bucket `cur`.
template <class StartsNew>
std::vector<GradBucket> make_buckets_split(const Plan& p, const StartsNew& starts_new) {
  std::vector<GradBucket> out;
  GradBucket cur;
  for (int u = static_cast<int>(p.units.size()) - 1; u >= 0; --u) {
    const auto& ts = p.units[u].tensors;
    for (auto it = ts.rbegin(); it != ts.rend(); ++it) {
      const int k = static_cast<int>(ts.rend() - it) - 1;
      const Elements n = it->numel();
      if (cur.elements > 0 && starts_new(cur, u, k, n)) {
        out.push_back(std::move(cur));
        cur = GradBucket{};
      }
      if (cur.elements == 0) cur.opens_at = u;
      if (cur.elements == 0 || cur.closes_after != u) cur.closing_elements = 0;
      cur.elements += n;
      cur.closing_elements += n;
      cur.tensors.push_back(*it);
      cur.members.push_back({u, k});
      cur.closes_after = u;
    }
  }
  if (cur.elements > 0) out.push_back(std::move(cur));
  return out;
}

// A bucket closes before the tensor that would take it past bucket_size (the gradient hooks' buckets).
std::vector<GradBucket> make_buckets(const Plan& p, Elements bucket_size) {
  return make_buckets_split(p, [&](const GradBucket& cur, int, int, Elements n) { return cur.elements + n > bucket_size; });
}

// runtime deepspeed, stage 0: the engine's buffered_allreduce_fallback walks the gradients in model order and
// all-reduces a bucket once its numel exceeds elements_per_buffer, the tensor that crosses it included
// (engine.py allreduce_no_retain); the same buckets, in the plan's backward order.
std::vector<GradBucket> make_fallback_buckets(const Plan& p, Elements per_buffer) {
  std::map<std::pair<int, int>, int> bucket_of;  // (unit, tensor) -> its bucket, counted in model order
  int b = 0;
  Elements numel = 0;
  for (int u = 0; u < static_cast<int>(p.units.size()); ++u)
    for (int k = 0; k < static_cast<int>(p.units[u].tensors.size()); ++k) {
      bucket_of[{u, k}] = b;
      numel += p.units[u].tensors[k].numel();
      if (numel > per_buffer) ++b, numel = 0;
    }
  return make_buckets_split(p, [&](const GradBucket& cur, int u, int k, Elements) {
    return bucket_of.at(cur.members.back()) != bucket_of.at({u, k});
  });
}

std::vector<Elements> split(Elements total, Elements chunk) {
  std::vector<Elements> out;
  if (total <= 0) return out;
  chunk = std::max<Elements>(chunk, 1);
  for (Elements done = 0; done < total; done += chunk) out.push_back(std::min(chunk, total - done));
  return out;
}

// offload_param nvme: zero.Init partitions every parameter through the swapper (partition_parameters.py
// _partition_param): a partition of at least min_aio_bytes (1 MiB, DeepSpeed's default aio.block_size) takes a pool
// buffer (get_buffer), which asserts `numel < elements_per_buffer`.
void check_swap_buffer_size(const Plan& p, const ZeroConfig& z) {
  for (const FetchUnit& u : p.units)
    for (const TensorShape& t : u.tensors) {
      const Elements part = ceil_div(t.numel(), p.dp);
      if (part * p.elem_bytes >= kMinAioBytes && part >= z.offload_param.buffer_size)
        throw std::invalid_argument(
            "offload_param.buffer_size " + std::to_string(z.offload_param.buffer_size) + " is too small: " + t.name +
            "'s partition has " + std::to_string(part) + " elements, and DeepSpeed's NVMe swapper asserts 'More "
            "elements than buffer size' when it partitions a parameter (partitioned_param_swapper.py get_buffer); "
            "raise offload_param.buffer_size above " + std::to_string(part));
    }
}

// The message for a pool that runs out, with the smallest buffer_count that runs the trace (a bisection between the
// count given and one buffer per tensor read from NVMe, which always runs).
std::string swap_stall_message(const Plan& p, const ZeroConfig& z, const SwapStall& at) {
  Plan q = p;
  int lo = p.param_swap_buffers + 1, hi = static_cast<int>(tensors_swapped_in(p).size());  // below lo stalls; hi runs
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    q.param_swap_buffers = mid;
    std::optional<SwapStall> s;
    make_trace(q, z, s);
    if (s) lo = mid + 1;
    else hi = mid;
  }
  return "offload_param.buffer_count " + std::to_string(p.param_swap_buffers) +
         " is too few: DeepSpeed's NVMe swapper runs out of swap-in buffers at the " +
         (at.phase == Phase::forward ? "forward" : "backward") + " fetch of " + p.units[at.unit].name +
         " (partitioned_param_swapper.py swap_in asserts 'Not enough buffers', DeepSpeed issue #3062): the parameters "
         "gathered and kept for reuse (stage3_max_reuse_distance " +
         std::to_string(z.stage3_max_reuse_distance) + ", stage3_max_live_parameters " +
         std::to_string(z.stage3_max_live_parameters) + ") and those read ahead hold every buffer. This trace runs "
         "with offload_param.buffer_count >= " + std::to_string(lo) + ", or a smaller stage3_max_reuse_distance";
}

// The cluster's shape, the dtypes and the process groups; the options the planner refuses.
void plan_groups(const Scenario& s, Plan& p) {
  const ZeroConfig& z = s.zero;
  p.runtime = s.runtime;
  p.stage = z.stage;
  p.bf16_optimizer = s.runtime == RuntimeKind::deepspeed && z.stage == 0 && s.training.precision == Precision::bf16;
  p.nodes = s.cluster.nodes;
  p.gpus_per_node = s.cluster.gpus_per_node;
  p.dp = s.world_size();
  if (p.nodes < 1 || p.gpus_per_node < 1) throw std::invalid_argument("plan: cluster has no GPUs");
  if (z.stage < 0 || z.stage > 3) throw std::invalid_argument("plan: ZeRO stage outside 0-3");
  const int hpz = std::max(1, z.zero_hpz_partition_size);
  if (p.gpus_per_node % hpz != 0)
    throw std::invalid_argument("plan: zero_hpz_partition_size does not divide gpus_per_node");
  if (z.reduce_bucket_size <= 0 || z.allgather_bucket_size <= 0)
    throw std::invalid_argument("plan: bucket sizes must be positive");

  p.dtype = dtype_of(s.training.precision);
  p.elem_bytes = bytes_per_element(s.training.precision);
  p.comm_dtype = s.training.communication_data_type ? dtype_of(*s.training.communication_data_type) : p.dtype;
  p.world = {"world", p.dp, p.gpus_per_node, 1};
  p.hpz = {"hpz", hpz, hpz, 1};
  p.intra_node = {"intra_node", p.gpus_per_node, p.gpus_per_node, 1};
  p.inter_node = {"inter_node", p.nodes, 1, p.gpus_per_node};
}

// The model's fetch units (embedding, each layer's modules, the head) and its activation figures.
void plan_units(const Scenario& s, Plan& p) {
  p.shapes = model_shapes(s.model);
  p.activations = activation_bytes(s.model, s.training, s.runtime);
  p.params = p.shapes.total_params();
  p.largest_module_params = p.shapes.largest_module_params();
  p.tied_head = p.shapes.tied_head;

  p.checkpointing = s.training.activation_checkpointing == Checkpointing::full;
  p.units.push_back(make_unit("embedding", -1, p.shapes.embedding.tensors, s, p.dp));
  p.units.back().is_embedding = true;
  const auto layer_modules = modules_of(p.shapes.layer);
  for (int l = 0; l < p.shapes.layers; ++l) {
    LayerUnits lu;
    lu.first = static_cast<int>(p.units.size());
    for (const auto& [mod, tensors] : layer_modules) {
      p.units.push_back(make_unit("L" + std::to_string(l) + "." + mod, l, tensors, s, p.dp));
      p.units.back().attention_core = mod == "attn.o";
      if (mod == "mlp.up") p.units.back().activation = FetchUnit::ActivationPart::up;
      if (mod == "mlp.gate") p.units.back().activation = FetchUnit::ActivationPart::gate;
    }
    lu.last = static_cast<int>(p.units.size()) - 1;
    p.layers.push_back(lu);
  }
  for (const auto& [mod, tensors] : modules_of(p.shapes.head))
    if (mod != "head.out") p.units.push_back(make_unit(mod, -1, tensors, s, p.dp));
  std::vector<TensorShape> out;
  for (const auto& t : p.shapes.head.tensors)
    if (module_name(t.name) == "head.out") out.push_back(t);
  p.units.push_back(make_unit("head", -1, out, s, p.dp));  // tied: no tensors, uses the embedding
  p.units.back().is_head = true;
}

// Each rank's parameter and optimizer partitions, as DeepSpeed pads them per stage.
void plan_partitions(const Scenario& s, Plan& p) {
  switch (p.stage) {
    case 0:
      if (p.bf16_optimizer) {
        // bf16 at stage 0 runs BF16_Optimizer (engine.py _configure_bf16_optimizer), which partitions its fp32
        // master and the optimizer state over the data-parallel ranks like ZeRO-1 (bf16_optimizer.py: the flat
        // bf16 group padded to a multiple of nccl_start_alignment_factor x dp, `partition_size = len(flat) // dp`);
        // its step all-gathers the bf16 flat buffer from those partitions.
        const Elements align = 2 * static_cast<Elements>(p.dp);
        p.param_partition = ceil_div(p.params, align) * align / p.dp;
        p.optimizer_partition = p.param_partition;
        break;
      }
      p.param_partition = p.params;
      p.optimizer_partition = p.params;
      break;
    case 1:
    case 2: {
      // DeepSpeedZeroOptimizer pads the flat 16-bit group to a multiple of 2N (nccl_start_alignment_factor x
      // dp: stage_1_and_2.py flatten_dense_tensors_aligned) and gives each rank 1/N of it.
      const Elements align = 2 * static_cast<Elements>(p.dp);
      p.param_partition = ceil_div(p.params, align) * align / p.dp;
      p.optimizer_partition = p.param_partition;
      break;
    }
    case 3:
      for (const auto& u : p.units) {
        p.param_partition += u.partition;
        p.persistent_params += u.persistent;
        for (const auto& t : u.tensors) p.optimizer_partition += ceil_div(t.numel(), p.dp);
      }
      break;
  }
}

// Where the optimizer and parameters live (offload), and the ZeRO++ / stage 3 fetch options.
void plan_placement(const Scenario& s, Plan& p) {
  const ZeroConfig& z = s.zero;
  const int hpz = std::max(1, z.zero_hpz_partition_size);
  p.overlap_comm = z.overlap_comm;
  p.reduce_scatter = z.reduce_scatter;
  p.optimizer_device = p.stage == 0 ? OffloadDevice::none : z.offload_optimizer.device;
  if (p.optimizer_device == OffloadDevice::nvme && p.stage < 3) {
    // stage_1_and_2.py: `self.cpu_offload = True` for any offload_optimizer device; only stage 3 swaps to NVMe.
    p.optimizer_device = OffloadDevice::cpu;
    p.warnings.push_back("offload_optimizer.device nvme at stage " + std::to_string(p.stage) +
                         ": DeepSpeed's ZeRO-1/2 optimizer offloads to the CPU for any device (stage_1_and_2.py "
                         "cpu_offload); the optimizer state stays in CPU memory, nothing is swapped to NVMe");
  }
  p.param_device = p.stage == 3 ? z.offload_param.device : OffloadDevice::none;
  // fp32 training keeps no separate master only at stage 0 (the engine's basic optimizer on the model's own fp32
  // weights): ZeRO clones the partition into its fp32 master even when it is already fp32 (stage_1_and_2.py
  // single_partition_of_fp32_groups: `...detach().clone().to(dtype=master_weights_and_grads_dtype)`; stage3.py
  // _create_fp32_partitions: `fp16_partitioned_groups_flat[i].to(device).clone().float().detach()`).
  p.optimizer_bytes_per_param = s.training.precision == Precision::fp32 && p.stage == 0 ? 8 : 12;
  if (p.stage == 3) {
    p.qwz = z.zero_quantized_weights;
    p.hpz_enabled = hpz > 1;
    p.qgz = z.zero_quantized_gradients && p.nodes > 1;  // DeepSpeed's all-to-all path needs > 1 node
    p.loco = p.qgz && z.zeropp_loco_param.enabled;
    p.loco_err_beta = z.zeropp_loco_param.err_beta;
    p.loco_reset_T = z.zeropp_loco_param.reset_T;
    p.sequential_allgather = z.stage3_allgather_sequential;
    p.all_reduce_fetch = z.stage3_use_all_reduce_for_fetch_params;
  }
}

// What DeepSpeed does differently from what the scenario asks, said as warnings.
void plan_warnings(const Scenario& s, Plan& p) {
  const ZeroConfig& z = s.zero;
  const int hpz = std::max(1, z.zero_hpz_partition_size);
  if (z.zero_quantized_gradients && p.stage == 3 && p.nodes == 1)
    p.warnings.push_back("zero_quantized_gradients: one node, so DeepSpeed reduce-scatters gradients unquantized "
                         "(qgZ's all-to-all path needs more than one node)");
  if ((z.zero_quantized_weights || z.zero_quantized_gradients || hpz > 1 || z.stage3_allgather_sequential) &&
      p.stage != 3)
    p.warnings.push_back("ZeRO++ options and stage3_allgather_sequential apply to stage 3 only; ignored at stage " +
                         std::to_string(p.stage));
  if ((z.round_robin_gradients || !z.use_multi_rank_bucket_allreduce) && p.stage != 1 && p.stage != 2)
    p.warnings.push_back("round_robin_gradients and use_multi_rank_bucket_allreduce apply to stages 1-2 "
                         "(DeepSpeedZeroOptimizer) only; ignored at stage " + std::to_string(p.stage));
  if (p.qgz) {
    std::int64_t fallback = 0;
    for (const auto& u : p.units)
      for (const auto& t : u.tensors) fallback += t.is_matrix() && !qgz_applies(t.rows, t.cols, p.dp);
    if (fallback > 0)
      p.warnings.push_back("zero_quantized_gradients: " + std::to_string(fallback) +
                           " weight matrices do not divide by 2 x world size; DeepSpeed reduce-scatters them "
                           "unquantized");
  }
  if (p.optimizer_device != OffloadDevice::none && z.offload_optimizer.ratio < 1.0)
    p.warnings.push_back("offload_optimizer.ratio < 1 is not modelled: the whole optimizer step runs on the CPU");
}

// Gradient buckets, ZeRO-1/2's all-gather shards, optimizer sub-groups, and the NVMe swap buffers.
void plan_buckets_and_swaps(const Scenario& s, Plan& p) {
  const ZeroConfig& z = s.zero;
  // Stage 0 uses DeepSpeed's buffered all-reduce fallback (MEMORY_OPT_ALLREDUCE_SIZE elements per
  // buffer), the other stages reduce_bucket_size.
  // Under runtime deepspeed BF16_Optimizer hands the engine its fp32 flat gradient buffer as the one tensor to reduce
  // (bf16_optimizer.py get_grads_for_reduction: non_expert_gradients, one flat buffer per group): one all-reduce of
  // the whole model, cast to communication_data_type (engine.py allreduce_bucket).
  p.buckets = p.stage == 0 && p.runtime == RuntimeKind::deepspeed
                  ? make_fallback_buckets(p, p.bf16_optimizer ? std::numeric_limits<Elements>::max()
                                                              : kAllreduceFallbackBucket)
                  : make_buckets(p, p.stage == 0 ? kAllreduceFallbackBucket : z.reduce_bucket_size);
  if ((p.stage == 1 || p.stage == 2 || p.bf16_optimizer) && p.dp > 1 && p.runtime == RuntimeKind::deepspeed) {
    // all_gather_dp_groups (runtime/utils.py) with torch's all_gather_into_tensor (dist.has_all_gather_into_tensor,
    // any torch DeepSpeed 0.14.5 runs on): all_gather_into_tensor_dp_groups, one all-gather of the whole flat buffer
    // per parameter group, whatever allgather_bucket_size says.
    p.allgather_chunks.push_back(p.param_partition);
  } else if ((p.stage == 1 || p.stage == 2) && p.dp > 1) {
    // zrun: all_gather_dp_groups' other path: max(1, partition x N // allgather_bucket_size) shards of each
    // rank's partition, each shard's size rounded down to the alignment factor 2, the last taking the rest;
    // one all-gather per shard (of N x shard elements). With one rank there is nothing to gather.
    const Elements P = p.param_partition;
    const Elements shards = std::max<Elements>(1, P * p.dp / std::max<Elements>(1, z.allgather_bucket_size));
    Elements shard = P / shards;
    shard -= shard % 2;
    if (shard <= 0) shard = P;
    for (Elements at = 0, k = 0; at < P; ++k) {
      const Elements n = k + 1 == shards || at + shard > P ? P - at : shard;
      p.allgather_chunks.push_back(n);  // per rank
      at += n;
    }
  }
  p.sub_groups = split(p.optimizer_partition, p.stage == 3 ? z.sub_group_size : p.optimizer_partition);
  p.nvme_params_from = p.optimizer_partition;
  if (p.param_device == OffloadDevice::nvme) {
    // stage3.py _create_param_groups_fp16_flat_cpu_memory: one CPU flat buffer of min(partition, max_in_cpu)
    // elements; _create_fp16_partitions_with_defragmentation gives a sub-group a slice of it when
    // `flat_offset + total_elements <= buffer.numel()`, else None (its parameters stay on NVMe). A prefix of the
    // sub-groups, then.
    Elements in_cpu = 0;
    for (Elements sub : p.sub_groups) {
      if (in_cpu + sub > z.offload_param.max_in_cpu) break;
      in_cpu += sub;
    }
    p.nvme_params_from = in_cpu;
  }
  if (p.param_device == OffloadDevice::nvme) {
    p.param_swap_buffers = z.offload_param.buffer_count;
    p.param_swap_buffer_elements = swap_io_aligned(z.offload_param.buffer_size, p.elem_bytes);
    check_swap_buffer_size(p, z);
  }
  if (p.stage == 3 && p.optimizer_device == OffloadDevice::nvme) {
    p.optimizer_swap_buffers = z.offload_optimizer.buffer_count;
    p.optimizer_swap_buffer_elements =
        swap_io_aligned(*std::max_element(p.sub_groups.begin(), p.sub_groups.end()), 4);
    // partitioned_optimizer_swapper.py swap_in_optimizer_state: `len(swap_info.tensors) + 1` buffers (the fp32
    // master and each state tensor: Adam's exp_avg and exp_avg_sq, 4 bytes a parameter each; and the gradients),
    // else `assert pinned_buffers is not None`.
    const int kNeeded = static_cast<int>(p.optimizer_bytes_per_param / 4) + 1;
    if (p.optimizer_swap_buffers < kNeeded)
      throw std::invalid_argument(
          "offload_optimizer.buffer_count " + std::to_string(p.optimizer_swap_buffers) + " is too few: DeepSpeed's "
          "optimizer swapper takes " + std::to_string(kNeeded) + " pinned buffers for each sub-group's swap-in (its "
          "fp32 master, exp_avg, exp_avg_sq and gradients: partitioned_optimizer_swapper.py swap_in_optimizer_state "
          "asserts 'pinned_buffers is not None'); set offload_optimizer.buffer_count >= " + std::to_string(kNeeded));
  }
}

}  // namespace

Plan make_plan(const Scenario& s) {
  Plan p;
  plan_groups(s, p);
  plan_units(s, p);
  plan_partitions(s, p);
  plan_placement(s, p);
  plan_warnings(s, p);
  plan_buckets_and_swaps(s, p);
  std::optional<SwapStall> stall;
  p.trace = make_trace(p, s.zero, stall);
  if (stall) throw std::invalid_argument(swap_stall_message(p, s.zero, *stall));
  return p;
}

}  // namespace zsim
