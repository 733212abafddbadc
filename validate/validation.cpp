#include "validate/validation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "sim/common/error.hpp"
#include "sim/engine/host_issue.hpp"
#include "sim/report/human_units.hpp"
#include "sim/report/memory_walk.hpp"
#include "validate/json_input.hpp"

namespace zsim {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

using json_input::bad;

const json& at(const json& j, const char* key, const std::string& source, const std::string& path) {
  if (!j.is_object() || !j.contains(key)) bad(source, path + key, "missing (is this zrun's --json report?)");
  return j.at(key);
}

std::string op_kind(const Schedule& s, const Op& op) {
  switch (op.kind) {
    case OpKind::compute: return to_string(op.compute.what);
    case OpKind::collective: return std::string(to_string(op.collective.what)) + "@" + s.groups[op.collective.group].name;
    case OpKind::copy: return to_string(op.copy.what);
    default: return to_string(op.kind);
  }
}

}  // namespace

namespace {
// Sorted, merged intervals.
std::vector<std::pair<double, double>> merged(std::vector<std::pair<double, double>> v) {
  std::sort(v.begin(), v.end());
  std::vector<std::pair<double, double>> out;
  for (const auto& iv : v) {
    if (iv.second <= iv.first) continue;
    if (!out.empty() && iv.first <= out.back().second) out.back().second = std::max(out.back().second, iv.second);
    else out.push_back(iv);
  }
  return out;
}
}  // namespace

double exposed_seconds(std::vector<std::pair<double, double>> comm, std::vector<std::pair<double, double>> compute) {
  const auto a = merged(std::move(comm)), b = merged(std::move(compute));
  double total = 0;
  std::size_t j = 0;
  for (const auto& [lo, hi] : a) {
    double covered = 0;
    while (j < b.size() && b[j].second <= lo) ++j;
    for (std::size_t k = j; k < b.size() && b[k].first < hi; ++k)
      covered += std::min(hi, b[k].second) - std::max(lo, b[k].first);
    total += (hi - lo) - covered;
  }
  return total;
}

double rel_error(double predicted, double measured) { return measured != 0 ? (predicted - measured) / measured : 0; }

ErrorStats error_stats(std::vector<double> e) {
  ErrorStats st;
  st.count = static_cast<int>(e.size());
  if (e.empty()) return st;
  std::sort(e.begin(), e.end());
  st.median = e[e.size() / 2];
  std::vector<double> a(e.size());
  for (std::size_t i = 0; i < e.size(); ++i) a[i] = std::fabs(e[i]);
  std::sort(a.begin(), a.end());
  st.p90 = a[std::min(a.size() - 1, static_cast<std::size_t>(std::ceil(0.9 * a.size())) - 1)];
  st.worst = std::fabs(e.front()) > std::fabs(e.back()) ? e.front() : e.back();
  return st;
}

