#include "sim/schedule/schedule_json.hpp"

#include <array>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string_view>

#include <nlohmann/json.hpp>

#include "sim/common/atomic_file.hpp"
#include "sim/common/error.hpp"

namespace zsim {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

// ---- enums <-> strings -------------------------------------------------------------------------

template <class E, size_t N>
struct EnumNames {
  std::array<E, N> values;
};
constexpr EnumNames<OpKind, 5> kOpKinds{{OpKind::compute, OpKind::collective, OpKind::copy, OpKind::alloc,
                                         OpKind::free}};
constexpr EnumNames<Phase, 4> kPhases{{Phase::init, Phase::forward, Phase::backward, Phase::step}};
constexpr EnumNames<ComputeKind, 7> kComputeKinds{{ComputeKind::forward, ComputeKind::backward,
                                                   ComputeKind::recompute, ComputeKind::optimizer,
                                                   ComputeKind::quantize, ComputeKind::dequantize,
                                                   ComputeKind::dequant_reduce}};
constexpr EnumNames<CollectiveKind, 6> kCollectiveKinds{{CollectiveKind::all_gather, CollectiveKind::reduce_scatter,
                                                         CollectiveKind::all_reduce, CollectiveKind::all_to_all,
                                                         CollectiveKind::broadcast, CollectiveKind::reduce}};
constexpr EnumNames<CopyKind, 5> kCopyKinds{{CopyKind::h2d, CopyKind::d2h, CopyKind::nvme_read,
                                             CopyKind::nvme_write, CopyKind::d2d}};
constexpr EnumNames<Device, 2> kDevices{{Device::gpu, Device::cpu}};
constexpr EnumNames<Tier, 3> kTiers{{Tier::gpu, Tier::cpu, Tier::nvme}};
constexpr EnumNames<MemCategory, 5> kCategories{{MemCategory::params, MemCategory::grads, MemCategory::optimizer,
                                                 MemCategory::activations, MemCategory::buffers}};
constexpr EnumNames<DType, 6> kDTypes{{DType::fp32, DType::bf16, DType::fp16, DType::int8, DType::int4, DType::fp64}};
bool is_quantization(ComputeKind k) {
  return k == ComputeKind::quantize || k == ComputeKind::dequantize || k == ComputeKind::dequant_reduce;
}
constexpr EnumNames<Access, 3> kAccesses{{Access::read, Access::write, Access::read_write}};
constexpr EnumNames<Role, 6> kRoles{{Role::param, Role::grad, Role::activation, Role::input, Role::output,
                                     Role::state}};

// ---- reading with JSON paths --------------------------------------------------------------------

// A JSON value and the path that leads to it; every accessor reports errors with that path. The path
// is only spelled out when an error is reported (parents must outlive their children: they are locals).
class Node {
 public:
  Node(const json& j, const std::string& source) : j_(j), src_(source) {}

  [[noreturn]] void fail(const std::string& message) const {
    throw InputError(SourceLocation{src_, 0, 0, path()}, message);
  }
  std::string path() const {
    if (!parent_) return "";
    std::string p = parent_->path();
    if (key_.data() == nullptr) return p + "[" + std::to_string(index_) + "]";
    return p.empty() ? std::string(key_) : p + "." + std::string(key_);
  }

  Node key(std::string_view k) const {
    require_object();
    auto it = j_.find(k);
    if (it == j_.end()) Node(j_, this, k, 0).fail("missing (required)");
    return Node(*it, this, k, 0);
  }
  bool has(std::string_view k) const { return j_.is_object() && j_.contains(k); }
  Node at(size_t i) const { return Node(j_.at(i), this, std::string_view(), i); }

  void require_object() const {
    if (!j_.is_object()) fail("expected an object, got " + std::string(j_.type_name()));
  }
  size_t array_size() const {
    if (!j_.is_array()) fail("expected an array, got " + std::string(j_.type_name()));
    return j_.size();
  }
  // Rejects keys other than `allowed`.
  void only_keys(std::initializer_list<std::string_view> allowed) const {
    require_object();
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      bool ok = false;
      for (std::string_view a : allowed) ok = ok || it.key() == a;
      if (!ok) Node(it.value(), this, it.key(), 0).fail("unknown key for this object");
    }
  }

