#include "sim/cli/repeated_micro_steps.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "sim/engine/simulate.hpp"
#include "sim/plan/plan.hpp"
#include "sim/plan/schedule_builder.hpp"

namespace zsim {

namespace {

// A figure is extended only when the three probes' residual, times the micro-steps it is extended over, stays
// under this fraction of its scale (the step time for times): the extension is then exact to well within the
// 1e-9 the oracle test asks for.
constexpr double kTolerance = 1e-10;

// Walks and times the program with `built` micro-steps per step.
struct Probe {
  Report report;
  TimingReport time;
  std::int64_t tokens_per_step = 0;
  std::size_t ops = 0;
  bool apart = false;     // no memory wait, and each step ended before the next one's steady micro-steps
  bool periodic = false;  // apart, its last three steady micro-steps run as shifts of one another
                          // (steady_timing), and they begin with the same live bytes (steady_memory)
};

// Whether, in every step, steady micro-step m + 1 runs exactly as micro-step m shifted in time, for m = last - 2
// and last - 1 (`last` the last steady micro-step built): every op's start and end moved by the same amount,
// within a relative 1e-12 of the program's length. Ops of one micro-step wait for ops of the same and the
// previous one (and for long-finished init ops), and without memory waits an op's times depend only on earlier
// ops, so two such shifts in a row mean every further steady micro-step is that shift again.
bool steady_timing(const Schedule& s, const TimingResult& t, int last) {
  if (last < 3) return false;
  const Seconds tolerance = 1e-12 * std::max(t.makespan_s, 1e-9);
  for (const StepSpan& step : t.steps) {
    std::vector<std::vector<OpId>> micro(3);
    for (OpId id = step.first; id <= step.last; ++id) {
      const int m = s.ops[id].micro_step - (last - 2);
      if (m >= 0 && m < 3 && s.ops[id].phase != Phase::step) micro[m].push_back(id);
    }
    for (int m = 0; m < 2; ++m) {
      const std::vector<OpId>&a = micro[m], &b = micro[m + 1];
      if (a.empty() || a.size() != b.size()) return false;
      const Seconds shift = t.ops[b[0]].start_s - t.ops[a[0]].start_s;
      for (size_t i = 0; i < a.size(); ++i)
        if (std::abs(t.ops[b[i]].start_s - t.ops[a[i]].start_s - shift) > tolerance ||
            std::abs(t.ops[b[i]].end_s - t.ops[a[i]].end_s - shift) > tolerance)
          return false;
    }
  }
  return true;
}

// Whether, in program order, every tier holds the same live bytes when each steady micro-step begins and when
// the last one begins (no net change per steady micro-step): then each steady micro-step replays the same live
// bytes, so the walk's peaks are the same whatever their number (the peak op's id only moves with the ops after
// them), and so are the timed ones once the timing is periodic.
bool steady_memory(const Schedule& s) {
  Bytes live[3] = {0, 0, 0};
  std::vector<std::array<Bytes, 3>> at_start;  // live bytes at each micro-step's first op, per step
  int micro = -1, step = -1;
  const std::vector<int> step_of = find_steps(s, nullptr);
  auto check_step = [&] {
    // Micro-steps 1 .. last: at_start[1 ..] (micro-step 0 builds what the steady ones keep, e.g. hpZ copies).
    for (size_t m = 2; m < at_start.size(); ++m)
      if (at_start[m] != at_start[1]) return false;
    return true;
  };
  for (const Op& op : s.ops) {
    if (step_of[op.id] != step) {
      if (!check_step()) return false;
      at_start.clear();
      step = step_of[op.id];
      micro = -1;
    }
    if (step >= 0 && op.phase != Phase::step && op.micro_step != micro) {
      micro = op.micro_step;
      at_start.push_back({live[0], live[1], live[2]});
    }
    if (op.kind == OpKind::alloc) live[static_cast<int>(op.mem.tier)] += op.mem.bytes;
    if (op.kind == OpKind::free) live[static_cast<int>(op.mem.tier)] -= op.mem.bytes;
  }
  return check_step();
}

// Whether every step has ended before the next step's first steady micro-step (micro-step 1) starts: a
// previous step's tail (a CPU optimizer, its copies) that still runs into the steady micro-steps would split
// their time differently with their number, though they shift alike.
bool steps_apart(const Schedule& s, const TimingResult& t) {
  for (size_t k = 1; k < t.steps.size(); ++k)
    for (OpId id = t.steps[k].first; id <= t.steps[k].last; ++id)
      if (s.ops[id].micro_step == 1 && s.ops[id].phase != Phase::step) {
        if (t.ops[id].start_s < t.steps[k - 1].end_s) return false;
        break;
      }
  return true;
}

Probe probe(const Scenario& scenario, const Plan& plan, const RepeatOptions& o, int built) {
  const Schedule s = make_schedule_with_micro_steps(scenario, plan, o.steps, built);
  Probe p;
  p.report = make_report(scenario, s);  // runs check_schedule
  p.tokens_per_step = s.meta.tokens_per_step;
  p.ops = s.ops.size();
  SimOptions sim;
  sim.precision = scenario.training.precision;
  sim.share = o.share;
  sim.schedule_checked = true;
  const TimingResult t = simulate(scenario.cluster, s, sim);
  // Every contributor is kept: one outside the top few of a short program may enter it in the long one. The
  // full summary even for throughput-only callers: its timed peak tells whether the long program would wait.
  p.time = summarize(s, t, std::numeric_limits<int>::max());
  p.time.critical_ops.clear();
  p.apart = t.memory_waits == 0 && steps_apart(s, t);
  p.periodic = p.apart && steady_timing(s, t, built - 2) && steady_memory(s);
  return p;
}

// The straight line through figures of three consecutive micro-step counts, extended to `target` micro-steps;
// ok() turns false as soon as one figure is off its line.
// With `check_third` false the line is the one through b and c (a is b's probe again): the periodic state
// already proves the figures affine from b on, and a third probe would cost as much as the two.
class Line {
 public:
  Line(int last_built, int target, bool check_third)
      : ahead_(target - last_built), span_(target - last_built + 2), check_third_(check_third) {}
  bool ok() const { return ok_; }