MeasuredRun measured_run_from_json(const json& run, const std::string& source) {
  MeasuredRun r;
  const json& m = at(run, "measured", source, "");
  const json& setup = at(run, "setup", source, "");
  r.nodes = at(setup, "nodes", source, "setup.").get<int>();
  r.gpus_per_node = at(setup, "gpus_per_node", source, "setup.").get<int>();
  const json& cmd = at(m, "command", source, "measured.");
  r.scenario = at(cmd, "scenario", source, "measured.command.").get<std::string>();
  r.overrides = at(cmd, "overrides", source, "measured.command.").get<std::vector<std::string>>();
  r.step_s = at(m, "step_time_s", source, "measured.").get<double>();
  if (!(r.step_s > 0)) bad(source, "measured.step_time_s", "must be a positive number of seconds");
  for (const json& o : at(m, "ops", source, "measured.")) {
    r.ops[o.at("id").get<OpId>()] = {o.at("start_s").get<double>(), o.at("end_s").get<double>()};
    if (o.contains("name"))
      r.op_names[o.at("id").get<OpId>()] = {o.at("name").get<std::string>(), o.value("micro_step", 0)};
  }
  for (const json& c : at(m, "collectives", source, "measured."))
    r.collective_s[c.at("id").get<OpId>()] = c.at("seconds").get<double>();
  if (m.contains("host_issue_s")) {
    r.host_issue_s = m.at("host_issue_s").get<double>();
    if (!(r.host_issue_s >= 0 && r.host_issue_s < 1e4)) bad(source, "measured.host_issue_s", "must be seconds >= 0");
  }
  if (m.contains("host_issue_ops")) {
    for (const json& o : m.at("host_issue_ops")) {
      MeasuredRun::OpIssue i;
      i.id = at(o, "id", source, "measured.host_issue_ops[].").get<OpId>();
      i.name = o.value("name", std::string());
      i.micro_step = o.value("micro_step", 0);
      i.s = at(o, "s", source, "measured.host_issue_ops[].").get<double>();
      if (!(i.s >= 0 && i.s < 1e4)) bad(source, "measured.host_issue_ops[].s", "must be seconds >= 0");
      r.op_issue.push_back(std::move(i));
    }
  }
  if (m.contains("timing_event_s")) {
    r.timing_event_s = m.at("timing_event_s").get<double>();
    if (!(r.timing_event_s >= 0 && r.timing_event_s < 1e-3))
      bad(source, "measured.timing_event_s", "must be seconds in [0, 1e-3)");
  }
  r.gpu_peak_bytes = at(m, "gpu_peak_bytes", source, "measured.").get<Bytes>();
  for (auto& [k, v] : at(m, "gpu_peak_bytes_by_category", source, "measured.").items()) r.gpu_peak_by_category[k] = v.get<Bytes>();
  for (auto& [k, v] : at(m, "gpu_beyond_schedule_peak_bytes_by_category", source, "measured.").items())
    r.beyond_by_category[k] = v.get<Bytes>();
  if (m.contains("peak_bytes_by_tier")) {
    for (auto& [tier, t] : m.at("peak_bytes_by_tier").items()) {
      MeasuredRun::TierPeak& p = r.tier_peaks[tier];
      p.peak = at(t, "peak", source, "measured.peak_bytes_by_tier." + tier + ".").get<Bytes>();
      for (auto& [k, v] : at(t, "by_category", source, "measured.peak_bytes_by_tier." + tier + ".").items())
        p.by_category[k] = v.get<Bytes>();
    }
  } else {
    r.tier_peaks["gpu"].peak = r.gpu_peak_bytes;
    r.tier_peaks["gpu"].by_category = r.gpu_peak_by_category;
  }
  return r;
}

namespace {

// One past the last op of step 0 of `s` (init ops, then step 0's up to the end of its step phase).
std::size_t step0_end(const Schedule& s) {
  bool seen_step = false;
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    if (seen_step && s.ops[i].phase != Phase::step) return i;
    seen_step |= s.ops[i].phase == Phase::step;
  }
  return s.ops.size();
}

}  // namespace

double predicted_host_issue_s(const Schedule& s, const ClusterSpec& c) {
  const std::vector<HostIssue> h = host_issue(s, c);
  double total = 0;
  for (std::size_t i = 0; i < step0_end(s); ++i)
    if (s.ops[i].phase != Phase::init) total += h[i].total_s;  // init issues the run's allocations, before any step
  return total;
}

MeasuredRun match_ops_by_name(const Schedule& s, const MeasuredRun& m, int* unmatched) {
  if (unmatched) *unmatched = 0;
  if (m.op_names.empty()) return m;
  // Step 0's ops of `s` by (name, micro_step), in program order.
  std::map<std::pair<std::string, int>, std::vector<OpId>> ids;
  for (std::size_t i = 0; i < step0_end(s); ++i) ids[{s.ops[i].name, s.ops[i].micro_step}].push_back(s.ops[i].id);
  // The next op of step 0 with that name and micro-step, each list of ops taken in order; none where `s` has no more.
  using Taken = std::map<std::pair<std::string, int>, std::size_t>;
  auto next_of = [&ids](const std::pair<std::string, int>& key, Taken& taken) -> std::optional<OpId> {
    const auto it = ids.find(key);
    std::size_t& k = taken[key];
    if (it == ids.end() || k >= it->second.size()) return std::nullopt;
    return it->second[k++];
  };
  MeasuredRun r = m;
  r.ops.clear();
  r.collective_s.clear();
  r.op_names.clear();
  Taken taken;
  std::map<OpId, OpId> to_new;
  for (const auto& [id, t] : m.ops) {  // by id: program order of the run's schedule
    const auto name = m.op_names.find(id);
    const std::optional<OpId> found = name == m.op_names.end() ? std::nullopt : next_of(name->second, taken);
    if (!found) {
      if (unmatched) ++*unmatched;
      continue;
    }
    const OpId now = *found;
    to_new[id] = now;
    r.ops[now] = t;
    r.op_names[now] = name->second;
  }
  for (const auto& [id, sec] : m.collective_s)
    if (to_new.count(id)) r.collective_s[to_new.at(id)] = sec;
  // The per-op host times name their ops too (every op of the step, allocations and frees included).
  r.op_issue.clear();
  Taken issue_taken;
  for (const MeasuredRun::OpIssue& i : m.op_issue) {
    if (i.name.empty()) continue;
    if (const std::optional<OpId> now = next_of({i.name, i.micro_step}, issue_taken)) {
      MeasuredRun::OpIssue moved = i;
      moved.id = *now;
      r.op_issue.push_back(std::move(moved));
    }
  }
  return r;
}

