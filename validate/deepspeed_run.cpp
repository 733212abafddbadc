#include "validate/deepspeed_run.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <tuple>

#include "sim/common/error.hpp"
#include "sim/report/human_units.hpp"
#include "validate/json_input.hpp"

namespace zsim {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

// --- reading --------------------------------------------------------------------------------------------------

using json_input::bad;

// Reads keys of one JSON object, naming the file and the dotted key path in every error.
class Reader {
 public:
  Reader(const json& j, std::string source, std::string path)
      : j_(j), source_(std::move(source)), path_(std::move(path)) {
    if (!j_.is_object()) bad(source_, path_.empty() ? "(top level)" : path_, "must be a JSON object");
  }

  std::string key(const std::string& k) const { return path_.empty() ? k : path_ + "." + k; }
  bool has(const std::string& k) const { return j_.contains(k) && !j_.at(k).is_null(); }
  const json& need(const std::string& k) const {
    if (!j_.contains(k))
      bad(source_, key(k), "missing (is this a zsim.deepspeed_run result of validate/deepspeed/harness.py?)");
    return j_.at(k);
  }
  Reader object(const std::string& k) const { return Reader(need(k), source_, key(k)); }
  const json& array(const std::string& k) const {
    const json& v = need(k);
    if (!v.is_array()) bad(source_, key(k), "must be an array");
    return v;
  }
  std::string string(const std::string& k) const {
    const json& v = need(k);
    if (!v.is_string()) bad(source_, key(k), "must be a string");
    return v.get<std::string>();
  }
  // A string, or "" where the key is absent or null.
  std::string string_or_empty(const std::string& k) const {
    if (!has(k)) return "";
    if (!j_.at(k).is_string()) bad(source_, key(k), "must be a string or null");
    return j_.at(k).get<std::string>();
  }
  bool boolean(const std::string& k) const {
    const json& v = need(k);
    if (!v.is_boolean()) bad(source_, key(k), "must be true or false");
    return v.get<bool>();
  }
  std::int64_t integer(const std::string& k, std::int64_t min = 0) const {
    const json& v = need(k);
    if (!v.is_number_integer()) bad(source_, key(k), "must be an integer");
    const std::int64_t x = v.get<std::int64_t>();
    if (x < min) bad(source_, key(k), fmt::format("must be >= {} (is {})", min, x));
    return x;
  }
  Bytes bytes(const std::string& k) const { return integer(k, 0); }
  double number(const std::string& k) const {
    const json& v = need(k);
    if (!v.is_number()) bad(source_, key(k), "must be a number");
    return v.get<double>();
  }
  const std::string& source() const { return source_; }

 private:
  const json& j_;
  std::string source_, path_;
};

DsMemoryPoint memory_point(const Reader& r) { return {r.bytes("allocated"), r.bytes("reserved")}; }

void read_memory(const Reader& m, DsRank& rank, bool required) {
  if (!required && !m.has("steady_peak_allocated")) return;  // a failed rank that never finished a step
  rank.steady_peak_allocated = m.bytes("steady_peak_allocated");
  rank.steady_peak_reserved = m.bytes("steady_peak_reserved");
  rank.has_peaks = true;
  for (const char* p : {"after_forward", "after_backward", "after_step"})
    if (required || m.has(p)) rank.points[p] = memory_point(m.object(p));
  if (required || m.has("phase_peaks")) {
    const Reader peaks = m.object("phase_peaks");
    for (const char* p : {"forward", "backward", "step"})
      if (required || peaks.has(p)) rank.phase_peaks[p] = memory_point(peaks.object(p));
  }
}

void read_collectives(const Reader& c, DsRank& rank) {
  rank.collectives_step = static_cast<int>(c.integer("step"));
  const json& calls = c.array("calls");
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const Reader r(calls[i], c.source(), c.key(fmt::format("calls[{}]", i)));
    DsCollectiveCalls call;
    call.phase = r.string("phase");
    call.op = r.string("op");
    call.group_size = static_cast<int>(r.integer("group_size", 1));
    call.input_bytes = r.bytes("input_bytes");
    call.output_bytes = r.bytes("output_bytes");
    call.dtype = r.string_or_empty("dtype");
    call.count = static_cast<int>(r.integer("count", 1));
    rank.calls.push_back(std::move(call));
  }
  rank.has_collectives = true;
}

// The median of a list (0: empty).
double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}


// DsRank::reference_loop_s (or, with the autograd keys, autograd_reference_loop_s) from a rank's timing block:
// the pooled key, else the timed steps' median of the per-step key (host_cpu.py run_loop_seconds and
// run_autograd_loop_seconds read the same).
double reference_loop_seconds(const Reader& t, const char* pooled_key = "reference_loop_seconds",
                              const char* per_step_key = "reference_work_seconds") {
  if (t.has(pooled_key)) {
    const double s = t.number(pooled_key);
    if (!(s > 0)) bad(t.source(), t.key(pooled_key), "must be seconds > 0");
    return s;
  }
  if (!t.has("host_per_step") || !t.has("step_kinds")) return 0;
  const json& steps = t.array("host_per_step");
  const json& kinds = t.array("step_kinds");
  std::vector<double> loops;
  for (std::size_t i = 0; i < steps.size() && i < kinds.size(); ++i) {
    if (!kinds[i].is_string() || kinds[i].get<std::string>() != "timed" || !steps[i].is_object()) continue;
    const auto it = steps[i].find(per_step_key);
    if (it != steps[i].end() && it->is_number() && it->get<double>() > 0) loops.push_back(it->get<double>());
  }
  return loops.empty() ? 0 : median_of(std::move(loops));
}

