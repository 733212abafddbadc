#include "sim/report/memory_walk.hpp"

#include <array>
#include <stdexcept>
#include <string_view>
#include <unordered_map>

namespace zsim {

Bytes MemoryBreakdown::of(MemCategory c) const {
  switch (c) {
    case MemCategory::params: return params;
    case MemCategory::grads: return grads;
    case MemCategory::optimizer: return optimizer;
    case MemCategory::activations: return activations;
    case MemCategory::buffers: return buffers;
  }
  return 0;
}

void MemoryBreakdown::add(MemCategory c, const std::string& detail, Bytes bytes) {
  switch (c) {
    case MemCategory::params: params += bytes; break;
    case MemCategory::grads: grads += bytes; break;
    case MemCategory::optimizer: optimizer += bytes; break;
    case MemCategory::activations: activations += bytes; break;
    case MemCategory::buffers: {
      buffers += bytes;
      const std::string key = detail.empty() ? "other" : detail;
      Bytes& d = buffer_detail[key];
      d += bytes;
      if (d == 0) buffer_detail.erase(key);
      break;
    }
  }
}

MemoryCapacity capacity_of(const Scenario& s) {
  return {s.cluster.gpu.hbm_bytes, s.cluster.host.memory_bytes, s.cluster.nvme.bytes};
}

const TierMemory& MemoryWalk::tier(Tier t) const {
  switch (t) {
    case Tier::gpu: return gpu;
    case Tier::cpu: return cpu;
    case Tier::nvme: return nvme;
  }
  return gpu;
}

namespace {

constexpr std::array<Tier, 3> kTiers = {Tier::gpu, Tier::cpu, Tier::nvme};

// Replays allocs/frees; calls visit(op) after applying each op, with live[tier] up to date.
class Replayer {
 public:
  explicit Replayer(const Schedule& s) : s_(s), scale_(s.meta.gpus_per_node < 1 ? 1 : s.meta.gpus_per_node) {}

  template <class Visit>
  void run(OpId last, Visit&& visit) {
    for (const Op& op : s_.ops) {
      if (op.id > last) break;
      if (op.kind == OpKind::alloc) apply_alloc(op);
      if (op.kind == OpKind::free) apply_free(op);
      visit(op);
    }
  }
  const MemoryBreakdown& live(Tier t) const { return live_[static_cast<int>(t)]; }

 private:
  // GPU bytes are per GPU; CPU/NVMe per node: every rank of the node holds its own copy.
  Bytes scaled(const MemOp& m) const { return m.tier == Tier::gpu ? m.bytes : m.bytes * scale_; }

  void apply_alloc(const Op& op) {
    if (!allocs_.emplace(op.mem.buffer, &op.mem).second)
      throw std::logic_error("memory walk: op " + std::to_string(op.id) + " allocates live buffer '" +
                             op.mem.buffer + "' again");
    live_[static_cast<int>(op.mem.tier)].add(op.mem.category, op.mem.detail, scaled(op.mem));
  }
  void apply_free(const Op& op) {
    auto it = allocs_.find(op.mem.buffer);
    if (it == allocs_.end())
      throw std::logic_error("memory walk: op " + std::to_string(op.id) + " frees buffer '" + op.mem.buffer +
                             "' that is not allocated");
    const MemOp& a = *it->second;  // the alloc's record decides what is released
    live_[static_cast<int>(a.tier)].add(a.category, a.detail, -scaled(a));
    allocs_.erase(it);
  }

  const Schedule& s_;
  Bytes scale_;
  std::unordered_map<std::string_view, const MemOp*> allocs_;  // keys view the allocs' names in s_
  std::array<MemoryBreakdown, 3> live_;
};

TierMemory& tier_of(MemoryWalk& w, Tier t) {
  return t == Tier::gpu ? w.gpu : t == Tier::cpu ? w.cpu : w.nvme;
}

Bytes capacity_for(const MemoryCapacity& c, Tier t) {
  return t == Tier::gpu ? c.gpu : t == Tier::cpu ? c.cpu : c.nvme;
}

}  // namespace

MemoryWalk walk_memory(const Schedule& s, const MemoryCapacity& capacity) {
  MemoryWalk w;
  for (Tier t : kTiers) tier_of(w, t).capacity = capacity_for(capacity, t);
  Replayer r(s);
  r.run(static_cast<OpId>(s.ops.size()), [&](const Op& op) {
    if (op.kind != OpKind::alloc && op.kind != OpKind::free) return;
    for (Tier t : kTiers) {
      TierMemory& tm = tier_of(w, t);
      const MemoryBreakdown& live = r.live(t);
      const Bytes now = live.total();
      if (now > tm.peak) {
        tm.peak = now;
        tm.peak_op = op.id;
        tm.peak_op_name = op.name;
        tm.at_peak = live;
      }
      if (!w.first_overflow && now > tm.capacity)
        w.first_overflow = MemoryOverflow{t, op.id, op.name, now, tm.capacity, now - tm.capacity};
    }
  });
  for (Tier t : kTiers) tier_of(w, t).at_end = r.live(t);
  return w;
}

MemoryBreakdown live_after(const Schedule& s, OpId after, Tier tier) {
  if (after < 0 || after >= static_cast<OpId>(s.ops.size()))
    throw std::out_of_range("live_after: no op " + std::to_string(after));
  Replayer r(s);
  r.run(after, [](const Op&) {});
  return r.live(tier);
}

std::map<MemCategory, Bytes> category_peaks(const Schedule& s, Tier tier) {
  std::map<MemCategory, Bytes> live, peak;
  for (const Op& op : s.ops)
    if ((op.kind == OpKind::alloc || op.kind == OpKind::free) && op.mem.tier == tier) {
      Bytes& l = live[op.mem.category];
      l += op.kind == OpKind::alloc ? op.mem.bytes : -op.mem.bytes;
      peak[op.mem.category] = std::max(peak[op.mem.category], l);
    }
  return peak;
}

}  // namespace zsim