Validation validate_run(const Schedule& s, const TimingResult& predicted, Bytes gpu_peak_predicted,
                        const MeasuredRun& run) {
  Validation v;
  const MeasuredRun measured = match_ops_by_name(s, run, &v.unmatched_ops);
  v.timing_event_s = run.timing_event_s;
  v.host_issue_measured_s = run.host_issue_s;
  for (const MeasuredRun::OpIssue& i : measured.op_issue)
    if (i.id >= 0 && i.id < static_cast<OpId>(s.ops.size())) v.op_issue_measured_s[i.id] = i.s;
  v.step_predicted_s = predicted.step_s();
  v.step_measured_s = measured.step_s;
  v.step_rel_error = rel_error(v.step_predicted_s, v.step_measured_s);
  v.gpu_peak_predicted = gpu_peak_predicted;
  v.gpu_peak_measured = measured.gpu_peak_bytes;
  v.gpu_peak_rel_error = rel_error(static_cast<double>(gpu_peak_predicted), static_cast<double>(measured.gpu_peak_bytes));
  std::map<std::string, std::vector<double>> errors;
  double pred_t0 = 1e300, meas_t0 = 1e300;
  for (const auto& [id, t] : measured.ops) {
    if (id < 0 || id >= static_cast<OpId>(s.ops.size())) continue;
    pred_t0 = std::min(pred_t0, predicted.ops.at(id).start_s);
    meas_t0 = std::min(meas_t0, t.first);
  }
  using Spans = std::vector<std::pair<double, double>>;
  Spans pred_compute, meas_compute;
  std::map<std::string, std::pair<Spans, Spans>> comm_by_phase;  // phase -> (predicted, measured)
  for (const auto& [id, t] : measured.ops) {
    if (id < 0 || id >= static_cast<OpId>(s.ops.size())) continue;
    const Op& op = s.ops[id];
    if (op.kind == OpKind::alloc || op.kind == OpKind::free) continue;
    OpComparison c;
    c.id = id;
    c.name = op.name;
    c.kind = op_kind(s, op);
    c.bytes = op.kind == OpKind::collective ? op.collective.bytes : op.kind == OpKind::copy ? op.copy.bytes : 0;
    c.predicted_s = predicted.ops.at(id).duration_s();
    const auto coll = measured.collective_s.find(id);
    // The op's own time: its timing event's cost off (an op measured at or below it is not compared).
    c.measured_s = (coll != measured.collective_s.end() ? coll->second : t.second - t.first) - v.timing_event_s;
    if (v.timing_event_s > 0 && c.measured_s <= 0) {
      c.measured_s = 0;
      ++v.unresolved_ops;
    }
    c.phase = to_string(op.phase);
    c.stream = op.stream >= 0 && op.stream < static_cast<int>(s.streams.size()) ? s.streams[op.stream] : "";
    c.predicted_start_s = predicted.ops.at(id).start_s - pred_t0;
    c.measured_start_s = t.first - meas_t0;
    const std::pair<double, double> p_span{predicted.ops.at(id).start_s, predicted.ops.at(id).end_s};
    const std::pair<double, double> m_span{std::min(t.first + v.timing_event_s, t.second), t.second};  // its own time
    if (op.kind == OpKind::compute && op.compute.device == Device::gpu) {
      pred_compute.push_back(p_span);
      meas_compute.push_back(m_span);
    } else if (op.kind == OpKind::collective) {
      comm_by_phase[c.phase].first.push_back(p_span);
      comm_by_phase[c.phase].second.push_back(m_span);
    }
    if (c.measured_s > 0) errors[c.kind].push_back(rel_error(c.predicted_s, c.measured_s));
    v.ops.push_back(std::move(c));
  }
  for (auto& [kind, e] : errors) v.by_kind[kind] = error_stats(std::move(e));
  v.compute_predicted_s = exposed_seconds(pred_compute, {});
  v.compute_measured_s = exposed_seconds(meas_compute, {});
  // Collectives by kind and group, and size: < 64 KiB, 64 KiB .. 1 MiB, .. 16 MiB, .. 256 MiB, 256 MiB and more.
  const Bytes edges[] = {0, 64LL << 10, 1LL << 20, 16LL << 20, 256LL << 20};
  std::map<std::pair<std::string, int>, std::vector<double>> bins;
  for (const OpComparison& c : v.ops)
    if (c.kind.find('@') != std::string::npos && c.measured_s > 0) {
      int b = 0;
      while (b + 1 < 5 && c.bytes >= edges[b + 1]) ++b;
      bins[{c.kind, b}].push_back(rel_error(c.predicted_s, c.measured_s));
    }
  for (auto& [key, e] : bins)
    v.collectives_by_size.push_back({key.first, edges[key.second], key.second + 1 < 5 ? edges[key.second + 1] : 0,
                                     error_stats(std::move(e))});
  for (auto& [phase, spans] : comm_by_phase)
    v.exposed_comm[phase] = {exposed_seconds(spans.first, pred_compute), exposed_seconds(spans.second, meas_compute)};
  return v;
}