  std::string str() const {
    if (!j_.is_string()) fail("expected a string, got " + std::string(j_.type_name()));
    return j_.get<std::string>();
  }
  std::int64_t integer(std::int64_t min_value) const {
    if (!j_.is_number_integer()) fail("expected an integer, got " + std::string(j_.type_name()));
    if (j_.is_number_unsigned() && j_.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
      fail("integer out of range");
    const std::int64_t v = j_.get<std::int64_t>();
    if (v < min_value) fail("must be >= " + std::to_string(min_value) + ", got " + std::to_string(v));
    return v;
  }
  int small_int(int min_value) const {
    const std::int64_t v = integer(min_value);
    if (v > INT32_MAX) fail("integer out of range");
    return static_cast<int>(v);
  }
  double number() const {
    if (!j_.is_number()) fail("expected a number, got " + std::string(j_.type_name()));
    const double v = j_.get<double>();
    if (!(v >= 0)) fail("must be a non-negative number");
    return v;
  }
  bool boolean() const {
    if (!j_.is_boolean()) fail("expected true or false, got " + std::string(j_.type_name()));
    return j_.get<bool>();
  }
  template <class E, size_t N>
  E enumerated(const EnumNames<E, N>& names) const {
    const std::string s = str();
    std::string choices;
    for (E e : names.values) {
      if (s == to_string(e)) return e;
      choices += (choices.empty() ? "" : ", ") + std::string(to_string(e));
    }
    fail("'" + s + "' is not one of: " + choices);
  }

 private:
  Node(const json& j, const Node* parent, std::string_view key, size_t index)
      : j_(j), src_(parent->src_), parent_(parent), key_(key), index_(index) {}

  const json& j_;
  const std::string& src_;
  const Node* parent_ = nullptr;
  std::string_view key_;  // data() == nullptr: an array element at index_
  size_t index_ = 0;
};

// Optional keys: the value when present, else the default.
std::int64_t opt_integer(const Node& n, const char* k, std::int64_t dflt, std::int64_t min_value) {
  return n.has(k) ? n.key(k).integer(min_value) : dflt;
}

ScheduleMeta read_meta(const Node& n) {
  n.only_keys({"scenario", "world_size", "nodes", "gpus_per_node", "params", "tokens_per_step", "steps", "framework",
               "zero_stage"});
  ScheduleMeta m;
  m.scenario = n.has("scenario") ? n.key("scenario").str() : "";
  m.world_size = n.key("world_size").small_int(1);
  m.nodes = n.key("nodes").small_int(1);
  m.gpus_per_node = n.key("gpus_per_node").small_int(1);
  m.params = opt_integer(n, "params", 0, 0);
  m.tokens_per_step = opt_integer(n, "tokens_per_step", 0, 0);
  m.steps = n.has("steps") ? n.key("steps").small_int(1) : 1;
  m.framework = n.has("framework") ? n.key("framework").str() : "";
  if (!m.framework.empty() && m.framework != "deepspeed") n.key("framework").fail("framework is \"deepspeed\" or absent (zrun)");
  m.zero_stage = n.has("zero_stage") ? static_cast<int>(n.key("zero_stage").integer(0)) : -1;
  if (m.zero_stage > 3) n.key("zero_stage").fail("zero_stage is 0-3");
  if (m.world_size != m.nodes * m.gpus_per_node)
    n.key("world_size").fail("world_size " + std::to_string(m.world_size) + " != nodes x gpus_per_node = " +
                             std::to_string(m.nodes * m.gpus_per_node));
  return m;
}

ScheduleModel read_model(const Node& n) {
  n.only_keys({"name", "model_type", "layers", "hidden", "ffn_hidden", "heads", "kv_heads", "vocab", "max_position_embeddings",
               "tie_word_embeddings", "mlp", "bias", "micro_batch", "seq_len", "grad_accum", "dtype", "checkpointing",
               "units"});
  ScheduleModel m;
  m.name = n.has("name") ? n.key("name").str() : "";
  m.model_type = n.has("model_type") ? n.key("model_type").str() : "";
  m.layers = n.key("layers").integer(0);
  m.hidden = n.key("hidden").integer(1);
  m.ffn_hidden = n.key("ffn_hidden").integer(0);
  m.heads = n.key("heads").integer(1);
  m.kv_heads = n.key("kv_heads").integer(1);
  m.vocab = n.key("vocab").integer(1);
  m.max_position_embeddings = opt_integer(n, "max_position_embeddings", 0, 0);
  m.tie_word_embeddings = n.has("tie_word_embeddings") && n.key("tie_word_embeddings").boolean();
  if (n.has("mlp")) {
    const std::string mlp = n.key("mlp").str();
    if (mlp != "gated" && mlp != "plain") n.key("mlp").fail("'" + mlp + "' is not one of: gated, plain");
    m.gated_mlp = mlp == "gated";
  }
  m.bias = n.has("bias") && n.key("bias").boolean();
  m.micro_batch = n.key("micro_batch").integer(1);
  m.seq_len = n.key("seq_len").integer(1);
  m.grad_accum = opt_integer(n, "grad_accum", 1, 1);
  m.dtype = n.key("dtype").enumerated(kDTypes);
  m.checkpointing = n.has("checkpointing") && n.key("checkpointing").boolean();
  const Node units = n.key("units");
  for (size_t i = 0, e = units.array_size(); i < e; ++i) {
    const Node u = units.at(i);
    u.only_keys({"name", "layer", "tensors", "hbm_kind", "gemm_calls"});
    ModelUnit unit;
    unit.name = u.key("name").str();
    unit.layer = u.has("layer") ? u.key("layer").small_int(-1) : -1;
    if (u.has("hbm_kind")) {
      unit.hbm_kind = u.key("hbm_kind").str();
      if (unit.hbm_kind != "copy" && unit.hbm_kind != "norm" && unit.hbm_kind != "softmax" &&
          unit.hbm_kind != "activation" && unit.hbm_kind != "cross_entropy")
        u.key("hbm_kind").fail("must be one of copy, norm, softmax, activation, cross_entropy");
    }
    if (u.has("gemm_calls")) {
      const Node g = u.key("gemm_calls");
      g.only_keys({"forward", "backward"});
      for (auto [key, list] : {std::pair{"forward", &unit.forward_gemms}, {"backward", &unit.backward_gemms}}) {
        if (!g.has(key)) continue;
        const Node calls = g.key(key);
        for (size_t k = 0, ce = calls.array_size(); k < ce; ++k) {
          const Node c = calls.at(k);
          if (c.array_size() != 5) c.fail("a GEMM call entry is [m, n, k, batch, calls]");
          list->push_back({c.at(0).integer(1), c.at(1).integer(1), c.at(2).integer(1), c.at(3).integer(1),
                           c.at(4).integer(1)});
        }
      }
    }
    const Node ts = u.key("tensors");
    for (size_t k = 0, te = ts.array_size(); k < te; ++k) {
      const Node t = ts.at(k);
      t.only_keys({"name", "rows", "cols"});
      unit.tensors.push_back({t.key("name").str(), t.key("rows").integer(1), opt_integer(t, "cols", 0, 0)});
    }
    m.units.push_back(std::move(unit));
  }
  return m;
}

// One entry of an op's `uses`: the buffer by name and by alloc id, which must agree.
BufferUse read_use(const Node& n, const std::vector<Op>& earlier) {
  n.only_keys({"buffer", "alloc", "offset", "bytes", "role", "access", "unit", "tensor", "rank_stride", "blocks",
               "block_stride"});
  BufferUse u;
  const Node alloc = n.key("alloc");
  const std::int64_t id = alloc.integer(0);
  if (id >= static_cast<std::int64_t>(earlier.size()) || earlier[id].kind != OpKind::alloc)
    alloc.fail("op " + std::to_string(id) + " is not an earlier alloc");
  u.alloc = static_cast<OpId>(id);
  const std::string buffer = n.key("buffer").str();
  if (buffer != earlier[u.alloc].mem.buffer)
    n.key("buffer").fail("'" + buffer + "' is not the buffer of alloc op " + std::to_string(u.alloc) + " ('" +
                         earlier[u.alloc].mem.buffer + "')");
  u.offset = opt_integer(n, "offset", 0, 0);
  u.bytes = n.key("bytes").integer(0);
  u.role = n.key("role").enumerated(kRoles);
  u.access = n.key("access").enumerated(kAccesses);
  u.unit = n.has("unit") ? n.key("unit").small_int(-1) : -1;
  u.tensor = n.has("tensor") ? n.key("tensor").small_int(-1) : -1;
  u.rank_stride = opt_integer(n, "rank_stride", 0, 0);
  u.blocks = n.has("blocks") ? n.key("blocks").small_int(1) : 1;
  u.block_stride = opt_integer(n, "block_stride", 0, 0);
  return u;
}

ProcessGroup read_group(const Node& n) {
  n.only_keys({"name", "size", "ranks_per_node", "stride"});
  ProcessGroup g;
  g.name = n.key("name").str();
  g.size = n.key("size").small_int(1);
  g.ranks_per_node = n.key("ranks_per_node").small_int(1);
  g.stride = n.has("stride") ? n.key("stride").small_int(1) : 1;
  if (g.size % g.ranks_per_node != 0)
    n.key("ranks_per_node").fail("group size " + std::to_string(g.size) + " is not a multiple of ranks_per_node " +
                                 std::to_string(g.ranks_per_node));
  return g;
}

// name -> index, rejecting duplicates.
std::map<std::string, int> index_names(const Node& list, const std::vector<std::string>& names) {
  std::map<std::string, int> idx;
  for (size_t i = 0; i < names.size(); ++i)
    if (!idx.emplace(names[i], static_cast<int>(i)).second)
      list.at(i).fail("duplicate name '" + names[i] + "'");
  return idx;
}

int lookup(const Node& n, const std::map<std::string, int>& idx, const char* what) {
  const std::string name = n.str();
  auto it = idx.find(name);
  if (it == idx.end()) n.fail("no " + std::string(what) + " named '" + name + "'");
  return it->second;
}

Op read_op(const Node& n, OpId expected_id, const std::map<std::string, int>& streams,
           const std::map<std::string, int>& groups, const std::vector<Op>& earlier) {
  Op op;
  const Node id = n.key("id");
  op.id = static_cast<OpId>(id.integer(0));
  if (op.id != expected_id) id.fail("op ids must equal their position; expected " + std::to_string(expected_id));
  op.kind = n.key("kind").enumerated(kOpKinds);
  op.name = n.key("name").str();
  op.phase = n.key("phase").enumerated(kPhases);
  op.stream = lookup(n.key("stream"), streams, "stream");
  op.layer = n.has("layer") ? n.key("layer").small_int(-1) : -1;
  op.micro_step = n.has("micro_step") ? n.key("micro_step").small_int(0) : 0;
  op.unit = n.has("unit") ? n.key("unit").small_int(-1) : -1;
  if (n.has("uses")) {
    const Node uses = n.key("uses");
    for (size_t i = 0, e = uses.array_size(); i < e; ++i) op.uses.push_back(read_use(uses.at(i), earlier));
  }
  if (n.has("deps")) {
    const Node deps = n.key("deps");
    for (size_t i = 0, e = deps.array_size(); i < e; ++i) {
      const Node d = deps.at(i);
      const std::int64_t v = d.integer(0);
      if (v >= op.id) d.fail("dependency " + std::to_string(v) + " is not an earlier op");
      op.deps.push_back(static_cast<OpId>(v));
    }
  }
  switch (op.kind) {
    case OpKind::compute:
      n.only_keys({"id", "kind", "name", "phase", "stream", "layer", "micro_step", "unit", "uses", "deps", "compute", "device",
                   "flops", "hbm_bytes", "gemm_hbm_bytes", "fused_attention_flops", "elements", "dtype",
                   "kernel_launches"});
      op.compute.what = n.key("compute").enumerated(kComputeKinds);
      if (is_quantization(op.compute.what)) {
        op.compute.dtype = n.key("dtype").enumerated(kDTypes);
        if (op.compute.dtype != DType::int8 && op.compute.dtype != DType::int4)
          n.key("dtype").fail("a quantization op's dtype is int8 (qwZ) or int4 (qgZ)");
      } else if (n.has("dtype")) {
        n.key("dtype").fail("only quantize / dequantize / dequant_reduce ops have a dtype");
      }
      op.compute.device = n.has("device") ? n.key("device").enumerated(kDevices) : Device::gpu;
      op.compute.flops = n.has("flops") ? n.key("flops").number() : 0;
      op.compute.hbm_bytes = opt_integer(n, "hbm_bytes", 0, 0);
      op.compute.gemm_hbm_bytes = opt_integer(n, "gemm_hbm_bytes", 0, 0);
      if (op.compute.gemm_hbm_bytes > op.compute.hbm_bytes)
        n.key("gemm_hbm_bytes").fail("is part of hbm_bytes: at most " + std::to_string(op.compute.hbm_bytes));
      op.compute.fused_attention_flops = n.has("fused_attention_flops") ? n.key("fused_attention_flops").number() : 0;
      if (op.compute.fused_attention_flops > op.compute.flops)
        n.key("fused_attention_flops").fail("is part of flops: at most " + json(op.compute.flops).dump());
      op.compute.elements = opt_integer(n, "elements", 0, 0);
      op.compute.kernel_launches = n.has("kernel_launches") ? n.key("kernel_launches").small_int(0) : 0;
      break;
    case OpKind::collective: {
      n.only_keys({"id", "kind", "name", "phase", "stream", "layer", "micro_step", "unit", "uses", "deps", "collective", "group",
                   "bytes", "scale_bytes", "dtype", "root"});
      op.collective.what = n.key("collective").enumerated(kCollectiveKinds);
      op.collective.group = lookup(n.key("group"), groups, "group");
      op.collective.bytes = n.key("bytes").integer(0);
      op.collective.scale_bytes = opt_integer(n, "scale_bytes", 0, 0);
      if (op.collective.scale_bytes > op.collective.bytes)
        n.key("scale_bytes").fail("scale bytes exceed the collective's total bytes");
      op.collective.dtype = n.key("dtype").enumerated(kDTypes);
      if (op.collective.what == CollectiveKind::reduce)
        op.collective.root = n.key("root").integer(0);
      else if (n.has("root"))
        n.key("root").fail("only a reduce has a root");
      break;
    }
    case OpKind::copy:
      n.only_keys({"id", "kind", "name", "phase", "stream", "layer", "micro_step", "unit", "uses", "deps", "copy", "bytes",
                   "pinned", "rank", "cast_from", "cast_to", "group", "kernel_launches"});
      op.copy.what = n.key("copy").enumerated(kCopyKinds);
      op.copy.bytes = n.key("bytes").integer(0);
      op.copy.pinned = n.has("pinned") ? n.key("pinned").boolean() : true;
      op.copy.rank = opt_integer(n, "rank", -1, -1);
      if (n.has("group")) op.copy.group = lookup(n.key("group"), groups, "group");
      if (n.has("cast_from") || n.has("cast_to")) {
        op.copy.cast = true;
        op.copy.cast_from = n.key("cast_from").enumerated(kDTypes);
        op.copy.cast_to = n.key("cast_to").enumerated(kDTypes);
        if (op.copy.what != CopyKind::d2d) n.key("cast_from").fail("only a d2d copy converts element types");
      }
      if (n.has("kernel_launches")) {
        op.copy.kernel_launches = n.key("kernel_launches").small_int(1);
        if (op.copy.what != CopyKind::d2d) n.key("kernel_launches").fail("only a d2d copy runs kernels");
      }
      break;
    case OpKind::alloc:
    case OpKind::free:
      n.only_keys({"id", "kind", "name", "phase", "stream", "layer", "micro_step", "unit", "uses", "deps", "buffer", "tier",
                   "category", "detail", "bytes"});
      op.mem.buffer = n.key("buffer").str();
      op.mem.tier = n.key("tier").enumerated(kTiers);
      op.mem.category = n.key("category").enumerated(kCategories);
      op.mem.detail = n.has("detail") ? n.key("detail").str() : "";
      op.mem.bytes = n.key("bytes").integer(0);
      break;
  }
  return op;
}

// ---- writing -----------------------------------------------------------------------------------

ordered_json op_to_json(const Schedule& s, const Op& op) {
  ordered_json j = {{"id", op.id},
            {"kind", to_string(op.kind)},
            {"name", op.name},
            {"phase", to_string(op.phase)},
            {"stream", s.streams.at(op.stream)},
            {"layer", op.layer},
            {"micro_step", op.micro_step},
            {"deps", op.deps}};
  if (op.unit >= 0) j["unit"] = op.unit;
  if (!op.uses.empty()) {
    ordered_json& uses = j["uses"] = ordered_json::array();
    for (const BufferUse& u : op.uses) {
      ordered_json ju = {{"buffer", s.ops.at(u.alloc).mem.buffer}, {"alloc", u.alloc}, {"offset", u.offset},
                         {"bytes", u.bytes}, {"role", to_string(u.role)}, {"access", to_string(u.access)}};
      if (u.unit >= 0) ju["unit"] = u.unit;
      if (u.tensor >= 0) ju["tensor"] = u.tensor;
      if (u.rank_stride > 0) ju["rank_stride"] = u.rank_stride;
      if (u.blocks > 1) {
        ju["blocks"] = u.blocks;
        ju["block_stride"] = u.block_stride;
      }
      uses.push_back(std::move(ju));
    }
  }
  switch (op.kind) {
    case OpKind::compute:
      j["compute"] = to_string(op.compute.what);
      j["device"] = to_string(op.compute.device);
      j["flops"] = op.compute.flops;
      j["hbm_bytes"] = op.compute.hbm_bytes;
      if (op.compute.gemm_hbm_bytes > 0) j["gemm_hbm_bytes"] = op.compute.gemm_hbm_bytes;
      if (op.compute.fused_attention_flops > 0) j["fused_attention_flops"] = op.compute.fused_attention_flops;
      j["elements"] = op.compute.elements;
      if (is_quantization(op.compute.what)) j["dtype"] = to_string(op.compute.dtype);
      if (op.compute.kernel_launches > 0) j["kernel_launches"] = op.compute.kernel_launches;
      break;
    case OpKind::collective:
      j["collective"] = to_string(op.collective.what);
      j["group"] = s.groups.at(op.collective.group).name;
      j["bytes"] = op.collective.bytes;
      j["scale_bytes"] = op.collective.scale_bytes;
      j["dtype"] = to_string(op.collective.dtype);
      if (op.collective.what == CollectiveKind::reduce) j["root"] = op.collective.root;
      break;
    case OpKind::copy:
      j["copy"] = to_string(op.copy.what);
      j["bytes"] = op.copy.bytes;
      j["pinned"] = op.copy.pinned;
      if (op.copy.rank >= 0) j["rank"] = op.copy.rank;
      if (op.copy.group >= 0) j["group"] = s.groups.at(op.copy.group).name;
      if (op.copy.cast) {
        j["cast_from"] = to_string(op.copy.cast_from);
        j["cast_to"] = to_string(op.copy.cast_to);
      }
      if (op.copy.kernel_launches != 1) j["kernel_launches"] = op.copy.kernel_launches;
      break;
    case OpKind::alloc:
    case OpKind::free:
      j["buffer"] = op.mem.buffer;
      j["tier"] = to_string(op.mem.tier);
      j["category"] = to_string(op.mem.category);
      j["detail"] = op.mem.detail;
      j["bytes"] = op.mem.bytes;
      break;
  }
  return j;
}

template <class T, class Name>
void require_unique(const std::vector<T>& items, Name name_of, const char* what) {
  std::set<std::string> seen;
  for (const T& t : items)
    if (!seen.insert(name_of(t)).second)
      throw std::logic_error(std::string("schedule has two ") + what + " named '" + name_of(t) + "'");
}

// 1-based line and column of byte `offset` in `text`.
std::pair<int, int> line_col(std::string_view text, size_t offset) {
  int line = 1, col = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return {line, col};
}

}  // namespace