  std::int64_t integer(std::int64_t a, std::int64_t b, std::int64_t c) {
    if (check_third_ && c - b != b - a) ok_ = false;
    return c + ahead_ * (c - b);
  }
  double real(double a, double b, double c, double scale) {
    const double residual = (c - b) - (b - a);
    if (check_third_ && !(std::abs(residual) * span_ <= kTolerance * std::abs(scale))) ok_ = false;
    return c + ahead_ * (c - b);
  }
  double real(double a, double b, double c) { return real(a, b, c, std::max({std::abs(a), std::abs(b), std::abs(c)})); }
  template <class T>
  const T& same(const T& a, const T& b, const T& c) {
    if (!(a == b && b == c)) ok_ = false;
    return c;
  }
  void require(bool condition) {
    if (!condition) ok_ = false;
  }

 private:
  int ahead_, span_;
  bool check_third_;
  bool ok_ = true;
};

template <class V>
std::set<std::string> keys_of(const std::map<std::string, V>& a, const std::map<std::string, V>& b,
                              const std::map<std::string, V>& c) {
  std::set<std::string> k;
  for (const auto* m : {&a, &b, &c})
    for (const auto& [key, v] : *m) k.insert(key);
  return k;
}
template <class V>
V value_or_zero(const std::map<std::string, V>& m, const std::string& k) {
  auto it = m.find(k);
  return it == m.end() ? V{} : it->second;
}

MemoryBreakdown fit(Line& l, const MemoryBreakdown& a, const MemoryBreakdown& b, const MemoryBreakdown& c) {
  MemoryBreakdown m;
  m.params = l.integer(a.params, b.params, c.params);
  m.grads = l.integer(a.grads, b.grads, c.grads);
  m.optimizer = l.integer(a.optimizer, b.optimizer, c.optimizer);
  m.activations = l.integer(a.activations, b.activations, c.activations);
  m.buffers = l.integer(a.buffers, b.buffers, c.buffers);
  for (const std::string& k : keys_of(a.buffer_detail, b.buffer_detail, c.buffer_detail)) {
    // A detail is listed when some buffer of it was ever live, so presence must not change either.
    l.require(a.buffer_detail.count(k) == c.buffer_detail.count(k) && b.buffer_detail.count(k) == c.buffer_detail.count(k));
    m.buffer_detail[k] = l.integer(value_or_zero(a.buffer_detail, k), value_or_zero(b.buffer_detail, k),
                                   value_or_zero(c.buffer_detail, k));
  }
  return m;
}

TierMemory fit(Line& l, const TierMemory& a, const TierMemory& b, const TierMemory& c) {
  TierMemory t(c.tier);
  t.capacity = l.same(a.capacity, b.capacity, c.capacity);
  t.peak = l.integer(a.peak, b.peak, c.peak);
  t.peak_op = static_cast<OpId>(l.integer(a.peak_op, b.peak_op, c.peak_op));
  t.peak_op_name = l.same(a.peak_op_name, b.peak_op_name, c.peak_op_name);
  t.at_peak = fit(l, a.at_peak, b.at_peak, c.at_peak);
  t.at_end = fit(l, a.at_end, b.at_end, c.at_end);
  t.reserved = l.integer(a.reserved, b.reserved, c.reserved);
  t.outside_allocator = l.same(a.outside_allocator, b.outside_allocator, c.outside_allocator);
  t.outside_allocator_default =
      l.same(a.outside_allocator_default, b.outside_allocator_default, c.outside_allocator_default);
  return t;
}

MemoryWalk fit(Line& l, const MemoryWalk& a, const MemoryWalk& b, const MemoryWalk& c) {
  MemoryWalk m;
  m.gpu = fit(l, a.gpu, b.gpu, c.gpu);
  m.cpu = fit(l, a.cpu, b.cpu, c.cpu);
  m.nvme = fit(l, a.nvme, b.nvme, c.nvme);
  l.require(a.first_overflow.has_value() == c.first_overflow.has_value() &&
            b.first_overflow.has_value() == c.first_overflow.has_value());
  if (l.ok() && c.first_overflow) {
    const MemoryOverflow &x = *a.first_overflow, &y = *b.first_overflow, &z = *c.first_overflow;
    MemoryOverflow o;
    o.tier = l.same(x.tier, y.tier, z.tier);
    o.op = static_cast<OpId>(l.integer(x.op, y.op, z.op));
    o.op_name = l.same(x.op_name, y.op_name, z.op_name);
    o.live = l.integer(x.live, y.live, z.live);
    o.capacity = l.same(x.capacity, y.capacity, z.capacity);
    o.over_by = l.integer(x.over_by, y.over_by, z.over_by);
    m.first_overflow = o;
  }
  return m;
}

PhaseBytes fit(Line& l, const PhaseBytes& a, const PhaseBytes& b, const PhaseBytes& c) {
  PhaseBytes p;
  for (Phase ph : {Phase::init, Phase::forward, Phase::backward, Phase::step})
    p.at(ph) = l.integer(a.at(ph), b.at(ph), c.at(ph));
  return p;
}

CommWalk fit(Line& l, const CommWalk& a, const CommWalk& b, const CommWalk& c) {
  CommWalk w;
  w.steps = l.same(a.steps, b.steps, c.steps);
  w.gpus_per_node = l.same(a.gpus_per_node, b.gpus_per_node, c.gpus_per_node);
  w.per_gpu = fit(l, a.per_gpu, b.per_gpu, c.per_gpu);
  w.scale_per_gpu = fit(l, a.scale_per_gpu, b.scale_per_gpu, c.scale_per_gpu);
  w.cross_node_per_gpu = fit(l, a.cross_node_per_gpu, b.cross_node_per_gpu, c.cross_node_per_gpu);
  w.cross_node_scale_per_gpu = fit(l, a.cross_node_scale_per_gpu, b.cross_node_scale_per_gpu, c.cross_node_scale_per_gpu);
  w.h2d = fit(l, a.h2d, b.h2d, c.h2d);
  w.d2h = fit(l, a.d2h, b.d2h, c.d2h);
  w.nvme_read = fit(l, a.nvme_read, b.nvme_read, c.nvme_read);
  w.nvme_write = fit(l, a.nvme_write, b.nvme_write, c.nvme_write);
  w.d2d = fit(l, a.d2d, b.d2d, c.d2d);
  l.require(a.collectives.size() == c.collectives.size() && b.collectives.size() == c.collectives.size());
  if (!l.ok()) return w;
  for (size_t i = 0; i < c.collectives.size(); ++i) {
    const CollectiveSummary &x = a.collectives[i], &y = b.collectives[i], &z = c.collectives[i];
    l.require(x.phase == z.phase && y.phase == z.phase && x.op == z.op && y.op == z.op && x.group == z.group &&
              y.group == z.group && x.group_size == z.group_size && y.group_size == z.group_size &&
              x.bytes == z.bytes && y.bytes == z.bytes && x.scale_bytes == z.scale_bytes &&
              y.scale_bytes == z.scale_bytes);
    CollectiveSummary s = z;
    s.count = l.integer(x.count, y.count, z.count);
    s.bytes_per_gpu = l.integer(x.bytes_per_gpu, y.bytes_per_gpu, z.bytes_per_gpu);
    s.cross_node_bytes_per_gpu = l.integer(x.cross_node_bytes_per_gpu, y.cross_node_bytes_per_gpu, z.cross_node_bytes_per_gpu);
    w.collectives.push_back(s);
  }
  return w;
}

std::map<std::string, Seconds> fit(Line& l, const std::map<std::string, Seconds>& a,
                                   const std::map<std::string, Seconds>& b, const std::map<std::string, Seconds>& c,
                                   Seconds scale) {
  std::map<std::string, Seconds> m;
  for (const std::string& k : keys_of(a, b, c)) {
    l.require(a.count(k) == c.count(k) && b.count(k) == c.count(k));
    m[k] = l.real(value_or_zero(a, k), value_or_zero(b, k), value_or_zero(c, k), scale);
  }
  return m;
}

TimingReport fit(Line& l, const Probe& pa, const Probe& pb, const Probe& pc, int top) {
  const TimingReport &a = pa.time, &b = pb.time, &c = pc.time;
  TimingReport r;
  r.steps_simulated = l.same(a.steps_simulated, b.steps_simulated, c.steps_simulated);
  r.step_s = l.real(a.step_s, b.step_s, c.step_s);
  const Seconds scale = r.step_s;
  auto time = [&](Seconds TimingReport::*f) { r.*f = l.real(a.*f, b.*f, c.*f, scale); };
  for (auto f : {&TimingReport::compute_s, &TimingReport::optimizer_s, &TimingReport::exposed_comm_s,
                 &TimingReport::offload_s, &TimingReport::idle_s, &TimingReport::comm_busy_s,
                 &TimingReport::offload_busy_s, &TimingReport::critical_path_s})
    time(f);
  r.exposed_comm_by_phase = fit(l, a.exposed_comm_by_phase, b.exposed_comm_by_phase, c.exposed_comm_by_phase, scale);
  r.exposed_comm_by_collective =
      fit(l, a.exposed_comm_by_collective, b.exposed_comm_by_collective, c.exposed_comm_by_collective, scale);
  r.model_flops_per_gpu = l.real(a.model_flops_per_gpu, b.model_flops_per_gpu, c.model_flops_per_gpu);
  r.hardware_flops_per_gpu = l.real(a.hardware_flops_per_gpu, b.hardware_flops_per_gpu, c.hardware_flops_per_gpu);
  // Derived exactly as summarize()'s throughput part derives them (timing_report.cpp).
  const std::int64_t tokens = l.same(pa.tokens_per_step, pb.tokens_per_step, pc.tokens_per_step);
  if (r.step_s > 0) {
    r.tflops_per_gpu = r.model_flops_per_gpu / r.step_s / 1e12;
    r.hardware_tflops_per_gpu = r.hardware_flops_per_gpu / r.step_s / 1e12;
    r.tokens_per_s = static_cast<double>(tokens) / r.step_s;
  }
  for (int t = 0; t < 3; ++t)
    r.timed_peak_bytes[t] = l.integer(a.timed_peak_bytes[t], b.timed_peak_bytes[t], c.timed_peak_bytes[t]);
  r.memory_waits = static_cast<int>(l.integer(a.memory_waits, b.memory_waits, c.memory_waits));
  r.memory_overcommits = static_cast<int>(l.integer(a.memory_overcommits, b.memory_overcommits, c.memory_overcommits));
  // Critical-path contributors by label, then sorted and cut as summarize() does.
  auto by_label = [](const TimingReport& t) {
    std::map<std::string, CriticalContributor> m;
    for (const CriticalContributor& x : t.critical_path) m[x.label] = x;
    return m;
  };
  const auto ma = by_label(a), mb = by_label(b), mc = by_label(c);
  for (const std::string& k : keys_of(ma, mb, mc)) {
    l.require(ma.count(k) == mc.count(k) && mb.count(k) == mc.count(k));
    if (!l.ok()) break;
    CriticalContributor x;
    x.label = k;
    x.seconds = l.real(ma.at(k).seconds, mb.at(k).seconds, mc.at(k).seconds, scale);
    x.ops = static_cast<int>(l.integer(ma.at(k).ops, mb.at(k).ops, mc.at(k).ops));
    r.critical_path.push_back(x);
  }
  std::sort(r.critical_path.begin(), r.critical_path.end(), [](const auto& x, const auto& y) {
    return x.seconds != y.seconds ? x.seconds > y.seconds : x.label < y.label;
  });
  if (static_cast<int>(r.critical_path.size()) > top) r.critical_path.resize(top);
  return r;
}

// The figures of `target` micro-steps per step from probes at three consecutive counts, or nullopt.
std::optional<RepeatedResult> extend(const Probe& a, const Probe& b, const Probe& c, int last_built, int target,
                                     int top, Bytes hbm_bytes, bool check_third) {
  if (!b.apart || !c.periodic) return std::nullopt;
  Line l(last_built, target, check_third);
  RepeatedResult out;
  out.built_micro_steps = last_built;
  Report& r = out.report;
  r.setup = c.report.setup;
  r.memory = fit(l, a.report.memory, b.report.memory, c.report.memory);
  r.comm = fit(l, a.report.comm, b.report.comm, c.report.comm);
  r.fits = r.memory.fits();
  // Warnings quote peaks: they must not change with the micro-step count (they then are the long program's).
  r.warnings = l.same(a.report.warnings, b.report.warnings, c.report.warnings);
  r.scenario_warnings = c.report.scenario_warnings;
  r.deepspeed_figures = c.report.deepspeed_figures;  // the scenario's, whatever the micro-step count
  if (!l.ok()) return std::nullopt;
  out.time = fit(l, a, b, c, top);
  if (!l.ok()) return std::nullopt;
  // No memory wait in the long program either: its timed peak (the line's) must fit when the engine limits
  // GPU memory (then every alloc found room, as in the probes, and the timing stays periodic).
  if (hbm_bytes > 0 && out.time.timed_peak_bytes[0] > hbm_bytes) return std::nullopt;
  return out;
}

}  // namespace

std::optional<RepeatedResult> report_by_repeated_micro_steps(const Scenario& scenario, const RepeatOptions& options) {
  const int target = scenario.training.grad_accum;
  constexpr int kFirst = 4;  // micro-step 0, two steady micro-steps, the last
  if (target < kFirst + 2) return std::nullopt;
  const Plan plan = make_plan(scenario);
  std::vector<Probe> probes;
  for (int built = kFirst; built <= std::min(options.max_built, target - 1); ++built) {
    probes.push_back(probe(scenario, plan, options, built));
    const size_t k = probes.size();
    if (k < 2) continue;
    const bool third = options.check_third_point && k >= 3;
    if (options.check_third_point && !third) continue;
    auto r = extend(probes[k - (third ? 3 : 2)], probes[k - 2], probes[k - 1], built, target,
                    options.top_contributors, scenario.cluster.gpu.hbm_bytes, third);
    if (r) {
      for (const Probe& p : probes) r->ops_simulated += p.ops;
      r->report.warnings.insert(r->report.warnings.end(), plan.warnings.begin(), plan.warnings.end());
      return r;
    }
  }
  return std::nullopt;
}

}  // namespace zsim