void compare_host_issue(const Schedule& s, const ClusterSpec& c, Validation& v) {
  v.host_issue_by_kind.clear();
  if (!c.efficiency.host_issue.present() || v.op_issue_measured_s.empty()) return;
  const std::vector<HostIssue> h = host_issue(s, c);
  for (const auto& [id, measured_s] : v.op_issue_measured_s) {
    HostIssueKind& k = v.host_issue_by_kind[op_kind(s, s.ops[id])];
    ++k.ops;
    k.predicted_s += h[id].total_s;
    k.measured_s += measured_s;
  }
  for (OpComparison& o : v.ops) {
    const auto m = v.op_issue_measured_s.find(o.id);
    if (m == v.op_issue_measured_s.end()) continue;
    o.predicted_issue_s = h[o.id].total_s;
    o.measured_issue_s = m->second;
  }
}

std::vector<MemoryComparison> compare_memory(const Schedule& s, const MemoryWalk& walk, const MeasuredRun& m) {
  std::vector<MemoryComparison> out;
  const Bytes node = std::max(1, s.meta.gpus_per_node);
  for (Tier t : {Tier::gpu, Tier::cpu, Tier::nvme}) {
    MemoryComparison c;
    c.tier = to_string(t);
    c.predicted = walk.tier(t).peak / (t == Tier::gpu ? 1 : node);
    for (const auto& [cat, bytes] : category_peaks(s, t)) c.by_category[to_string(cat)].first = bytes;
    const auto meas = m.tier_peaks.find(c.tier);
    if (meas != m.tier_peaks.end()) {
      c.measured = meas->second.peak;
      for (const auto& [cat, bytes] : meas->second.by_category) c.by_category[cat].second = bytes;
    }
    for (auto it = c.by_category.begin(); it != c.by_category.end();)
      it = it->second.first == 0 && it->second.second == 0 ? c.by_category.erase(it) : std::next(it);
    if (c.predicted > 0 || c.measured > 0) out.push_back(std::move(c));
  }
  return out;
}