DsRank read_rank(const Reader& r, bool run_ok) {
  DsRank rank;
  rank.rank = static_cast<int>(r.integer("rank"));
  rank.status = r.string("status");
  if (rank.status != "ok" && rank.status != "failed") bad(r.source(), r.key("status"), "must be \"ok\" or \"failed\"");
  if (run_ok && rank.status != "ok")
    bad(r.source(), r.key("status"), "is \"" + rank.status + "\" in a run whose status is \"ok\"");
  rank.error = r.string_or_empty("error");
  rank.failure_kind = r.string_or_empty("failure_kind");
  rank.stage_reached = r.string_or_empty("stage_reached");
  const bool ok = rank.status == "ok";
  if (ok || r.has("memory")) read_memory(r.object("memory"), rank, ok);
  // A failed rank's collectives block may hold only `init` (it stopped before the collectives step).
  if (ok || (r.has("collectives") && r.object("collectives").has("calls")))
    read_collectives(r.object("collectives"), rank);
  if (ok || r.has("timing")) {
    const Reader t = r.object("timing");
    if (ok && !t.has("median_step_seconds")) t.need("median_step_seconds");
    if (t.has("median_step_seconds")) {
      rank.median_step_s = t.number("median_step_seconds");
      if (!(rank.median_step_s >= 0)) bad(r.source(), t.key("median_step_seconds"), "must be seconds >= 0");
    }
    rank.reference_loop_s = reference_loop_seconds(t);
    rank.autograd_reference_loop_s =
        reference_loop_seconds(t, "autograd_reference_loop_seconds", "autograd_reference_work_seconds");
  }
  return rank;
}

}  // namespace

std::vector<std::string> host_speed_overrides(const DeepSpeedRun& run) {
  if (run.ranks.empty() || !(run.ranks.front().reference_loop_s > 0)) return {};
  const DsRank& r0 = run.ranks.front();
  std::vector<std::string> out{fmt::format("cluster.efficiency.deepspeed_host.loop_us={:.3f}", r0.reference_loop_s * 1e6)};
  if (r0.autograd_reference_loop_s > 0)
    out.push_back(
        fmt::format("cluster.efficiency.deepspeed_host.autograd_loop_us={:.3f}", r0.autograd_reference_loop_s * 1e6));
  return out;
}

bool is_deepspeed_run(const json& j) {
  return j.is_object() && j.contains("format") && j.at("format").is_string() &&
         j.at("format").get<std::string>() == kDeepSpeedRunFormat;
}

DeepSpeedRun deepspeed_run_from_json(const json& j, const std::string& source) {
  const Reader top(j, source, "");
  DeepSpeedRun run;
  run.source = source;
  if (top.string("format") != kDeepSpeedRunFormat)
    bad(source, "format", fmt::format("is \"{}\", not \"{}\"", top.string("format"), kDeepSpeedRunFormat));
  if (const std::int64_t v = top.integer("version"); v != kDeepSpeedRunVersion)
    bad(source, "version", fmt::format("{} is not supported (this zsim reads version {})", v, kDeepSpeedRunVersion));
  const Reader c = top.object("case");
  run.case_name = c.string("name");
  if (run.case_name.empty()) bad(source, "case.name", "must not be empty");
  run.case_dir = c.string("dir");
  if (c.has("files")) {
    const Reader f = c.object("files");
    if (f.has("scenario")) run.scenario_file = f.string("scenario");
    if (f.has("ds_config")) run.ds_config_file = f.string("ds_config");
  }
  if (c.has("ds_config")) run.ds_config = c.need("ds_config");
  run.world = static_cast<int>(c.integer("world", 1));
  run.shared_gpu = c.has("shared_gpu") ? c.boolean("shared_gpu") : run.world > 1;
  run.status = top.string("status");
  if (run.status != "ok" && run.status != "failed") bad(source, "status", "must be \"ok\" or \"failed\"");
  run.error = top.string_or_empty("error");
  run.failure_kind = top.string_or_empty("failure_kind");
  run.expected_status = top.string_or_empty("expected_status");
  run.as_expected = top.has("as_expected") ? top.boolean("as_expected")
                                           : run.expected_status.empty() || run.expected_status == run.status;
  run.timed_out = top.has("timed_out") && top.boolean("timed_out");
  if (top.has("versions")) {
    const Reader v = top.object("versions");
    auto str = [&v](const char* k) { return v.has(k) && v.need(k).is_string() ? v.need(k).get<std::string>() : ""; };
    run.deepspeed_version = str("deepspeed");
    run.torch_version = str("torch");
    run.transformers_version = str("transformers");
    run.gpu = str("gpu");
    run.python_version = str("python");
    run.cuda_version = str("cuda");
  }
  const json& ranks = top.array("ranks");
  for (std::size_t i = 0; i < ranks.size(); ++i)
    run.ranks.push_back(read_rank(Reader(ranks[i], source, fmt::format("ranks[{}]", i)), run.ok()));
  if (run.ok()) {
    if (static_cast<int>(run.ranks.size()) != run.world)
      bad(source, "ranks", fmt::format("has {} rank(s) where case.world is {}", run.ranks.size(), run.world));
    for (std::size_t i = 0; i < run.ranks.size(); ++i)
      if (run.ranks[i].rank != static_cast<int>(i))
        bad(source, fmt::format("ranks[{}].rank", i),
            fmt::format("is {}: ranks must be in rank order", run.ranks[i].rank));
  }
  return run;
}