namespace {

ordered_json model_to_json(const ScheduleModel& m) {
  ordered_json j = {{"name", m.name},
                    {"layers", m.layers},
                    {"hidden", m.hidden},
                    {"ffn_hidden", m.ffn_hidden},
                    {"heads", m.heads},
                    {"kv_heads", m.kv_heads},
                    {"vocab", m.vocab},
                    {"max_position_embeddings", m.max_position_embeddings},
                    {"tie_word_embeddings", m.tie_word_embeddings},
                    {"mlp", m.gated_mlp ? "gated" : "plain"},
                    {"bias", m.bias},
                    {"micro_batch", m.micro_batch},
                    {"seq_len", m.seq_len},
                    {"grad_accum", m.grad_accum},
                    {"dtype", to_string(m.dtype)},
                    {"checkpointing", m.checkpointing}};
  if (!m.model_type.empty()) j["model_type"] = m.model_type;
  ordered_json& units = j["units"] = ordered_json::array();
  for (const ModelUnit& u : m.units) {
    ordered_json tensors = ordered_json::array();
    for (const ModelTensor& t : u.tensors) tensors.push_back({{"name", t.name}, {"rows", t.rows}, {"cols", t.cols}});
    units.push_back({{"name", u.name}, {"layer", u.layer}, {"tensors", std::move(tensors)}});
    if (!u.hbm_kind.empty()) units.back()["hbm_kind"] = u.hbm_kind;
    if (!u.forward_gemms.empty() || !u.backward_gemms.empty()) {
      ordered_json& g = units.back()["gemm_calls"] = ordered_json::object();
      for (auto [key, list] : {std::pair{"forward", &u.forward_gemms}, {"backward", &u.backward_gemms}}) {
        ordered_json a = ordered_json::array();
        for (const GemmCalls& c : *list) a.push_back({c.m, c.n, c.k, c.batch, c.calls});
        g[key] = std::move(a);
      }
    }
  }
  return j;
}

// Everything but the ops, in the documented key order.
ordered_json schedule_head_json(const Schedule& s) {
  require_unique(s.streams, [](const std::string& n) { return n; }, "streams");
  require_unique(s.groups, [](const ProcessGroup& g) { return g.name; }, "groups");
  ordered_json j;
  j["format"] = kScheduleFormat;
  j["version"] = kScheduleVersion;
  j["meta"] = {{"scenario", s.meta.scenario},       {"world_size", s.meta.world_size},
               {"nodes", s.meta.nodes},             {"gpus_per_node", s.meta.gpus_per_node},
               {"params", s.meta.params},           {"tokens_per_step", s.meta.tokens_per_step},
               {"steps", s.meta.steps}};
  if (!s.meta.framework.empty()) {
    j["meta"]["framework"] = s.meta.framework;
    j["meta"]["zero_stage"] = s.meta.zero_stage;
  }
  if (!s.model.units.empty()) j["model"] = model_to_json(s.model);
  j["streams"] = s.streams;
  j["groups"] = ordered_json::array();
  for (const ProcessGroup& g : s.groups)
    j["groups"].push_back(
        {{"name", g.name}, {"size", g.size}, {"ranks_per_node", g.ranks_per_node}, {"stride", g.stride}});
  return j;
}

}  // namespace