ordered_json validation_json(const Validation& v) {
  ordered_json j;
  j["step_time"] = {{"predicted_s", v.step_predicted_s}, {"measured_s", v.step_measured_s}, {"rel_error", v.step_rel_error}};
  j["gpu_peak"] = {{"predicted_bytes", v.gpu_peak_predicted}, {"measured_bytes", v.gpu_peak_measured},
                   {"rel_error", v.gpu_peak_rel_error}};
  ordered_json kinds = ordered_json::object();
  for (const auto& [k, st] : v.by_kind)
    kinds[k] = {{"count", st.count}, {"median", st.median}, {"p90_abs", st.p90}, {"worst", st.worst}};
  j["op_kinds"] = kinds;
  ordered_json exposed = ordered_json::object();
  for (const auto& [phase, e] : v.exposed_comm)
    exposed[phase] = {{"predicted_s", e.predicted_s}, {"measured_s", e.measured_s},
                      {"abs_error_s", e.predicted_s - e.measured_s}, {"rel_error", rel_error(e.predicted_s, e.measured_s)}};
  j["exposed_comm"] = exposed;
  j["unmatched_ops"] = v.unmatched_ops;
  j["timing_event_s"] = v.timing_event_s;
  j["unresolved_ops"] = v.unresolved_ops;
  j["host_issue"] = {{"predicted_s", v.host_issue_predicted_s}, {"measured_s", v.host_issue_measured_s}};
  if (!v.host_issue_by_kind.empty()) {
    ordered_json kinds_issue = ordered_json::object();
    for (const auto& [k, h] : v.host_issue_by_kind)
      kinds_issue[k] = {{"ops", h.ops}, {"predicted_s", h.predicted_s}, {"measured_s", h.measured_s}};
    j["host_issue"]["by_kind"] = kinds_issue;
  }
  j["compute"] = {{"predicted_s", v.compute_predicted_s}, {"measured_s", v.compute_measured_s},
                  {"rel_error", rel_error(v.compute_predicted_s, v.compute_measured_s)}};
  ordered_json bins = ordered_json::array();
  for (const CollectiveSizeBin& b : v.collectives_by_size)
    bins.push_back({{"kind", b.kind}, {"from_bytes", b.from}, {"to_bytes", b.to}, {"count", b.stats.count},
                    {"median", b.stats.median}, {"p90_abs", b.stats.p90}, {"worst", b.stats.worst}});
  j["collectives_by_size"] = bins;
  ordered_json memory = ordered_json::object();
  for (const MemoryComparison& m : v.memory) {
    ordered_json cats = ordered_json::object();
    for (const auto& [cat, pm] : m.by_category)
      cats[cat] = {{"predicted_bytes", pm.first}, {"measured_bytes", pm.second},
                   {"rel_error", rel_error(static_cast<double>(pm.first), static_cast<double>(pm.second))}};
    memory[m.tier] = {{"predicted_bytes", m.predicted}, {"measured_bytes", m.measured},
                      {"rel_error", rel_error(static_cast<double>(m.predicted), static_cast<double>(m.measured))},
                      {"by_category", cats}};
  }
  j["memory_per_rank"] = memory;
  return j;
}

