#include "sim/plan/deepspeed_fetch.hpp"

#include <algorithm>
#include <deque>
#include <set>
#include <stdexcept>
#include <string>

#include "sim/plan/plan.hpp"

namespace zsim {

namespace {

// One call of DeepSpeed's hooks into the coordinator: fetch_sub_module or release_sub_module of one module.
struct Hook {
  bool fetch = true;       // fetch_sub_module, else release_sub_module
  int key = -1;            // the module (ds_active_sub_modules): its first unit, -1 for a module without parameters
  std::vector<int> units;  // its parameters, as units (a tied head: the embedding's)
  size_t step = 0;         // the trace step whose actions (or, a release, whose release list) it joins
  bool early = false;      // a release before its step's compute (a checkpointed layer's recompute)
};

// "L3.attn.q" -> "attn.q"; units outside the layers keep their name.
std::string local_name(const FetchUnit& u) {
  if (u.layer < 0) return u.name;
  const size_t dot = u.name.find('.');
  return dot == std::string::npos ? u.name : u.name.substr(dot + 1);
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// The units a use of unit u needs (make_trace's fetch_units): a tied head needs the embedding.
std::vector<int> params_of(const Plan& p, int u) {
  if (p.units[u].is_head && p.tied_head) return {0};
  return {u};
}

// The hooks of one micro-step, in the order they fire, each joined to the trace step it precedes (fetch) or
// follows (release).
std::vector<Hook> hooks_of(const Plan& p, const std::vector<FetchStep>& trace) {
  const int n = static_cast<int>(p.units.size());
  std::vector<size_t> bwd_step(n, 0), rc_step(p.layers.size(), 0);
  for (size_t i = static_cast<size_t>(n); i < trace.size(); ++i) {
    if (trace[i].recompute) rc_step[trace[i].layer] = i;
    else bwd_step[trace[i].unit] = i;
  }
  std::vector<Hook> h;
  auto paramless = [&](size_t step) { h.push_back({true, -1, {}, step, false}); };
  auto fetch = [&](size_t step, int u) { h.push_back({true, u, params_of(p, u), step, false}); };
  auto release = [&](size_t step, int u, bool early) { h.push_back({false, u, params_of(p, u), step, early}); };
  // The MLP's activation module (SiLU between gate_proj and up_proj; GELU between c_fc and c_proj) runs before unit u.
  auto activation_before = [&](int u) {
    if (u == 0 || p.units[u].layer < 0 || p.units[u - 1].layer != p.units[u].layer) return false;
    const std::string m = local_name(p.units[u]), prev = local_name(p.units[u - 1]);
    bool gated = false;
    for (int v = p.layers[p.units[u].layer].first; v <= p.layers[p.units[u].layer].last; ++v)
      gated |= local_name(p.units[v]) == "mlp.gate";
    return gated ? m == "mlp.up" && prev == "mlp.gate" : m == "mlp.down" && prev == "mlp.up";
  };
  // A layer's forward (or its recompute): the decoder layer, its attention and MLP containers and the activation
  // take hooks of their own; a recompute stops in its last module's forward (torch's early stop), whose post-forward
  // hook never fires.
  auto layer_forward = [&](int l, bool recompute) {
    const LayerUnits lu = p.layers[l];
    auto step = [&](int u) { return recompute ? rc_step[l] : static_cast<size_t>(u); };
    paramless(step(lu.first));
    bool attn = false, mlp = false;
    for (int u = lu.first; u <= lu.last; ++u) {
      const std::string m = local_name(p.units[u]);
      if (!attn && starts_with(m, "attn.") && m != "attn.norm") paramless(step(u)), attn = true;
      if (!mlp && starts_with(m, "mlp.") && m != "mlp.norm") paramless(step(u)), mlp = true;
      if (activation_before(u)) paramless(step(u));
      fetch(step(u), u);
      if (!(recompute && u == lu.last)) release(step(u), u, recompute);
    }
  };
  // Forward: the model and its base model, the embedding, the rotary embedding (or the embeddings' dropout), the
  // layers, the final norm, the head.
  paramless(0);
  paramless(0);
  for (int u = 0; u < n; ++u) {
    const int l = p.units[u].layer;
    if (l >= 0) {
      layer_forward(l, false);
      u = p.layers[l].last;
      continue;
    }
    fetch(static_cast<size_t>(u), u);
    release(static_cast<size_t>(u), u, false);
    if (u == 0 && n > 1) paramless(1);
  }
  // Backward: the model (its loss), the head, the base model, the final norm, the layers in reverse, the embedding.
  for (int u = n - 1; u >= 0; --u) {
    const int l = p.units[u].layer;
    if (u == n - 1) paramless(bwd_step[u]);
    if (l < 0 && u > 0) {
      fetch(bwd_step[u], u);
      release(bwd_step[u], u, false);
      if (u == n - 1 && bwd_step[u] + 1 < trace.size()) paramless(bwd_step[u] + 1);
      continue;
    }
    if (l < 0) {  // the embedding: no post-backward hook (its input, the token ids, needs no gradient)
      fetch(bwd_step[u], u);
      continue;
    }
    const LayerUnits lu = p.layers[l];
    const size_t first = p.checkpointing ? rc_step[l] : bwd_step[lu.last];
    paramless(first);  // the decoder layer
    paramless(first);  // its MLP
    fetch(first, lu.last);
    if (p.checkpointing) layer_forward(l, true);
    release(bwd_step[lu.last], lu.last, false);
    bool attn = false;
    for (int v = lu.last - 1; v >= lu.first; --v) {
      const std::string m = local_name(p.units[v]);
      if (activation_before(v + 1)) paramless(bwd_step[v]);
      if (!attn && starts_with(m, "attn.") && m != "attn.norm") paramless(bwd_step[v]), attn = true;
      fetch(bwd_step[v], v);
      release(bwd_step[v], v, false);
    }
    u = lu.first;
  }
  return h;
}

struct Outcome {
  std::vector<std::vector<FetchAction>> actions;
  std::vector<std::vector<int>> release;
  Elements left_gathered = 0;  // numel still gathered after the backward
};

// One micro-step of the coordinator from __n_available_params = `start`.
Outcome simulate(const Plan& p, const ZeroConfig& z, const std::vector<Hook>& hooks, size_t steps, Elements start) {
  const int n = static_cast<int>(p.units.size());
  Outcome out;
  out.actions.resize(steps);
  out.release.resize(steps);
  std::vector<const Hook*> order;  // the recorded trace: __submodule_order
  for (const Hook& h : hooks)
    if (h.fetch) order.push_back(&h);
  std::deque<std::pair<int, long long>> queue;  // __param_queue: (unit, step_id_last_used_at)
  for (size_t s = 0; s < order.size(); ++s)
    for (int u : order[s]->units) queue.push_back({u, static_cast<long long>(s)});
  std::vector<long long> most_recent(n, -10'000'000'000LL);  // __most_recent_step_id_param_fetched_for
  std::vector<char> gathered(n, 0);                          // INFLIGHT or AVAILABLE (persistent ones aside)
  std::vector<std::set<int>> active(n);                      // ds_active_sub_modules (module ids: a set)
  Elements available = start;                                // __n_available_params
  long long step_id = 0;
  auto partitioned = [&](int u) { return p.units[u].gathered > 0; };
  auto gather = [&](std::vector<int> us, size_t step, bool prefetch) {
    for (int u : us) {
      gathered[u] = 1;
      available += p.units[u].gathered;
    }
    out.actions[step].push_back({FetchAction::Kind::gather, std::move(us), prefetch});
  };
  for (const Hook& h : hooks) {
    if (h.fetch) {  // fetch_sub_module
      std::vector<int> now, wait;
      for (int u : h.units)
        if (partitioned(u)) {
          wait.push_back(u);
          if (!gathered[u]) now.push_back(u);
        }
      if (!now.empty()) gather(now, h.step, false);
      for (int u : h.units) active[u].insert(h.key);
      if (!wait.empty()) out.actions[h.step].push_back({FetchAction::Kind::wait, wait, false});
      // Pop the module's own parameters off the queue, unless a prefetch already looked at them for this step.
      std::set<int> not_fetched, discarded;
      for (int u : h.units)
        if (most_recent[u] < step_id) not_fetched.insert(u);
      while (!queue.empty() && discarded.size() < not_fetched.size()) {
        most_recent[queue.front().first] = queue.front().second;
        discarded.insert(queue.front().first);
        queue.pop_front();
      }
      if (discarded != not_fetched)
        throw std::logic_error("deepspeed_fetch_trace: the parameter queue is out of step with the hooks");
      if (z.stage3_prefetch_bucket_size > 0) {
        const Elements room = std::min(z.stage3_max_live_parameters - available, z.stage3_prefetch_bucket_size);
        std::vector<int> batch;
        Elements taken = 0;
        while (!queue.empty() && taken < room) {
          const auto [u, s] = queue.front();
          queue.pop_front();
          const bool take =
              partitioned(u) && !gathered[u] && std::find(batch.begin(), batch.end(), u) == batch.end();
          most_recent[u] = std::max(most_recent[u], s);
          if (take) {
            batch.push_back(u);
            taken += p.units[u].gathered;
          }
        }
        if (taken > 0) gather(std::move(batch), h.step, true);
      }
      ++step_id;
      continue;
    }
    // release_sub_module: __params_to_release, then __release_param of each.
    std::set<int> rel;
    for (int u : h.units)
      if (partitioned(u) && most_recent[u] <= step_id) rel.insert(u);
    Elements traversed = 0;
    for (size_t s = static_cast<size_t>(step_id); s < order.size(); ++s) {
      if (traversed >= z.stage3_max_reuse_distance) break;
      for (int v : order[s]->units) {
        rel.erase(v);
        traversed += p.units[v].params;
      }
    }
    for (int u : h.units) {
      active[u].erase(h.key);
      if (!rel.count(u) || !gathered[u] || !active[u].empty()) continue;
      gathered[u] = 0;
      available -= p.units[u].gathered;
      if (h.early) out.actions[h.step].push_back({FetchAction::Kind::release, {u}, false});
      else out.release[h.step].push_back(u);
    }
  }
  // The optimizer step's release_and_reset_all frees what is still gathered (after the last backward step here).
  for (int u = 0; u < n; ++u)
    if (gathered[u]) {
      out.release[steps - 1].push_back(u);
      out.left_gathered += p.units[u].gathered;
    }
  // A release inside a recompute acts before the compute only where a later call of that step gathers the unit
  // again; otherwise it joins the step's releases after its compute (zsim's recompute is one op).
  for (size_t s = 0; s < steps; ++s) {
    std::vector<FetchAction>& a = out.actions[s];
    for (size_t i = 0; i < a.size();) {
      if (a[i].kind != FetchAction::Kind::release) {
        ++i;
        continue;
      }
      const int u = a[i].units[0];
      bool again = false;
      for (size_t j = i + 1; j < a.size(); ++j)
        again |= a[j].kind == FetchAction::Kind::gather &&
                 std::find(a[j].units.begin(), a[j].units.end(), u) != a[j].units.end();
      if (again) {
        ++i;
        continue;
      }
      out.release[s].push_back(u);
      a.erase(a.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  return out;
}

}  // namespace

void deepspeed_fetch_trace(const Plan& p, const ZeroConfig& z, std::vector<FetchStep>& trace) {
  const std::vector<Hook> hooks = hooks_of(p, trace);
  // reset_step zeroes __n_available_params after the backward; release_and_reset_all then subtracts every parameter
  // still available, the persistent ones included: the next micro-step starts there.
  Elements start = 0;
  Outcome o = simulate(p, z, hooks, trace.size(), start);
  for (int i = 0; i < 16; ++i) {
    const Elements next = -o.left_gathered - p.persistent_params;
    if (next == start) break;
    start = next;
    o = simulate(p, z, hooks, trace.size(), start);
  }
  for (size_t s = 0; s < trace.size(); ++s) {
    trace[s].fetch.clear();
    trace[s].prefetch.clear();
    trace[s].prefetch_phase.clear();
    trace[s].actions = std::move(o.actions[s]);
    trace[s].release = std::move(o.release[s]);
  }
}

}  // namespace zsim
