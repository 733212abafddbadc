#include "sim/engine/simulate.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

#include "sim/engine/op_work.hpp"
#include "sim/topology/max_min_fair.hpp"
#include "sim/topology/topology.hpp"

namespace zsim {

Seconds TimingResult::step_s() const {
  if (steps.empty()) return 0;
  if (steps.size() == 1) return steps[0].end_s - steps[0].start_s;
  return steps.back().end_s - steps[steps.size() - 2].end_s;
}

Seconds TimingResult::window_begin_s() const {
  if (steps.empty()) return 0;
  if (steps.size() == 1) return steps[0].start_s;
  return steps[steps.size() - 2].end_s;
}

std::vector<int> find_steps(const Schedule& s, std::vector<StepSpan>* spans) {
  std::vector<int> step(s.ops.size(), -1);
  int current = -1;
  Phase prev = Phase::init;
  for (const Op& op : s.ops) {
    if (op.phase == Phase::init) continue;
    if (current < 0 || (prev == Phase::step && op.phase != Phase::step)) {
      ++current;
      if (spans) spans->push_back({op.id, op.id, 0, 0});
    }
    step[op.id] = current;
    if (spans) spans->back().last = op.id;
    prev = op.phase;
  }
  return step;
}

namespace {

// link_wait: the fixed part is over, the transfer waits for an earlier transfer on one of its links (ordered).
enum class State : char { waiting, fixed, link_wait, flowing, done };

void check_shape(const ClusterSpec& c, const Schedule& s) {
  const ScheduleMeta& m = s.meta;
  if (m.world_size != c.world_size() || m.nodes != c.nodes || m.gpus_per_node != c.gpus_per_node)
    throw std::invalid_argument("schedule is for " + std::to_string(m.nodes) + " x " +
                                std::to_string(m.gpus_per_node) + " GPUs, cluster has " + std::to_string(c.nodes) +
                                " x " + std::to_string(c.gpus_per_node));
  for (const ProcessGroup& g : s.groups)
    if (g.size > c.world_size() || g.ranks_per_node > c.gpus_per_node || g.nodes_spanned() > c.nodes)
      throw std::invalid_argument("process group '" + g.name + "' does not fit the cluster");
}

class Engine {
 public:
  Engine(const ClusterSpec& c, const Schedule& s, const SimOptions& o) : s_(s) {
    if (o.limit_gpu_memory && c.gpu.hbm_bytes > 0) gpu_capacity_ = c.gpu.hbm_bytes;
    r_.links = rank_links(Topology(c));
    const size_t n = s.ops.size();
    work_.reserve(n);
    for (const Op& op : s.ops) work_.push_back(op_work(op, s, c, r_.links, o));
    r_.ops.assign(n, {});
    r_.stream_busy_s.assign(s.streams.size(), 0.0);
    r_.link_bytes.assign(r_.links.bytes_per_s.size(), 0.0);
    state_.assign(n, State::waiting);
    waited_.assign(n, 0);
    pending_.resize(n);
    link_pending_.assign(n, 0);
    link_dependents_.resize(n);
    remaining_.assign(n, 0.0);
    rate_.assign(n, 0.0);
    fixed_end_.assign(n, 0.0);
    queue_.resize(s.streams.size());
    head_.assign(s.streams.size(), 0);
    busy_.assign(s.streams.size(), 0);
    stream_of_.resize(n);
    gpu_mem_.assign(n, GpuMem::none);
    gpu_mem_bytes_.assign(n, 0);
    for (const Op& op : s.ops) {
      stream_of_[op.id] = op.stream;
      if ((op.kind == OpKind::alloc || op.kind == OpKind::free) && op.mem.tier == Tier::gpu) {
        gpu_mem_[op.id] = op.kind == OpKind::alloc ? GpuMem::alloc : GpuMem::free;
        gpu_mem_bytes_[op.id] = op.mem.bytes;
      }
      pending_[op.id] = static_cast<int>(op.deps.size());
      for (OpId d : op.deps) edges_.push_back({d, op.id});
      queue_[op.stream].push_back(op.id);
    }
    if (o.share == SharePolicy::ordered) order_transfers_per_link();
    build_dependents(n);
  }

