#include "sim/engine/timing_report.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>

namespace zsim {

namespace {

enum Activity { kCompute, kOptimizer, kComm, kCopy, kActivities };

int activity(const Op& op) {
  switch (op.kind) {
    case OpKind::compute: return op.compute.what == ComputeKind::optimizer ? kOptimizer : kCompute;
    case OpKind::collective: return kComm;
    // A device copy (d2d) is the stage-3 fetch's copy into / out of its flat buffer: part of the
    // parameter communication, not offload traffic.
    case OpKind::copy: return op.copy.what == CopyKind::d2d ? kComm : kCopy;
    default: return -1;
  }
}

std::string label(const Schedule& s, const Op& op) {
  std::string what;
  switch (op.kind) {
    case OpKind::compute:
      what = std::string("compute.") + to_string(op.compute.what) + (op.compute.device == Device::cpu ? "@cpu" : "");
      break;
    case OpKind::collective: what = fmt::format("{}@{}", to_string(op.collective.what), s.groups[op.collective.group].name); break;
    case OpKind::copy: what = std::string("copy.") + to_string(op.copy.what); break;
    default: what = "memory"; break;
  }
  return fmt::format("{} {}", to_string(op.phase), what);
}

// Splits [w0, w1) into compute / optimizer / exposed comm / exposed copy / idle by a sweep over op edges.
void split_window(const Schedule& s, const TimingResult& t, Seconds w0, Seconds w1, TimingReport& r) {
  struct Edge {
    Seconds at;
    int delta;
    OpId id;
    int activity;  // activity(s.ops[id]), kept here so the sweep below does not revisit the op
  };
  std::vector<Edge> edges;
  edges.reserve(2 * s.ops.size());
  for (const Op& op : s.ops) {
    const int a = activity(op);
    if (a < 0) continue;
    const Seconds b = std::max(t.ops[op.id].start_s, w0), e = std::min(t.ops[op.id].end_s, w1);
    if (e <= b) continue;
    edges.push_back({b, +1, op.id, a});
    edges.push_back({e, -1, op.id, a});
  }
  std::sort(edges.begin(), edges.end(), [](const Edge& x, const Edge& y) {
    if (x.at != y.at) return x.at < y.at;
    if (x.delta != y.delta) return x.delta < y.delta;
    return x.id < y.id;
  });
  int count[kActivities] = {0, 0, 0, 0};
  std::set<OpId> comms;
  Seconds at = w0;
  Seconds busy_comm = 0, busy_copy = 0;
  auto account = [&](Seconds until) {
    const Seconds d = until - at;
    if (d <= 0) return;
    if (count[kComm] > 0) busy_comm += d;
    if (count[kCopy] > 0) busy_copy += d;
    if (count[kCompute] > 0) {
      r.compute_s += d;
    } else if (count[kOptimizer] > 0) {
      r.optimizer_s += d;
    } else if (count[kComm] > 0) {
      r.exposed_comm_s += d;
      const Op& op = s.ops[*comms.begin()];  // attributed to the earliest op in program order
      r.exposed_comm_by_phase[to_string(op.phase)] += d;
      r.exposed_comm_by_collective[op.kind == OpKind::copy ? "d2d_copy" : to_string(op.collective.what)] += d;
    } else if (count[kCopy] > 0) {
      r.offload_s += d;
    } else {
      r.idle_s += d;
    }
  };
  for (const Edge& e : edges) {
    account(e.at);
    at = std::max(at, e.at);
    const int a = e.activity;
    count[a] += e.delta;
    if (a == kComm) {
      if (e.delta > 0) comms.insert(e.id);
      else comms.erase(e.id);
    }
  }
  account(w1);
  r.comm_busy_s = busy_comm;
  r.offload_busy_s = busy_copy;
}

void walk_critical_path(const Schedule& s, const TimingResult& t, Seconds w0, Seconds w1, int top,
                        TimingReport& r) {
  if (t.steps.empty()) return;
  const StepSpan& last = t.steps.back();
  OpId cur = -1;
  for (OpId id = last.first; id <= last.last; ++id)
    if (t.step_of_op[id] >= 0 && (cur < 0 || t.ops[id].end_s >= t.ops[cur].end_s)) cur = id;
  std::vector<OpId> stream_prev(s.ops.size(), -1), last_on(s.streams.size(), -1);
  for (const Op& op : s.ops) {
    stream_prev[op.id] = last_on[op.stream];
    last_on[op.stream] = op.id;
  }
  std::map<std::string, CriticalContributor> by_label;
  while (cur >= 0 && t.ops[cur].end_s > w0) {
    const Op& op = s.ops[cur];
    OpId pred = stream_prev[cur];
    for (OpId d : op.deps)
      if (pred < 0 || t.ops[d].end_s > t.ops[pred].end_s || (t.ops[d].end_s == t.ops[pred].end_s && d > pred))
        pred = d;
    const Seconds begin = std::max(t.ops[cur].start_s, w0), end = std::min(t.ops[cur].end_s, w1);
    r.critical_ops.push_back(cur);
    if (end > begin) {
      CriticalContributor& c = by_label[label(s, op)];
      c.seconds += end - begin;
      c.ops += 1;
      r.critical_path_s += end - begin;
    }
    // Time between the predecessor's end and this op's start: waiting on a shared link (ordered policy).
    const Seconds pred_end = pred >= 0 ? std::max(t.ops[pred].end_s, w0) : w0;
    if (begin > pred_end) {
      CriticalContributor& c = by_label["wait for a link"];
      c.seconds += begin - pred_end;
      r.critical_path_s += begin - pred_end;
    }
    cur = pred;
  }
  for (auto& [name, c] : by_label) {
    c.label = name;
    r.critical_path.push_back(c);
  }
  std::sort(r.critical_path.begin(), r.critical_path.end(), [](const auto& a, const auto& b) {
    return a.seconds != b.seconds ? a.seconds > b.seconds : a.label < b.label;
  });
  if (static_cast<int>(r.critical_path.size()) > top) r.critical_path.resize(top);
}

void timed_peaks(const Schedule& s, const TimingResult& t, TimingReport& r) {
  struct Event {
    Seconds at;
    OpId id;
    int tier;     // the op's tier and signed size, kept here so the replay below does not revisit the op
    Bytes delta;
  };
  std::vector<Event> events;
  for (const Op& op : s.ops)
    if (op.kind == OpKind::alloc || op.kind == OpKind::free)
      events.push_back({t.ops[op.id].start_s, op.id, static_cast<int>(op.mem.tier),
                        op.kind == OpKind::alloc ? op.mem.bytes : -op.mem.bytes});
  std::sort(events.begin(), events.end(),
            [](const Event& a, const Event& b) { return a.at != b.at ? a.at < b.at : a.id < b.id; });
  Bytes live[3] = {0, 0, 0};
  for (const Event& e : events) {
    live[e.tier] += e.delta;
    r.timed_peak_bytes[e.tier] = std::max(r.timed_peak_bytes[e.tier], live[e.tier]);
  }
}

}  // namespace

namespace {

void throughput(const Schedule& s, const TimingResult& t, TimingReport& r) {
  const int last = static_cast<int>(t.steps.size()) - 1;
  // The last step's ops all lie in its span [first, last] (find_steps); the init ops inside it are skipped.
  for (OpId id = last < 0 ? 0 : t.steps[last].first; last >= 0 && id <= t.steps[last].last; ++id) {
    const Op& op = s.ops[id];
    if (op.kind != OpKind::compute || t.step_of_op[op.id] != last) continue;
    const ComputeKind w = op.compute.what;
    if (w == ComputeKind::forward || w == ComputeKind::backward) r.model_flops_per_gpu += op.compute.flops;
    if (w == ComputeKind::forward || w == ComputeKind::backward || w == ComputeKind::recompute)
      r.hardware_flops_per_gpu += op.compute.flops;
  }
  if (r.step_s > 0) {
    r.tflops_per_gpu = r.model_flops_per_gpu / r.step_s / 1e12;
    r.hardware_tflops_per_gpu = r.hardware_flops_per_gpu / r.step_s / 1e12;
    r.tokens_per_s = static_cast<double>(s.meta.tokens_per_step) / r.step_s;
  }
  r.memory_waits = t.memory_waits;
  r.memory_overcommits = t.memory_overcommits;
}

}  // namespace

TimingReport summarize(const Schedule& s, const TimingResult& t, int top_contributors) {
  TimingReport r;
  r.steps_simulated = static_cast<int>(t.steps.size());
  r.step_s = t.step_s();
  const Seconds w0 = t.window_begin_s();
  const Seconds w1 = t.steps.empty() ? w0 : t.steps.back().end_s;
  split_window(s, t, w0, w1, r);
  throughput(s, t, r);
  if (!t.host_issue_s.empty() && !t.steps.empty())
    for (OpId id = t.steps.back().first; id <= t.steps.back().last; ++id)
      if (t.step_of_op[id] >= 0) r.host_s += t.host_issue_s[id];
  walk_critical_path(s, t, w0, w1, top_contributors, r);
  timed_peaks(s, t, r);
  return r;
}

TimingReport summarize_throughput(const Schedule& s, const TimingResult& t) {
  TimingReport r;
  r.steps_simulated = static_cast<int>(t.steps.size());
  r.step_s = t.step_s();
  throughput(s, t, r);
  return r;
}

}  // namespace zsim
