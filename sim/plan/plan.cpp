#include "sim/plan/plan.hpp"

#include <algorithm>
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

FetchUnit make_unit(std::string name, int layer, const ModuleShapes& m, const Scenario& s, int dp) {
  FetchUnit u;
  u.name = std::move(name);
  u.layer = layer;
  u.tensors = m.tensors;
  for (const auto& t : m.tensors) {
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

// Units gathered for a use of `unit`: the unit itself, plus the embedding for a tied head.
std::vector<int> fetch_units(const Plan& p, int unit) {
  std::vector<int> f{unit};
  if (p.tied_head && unit == static_cast<int>(p.units.size()) - 1) f.push_back(0);
  return f;
}

// The stage-3 fetch trace of one micro-step: forward over the units, then backward in reverse.
// Prefetch: after the blocking fetches of a use, gather the next uses' units while the gathered
// elements ahead of this use stay within stage3_prefetch_bucket_size and everything gathered within
// stage3_max_live_parameters. Release after a use unless the unit's next use comes within fewer than
// stage3_max_reuse_distance elements of parameters traversed in between (DeepSpeed's
// PartitionedParameterCoordinator.__params_to_release; 0 disables reuse).
std::vector<FetchStep> make_trace(const Plan& p, const ZeroConfig& z) {
  const int n = static_cast<int>(p.units.size());
  std::vector<FetchStep> trace;
  for (int u = 0; u < n; ++u) trace.push_back({u, Phase::forward, {}, {}, {}});
  for (int u = n - 1; u >= 0; --u) trace.push_back({u, Phase::backward, {}, {}, {}});
  std::vector<std::vector<int>> needs(trace.size());
  for (size_t i = 0; i < trace.size(); ++i) needs[i] = fetch_units(p, trace[i].unit);

  std::set<int> live;
  Elements live_elems = 0;
  auto gather = [&](int u) {
    live.insert(u);
    live_elems += p.units[u].gathered;
  };
  const Elements keep_window = z.stage3_max_reuse_distance;
  for (size_t i = 0; i < trace.size(); ++i) {
    FetchStep& st = trace[i];
    for (int u : needs[i])
      if (p.units[u].gathered > 0 && !live.count(u)) {
        st.fetch.push_back(u);
        gather(u);
      }
    Elements ahead = 0;
    bool stop = z.stage3_prefetch_bucket_size <= 0;
    for (size_t j = i + 1; j < trace.size() && !stop; ++j) {
      for (int u : needs[j]) {
        if (p.units[u].gathered == 0) continue;
        const Elements e = p.units[u].gathered;
        const bool current = std::find(needs[i].begin(), needs[i].end(), u) != needs[i].end();
        if (live.count(u)) {  // already gathered: counts towards the look-ahead window
          if (!current) ahead += e;
          continue;
        }
        if (ahead + e > z.stage3_prefetch_bucket_size || live_elems + e > z.stage3_max_live_parameters) {
          stop = true;
          break;
        }
        ahead += e;
        st.prefetch.push_back(u);
        gather(u);
      }
    }
    for (int u : needs[i]) {
      if (!live.count(u)) continue;
      Elements distance = 0;
      bool reused = false;
      for (size_t k = i + 1; k < trace.size() && distance < keep_window; ++k) {
        const auto& nk = needs[k];
        if (std::find(nk.begin(), nk.end(), u) != nk.end()) {
          reused = true;
          break;
        }
        for (int v : nk) distance += p.units[v].gathered;
      }
      if (!(reused && distance < keep_window)) {
        st.release.push_back(u);
        live.erase(u);
        live_elems -= p.units[u].gathered;
      }
    }
  }
  return trace;
}

std::vector<GradBucket> make_buckets(const Plan& p, Elements bucket_size) {
  std::vector<GradBucket> out;
  GradBucket cur;
  for (int u = static_cast<int>(p.units.size()) - 1; u >= 0; --u) {
    const auto& ts = p.units[u].tensors;
    for (auto it = ts.rbegin(); it != ts.rend(); ++it) {
      const Elements n = it->numel();
      if (cur.elements > 0 && cur.elements + n > bucket_size) {
        out.push_back(std::move(cur));
        cur = GradBucket{};
      }
      if (cur.elements == 0) cur.opens_at = u;
      if (cur.elements == 0 || cur.closes_after != u) cur.closing_elements = 0;
      cur.elements += n;
      cur.closing_elements += n;
      cur.tensors.push_back(*it);
      cur.closes_after = u;
    }
  }
  if (cur.elements > 0) out.push_back(std::move(cur));
  return out;
}

std::vector<Elements> split(Elements total, Elements chunk) {
  std::vector<Elements> out;
  if (total <= 0) return out;
  chunk = std::max<Elements>(chunk, 1);
  for (Elements done = 0; done < total; done += chunk) out.push_back(std::min(chunk, total - done));
  return out;
}

}  // namespace

Plan make_plan(const Scenario& s) {
  const ZeroConfig& z = s.zero;
  Plan p;
  p.stage = z.stage;
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
  p.world = {"world", p.dp, p.gpus_per_node, 1};
  p.hpz = {"hpz", hpz, hpz, 1};
  p.intra_node = {"intra_node", p.gpus_per_node, p.gpus_per_node, 1};
  p.inter_node = {"inter_node", p.nodes, 1, p.gpus_per_node};

  p.shapes = model_shapes(s.model);
  p.activations = activation_bytes(s.model, s.training);
  p.params = p.shapes.total_params();
  p.largest_module_params = p.shapes.largest_module_params();
  p.tied_head = p.shapes.tied_head;

  p.units.push_back(make_unit("embedding", -1, p.shapes.embedding, s, p.dp));
  for (int l = 0; l < p.shapes.layers; ++l)
    p.units.push_back(make_unit("L" + std::to_string(l), l, p.shapes.layer, s, p.dp));
  p.units.push_back(make_unit("head", -1, p.shapes.head, s, p.dp));

  switch (p.stage) {
    case 0:
      p.param_partition = p.params;
      p.optimizer_partition = p.params;
      break;
    case 1:
    case 2:
      p.param_partition = ceil_div(p.params, p.dp);
      p.optimizer_partition = p.param_partition;
      break;
    case 3:
      for (const auto& u : p.units) {
        p.param_partition += u.partition;
        p.persistent_params += u.persistent;
        for (const auto& t : u.tensors) p.optimizer_partition += ceil_div(t.numel(), p.dp);
      }
      break;
  }

  p.overlap_comm = z.overlap_comm;
  p.reduce_scatter = z.reduce_scatter;
  p.optimizer_device = p.stage == 0 ? OffloadDevice::none : z.offload_optimizer.device;
  p.param_device = p.stage == 3 ? z.offload_param.device : OffloadDevice::none;
  p.optimizer_bytes_per_param =
      s.training.precision == Precision::fp32 && p.optimizer_device == OffloadDevice::none ? 8 : 12;
  if (p.stage == 3) {
    p.qwz = z.zero_quantized_weights;
    p.hpz_enabled = hpz > 1;
    p.qgz = z.zero_quantized_gradients && p.nodes > 1;  // DeepSpeed's all-to-all path needs > 1 node
    p.loco = p.qgz && z.zeropp_loco_param.enabled;
    p.sequential_allgather = z.stage3_allgather_sequential;
  }

  // Stage 0 uses DeepSpeed's buffered all-reduce fallback (MEMORY_OPT_ALLREDUCE_SIZE elements per
  // buffer), the other stages reduce_bucket_size.
  p.buckets = make_buckets(p, p.stage == 0 ? kAllreduceFallbackBucket : z.reduce_bucket_size);
  if (p.stage == 1 || p.stage == 2) p.allgather_chunks = split(p.param_partition * p.dp, z.allgather_bucket_size);
  p.sub_groups = split(p.optimizer_partition, p.stage == 3 ? z.sub_group_size : p.optimizer_partition);
  if (p.stage == 3) p.trace = make_trace(p, z);
  return p;
}

}  // namespace zsim