  TimingResult run() {
    for (size_t st = 0; st < queue_.size(); ++st)
      if (!queue_[st].empty()) candidates_.push_back(queue_[st][0]);
    Seconds t = 0;
    size_t done = 0;
    for (;;) {
      done += start_ready(t);
      // Ops in link_wait make no progress of their own: if only they run, the transfer they wait for is
      // stuck behind a memory wait, which the over-commit below resolves.
      const bool progressing = std::any_of(running_.begin(), running_.end(), [&](OpId id) {
        return state_[id] == State::fixed || state_[id] == State::flowing;
      });
      if (!progressing && !blocked_.empty()) {
        // Deadlock on memory: let the earliest waiting alloc through over capacity.
        std::sort(blocked_.begin(), blocked_.end());
        forced_ = blocked_.front();
        ++r_.memory_overcommits;
        candidates_.push_back(forced_);
        blocked_.erase(blocked_.begin());
        continue;
      }
      if (!progressing) break;  // nothing runs; the check after the loop reports ops that never ran
      ++r_.events;
      if (flows_changed_) recompute_rates();
      // Next event: the earliest fixed-phase end or flow completion.
      Seconds next = std::numeric_limits<double>::infinity();
      for (OpId id : running_) {
        if (state_[id] == State::fixed) next = std::min(next, fixed_end_[id]);
        else if (state_[id] == State::flowing) next = std::min(next, t + remaining_[id] / rate_[id]);
      }
      const Seconds dt = next - t;
      std::vector<OpId> finished;
      for (OpId id : running_) {
        if (state_[id] == State::fixed) {
          if (fixed_end_[id] <= next) finished.push_back(id);
          continue;
        }
        if (state_[id] != State::flowing) continue;
        const bool ends = t + remaining_[id] / rate_[id] <= next;
        const double moved = ends ? remaining_[id] : rate_[id] * dt;
        for (FlowUse u : work_[id].route) r_.link_bytes[u.link] += moved * u.coefficient;
        remaining_[id] -= moved;
        if (ends) finished.push_back(id);
      }
      t = next;
      for (OpId id : finished) {
        if (state_[id] == State::fixed && work_[id].flow_bytes > 0) {
          begin_flow_when_links_free(id);
        } else {
          finish(id, t);
          ++done;
        }
      }
      std::erase_if(running_, [&](OpId id) { return state_[id] == State::done; });
    }
    if (done != s_.ops.size())
      throw std::logic_error("schedule deadlocks: " + std::to_string(s_.ops.size() - done) + " ops never ran");
    r_.makespan_s = t;
    r_.step_of_op = find_steps(s_, &r_.steps);
    for (StepSpan& sp : r_.steps) {
      sp.start_s = std::numeric_limits<double>::infinity();
      sp.end_s = 0;
      for (OpId id = sp.first; id <= sp.last; ++id) {
        if (r_.step_of_op[id] < 0) continue;
        sp.start_s = std::min(sp.start_s, r_.ops[id].start_s);
        sp.end_s = std::max(sp.end_s, r_.ops[id].end_s);
      }
    }
    return std::move(r_);
  }

 private:
  // Starts every op whose deps are done and that heads an idle stream, cascading through zero-time ops.
  // Returns how many ops completed instantly.
  size_t start_ready(Seconds t) {
    size_t done = 0;
    while (!candidates_.empty()) {
      std::sort(candidates_.begin(), candidates_.end());
      candidates_.erase(std::unique(candidates_.begin(), candidates_.end()), candidates_.end());
      std::vector<OpId> batch;
      batch.swap(candidates_);
      for (OpId id : batch) {
        const int st = stream_of_[id];
        if (state_[id] != State::waiting || pending_[id] > 0 || busy_[st]) continue;
        if (head_[st] >= queue_[st].size() || queue_[st][head_[st]] != id) continue;
        if (!admit_memory(id)) continue;
        busy_[st] = 1;
        r_.ops[id].start_s = t;
        const OpWork& w = work_[id];
        if (w.fixed_s > 0) {
          state_[id] = State::fixed;
          fixed_end_[id] = t + w.fixed_s;
          running_.push_back(id);
        } else if (w.flow_bytes > 0) {
          begin_flow_when_links_free(id);
          running_.push_back(id);
        } else {
          finish(id, t);
          ++done;
        }
      }
    }
    std::sort(running_.begin(), running_.end());
    return done;
  }

  // Tracks the rank's live GPU bytes; an alloc that does not fit waits for a free (limit_gpu_memory).
  bool admit_memory(OpId id) {
    const GpuMem kind = gpu_mem_[id];
    if (kind == GpuMem::none) return true;
    const Bytes bytes = gpu_mem_bytes_[id];
    if (kind == GpuMem::free) {
      live_gpu_ -= bytes;
      for (OpId b : blocked_) candidates_.push_back(b);
      blocked_.clear();
      return true;
    }
    if (id != forced_ && live_gpu_ > 0 && live_gpu_ + bytes > gpu_capacity_) {
      if (!waited_[id]) {
        waited_[id] = 1;
        ++r_.memory_waits;
      }
      if (std::find(blocked_.begin(), blocked_.end(), id) == blocked_.end()) blocked_.push_back(id);
      return false;
    }
    live_gpu_ += bytes;
    return true;
  }

