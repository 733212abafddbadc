#include "sim/engine/trace_writer.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace zsim {

Bytes op_bytes(const Op& op) {
  switch (op.kind) {
    case OpKind::compute: return op.compute.hbm_bytes;
    case OpKind::collective: return op.collective.bytes;
    case OpKind::copy: return op.copy.bytes;
    case OpKind::alloc:
    case OpKind::free: return op.mem.bytes;
  }
  return 0;
}

void write_chrome_trace(std::ostream& out, const Schedule& s, const TimingResult& t) {
  using nlohmann::json;
  json events = json::array();
  events.push_back({{"ph", "M"}, {"pid", 0}, {"tid", 0}, {"name", "process_name"}, {"args", {{"name", "rank 0"}}}});
  for (size_t i = 0; i < s.streams.size(); ++i) {
    events.push_back({{"ph", "M"}, {"pid", 0}, {"tid", static_cast<int>(i)}, {"name", "thread_name"},
                      {"args", {{"name", s.streams[i]}}}});
    events.push_back({{"ph", "M"}, {"pid", 0}, {"tid", static_cast<int>(i)}, {"name", "thread_sort_index"},
                      {"args", {{"sort_index", static_cast<int>(i)}}}});
  }
  for (const Op& op : s.ops) {
    const OpTiming& ot = t.ops[op.id];
    json args = {{"id", op.id}, {"kind", to_string(op.kind)}, {"phase", to_string(op.phase)},
                 {"bytes", op_bytes(op)}, {"layer", op.layer}, {"micro_step", op.micro_step}};
    if (op.kind == OpKind::compute) {
      args["flops"] = op.compute.flops;
      args["what"] = to_string(op.compute.what);
    } else if (op.kind == OpKind::collective) {
      args["what"] = to_string(op.collective.what);
      args["group"] = s.groups[op.collective.group].name;
      args["scale_bytes"] = op.collective.scale_bytes;
    } else if (op.kind == OpKind::copy) {
      args["what"] = to_string(op.copy.what);
      args["pinned"] = op.copy.pinned;
    } else {
      args["buffer"] = op.mem.buffer;
      args["tier"] = to_string(op.mem.tier);
    }
    // Chrome trace times are microseconds.
    events.push_back({{"ph", "X"}, {"pid", 0}, {"tid", op.stream}, {"name", op.name}, {"cat", to_string(op.kind)},
                      {"ts", ot.start_s * 1e6}, {"dur", ot.duration_s() * 1e6}, {"args", std::move(args)}});
  }
  json doc = {{"traceEvents", std::move(events)},
              {"displayTimeUnit", "ms"},
              {"otherData",
               {{"generator", "zsim"},
                {"note", fmt::format("ranks are symmetric (SPMD): rank 0 of {} stands for all", s.meta.world_size)},
                {"scenario", s.meta.scenario}}}};
  out << doc.dump() << '\n';
}

namespace {
std::string csv_field(const std::string& v) {
  if (v.find_first_of(",\"\n") == std::string::npos) return v;
  std::string q = "\"";
  for (char c : v) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}
}  // namespace

void write_op_csv(std::ostream& out, const Schedule& s, const TimingResult& t) {
  out << "id,name,kind,phase,stream,start_s,end_s,bytes,flops\n";
  for (const Op& op : s.ops) {
    const OpTiming& ot = t.ops[op.id];
    out << fmt::format("{},{},{},{},{},{:.9e},{:.9e},{},{:.6e}\n", op.id, csv_field(op.name), to_string(op.kind),
                       to_string(op.phase), csv_field(s.streams[op.stream]), ot.start_s, ot.end_s, op_bytes(op),
                       op.kind == OpKind::compute ? op.compute.flops : 0.0);
  }
}

}  // namespace zsim