ordered_json schedule_to_json(const Schedule& s) {
  ordered_json j = schedule_head_json(s);
  ordered_json& ops = j["ops"] = ordered_json::array();
  ops.get_ref<ordered_json::array_t&>().reserve(s.ops.size());
  for (const Op& op : s.ops) ops.push_back(op_to_json(s, op));
  return j;
}

std::string schedule_to_json_text(const Schedule& s) {
  // Readable and diffable: top level indented, one op (or group) per line. Ops are dumped one by one
  // (the same op_to_json as schedule_to_json) rather than through one big document.
  const ordered_json head = schedule_head_json(s);
  std::string out = "{\n";
  for (auto it = head.begin(); it != head.end(); ++it) {
    out += "  " + ordered_json(it.key()).dump() + ": ";
    const ordered_json& v = it.value();
    if (v.is_array() && !v.empty() && v.front().is_object()) {
      out += "[\n";
      for (size_t i = 0; i < v.size(); ++i) out += "    " + v[i].dump() + (i + 1 < v.size() ? ",\n" : "\n");
      out += "  ],\n";
    } else {
      out += v.dump() + ",\n";
    }
  }
  out += "  \"ops\": [";
  for (size_t i = 0; i < s.ops.size(); ++i) {
    out += i == 0 ? "\n    " : ",\n    ";
    out += op_to_json(s, s.ops[i]).dump();
  }
  out += s.ops.empty() ? "]\n}\n" : "\n  ]\n}\n";
  return out;
}