std::vector<std::string> deepspeed_scenario_candidates(const DeepSpeedRun& run, const std::string& run_dir,
                                                       const std::string& cwd) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  auto add = [&out](const fs::path& p) {
    const std::string s = p.lexically_normal().string();
    if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  };
  auto ancestors = [](const fs::path& from) {
    std::vector<fs::path> v;
    for (fs::path p = from.lexically_normal(); !p.empty(); p = p.parent_path()) {
      v.push_back(p);
      if (p == p.parent_path()) break;
    }
    return v;
  };
  const fs::path dir(run.case_dir);
  std::vector<fs::path> bases = ancestors(run_dir);
  for (const fs::path& p : ancestors(cwd)) bases.push_back(p);
  if (dir.is_absolute())
    add(dir / run.scenario_file);
  else
    for (const fs::path& b : bases) add(b / dir / run.scenario_file);
  for (const fs::path& b : bases) add(b / "validate" / "deepspeed" / "cases" / run.case_name / run.scenario_file);
  return out;
}

// --- collectives ----------------------------------------------------------------------------------------------

std::optional<CollectiveKind> collective_kind_of_torch_op(std::string_view op) {
  if (op == "all_gather_into_tensor" || op == "_all_gather_base" || op == "all_gather" || op == "all_gather_coalesced")
    return CollectiveKind::all_gather;
  if (op == "reduce_scatter_tensor" || op == "_reduce_scatter_base" || op == "reduce_scatter")
    return CollectiveKind::reduce_scatter;
  if (op == "all_reduce" || op == "all_reduce_coalesced") return CollectiveKind::all_reduce;
  if (op == "all_to_all_single" || op == "all_to_all") return CollectiveKind::all_to_all;
  if (op == "broadcast") return CollectiveKind::broadcast;
  if (op == "reduce") return CollectiveKind::reduce;
  return std::nullopt;
}

Bytes schedule_bytes_of_call(CollectiveKind kind, Bytes input_bytes, Bytes output_bytes) {
  switch (kind) {
    case CollectiveKind::all_gather:
      return output_bytes;  // the gathered tensor
    case CollectiveKind::reduce_scatter:
      return input_bytes;  // the whole input, every rank's chunk
    case CollectiveKind::all_to_all:
      return input_bytes;  // the rank's whole send buffer
    case CollectiveKind::all_reduce:
    case CollectiveKind::broadcast:
    case CollectiveKind::reduce:
      return input_bytes;  // the buffer (the harness gives it as both)
  }
  return input_bytes;
}

std::string zsim_dtype_name(std::string_view t) {
  if (t == "bfloat16") return "bf16";
  if (t == "float16" || t == "half") return "fp16";
  if (t == "float32" || t == "float") return "fp32";
  if (t == "float64" || t == "double") return "fp64";
  return std::string(t);
}

namespace {

// One past the last op of step `step` of `s` and the first op of it (init first, then each step: its micro-steps'
// forward and backward, then its step phase).
std::pair<std::size_t, std::size_t> step_range(const Schedule& s, int step) {
  int current = 0;
  std::size_t begin = s.ops.size();
  bool in_step_phase = false;
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const Phase p = s.ops[i].phase;
    if (in_step_phase && p != Phase::step) {
      if (current == step) return {begin, i};
      ++current;
    }
    in_step_phase = p == Phase::step;
    if (current == step && p != Phase::init && begin == s.ops.size()) begin = i;
  }
  return {begin, s.ops.size()};
}

int steps_in(const Schedule& s) {
  int steps = 0;
  bool in_step_phase = false;
  for (const Op& op : s.ops) {
    if (in_step_phase && op.phase != Phase::step) ++steps;
    in_step_phase = op.phase == Phase::step;
  }
  return steps + (in_step_phase ? 1 : 0);
}

int phase_order(const std::string& p) {
  if (p == "forward") return 0;
  if (p == "backward") return 1;
  if (p == "step") return 2;
  return 3;
}

}  // namespace

std::vector<PredictedCollectives> step_collectives(const Schedule& s, int step) {
  std::map<std::tuple<Phase, CollectiveKind, int, Bytes, DType>, int> counts;
  const auto [begin, end] = step_range(s, step);
  for (std::size_t i = begin; i < end; ++i) {
    const Op& op = s.ops[i];
    if (op.kind != OpKind::collective) continue;
    const int size = op.collective.group >= 0 && op.collective.group < static_cast<int>(s.groups.size())
                         ? s.groups[op.collective.group].size
                         : 1;
    ++counts[{op.phase, op.collective.what, size, op.collective.bytes, op.collective.dtype}];
  }
  std::vector<PredictedCollectives> out;
  for (const auto& [k, n] : counts)
    out.push_back({std::get<0>(k), std::get<1>(k), std::get<2>(k), std::get<3>(k), std::get<4>(k), n});
  return out;
}

PhaseMemory phase_memory(const Schedule& s) {
  PhaseMemory pm;
  const int last = std::max(0, steps_in(s) - 1);
  const auto [begin, end] = step_range(s, last);
  int last_micro = 0;
  for (std::size_t i = begin; i < end; ++i)
    if (s.ops[i].phase != Phase::step) last_micro = std::max(last_micro, s.ops[i].micro_step);
  Bytes live = 0;
  for (std::size_t i = 0; i < end; ++i) {
    const Op& op = s.ops[i];
    if ((op.kind == OpKind::alloc || op.kind == OpKind::free) && op.mem.tier == Tier::gpu)
      live += op.kind == OpKind::alloc ? op.mem.bytes : -op.mem.bytes;
    if (i < begin || op.phase == Phase::init) continue;
    const std::string phase = to_string(op.phase);
    Bytes& peak = pm.phase_peaks[phase];
    peak = std::max(peak, live);
    if (op.phase == Phase::step || op.micro_step == last_micro) pm.points["after_" + phase] = live;
  }
  return pm;
}

Bytes predicted_reserved_from_report(const ordered_json& report) {
  if (!report.contains("memory") || !report["memory"].contains("gpu")) return 0;
  const ordered_json& gpu = report["memory"]["gpu"];
  if (gpu.contains("reserved") && gpu["reserved"].is_number_integer()) return gpu["reserved"].get<Bytes>();
  return 0;
}

