#include "sim/report/report_json.hpp"

#include <cstdio>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "sim/common/atomic_file.hpp"

namespace zsim {

using nlohmann::ordered_json;

namespace {

ordered_json op_ref(OpId id, const std::string& name) {
  if (id < 0) return nullptr;
  return {{"id", id}, {"name", name}};
}

ordered_json tier_json(const TierMemory& t) {
  ordered_json j;
  j["per"] = t.tier == Tier::gpu ? "gpu" : "node";
  j["params"] = t.at_peak.params;
  j["grads"] = t.at_peak.grads;
  j["optimizer"] = t.at_peak.optimizer;
  j["activations"] = t.at_peak.activations;
  j["buffers"] = t.at_peak.buffers;
  j["buffer_detail"] = ordered_json::object();
  for (const auto& [name, bytes] : t.at_peak.buffer_detail) j["buffer_detail"][name] = bytes;
  j["peak"] = t.peak;
  j["peak_op"] = op_ref(t.peak_op, t.peak_op_name);
  if (t.reserved > 0) {  // the allocator modelled: the verdict reads reserved + outside_allocator
    j["reserved"] = t.reserved;
    j["outside_allocator"] = t.outside_allocator;
    j["outside_allocator_default"] = t.outside_allocator_default;
    j["verdict_bytes"] = t.verdict_bytes();
  }
  j["persistent"] = t.at_end.total();
  j["capacity"] = t.capacity;
  j["headroom"] = t.headroom();
  j["fits"] = t.fits();
  return j;
}

ordered_json phases_json(const PhaseBytes& b) {
  return {{"forward", b.forward}, {"backward", b.backward}, {"step", b.step}, {"total", b.total()},
          {"init", b.init}};
}

PhaseBytes times(PhaseBytes b, Bytes k) {
  for (Phase p : {Phase::init, Phase::forward, Phase::backward, Phase::step}) b.at(p) *= k;
  return b;
}

ordered_json collective_json(const CollectiveSummary& c) {
  return {{"phase", to_string(c.phase)},
          {"op", to_string(c.op)},
          {"group", c.group},
          {"group_size", c.group_size},
          {"bytes", c.bytes},
          {"scale_bytes", c.scale_bytes},
          {"count", c.count},
          {"bytes_per_gpu", c.bytes_per_gpu},
          {"cross_node_bytes_per_gpu", c.cross_node_bytes_per_gpu}};
}

ordered_json comm_json(const CommWalk& w) {
  ordered_json j;
  j["per_gpu_bytes"] = phases_json(w.per_gpu);
  j["scale_bytes_per_gpu"] = phases_json(w.scale_per_gpu);
  j["cross_node_bytes_per_gpu"] = w.cross_node_per_gpu.total();
  j["cross_node_bytes_per_node"] = w.cross_node_per_node_total();
  j["cross_node_bytes_per_gpu_by_phase"] = phases_json(w.cross_node_per_gpu);
  j["cross_node_scale_bytes_per_gpu"] = phases_json(w.cross_node_scale_per_gpu);
  j["collectives"] = ordered_json::array();
  for (const CollectiveSummary& c : w.collectives) j["collectives"].push_back(collective_json(c));
  j["copies_per_gpu"] = {{"h2d", phases_json(w.h2d)},
                         {"d2h", phases_json(w.d2h)},
                         {"nvme_read", phases_json(w.nvme_read)},
                         {"nvme_write", phases_json(w.nvme_write)},
                         {"d2d", phases_json(w.d2d)}};
  j["copies_per_node"] = {{"h2d", phases_json(times(w.h2d, w.gpus_per_node))},
                          {"d2h", phases_json(times(w.d2h, w.gpus_per_node))},
                          {"nvme_read", phases_json(times(w.nvme_read, w.gpus_per_node))},
                          {"nvme_write", phases_json(times(w.nvme_write, w.gpus_per_node))},
                          {"d2d", phases_json(times(w.d2d, w.gpus_per_node))}};
  return j;
}

}  // namespace

ordered_json report_to_json(const Report& r) {
  ordered_json j;
  j["format"] = kReportFormat;
  j["version"] = kReportVersion;
  const ReportSetup& s = r.setup;
  j["setup"] = {{"source", s.source_file},     {"nodes", s.nodes},       {"gpus_per_node", s.gpus_per_node},
                   {"world_size", s.world_size}, {"gpu", s.gpu},           {"zero_stage", s.zero_stage},
                   {"features", s.features}};
  if (r.scenario) j["scenario"] = *r.scenario;
  j["model"] = {{"name", s.model}, {"params", s.params}};
  ordered_json mem;
  mem["gpu"] = tier_json(r.memory.gpu);
  mem["cpu"] = tier_json(r.memory.cpu);
  mem["nvme"] = tier_json(r.memory.nvme);
  if (const auto& o = r.memory.first_overflow)
    mem["first_overflow"] = {{"tier", to_string(o->tier)}, {"op", op_ref(o->op, o->op_name)}, {"live", o->live},
                             {"capacity", o->capacity},     {"over_by", o->over_by}};
  else
    mem["first_overflow"] = nullptr;
  j["memory"] = mem;
  j["comm"] = comm_json(r.comm);
  j["fits"] = r.fits;
  j["warnings"] = r.warnings;
  if (r.time) j["time"] = r.time->json;
  if (const auto& f = r.deepspeed_figures) {
    ordered_json fitted = nullptr;
    for (const auto& [v, key] : f->fitted_under.fields())
      if (!v.empty()) fitted[key] = v;
    j["deepspeed_figures"] = {
        {"profile", f->profile.empty() ? ordered_json(nullptr) : ordered_json(f->profile)},
        {"fitted_under", fitted},
        {"host", {{"source", f->host}, {"note", f->host_note}}},
        {"gpu", {{"source", f->gpu}, {"note", f->gpu_note}}},
        {"outside_allocator",
         {{"bytes", f->outside_allocator}, {"source", f->outside_allocator_default ? "default" : "given"},
          {"note", f->outside_allocator_note}}}};
  }
  return j;
}

std::string report_json_text(const Report& r) { return report_to_json(r).dump(2) + "\n"; }

void write_report_json(const Report& r, const std::string& path) {
  write_file_atomically(path, report_json_text(r));  // the text is built before anything is written
}

}  // namespace zsim