std::string format_validation(const Validation& v) {
  std::string out = fmt::format("                 predicted      measured   error\n");
  out += fmt::format("step time    {:10.3f} ms {:10.3f} ms   {:+.1f}%\n", v.step_predicted_s * 1e3, v.step_measured_s * 1e3,
                     100 * v.step_rel_error);
  out += fmt::format("GPU peak     {:10.1f} MiB{:10.1f} MiB  {:+.1f}%\n", v.gpu_peak_predicted / 1048576.0,
                     v.gpu_peak_measured / 1048576.0, 100 * v.gpu_peak_rel_error);
  out += fmt::format("GPU compute  {:10.3f} ms {:10.3f} ms   {:+.1f}%   (busy time: the union of the compute ops)\n",
                     v.compute_predicted_s * 1e3, v.compute_measured_s * 1e3,
                     100 * rel_error(v.compute_predicted_s, v.compute_measured_s));
  if (v.host_issue_measured_s > 0 || v.host_issue_predicted_s > 0)
    out += fmt::format("host issue   {:>13} {:>13}   (the issuing thread's time per step{})\n",
                       v.host_issue_predicted_s > 0 ? fmt::format("{:.3f} ms", v.host_issue_predicted_s * 1e3)
                                                    : std::string("no model"),
                       v.host_issue_measured_s > 0 ? fmt::format("{:.3f} ms", v.host_issue_measured_s * 1e3)
                                                   : std::string("not reported"),
                       v.host_issue_measured_s > 0 && v.host_issue_predicted_s > 0
                           ? fmt::format(": {:+.1f}%", 100 * rel_error(v.host_issue_predicted_s, v.host_issue_measured_s))
                           : "");
  if (!v.host_issue_by_kind.empty()) {
    out += "\nhost issue per op kind, per step          ops   predicted    measured   (waits included)\n";
    for (const auto& [k, h] : v.host_issue_by_kind)
      out += fmt::format("  {:<38} {:5d}   {:8.3f} ms {:8.3f} ms\n", k, h.ops, h.predicted_s * 1e3, h.measured_s * 1e3);
  }
  out += "\nper op kind (errors of each op's time)   ops   median      p90 |e|     worst\n";
  for (const auto& [k, st] : v.by_kind)
    out += fmt::format("  {:<38} {:5d}   {:+8.1f}%   {:8.1f}%   {:+8.1f}%\n", k, st.count, 100 * st.median, 100 * st.p90,
                       100 * st.worst);
  if (v.unmatched_ops > 0)
    out += fmt::format("  ({} measured ops are not in this schedule any more: not compared)\n", v.unmatched_ops);
  if (v.timing_event_s > 0)
    out += fmt::format("  (each op's measured time less its timing event, {:.2f} us as zrun measured it{})\n",
                       v.timing_event_s * 1e6,
                       v.unresolved_ops > 0 ? fmt::format("; {} op{} at or below it not compared", v.unresolved_ops,
                                                                v.unresolved_ops == 1 ? "" : "s")
                                          : "");
  if (!v.collectives_by_size.empty()) {
    out += "\nper collective, by size                      ops   median      p90 |e|     worst\n";
    for (const CollectiveSizeBin& b : v.collectives_by_size) {
      const std::string range = b.to > 0 ? fmt::format("{} - {}", human_bytes(b.from), human_bytes(b.to))
                                         : fmt::format(">= {}", human_bytes(b.from));
      out += fmt::format("  {:<20} {:<21} {:5d}   {:+8.1f}%   {:8.1f}%   {:+8.1f}%\n", b.kind, range, b.stats.count,
                         100 * b.stats.median, 100 * b.stats.p90, 100 * b.stats.worst);
    }
  }
  if (!v.memory.empty()) {
    out += "\npeak memory per rank, by tier          predicted      measured   error   (each category: its own peak)\n";
    for (const MemoryComparison& m : v.memory) {
      out += fmt::format("  {:<30} {:12} {:12}  {}\n", m.tier, human_bytes(m.predicted), human_bytes(m.measured),
                         m.measured > 0 ? fmt::format("{:+.1f}%", 100 * rel_error(double(m.predicted), double(m.measured)))
                                        : std::string("not measured"));
      for (const auto& [cat, pm] : m.by_category)
        out += fmt::format("    {:<28} {:12} {:12}\n", cat, human_bytes(pm.first), human_bytes(pm.second));
    }
  }
  if (!v.exposed_comm.empty()) {
    out += "\nexposed communication per phase       predicted      measured\n";
    for (const auto& [phase, e] : v.exposed_comm)
      out += fmt::format("  {:<30} {:10.3f} ms {:10.3f} ms\n", phase, e.predicted_s * 1e3, e.measured_s * 1e3);
  }
  return out;
}

std::string validation_ops_csv(const Validation& v) {
  std::string out = "id,name,kind,bytes,predicted_s,measured_s,phase,stream,predicted_start_s,measured_start_s,"
                    "predicted_issue_s,measured_issue_s\n";
  auto issue = [](double s) { return s >= 0 ? fmt::format("{:.9e}", s) : std::string(); };  // empty: not compared
  for (const OpComparison& c : v.ops)
    out += fmt::format("{},{},{},{},{:.9e},{:.9e},{},{},{:.9e},{:.9e},{},{}\n", c.id, c.name, c.kind, c.bytes,
                       c.predicted_s, c.measured_s, c.phase, c.stream, c.predicted_start_s, c.measured_start_s,
                       issue(c.predicted_issue_s), issue(c.measured_issue_s));
  return out;
}

}  // namespace zsim