bool DsCollectiveRow::bytes_match() const {
  if (measured_bytes == 0) return predicted_bytes == 0;
  return std::fabs(static_cast<double>(predicted_bytes - measured_bytes) / static_cast<double>(measured_bytes)) <=
         kCollectiveBytesTolerance;
}

namespace {

double rel(double predicted, double measured) { return measured != 0 ? (predicted - measured) / measured : 0; }

void add_unique(std::vector<std::string>& v, const std::string& x) {
  if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
}

}  // namespace

DsValidation compare_deepspeed_run(const DeepSpeedRun& run, const DsPrediction& p) {
  if (!run.ok() || run.ranks.empty()) throw std::logic_error("compare_deepspeed_run: the run failed");
  DsValidation v;
  v.case_name = run.case_name;
  v.run_file = run.source;
  v.scenario = p.scenario;
  v.world = run.world;
  v.shared_gpu = run.shared_gpu;
  v.deepspeed_version = run.deepspeed_version;
  v.torch_version = run.torch_version;
  v.transformers_version = run.transformers_version;
  v.gpu = run.gpu;
  const DsRank& r0 = run.ranks.front();

  v.peak_predicted = p.gpu_peak;
  v.peak_measured_rank0 = r0.steady_peak_allocated;
  for (const DsRank& r : run.ranks) {
    if (r.steady_peak_allocated > v.peak_measured_max) {
      v.peak_measured_max = r.steady_peak_allocated;
      v.peak_max_rank = r.rank;
    }
    v.reserved_measured_max = std::max(v.reserved_measured_max, r.steady_peak_reserved);
  }
  v.peak_rel_error = rel(double(v.peak_predicted), double(v.peak_measured_max));
  v.peak_rel_error_rank0 = rel(double(v.peak_predicted), double(v.peak_measured_rank0));
  v.reserved_predicted = p.gpu_reserved;
  v.reserved_measured_rank0 = r0.steady_peak_reserved;

  for (const auto& [name, m] : r0.points)
    if (const auto it = p.phases.points.find(name); it != p.phases.points.end())
      v.points[name] = {it->second, m.allocated};
  for (const auto& [name, m] : r0.phase_peaks)
    if (const auto it = p.phases.phase_peaks.find(name); it != p.phases.phase_peaks.end())
      v.phase_peaks[name] = {it->second, m.allocated};

  // Collectives per (phase, op, group size).
  using Key = std::tuple<int, std::string, std::string, int>;  // (phase order, phase, op, group size)
  std::map<Key, DsCollectiveRow> rows;
  auto row = [&rows](const std::string& phase, const std::string& op, int group) -> DsCollectiveRow& {
    DsCollectiveRow& r = rows[{phase_order(phase), phase, op, group}];
    r.phase = phase;
    r.op = op;
    r.group_size = group;
    return r;
  };
  std::set<std::tuple<std::string, std::string, int>> tiny_predicted;  // where zsim has a call of a few bytes
  for (const PredictedCollectives& c : p.collectives) {
    const std::string phase = to_string(c.phase), op = to_string(c.kind);
    DsCollectiveRow& r = row(phase, op, c.group_size);
    r.predicted_calls += c.count;
    r.predicted_bytes += c.bytes * c.count;
    add_unique(r.predicted_dtypes, to_string(c.dtype));
    if (c.bytes <= kTinyCollectiveBytes * c.group_size) tiny_predicted.insert({phase, op, c.group_size});
  }
  v.collectives_step = r0.collectives_step;
  for (const DsCollectiveCalls& c : r0.calls) {
    const std::optional<CollectiveKind> kind = collective_kind_of_torch_op(c.op);
    if (!kind) {
      v.not_modelled.push_back({c, "zsim has no collective of this kind"});
      continue;
    }
    const std::string op = to_string(*kind);
    if (c.input_bytes <= kTinyCollectiveBytes && !tiny_predicted.count({c.phase, op, c.group_size})) {
      v.not_modelled.push_back(
          {c, fmt::format("DeepSpeed's bookkeeping ({} B a rank; zsim models no {} of a few bytes here)", c.input_bytes,
                          op)});
      continue;
    }
    DsCollectiveRow& r = row(c.phase, op, c.group_size);
    r.measured_calls += c.count;
    r.measured_bytes += schedule_bytes_of_call(*kind, c.input_bytes, c.output_bytes) * c.count;
    add_unique(r.measured_dtypes, zsim_dtype_name(c.dtype));
    add_unique(r.measured_ops, c.op);
  }
  for (auto& [k, r] : rows) {
    v.collectives_match = v.collectives_match && r.calls_match() && r.bytes_match();
    v.collectives.push_back(std::move(r));
  }

  v.step_predicted_s = p.step_s;
  v.reference_loop_s = r0.reference_loop_s;
  v.host_speed_scale = p.host_speed_scale;
  v.autograd_reference_loop_s = r0.autograd_reference_loop_s;
  v.autograd_host_speed_scale = p.autograd_host_speed_scale;
  v.step_measured_s = r0.median_step_s;
  return v;
}

namespace {

// The leading release of a version, "2.11.0" of "2.11.0+cu130" (no trailing dot); "" where it starts with no digit.
std::string_view release_of(std::string_view v) {
  std::size_t n = 0;
  while (n < v.size() && (std::isdigit(static_cast<unsigned char>(v[n])) || v[n] == '.')) ++n;
  while (n > 0 && v[n - 1] == '.') --n;
  return v.substr(0, n);
}

}  // namespace

bool versions_agree(std::string_view run, std::string_view fitted) {
  if (run.empty() || fitted.empty()) return true;
  const std::string_view a = release_of(run), b = release_of(fitted);
  if (a.empty() || b.empty()) return run == fitted;
  const std::string_view shorter = a.size() <= b.size() ? a : b, longer = a.size() <= b.size() ? b : a;
  return longer.substr(0, shorter.size()) == shorter && (longer.size() == shorter.size() || longer[shorter.size()] == '.');
}

