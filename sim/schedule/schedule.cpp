#include "sim/schedule/schedule.hpp"

#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>

namespace zsim {

int Schedule::stream(const std::string& name) {
  for (size_t i = 0; i < streams.size(); ++i)
    if (streams[i] == name) return static_cast<int>(i);
  streams.push_back(name);
  return static_cast<int>(streams.size() - 1);
}

int Schedule::group(const ProcessGroup& g) {
  for (size_t i = 0; i < groups.size(); ++i)
    if (groups[i].name == g.name) return static_cast<int>(i);
  groups.push_back(g);
  return static_cast<int>(groups.size() - 1);
}

OpId Schedule::add(Op op) {
  op.id = static_cast<OpId>(ops.size());
  ops.push_back(std::move(op));
  return ops.back().id;
}

namespace {

// A buffer use must name an alloc op whose buffer is live at `op`, and a range and tensor that exist.
template <class Live, class Fail>
void check_use(const Schedule& s, const Op& op, const BufferUse& u, const Live& live, const Fail& fail) {
  if (u.alloc < 0 || u.alloc >= op.id || s.ops[u.alloc].kind != OpKind::alloc)
    fail(op, "uses op " + std::to_string(u.alloc) + ", which is not an earlier alloc");
  const MemOp& m = s.ops[u.alloc].mem;
  auto it = live.find(m.buffer);
  if (it == live.end() || it->second != &s.ops[u.alloc])
    fail(op, "uses buffer '" + m.buffer + "' (alloc op " + std::to_string(u.alloc) + "), which is not live here");
  // The last rank's range (rank_stride) must fit too.
  const int group = op.kind == OpKind::collective ? op.collective.group : op.kind == OpKind::copy ? op.copy.group : -1;
  const int ranks = group >= 0 ? s.groups[group].size : s.meta.world_size;
  const Bytes last = u.offset + static_cast<Bytes>(ranks - 1) * u.rank_stride +
                     static_cast<Bytes>(u.blocks - 1) * u.block_stride;
  if (u.blocks < 1 || u.block_stride < 0) fail(op, "a use has fewer than one block or a negative block stride");
  if (u.offset < 0 || u.bytes < 0 || u.rank_stride < 0 || last + u.bytes > m.bytes)
    fail(op, "uses bytes [" + std::to_string(last) + ", " + std::to_string(last + u.bytes) + ") of buffer '" +
                 m.buffer + "', which holds " + std::to_string(m.bytes));
  if (u.unit < -1 || u.unit >= static_cast<int>(s.model.units.size())) fail(op, "a use names a bad unit index");
  if (u.tensor < -1 || (u.tensor >= 0 && (u.unit < 0 || u.tensor >= static_cast<int>(s.model.units[u.unit].tensors.size()))))
    fail(op, "a use names a bad tensor index");
}

}  // namespace

void check_schedule(const Schedule& s) {
  auto fail = [](const Op& op, const std::string& why) {
    throw std::logic_error("schedule op " + std::to_string(op.id) + " '" + op.name + "': " + why);
  };
  // Live allocs by buffer name; the views point into s.ops, which outlives the map.
  std::unordered_map<std::string_view, const Op*> live;
  for (size_t i = 0; i < s.ops.size(); ++i) {
    const Op& op = s.ops[i];
    if (op.id != static_cast<OpId>(i)) fail(op, "id is not its index " + std::to_string(i));
    if (op.stream < 0 || op.stream >= static_cast<int>(s.streams.size())) fail(op, "bad stream index");
    for (OpId d : op.deps)
      if (d < 0 || d >= op.id) fail(op, "dependency " + std::to_string(d) + " is not an earlier op");
    if (op.kind == OpKind::collective) {
      const int g = op.collective.group;
      if (g < 0 || g >= static_cast<int>(s.groups.size())) fail(op, "bad group index");
      if (op.collective.scale_bytes > op.collective.bytes) fail(op, "scale bytes exceed total bytes");
      const bool reduce = op.collective.what == CollectiveKind::reduce;
      if (reduce && (op.collective.root < 0 || op.collective.root >= s.groups[g].size))
        fail(op, "reduce root " + std::to_string(op.collective.root) + " is not a rank of its group");
      if (!reduce && op.collective.root != -1) fail(op, "only a reduce has a root");
    }
    if (op.unit < -1 || op.unit >= static_cast<int>(s.model.units.size())) fail(op, "bad unit index");
    if (op.kind == OpKind::copy && (op.copy.rank < -1 || op.copy.rank >= s.meta.world_size))
      fail(op, "copy rank " + std::to_string(op.copy.rank) + " is not a rank of the world");
    if (op.kind == OpKind::copy && (op.copy.group < -1 || op.copy.group >= static_cast<int>(s.groups.size())))
      fail(op, "bad group index");
    for (const BufferUse& u : op.uses) check_use(s, op, u, live, fail);
    if (op.kind == OpKind::alloc) {
      if (op.mem.bytes < 0) fail(op, "negative allocation");
      if (!live.emplace(op.mem.buffer, &op).second) fail(op, "buffer '" + op.mem.buffer + "' allocated twice");
    }
    if (op.kind == OpKind::free) {
      auto it = live.find(op.mem.buffer);
      if (it == live.end()) fail(op, "frees buffer '" + op.mem.buffer + "' that is not allocated");
      if (it->second->mem.tier != op.mem.tier || it->second->mem.bytes != op.mem.bytes)
        fail(op, "free of '" + op.mem.buffer + "' does not match its alloc (tier or bytes)");
      live.erase(it);
    }
  }
}

const char* to_string(OpKind k) {
  switch (k) {
    case OpKind::compute: return "compute";
    case OpKind::collective: return "collective";
    case OpKind::copy: return "copy";
    case OpKind::alloc: return "alloc";
    case OpKind::free: return "free";
  }
  return "?";
}
const char* to_string(Phase p) {
  switch (p) {
    case Phase::init: return "init";
    case Phase::forward: return "forward";
    case Phase::backward: return "backward";
    case Phase::step: return "step";
  }
  return "?";
}
const char* to_string(ComputeKind k) {
  switch (k) {
    case ComputeKind::forward: return "forward";
    case ComputeKind::backward: return "backward";
    case ComputeKind::recompute: return "recompute";
    case ComputeKind::optimizer: return "optimizer";
    case ComputeKind::quantize: return "quantize";
    case ComputeKind::dequantize: return "dequantize";
    case ComputeKind::dequant_reduce: return "dequant_reduce";
  }
  return "?";
}
const char* to_string(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::all_gather: return "all_gather";
    case CollectiveKind::reduce_scatter: return "reduce_scatter";
    case CollectiveKind::all_reduce: return "all_reduce";
    case CollectiveKind::all_to_all: return "all_to_all";
    case CollectiveKind::broadcast: return "broadcast";
    case CollectiveKind::reduce: return "reduce";
  }
  return "?";
}
const char* to_string(CopyKind k) {
  switch (k) {
    case CopyKind::h2d: return "h2d";
    case CopyKind::d2h: return "d2h";
    case CopyKind::nvme_read: return "nvme_read";
    case CopyKind::nvme_write: return "nvme_write";
    case CopyKind::d2d: return "d2d";
  }
  return "?";
}
const char* to_string(Device d) { return d == Device::gpu ? "gpu" : "cpu"; }
const char* to_string(Tier t) {
  switch (t) {
    case Tier::gpu: return "gpu";
    case Tier::cpu: return "cpu";
    case Tier::nvme: return "nvme";
  }
  return "?";
}
const char* to_string(MemCategory c) {
  switch (c) {
    case MemCategory::params: return "params";
    case MemCategory::grads: return "grads";
    case MemCategory::optimizer: return "optimizer";
    case MemCategory::activations: return "activations";
    case MemCategory::buffers: return "buffers";
  }
  return "?";
}
const char* to_string(DType d) {
  switch (d) {
    case DType::fp32: return "fp32";
    case DType::bf16: return "bf16";
    case DType::fp16: return "fp16";
    case DType::int8: return "int8";
    case DType::int4: return "int4";
    case DType::fp64: return "fp64";
  }
  return "?";
}
const char* to_string(Access a) {
  switch (a) {
    case Access::read: return "read";
    case Access::write: return "write";
    case Access::read_write: return "read_write";
  }
  return "?";
}
const char* to_string(Role r) {
  switch (r) {
    case Role::param: return "param";
    case Role::grad: return "grad";
    case Role::activation: return "activation";
    case Role::input: return "input";
    case Role::output: return "output";
    case Role::state: return "state";
  }
  return "?";
}
Bytes dtype_bits(DType d) {
  switch (d) {
    case DType::fp32: return 32;
    case DType::bf16:
    case DType::fp16: return 16;
    case DType::int8: return 8;
    case DType::int4: return 4;
    case DType::fp64: return 64;
  }
  return 0;
}

}  // namespace zsim