  // SharePolicy::ordered: the flow of a transfer waits for the flow of the previous transfer (in program
  // order) on each of its links. Only the flows are serialised: fixed parts (a collective's latency steps,
  // a copy's setup) run as soon as the op starts, concurrently with other transfers, as on real hardware
  // where a link is idle during another collective's latency steps.
  void order_transfers_per_link() {
    std::vector<OpId> last(r_.links.bytes_per_s.size(), -1);
    for (const Op& op : s_.ops) {
      if (work_[op.id].flow_bytes <= 0) continue;
      std::vector<OpId> before;
      for (FlowUse u : work_[op.id].route) {
        if (last[u.link] >= 0) before.push_back(last[u.link]);
        last[u.link] = op.id;
      }
      std::sort(before.begin(), before.end());
      before.erase(std::unique(before.begin(), before.end()), before.end());
      for (OpId b : before) {
        ++link_pending_[op.id];
        link_dependents_[b].push_back(op.id);
      }
    }
  }

  void begin_flow_when_links_free(OpId id) {
    if (link_pending_[id] > 0) state_[id] = State::link_wait;
    else begin_flow(id);
  }

  void begin_flow(OpId id) {
    state_[id] = State::flowing;
    remaining_[id] = work_[id].flow_bytes;
    flows_changed_ = true;
  }

  void finish(OpId id, Seconds t) {
    if (state_[id] == State::flowing) flows_changed_ = true;
    for (OpId d : link_dependents_[id])
      if (--link_pending_[d] == 0 && state_[d] == State::link_wait) begin_flow(d);
    state_[id] = State::done;
    r_.ops[id].end_s = t;
    const int st = stream_of_[id];
    r_.stream_busy_s[st] += t - r_.ops[id].start_s;
    busy_[st] = 0;
    if (++head_[st] < queue_[st].size()) candidates_.push_back(queue_[st][head_[st]]);
    for (std::size_t k = dependents_begin_[id]; k < dependents_begin_[id + 1]; ++k)
      if (const OpId d = dependents_[k]; --pending_[d] == 0) candidates_.push_back(d);
  }

  // Turns edges_ into the flat dependents_ lists, keeping each op's dependents in the order found.
  void build_dependents(std::size_t n) {
    dependents_begin_.assign(n + 1, 0);
    for (const auto& [from, to] : edges_) ++dependents_begin_[from + 1];
    for (std::size_t i = 0; i < n; ++i) dependents_begin_[i + 1] += dependents_begin_[i];
    dependents_.resize(edges_.size());
    std::vector<std::size_t> next(dependents_begin_.begin(), dependents_begin_.end() - 1);
    for (const auto& [from, to] : edges_) dependents_[next[from]++] = to;
    edges_ = {};
  }

  void recompute_rates() {
    std::vector<FlowPath> paths;
    std::vector<OpId> ids;
    for (OpId id : running_)
      if (state_[id] == State::flowing) {
        ids.push_back(id);
        paths.push_back(work_[id].route);
      }
    const std::vector<double> rates = max_min_fair_rates(paths, r_.links.bytes_per_s);
    for (size_t i = 0; i < ids.size(); ++i) rate_[ids[i]] = rates[i];
    flows_changed_ = false;
  }

  const Schedule& s_;
  TimingResult r_;
  std::vector<OpWork> work_;
  std::vector<State> state_;
  std::vector<int> pending_;
  // Compact copies of what the hot loops need, so that they do not touch the (large) ops.
  enum class GpuMem : char { none, alloc, free };
  std::vector<int> stream_of_;     // s.ops[id].stream
  std::vector<GpuMem> gpu_mem_;    // whether s.ops[id] allocates or frees GPU memory
  std::vector<Bytes> gpu_mem_bytes_;  // and how much (s.ops[id].mem.bytes)
  // Who waits for whom, as one flat array per op (CSR): dependents_[dependents_begin_[i] ..
  // dependents_begin_[i + 1]) wait for op i, in the order the edges were found.
  std::vector<std::pair<OpId, OpId>> edges_;  // (op, dependent), while constructing
  std::vector<std::size_t> dependents_begin_;
  std::vector<OpId> dependents_;
  std::vector<int> link_pending_;                   // ordered: earlier transfers on its links not yet done
  std::vector<std::vector<OpId>> link_dependents_;  // ordered: later transfers waiting for this one's links
  std::vector<double> remaining_, fixed_end_, rate_;
  std::vector<std::vector<OpId>> queue_;
  std::vector<size_t> head_;
  std::vector<char> busy_;
  std::vector<OpId> candidates_, running_;
  bool flows_changed_ = false;
  Bytes gpu_capacity_ = std::numeric_limits<Bytes>::max();
  Bytes live_gpu_ = 0;
  std::vector<OpId> blocked_;
  std::vector<char> waited_;
  OpId forced_ = -1;
};

}  // namespace

TimingResult simulate(const ClusterSpec& cluster, const Schedule& schedule, const SimOptions& options) {
  if (!options.schedule_checked) check_schedule(schedule);
  check_shape(cluster, schedule);
  return Engine(cluster, schedule, options).run();
}

}  // namespace zsim