std::vector<std::string> stack_differences(const FittedUnder& fitted, const DeepSpeedRun& run) {
  std::vector<std::string> out;
  for (const auto& [ran, was, name] :
       {std::tuple{run.deepspeed_version, fitted.deepspeed, "DeepSpeed"}, {run.torch_version, fitted.torch, "torch"},
        {run.transformers_version, fitted.transformers, "transformers"}, {run.python_version, fitted.python, "python"},
        {run.cuda_version, fitted.cuda, "CUDA"}, {run.gpu, fitted.gpu, "GPU"}})
    if (!versions_agree(ran, was)) out.push_back(fmt::format("{} {} (the profile's figures: {})", name, ran, was));
  return out;
}

// --- output ---------------------------------------------------------------------------------------------------

namespace {

ordered_json error_or_null(double predicted, double measured) {
  if (measured == 0) return nullptr;
  return rel(predicted, measured);
}

std::string joined(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

std::string mib(Bytes b) { return fmt::format("{:.1f} MiB", static_cast<double>(b) / 1048576.0); }

std::string pct(double e) { return fmt::format("{:+.1f}%", 100 * e); }

std::string versions_line(const std::string& ds, const std::string& torch, const std::string& tf,
                          const std::string& gpu) {
  std::vector<std::string> parts;
  if (!ds.empty()) parts.push_back("DeepSpeed " + ds);
  if (!torch.empty()) parts.push_back("torch " + torch);
  if (!tf.empty()) parts.push_back("transformers " + tf);
  std::string out = joined(parts);
  if (!gpu.empty()) out += (out.empty() ? "on " : " on ") + gpu;
  return out;
}

std::string shape_of(int world, bool shared_gpu) {
  if (world == 1) return "1 rank";
  return fmt::format("{} ranks{}", world, shared_gpu ? " sharing one GPU" : "");
}

}  // namespace

ordered_json deepspeed_validation_json(const DsValidation& v) {
  ordered_json j;
  j["format"] = "zsim.deepspeed_validation";
  j["version"] = 1;
  j["case"] = v.case_name;
  j["run"] = v.run_file;
  j["scenario"] = v.scenario;
  j["status"] = "ok";
  j["world"] = v.world;
  j["shared_gpu"] = v.shared_gpu;
  j["versions"] = {{"deepspeed", v.deepspeed_version},
                   {"torch", v.torch_version},
                   {"transformers", v.transformers_version},
                   {"gpu", v.gpu}};
  j["stack_differences"] = v.stack_differences;
  j["peak_allocated"] = {{"predicted_bytes", v.peak_predicted},
                         {"measured_bytes", v.peak_measured_max},
                         {"measured_rank", v.peak_max_rank},
                         {"rel_error", v.peak_rel_error},
                         {"measured_rank0_bytes", v.peak_measured_rank0},
                         {"rank0_rel_error", v.peak_rel_error_rank0}};
  const bool reserved = v.reserved_predicted > 0;
  j["peak_reserved"] = {
      {"predicted_bytes", v.reserved_predicted},
      {"modelled", reserved},
      {"measured_bytes", v.reserved_measured_max},
      {"measured_rank0_bytes", v.reserved_measured_rank0},
      {"rel_error", reserved ? error_or_null(double(v.reserved_predicted), double(v.reserved_measured_max))
                             : ordered_json(nullptr)}};
  auto pairs = [](const std::map<std::string, std::pair<Bytes, Bytes>>& m) {
    ordered_json o = ordered_json::object();
    for (const char* k : {"after_forward", "after_backward", "after_step", "forward", "backward", "step"})
      if (const auto it = m.find(k); it != m.end())
        o[k] = {{"predicted_bytes", it->second.first},
                {"measured_bytes", it->second.second},
                {"rel_error", error_or_null(double(it->second.first), double(it->second.second))}};
    return o;
  };
  j["memory_points"] = pairs(v.points);
  j["phase_peaks"] = pairs(v.phase_peaks);
  ordered_json rows = ordered_json::array();
  for (const DsCollectiveRow& r : v.collectives)
    rows.push_back({{"phase", r.phase},
                    {"op", r.op},
                    {"group_size", r.group_size},
                    {"predicted_calls", r.predicted_calls},
                    {"measured_calls", r.measured_calls},
                    {"predicted_bytes", r.predicted_bytes},
                    {"measured_bytes", r.measured_bytes},
                    {"bytes_rel_error", error_or_null(double(r.predicted_bytes), double(r.measured_bytes))},
                    {"calls_match", r.calls_match()},
                    {"bytes_match", r.bytes_match()},
                    {"predicted_dtypes", r.predicted_dtypes},
                    {"measured_dtypes", r.measured_dtypes},
                    {"measured_ops", r.measured_ops}});
  j["collectives_step"] = v.collectives_step;
  j["collectives"] = rows;
  ordered_json nm = ordered_json::array();
  for (const DsNotModelled& n : v.not_modelled)
    nm.push_back({{"phase", n.call.phase},
                  {"op", n.call.op},
                  {"group_size", n.call.group_size},
                  {"input_bytes", n.call.input_bytes},
                  {"output_bytes", n.call.output_bytes},
                  {"dtype", n.call.dtype},
                  {"count", n.call.count},
                  {"why", n.why}});
  j["collectives_not_modelled"] = nm;
  j["collectives_match"] = v.collectives_match;
  j["step_time"] = {{"predicted_s", v.step_predicted_s},
                    {"measured_s", v.step_measured_s},
                    {"rel_error", error_or_null(v.step_predicted_s, v.step_measured_s)},
                    {"reference_loop_s", v.reference_loop_s > 0 ? ordered_json(v.reference_loop_s) : ordered_json()},
                    {"host_speed_scale", v.host_speed_scale},
                    {"autograd_reference_loop_s",
                     v.autograd_reference_loop_s > 0 ? ordered_json(v.autograd_reference_loop_s) : ordered_json()},
                    {"autograd_host_speed_scale", v.autograd_host_speed_scale},
                    {"note", v.shared_gpu && v.world > 1 ? "ranks shared one GPU: the measured step is not that of "
                                                           "separate GPUs"
                                                         : ""}};
  return j;
}

std::string format_deepspeed_validation(const DsValidation& v) {
  std::string out;
  out += fmt::format("  scenario: {} ({})\n", v.scenario, shape_of(v.world, v.shared_gpu));
  out += "                                     predicted        measured    error\n";
  out += fmt::format("GPU peak allocated, rank 0        {:>13}   {:>13}   {}\n", mib(v.peak_predicted),
                     mib(v.peak_measured_rank0), pct(v.peak_rel_error_rank0));
  if (v.world > 1)
    out +=
        fmt::format("GPU peak allocated, max {:<9} {:>13}   {:>13}   {}\n", fmt::format("(rank {})", v.peak_max_rank),
                    mib(v.peak_predicted), mib(v.peak_measured_max), pct(v.peak_rel_error));
  if (v.reserved_predicted > 0)
    out += fmt::format("GPU peak reserved, max            {:>13}   {:>13}   {}\n", mib(v.reserved_predicted),
                       mib(v.reserved_measured_max),
                       pct(rel(double(v.reserved_predicted), double(v.reserved_measured_max))));
  else
    out += fmt::format("GPU peak reserved, max            {:>13}   {:>13}\n", "not modelled",
                       mib(v.reserved_measured_max));
  out += fmt::format("step time                         {:>13}   {:>13}   {}{}\n",
                     fmt::format("{:.3f} ms", v.step_predicted_s * 1e3),
                     v.step_measured_s > 0 ? fmt::format("{:.3f} ms", v.step_measured_s * 1e3) : std::string("none"),
                     v.step_measured_s > 0 ? pct(rel(v.step_predicted_s, v.step_measured_s)) : std::string(""),
                     v.shared_gpu && v.world > 1 ? "   (ranks share one GPU: not a multi-GPU step)" : "");
  if (v.reference_loop_s > 0)
    out += fmt::format("  the host's reference loop beside the steps {:.3f} ms: zsim's host figures x {:.3f}\n",
                       v.reference_loop_s * 1e3, v.host_speed_scale);
  if (v.autograd_reference_loop_s > 0)
    out += fmt::format("  on autograd's thread {:.3f} ms: the backward's figures x {:.3f}\n",
                       v.autograd_reference_loop_s * 1e3, v.autograd_host_speed_scale);
  if (!v.stack_differences.empty())
    out += fmt::format("  the run's stack differs from the one the figures were fitted under: {}\n",
                       joined(v.stack_differences, "; "));
  if (!v.points.empty() || !v.phase_peaks.empty()) {
    out +=
        "\nGPU memory allocated, rank 0 (zsim: program order of its last step)   predicted        measured    error\n";
    auto line = [&out](const std::string& what, const std::pair<Bytes, Bytes>& pm) {
      out += fmt::format("  {:<66} {:>13}   {:>13}   {}\n", what, mib(pm.first), mib(pm.second),
                         pm.second > 0 ? pct(rel(double(pm.first), double(pm.second))) : std::string(""));
    };
    for (const char* k : {"after_forward", "after_backward", "after_step"})
      if (const auto it = v.points.find(k); it != v.points.end())
        line(std::string(k) + " (last micro-step)", it->second);
    for (const char* k : {"forward", "backward", "step"})
      if (const auto it = v.phase_peaks.find(k); it != v.phase_peaks.end())
        line(std::string("peak in ") + k, it->second);
  }
  out +=
      fmt::format("\ncollective calls of one step (rank 0{}; bytes per step, nccl-tests' size)\n",
                  v.collectives_step >= 0 ? fmt::format(", DeepSpeed's step {}", v.collectives_step) : std::string());
  out += "  phase     op              group    calls: zsim  DeepSpeed     bytes: zsim     DeepSpeed    error\n";
  for (const DsCollectiveRow& r : v.collectives)
    out += fmt::format(
        "  {:<9} {:<15} {:>5}    {:>11}  {:>9}   {:>13} {:>13}  {:>7}  {}{}\n", r.phase, r.op, r.group_size,
        r.predicted_calls, r.measured_calls, human_bytes(r.predicted_bytes), human_bytes(r.measured_bytes),
        r.measured_bytes > 0 ? pct(rel(double(r.predicted_bytes), double(r.measured_bytes))) : std::string("-"),
        r.calls_match() && r.bytes_match() ? "ok" : "DIFFERS",
        r.measured_ops.empty() ? "" : "   (" + joined(r.measured_ops) + ")");
  if (v.collectives.empty()) out += "  (none on either side)\n";
  if (!v.not_modelled.empty()) {
    out += "  not modelled by zsim (listed, not compared):\n";
    for (const DsNotModelled& n : v.not_modelled)
      out += fmt::format("    {:<9} {:<22} group {:>2}: {} call{} of {} B in, {} B out{}: {}\n", n.call.phase,
                         n.call.op, n.call.group_size, n.call.count, n.call.count == 1 ? "" : "s", n.call.input_bytes,
                         n.call.output_bytes, n.call.dtype.empty() ? "" : " " + n.call.dtype, n.why);
  }
  int matching = 0;
  for (const DsCollectiveRow& r : v.collectives) matching += r.calls_match() && r.bytes_match();
  out += fmt::format("  {} of {} (phase, op, group) rows match in calls and bytes (within {:.1f}%)\n", matching,
                     v.collectives.size(), 100 * kCollectiveBytesTolerance);
  return out;
}

std::string format_deepspeed_failure(const DeepSpeedRun& run) {
  std::string out =
      fmt::format("DeepSpeed run {} of case {} FAILED ({}{}): {}\n", run.source, run.case_name,
                  run.failure_kind.empty() ? "no failure kind" : run.failure_kind, run.timed_out ? ", timed out" : "",
                  run.error.empty() ? "(no error recorded)" : run.error);
  if (!run.expected_status.empty())
    out += fmt::format("  the case expects \"{}\": the failure is {}\n", run.expected_status,
                       run.as_expected ? "as expected" : "NOT as expected");
  for (const DsRank& r : run.ranks)
    out += fmt::format(
        "  rank {}: {}{}{}{}{}\n", r.rank, r.status, r.stage_reached.empty() ? "" : ", reached " + r.stage_reached,
        r.failure_kind.empty() ? "" : ", " + r.failure_kind, r.error.empty() ? "" : ": " + r.error,
        r.has_peaks
            ? fmt::format(" (steady peak allocated {} over the steps it finished)", mib(r.steady_peak_allocated))
            : "");
  out += "  nothing to compare: zsim validate compares runs whose status is \"ok\"\n";
  return out;
}

ordered_json deepspeed_failure_json(const DeepSpeedRun& run) {
  ordered_json j;
  j["format"] = "zsim.deepspeed_validation";
  j["version"] = 1;
  j["case"] = run.case_name;
  j["run"] = run.source;
  j["status"] = "failed";
  j["failure_kind"] = run.failure_kind;
  j["error"] = run.error;
  j["expected_status"] = run.expected_status;
  j["as_expected"] = run.as_expected;
  j["timed_out"] = run.timed_out;
  ordered_json ranks = ordered_json::array();
  for (const DsRank& r : run.ranks) {
    ordered_json rank = {{"rank", r.rank},
                         {"status", r.status},
                         {"stage_reached", r.stage_reached},
                         {"failure_kind", r.failure_kind},
                         {"error", r.error}};
    if (r.has_peaks) rank["steady_peak_allocated"] = r.steady_peak_allocated;  // over the steps it finished
    ranks.push_back(std::move(rank));
  }
  j["ranks"] = ranks;
  return j;
}

// --- the record -----------------------------------------------------------------------------------------------

namespace {

// One figure's errors over the runs: their median |error| and the worst, with its case.
struct ErrorTally {
  std::vector<double> abs_errors;
  double worst = 0;
  std::string worst_case;
  void add(const std::string& name, double error) {
    abs_errors.push_back(std::fabs(error));
    if (std::fabs(error) >= std::fabs(worst)) {
      worst = error;
      worst_case = name;
    }
  }
  double median() const { return median_of(abs_errors); }
};

// The step time's error where one rank per GPU timed it (ranks sharing one GPU do not time a multi-GPU step).
std::optional<double> one_rank_step_error(const DsValidation& v) {
  if (!(v.step_measured_s > 0) || (v.shared_gpu && v.world > 1)) return std::nullopt;
  return (v.step_predicted_s - v.step_measured_s) / v.step_measured_s;
}

}  // namespace

std::string deepspeed_summary_markdown(const std::vector<DsRecordEntry>& entries, const std::string& record_dir,
                                       double band_margin) {
  std::string out;
  out += fmt::format("# zsim against DeepSpeed: {}\n\n", record_dir);
  out += fmt::format(
      "Written by `zsim validate --deepspeed-summary {}` (do not edit: run it again after a model change, with "
      "`--write-bands` to move the bands). Each run of `runs/` is a result of validate/deepspeed/harness.py; zsim "
      "predicts its case's `scenario.yaml` (validate/deepspeed/cases/<case>/) on the run's ranks. Errors are "
      "(predicted - measured) / measured. Peak allocated: zsim's GPU peak (its memory walk) against the largest "
      "rank's `steady_peak_allocated`. Reserved: the schedule's GPU allocations and frees walked through zsim's model of "
      "PyTorch's caching allocator (sim/report/caching_allocator.hpp) against the largest rank's "
      "`steady_peak_reserved`. Collectives: rank 0's calls of one step per (phase, op, group size), against zsim's step 0: rows "
      "whose calls are equal and bytes within {:.1f}%; DeepSpeed's bookkeeping calls zsim does not model (a few bytes) "
      "are listed in each validation, not counted. Step time: the median timed step; ranks sharing one GPU do not time "
      "a multi-GPU step.\n\n",
      record_dir, 100 * kCollectiveBytesTolerance);
  std::vector<std::string> versions;
  for (const DsRecordEntry& e : entries) {
    const std::string line =
        versions_line(e.run.deepspeed_version, e.run.torch_version, e.run.transformers_version, e.run.gpu);
    if (!line.empty()) add_unique(versions, line);
  }
  if (!versions.empty()) out += "Measured with " + joined(versions, "; ") + ".\n\n";

  out +=
      "| case | ranks | peak allocated: zsim | DeepSpeed | error | reserved: zsim | DeepSpeed | error | collective "
      "rows matching (calls / bytes / rows) | not modelled | step: zsim | DeepSpeed | error |\n";
  out += "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  ErrorTally peak, reserved_tally, step;
  int multi = 0, multi_bytes = 0, multi_calls = 0;
  std::vector<const DsRecordEntry*> failed;
  for (const DsRecordEntry& e : entries) {
    if (!e.validation) {
      failed.push_back(&e);
      continue;
    }
    const DsValidation& v = *e.validation;
    int calls = 0, bytes = 0;
    for (const DsCollectiveRow& r : v.collectives) {
      calls += r.calls_match();
      bytes += r.bytes_match();
    }
    if (v.world > 1) {
      ++multi;
      multi_calls += calls == static_cast<int>(v.collectives.size());
      multi_bytes += bytes == static_cast<int>(v.collectives.size());
    }
    peak.add(e.name, v.peak_rel_error);
    const bool reserved = v.reserved_predicted > 0 && v.reserved_measured_max > 0;
    const double reserved_error =
        reserved ? (double(v.reserved_predicted) - double(v.reserved_measured_max)) / double(v.reserved_measured_max) : 0;
    if (reserved) reserved_tally.add(e.name, reserved_error);
    int not_modelled = 0;
    for (const DsNotModelled& n : v.not_modelled) not_modelled += n.call.count;
    const std::optional<double> step_error = one_rank_step_error(v);
    if (step_error) step.add(e.name, *step_error);
    out += fmt::format(
        "| {} | {} | {} | {} | {} | {} | {} | {} | {} / {} / {} | {} | {:.1f} ms | {} | {} |\n", e.name, v.world,
        mib(v.peak_predicted), mib(v.peak_measured_max), pct(v.peak_rel_error),
        v.reserved_predicted > 0 ? mib(v.reserved_predicted) : std::string("not modelled"),
        mib(v.reserved_measured_max), reserved ? pct(reserved_error) : std::string("-"), calls, bytes, v.collectives.size(), not_modelled, v.step_predicted_s * 1e3,
        v.step_measured_s > 0
            ? fmt::format("{:.1f} ms{}", v.step_measured_s * 1e3, v.shared_gpu && v.world > 1 ? " (shared GPU)" : "")
            : std::string("none"),
        step_error ? pct(*step_error) : std::string("-"));
  }
  if (!failed.empty()) {
    out += "\nFailed runs (recorded as DeepSpeed failed them; nothing to compare):\n\n";
    out += "| case | failure | error | as the case expects |\n|---|---|---|---|\n";
    for (const DsRecordEntry* e : failed)
      out += fmt::format("| {} | {} | {} | {} |\n", e->name, e->run.failure_kind, e->run.error,
                         e->run.as_expected ? "yes" : "no");
  }
  out += fmt::format(
      "\nPeak allocated over {} ok runs: median |error| {:.1f}% (issue 38's target <= 3%: {}), worst "
      "{} ({}; target <= 8%: {}).\n",
      peak.abs_errors.size(), 100 * peak.median(), peak.median() <= 0.03 ? "met" : "not met", pct(peak.worst),
      peak.worst_case, std::fabs(peak.worst) <= 0.08 ? "met" : "not met");
  if (!reserved_tally.abs_errors.empty())
    out += fmt::format(
        "Peak reserved over {} ok runs: median |error| {:.1f}%, worst {} ({}; issue 38's target <= 10%: {}).\n",
        reserved_tally.abs_errors.size(), 100 * reserved_tally.median(), pct(reserved_tally.worst),
        reserved_tally.worst_case, std::fabs(reserved_tally.worst) <= 0.10 ? "met" : "not met");
  if (!step.abs_errors.empty())
    out += fmt::format(
        "Step time over {} runs of one rank per GPU: median |error| {:.1f}% (issue 39's target <= 10%: {}), worst {} "
        "({}; target <= 20%: {}).\n",
        step.abs_errors.size(), 100 * step.median(), step.median() <= 0.10 ? "met" : "not met", pct(step.worst),
        step.worst_case, std::fabs(step.worst) <= 0.20 ? "met" : "not met");
  out += fmt::format(
      "Collectives of the {} multi-rank ok runs: calls equal on every row in {}, bytes within {:.1f}% on "
      "every row in {}.\n",
      multi, multi_calls, 100 * kCollectiveBytesTolerance, multi_bytes);
  out += fmt::format(
      "\nBands ({}): each ok run's peak-allocated error (and, one rank per GPU, its step-time error) as recorded here, "
      "+-{:.1f} percentage points; CI "
      "(`validation_results_test`, validate/results_band_test.cpp) validates every run again and fails "
      "when one leaves its band. After a deliberate model change: `zsim validate --deepspeed-summary {} "
      "--write-bands`, and commit summary.md and the bands with the reason.\n",
      kDeepSpeedBandsFile, 100 * band_margin, record_dir);
  return out;
}

ordered_json deepspeed_bands_json(const std::vector<DsRecordEntry>& entries, double band_margin) {
  ordered_json j;
  j["format"] = "zsim.deepspeed_bands";
  j["version"] = 1;
  j["margin"] = band_margin;
  j["what"] =
      "peak_allocated.rel_error of `zsim validate RUN --json` (zsim's GPU peak against the largest rank's "
      "steady_peak_allocated) must stay in [min, max]; step_time.rel_error, where one rank per GPU timed the step, in "
      "[step_min, step_max]";
  ordered_json runs = ordered_json::object();
  for (const DsRecordEntry& e : entries) {
    if (!e.validation) {
      runs[e.name] = {{"status", "failed"}};
      continue;
    }
    const DsValidation& v = *e.validation;
    const double err = v.peak_rel_error;
    runs[e.name] = {
        {"status", "ok"}, {"peak_allocated_rel_error", err}, {"min", err - band_margin}, {"max", err + band_margin}};
    // Step time, where one rank per GPU timed it (issue 39): the same margin around the error recorded.
    if (const std::optional<double> step = one_rank_step_error(v)) {
      runs[e.name]["step_rel_error"] = *step;
      runs[e.name]["step_min"] = *step - band_margin;
      runs[e.name]["step_max"] = *step + band_margin;
    }
  }
  j["runs"] = runs;
  return j;
}

}  // namespace zsim