Schedule schedule_from_json(const json& j, const std::string& source) {
  const Node root(j, source);
  root.only_keys({"format", "version", "meta", "model", "streams", "groups", "ops"});
  const std::string format = root.key("format").str();
  if (format != kScheduleFormat)
    root.key("format").fail("expected \"" + std::string(kScheduleFormat) + "\", got \"" + format + "\"");
  const Node version = root.key("version");
  const std::int64_t v = version.integer(0);
  if (v != kScheduleVersion)
    version.fail("unsupported version " + std::to_string(v) + "; this build reads version " +
                 std::to_string(kScheduleVersion));

  Schedule s;
  s.meta = read_meta(root.key("meta"));
  if (root.has("model")) s.model = read_model(root.key("model"));
  const Node streams = root.key("streams");
  for (size_t i = 0, e = streams.array_size(); i < e; ++i) s.streams.push_back(streams.at(i).str());
  const Node groups = root.key("groups");
  for (size_t i = 0, e = groups.array_size(); i < e; ++i) s.groups.push_back(read_group(groups.at(i)));
  std::vector<std::string> group_names;
  for (const ProcessGroup& g : s.groups) group_names.push_back(g.name);
  const auto stream_idx = index_names(streams, s.streams);
  const auto group_idx = index_names(groups, group_names);

  const Node ops = root.key("ops");
  const size_t n_ops = ops.array_size();
  s.ops.reserve(n_ops);
  std::map<std::string, size_t> live;  // buffer -> index of its alloc, to check frees with a path
  for (size_t i = 0; i < n_ops; ++i) {
    const Node n = ops.at(i);
    s.ops.push_back(read_op(n, static_cast<OpId>(i), stream_idx, group_idx, s.ops));
    const Op& op = s.ops.back();
    if (op.kind == OpKind::alloc && !live.emplace(op.mem.buffer, i).second)
      n.key("buffer").fail("buffer '" + op.mem.buffer + "' is already allocated (op " +
                           std::to_string(live[op.mem.buffer]) + ")");
    if (op.kind == OpKind::free) {
      auto it = live.find(op.mem.buffer);
      if (it == live.end()) n.key("buffer").fail("frees buffer '" + op.mem.buffer + "' that is not allocated");
      const MemOp& a = s.ops[it->second].mem;
      if (a.tier != op.mem.tier || a.bytes != op.mem.bytes)
        n.fail("free of '" + op.mem.buffer + "' does not match its alloc (op " + std::to_string(it->second) +
               ") in tier or bytes");
      live.erase(it);
    }
  }
  try {
    check_schedule(s);  // the shared structural checks, in case they grow beyond the ones above
  } catch (const std::logic_error& e) {
    ops.fail(e.what());
  }
  return s;
}

Schedule schedule_from_json_text(std::string_view text, const std::string& source) {
  json j;
  try {
    j = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    const auto [line, col] = line_col(text, e.byte > 0 ? e.byte - 1 : 0);
    std::string msg = e.what();
    // nlohmann's message: "[json.exception.parse_error.101] parse error at line L, column C: syntax error ..."
    if (auto p = msg.find("syntax error"); p != std::string::npos) msg = msg.substr(p);
    throw InputError(SourceLocation{source, line, col, ""}, "invalid JSON: " + msg);
  }
  return schedule_from_json(j, source);
}

Schedule read_schedule_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(SourceLocation{path, 0, 0, ""}, "cannot open schedule file");
  std::ostringstream text;
  text << in.rdbuf();
  return schedule_from_json_text(text.str(), path);
}

void write_schedule_json(const Schedule& s, const std::string& path) {
  write_file_atomically(path, schedule_to_json_text(s));  // the text is built before anything is written
}

}  // namespace zsim
