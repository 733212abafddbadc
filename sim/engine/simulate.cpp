#include "sim/engine/simulate.hpp"

#include <algorithm>
#include <bit>
#include <span>
#include <limits>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "sim/engine/comm_order.hpp"
#include "sim/engine/deepspeed_host.hpp"
#include "sim/engine/host_issue.hpp"
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
// comm_wait: started on its stream, its work waiting for the collective issued before it on its communicator.
enum class State : char { waiting, comm_wait, fixed, link_wait, flowing, done };

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

// The cost inputs of an op (SimProgram::work_class): equal keys, equal op_work.
struct WorkKey {
  OpKind kind = OpKind::compute;
  int unit = -1, layer = -1;
  ComputeOp compute;
  CollectiveOp collective;
  CopyOp copy;
  bool copy_adds = false;  // op_work reads it from the copy's uses
  int use_pairs = 0;       // likewise (a copy's pieces)
  bool in_place = false;   // likewise (a collective's input at the start of its output)
  bool operator==(const WorkKey&) const = default;
};

struct WorkKeyHash {
  std::size_t operator()(const WorkKey& k) const {
    std::size_t h = static_cast<std::size_t>(k.kind);
    auto mix = [&](std::uint64_t v) { h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); };
    mix(static_cast<std::uint64_t>(k.unit));
    mix(static_cast<std::uint64_t>(k.layer));
    mix(static_cast<std::uint64_t>(k.compute.what));
    mix(std::bit_cast<std::uint64_t>(k.compute.flops));
    mix(static_cast<std::uint64_t>(k.compute.hbm_bytes));
    mix(static_cast<std::uint64_t>(k.collective.group));
    mix(static_cast<std::uint64_t>(k.collective.bytes));
    mix(static_cast<std::uint64_t>(k.copy.what));
    mix(static_cast<std::uint64_t>(k.copy.bytes));
    mix(static_cast<std::uint64_t>(k.copy_adds));
    mix(static_cast<std::uint64_t>(k.use_pairs));
    mix(static_cast<std::uint64_t>(k.in_place));
    return h;
  }
};

void assign_work_classes(const Schedule& s, std::vector<int>& work_class, std::vector<OpId>& class_op) {
  work_class.assign(s.ops.size(), 0);
  class_op.assign(1, -1);  // class 0: alloc / free
  std::unordered_map<WorkKey, int, WorkKeyHash> classes;
  for (const Op& op : s.ops) {
    WorkKey key;
    key.kind = op.kind;
    switch (op.kind) {
      case OpKind::alloc:
      case OpKind::free: continue;
      case OpKind::compute:
        key.unit = op.unit;
        key.layer = op.layer;
        key.compute = op.compute;
        break;
      case OpKind::collective:
        key.collective = op.collective;
        key.in_place = collective_in_place(op);
        break;
      case OpKind::copy:
        key.copy = op.copy;
        key.copy_adds = copy_adds(op);
        key.use_pairs = copy_use_pairs(op);
        break;
    }
    const auto [it, added] = classes.try_emplace(key, static_cast<int>(class_op.size()));
    if (added) class_op.push_back(op.id);
    work_class[op.id] = it->second;
  }
}

class Engine {
 public:
  Engine(const ClusterSpec& c, const SimProgram& p, const SimOptions& o) : s_(*p.schedule), p_(p) {
    if (o.limit_gpu_memory && c.gpu.hbm_bytes > 0) gpu_capacity_ = c.gpu.hbm_bytes;
    r_.links = rank_links(Topology(c));
    const size_t n = s_.ops.size();
    // What each work class costs on this cluster (class 0, alloc / free: nothing), in class order, which is
    // program order of the classes' first ops: the first op to throw is the one an op-by-op pass would find.
    const size_t classes = p.class_op.size();
    fixed_s_.assign(classes, 0.0);
    flow_bytes_.assign(classes, 0.0);
    side_rate_.assign(classes, 1.0);
    compute_rate_.assign(classes, 1.0);
    flow_side_rate_.assign(classes, 1.0);
    flow_compute_rate_.assign(classes, 1.0);
    wait_q_.assign(classes, 0.0);
    kernel_mean_s_.assign(classes, 0.0);
    kernel_residual_s_.assign(classes, 0.0);
    route_begin_.assign(classes + 1, 0);
    for (size_t k = 1; k < classes; ++k) {
      const OpWork w = op_work(s_.ops[p.class_op[k]], s_, c, r_.links, o);
      fixed_s_[k] = w.fixed_s;
      flow_bytes_[k] = w.flow_bytes;
      // A collective among ranks is slowed, and slows compute, in its flow; the other side kinds in their fixed part.
      (w.side == SideKind::link_collective ? flow_side_rate_ : side_rate_)[k] =
          beside_compute_rate(w.side, c.efficiency.beside_compute);
      (w.side == SideKind::link_collective ? flow_compute_rate_ : compute_rate_)[k] =
          beside_compute_rate(w.side, c.efficiency.compute_beside);
      wait_q_[k] = beside_compute_wait(w.side, c.efficiency.beside_compute_wait);
      kernel_mean_s_[k] = w.kernel_mean_s;
      kernel_residual_s_[k] = w.kernel_residual_s;
      route_uses_.insert(route_uses_.end(), w.route.begin(), w.route.end());
      route_begin_[k + 1] = route_uses_.size();
    }
    r_.ops.assign(n, {});
    r_.stream_busy_s.assign(s_.streams.size(), 0.0);
    r_.link_bytes.assign(r_.links.bytes_per_s.size(), 0.0);
    state_.assign(n, State::waiting);
    waited_.assign(n, 0);
    pending_ = p.deps;
    comm_waiter_.assign(n, -1);
    link_pending_.assign(n, 0);
    remaining_.assign(n, 0.0);
    rate_.assign(n, 0.0);
    fixed_end_.assign(n, 0.0);
    // Pacing side kernels and the compute stream only where the profile slows some (efficiency.beside_compute,
    // efficiency.compute_beside): no per-op state otherwise.
    const auto slowed = [](const std::vector<double>& v) {
      return std::any_of(v.begin(), v.end(), [](double r) { return r < 1; });
    };
    pace_flows_ = slowed(flow_side_rate_) || slowed(flow_compute_rate_);
    pace_waits_ = std::any_of(wait_q_.begin(), wait_q_.end(), [](double q) { return q > 0; });
    pace_sides_ = slowed(side_rate_) || slowed(compute_rate_) || pace_flows_ || pace_waits_;
    if (pace_sides_) {
      fixed_left_.assign(n, 0.0);
      wait_left_.assign(n, 0.0);
      fixed_rate_.assign(n, 1.0);
      main_compute_.assign(n, 0);
      for (const Op& op : s_.ops)
        main_compute_[op.id] = op.kind == OpKind::compute && op.compute.device == Device::gpu &&
                               (op.compute.what == ComputeKind::forward || op.compute.what == ComputeKind::backward ||
                                op.compute.what == ComputeKind::recompute);
    }
    head_.assign(s_.streams.size(), 0);
    for (size_t st = 0; st < s_.streams.size(); ++st) head_[st] = p.queue_begin[st];
    if (c.efficiency.host_issue.present() || deepspeed_host_applies(s_, c)) init_host_issue(c);
    busy_.assign(s_.streams.size(), 0);
    if (o.share == SharePolicy::ordered) order_transfers_per_link();
    else link_dependents_begin_.assign(n + 1, 0);
  }

  TimingResult run() {
    for (size_t st = 0; st + 1 < p_.queue_begin.size(); ++st)
      if (p_.queue_begin[st] < p_.queue_begin[st + 1]) candidates_.push_back(p_.queue[p_.queue_begin[st]]);
    Seconds t = 0;
    size_t done = 0;
    std::vector<OpId> finished;
    for (;;) {
      done += start_ready(t);
      if (!arrivals_.empty()) assign_waits(t);
      // Ops in link_wait make no progress of their own: if only they run, the transfer they wait for is
      // stuck behind a memory wait, which the over-commit below resolves.
      const bool progressing = std::any_of(running_.begin(), running_.end(), [&](OpId id) {
        return state_[id] == State::fixed || state_[id] == State::flowing;
      });
      if (!progressing && !sleeping_.empty()) {  // only the host's issue is ahead: on to the next op it issues
        t = wake_sleepers(std::numeric_limits<double>::infinity());
        continue;
      }
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
      if (sides_changed_) pace_side_kernels(t);
      // Next event: the earliest fixed-phase end or flow completion (or the host's issue of a waiting op).
      Seconds next = std::numeric_limits<double>::infinity();
      for (const auto& [at, id] : sleeping_) next = std::min(next, at);
      for (OpId id : running_) {
        if (state_[id] == State::fixed) {
          next = std::min(next, fixed_end_[id]);
          if (pace_waits_ && paced(id) && wait_left_[id] > 0) next = std::min(next, t + wait_left_[id]);
        }
        else if (state_[id] == State::flowing) next = std::min(next, t + remaining_[id] / rate_[id]);
      }
      const Seconds dt = next - t;
      finished.clear();
      for (OpId id : running_) {
        if (state_[id] == State::fixed) {
          if (fixed_end_[id] <= next) finished.push_back(id);
          else if (paced(id)) {
            Seconds moving_s = dt;  // a side kernel's wait for SMs comes first; at its end the rates change
            if (wait_left_[id] > 0) {
              if (t + wait_left_[id] <= next) {
                moving_s = std::max(0.0, dt - wait_left_[id]);
                wait_left_[id] = 0;
                sides_changed_ = true;
              } else {
                wait_left_[id] -= dt;
                moving_s = 0;
              }
            }
            fixed_left_[id] -= moving_s * fixed_rate_[id];
          }
          continue;
        }
        if (state_[id] != State::flowing) continue;
        const bool ends = t + remaining_[id] / rate_[id] <= next;
        const double moved = ends ? remaining_[id] : rate_[id] * dt;
        for (FlowUse u : route(id)) r_.link_bytes[u.link] += moved * u.coefficient;
        remaining_[id] -= moved;
        if (ends) finished.push_back(id);
      }
      t = next;
      if (!sleeping_.empty()) wake_sleepers(t);
      for (OpId id : finished) {
        if (state_[id] == State::fixed && flow_bytes_[p_.work_class[id]] > 0) {
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
    r_.step_of_op = p_.step_of_op;
    r_.steps = p_.steps;
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
  std::span<const FlowUse> route(OpId id) const {
    const int k = p_.work_class[id];
    return {route_uses_.data() + route_begin_[k], route_uses_.data() + route_begin_[k + 1]};
  }

  // Starts every op whose deps are done and that heads an idle stream, cascading through zero-time ops.
  // Returns how many ops completed instantly.
  size_t start_ready(Seconds t) {
    size_t done = 0;
    while (!candidates_.empty()) {
      std::sort(candidates_.begin(), candidates_.end());
      candidates_.erase(std::unique(candidates_.begin(), candidates_.end()), candidates_.end());
      batch_.clear();
      batch_.swap(candidates_);
      for (OpId id : batch_) {
        const int st = p_.stream_of[id];
        if (state_[id] == State::comm_wait) {  // its communicator's call before it has ended
          done += begin_work(id, t);
          continue;
        }
        if (state_[id] != State::waiting || pending_[id] > 0 || busy_[st]) continue;
        if (head_[st] >= p_.queue_begin[st + 1] || p_.queue[head_[st]] != id) continue;
        if (host_ && !issued(id, t)) continue;
        if (!admit_memory(id)) continue;
        busy_[st] = 1;
        r_.ops[id].start_s = t;
        // A collective holds its stream from here, as zrun's op (its start event) and NCCL's kernel do, but moves
        // nothing until the call issued before it on its communicator has ended (communicator_order_deps).
        if (const OpId before = p_.comm_prev[id]; before >= 0 && state_[before] != State::done) {
          state_[id] = State::comm_wait;
          comm_waiter_[before] = id;
          continue;
        }
        done += begin_work(id, t);
      }
    }
    std::sort(running_.begin(), running_.end());
    return done;
  }

  // An op's work from t: its fixed part, then its flow, or nothing (done at once: returns 1).
  size_t begin_work(OpId id, Seconds t) {
    // An op that may wait for the compute stream's kernel (efficiency.beside_compute_wait) goes through its fixed part
    // even where it has none (a collective priced by its measured bus bandwidth: a flow only), to wait there.
    const bool waits = pace_waits_ && wait_q_[p_.work_class[id]] > 0;
    if (fixed_s_[p_.work_class[id]] > 0 || (waits && flow_bytes_[p_.work_class[id]] > 0)) {
      state_[id] = State::fixed;
      fixed_end_[id] = t + fixed_s_[p_.work_class[id]];
      if (host_) fixed_end_[id] = std::max(fixed_end_[id], issued_by(id));
      if (paced(id)) {
        fixed_left_[id] = fixed_s_[p_.work_class[id]];
        fixed_rate_[id] = 1;
        (side_class(id) ? side_running_ : main_fixed_).push_back(id);
        sides_changed_ = true;
        if (main_compute_[id] && !link_flowing_.empty()) flows_changed_ = true;
      }
      if (waits) arrivals_.push_back(id);
      running_.push_back(id);
    } else if (flow_bytes_[p_.work_class[id]] > 0) {
      begin_flow_when_links_free(id);
      running_.push_back(id);
    } else {
      finish(id, t);
      return 1;
    }
    return 0;
  }

  // Tracks the rank's live GPU bytes; an alloc that does not fit waits for a free (limit_gpu_memory).
  bool admit_memory(OpId id) {
    const char kind = p_.gpu_mem[id];
    if (kind == kNoGpuMem) return true;
    const Bytes bytes = p_.gpu_mem_bytes[id];
    if (kind == kGpuFree) {
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
    const size_t n = s_.ops.size();
    std::vector<OpId> last(r_.links.bytes_per_s.size(), -1);
    std::vector<std::pair<OpId, OpId>> edges;  // (earlier transfer, later transfer)
    std::vector<OpId> before;
    for (OpId id = 0; id < static_cast<OpId>(n); ++id) {
      if (flow_bytes_[p_.work_class[id]] <= 0) continue;
      before.clear();
      for (FlowUse u : route(id)) {
        if (last[u.link] >= 0) before.push_back(last[u.link]);
        last[u.link] = id;
      }
      std::sort(before.begin(), before.end());
      before.erase(std::unique(before.begin(), before.end()), before.end());
      for (OpId b : before) {
        ++link_pending_[id];
        edges.push_back({b, id});
      }
    }
    link_dependents_begin_.assign(n + 1, 0);
    for (const auto& [from, to] : edges) ++link_dependents_begin_[from + 1];
    for (size_t i = 0; i < n; ++i) link_dependents_begin_[i + 1] += link_dependents_begin_[i];
    link_dependents_.resize(edges.size());
    std::vector<std::size_t> next(link_dependents_begin_.begin(), link_dependents_begin_.end() - 1);
    for (const auto& [from, to] : edges) link_dependents_[next[from]++] = to;
  }

  void begin_flow_when_links_free(OpId id) {
    if (link_pending_[id] > 0) state_[id] = State::link_wait;
    else begin_flow(id);
  }

  void begin_flow(OpId id) {
    state_[id] = State::flowing;
    remaining_[id] = flow_bytes_[p_.work_class[id]];
    flows_changed_ = true;
    if (link_paced(id)) {
      link_flowing_.push_back(id);
      sides_changed_ = true;
    }
  }
  // A collective among ranks whose flow the engine paces beside the compute stream (efficiency.beside_compute /
  // compute_beside .link_collective).
  bool link_paced(OpId id) const {
    const int k = p_.work_class[id];
    return pace_flows_ && (flow_side_rate_[k] < 1 || flow_compute_rate_[k] < 1);
  }

  void finish(OpId id, Seconds t) {
    if (state_[id] == State::flowing) {
      flows_changed_ = true;
      if (link_paced(id)) {
        std::erase(link_flowing_, id);
        sides_changed_ = true;
      }
    }
    if (pace_sides_) {
      if (main_compute_[id]) {
        sides_changed_ |= !side_running_.empty();
        flows_changed_ |= !link_flowing_.empty();
        std::erase(main_fixed_, id);
      }
      if (side_class(id)) {
        std::erase(side_running_, id);
        sides_changed_ |= !main_fixed_.empty();
      }
    }
    for (std::size_t k = link_dependents_begin_[id]; k < link_dependents_begin_[id + 1]; ++k)
      if (const OpId d = link_dependents_[k]; --link_pending_[d] == 0 && state_[d] == State::link_wait) begin_flow(d);
    state_[id] = State::done;
    r_.ops[id].end_s = t;
    if (host_) segment_op_done(id, t);
    const int st = p_.stream_of[id];
    r_.stream_busy_s[st] += t - r_.ops[id].start_s;
    busy_[st] = 0;
    if (++head_[st] < p_.queue_begin[st + 1]) candidates_.push_back(p_.queue[head_[st]]);
    for (std::size_t k = p_.dependents_begin[id]; k < p_.dependents_begin[id + 1]; ++k)
      if (const OpId d = p_.dependents[k]; --pending_[d] == 0) candidates_.push_back(d);
    if (comm_waiter_[id] >= 0) candidates_.push_back(comm_waiter_[id]);
  }

  // The kernels of side streams that run slower beside the compute stream's ops (efficiency.beside_compute): each
  // progresses through its fixed time at its class's rate while a forward, backward or recompute op runs, else at 1.
  // And the compute stream's forward, backward and recompute ops beside them (efficiency.compute_beside): at the
  // lowest rate of the side classes running, collectives among ranks in their flow among them, else at 1.
  void pace_side_kernels(Seconds t) {
    double main_rate = 1.0;
    for (OpId id : side_running_) {
      fixed_rate_[id] = !main_fixed_.empty() ? side_rate_[p_.work_class[id]] : 1.0;
      if (main_fixed_.empty()) wait_left_[id] = 0;  // the kernel it waited for has ended
      fixed_end_[id] = t + wait_left_[id] + std::max(0.0, fixed_left_[id]) / fixed_rate_[id];
      if (host_) fixed_end_[id] = std::max(fixed_end_[id], issued_by(id));
      if (!(wait_left_[id] > 0)) main_rate = std::min(main_rate, compute_rate_[p_.work_class[id]]);  // waiting: no SM
    }
    for (OpId id : link_flowing_) main_rate = std::min(main_rate, flow_compute_rate_[p_.work_class[id]]);
    for (OpId id : main_fixed_) {
      fixed_rate_[id] = main_rate;
      fixed_end_[id] = t + std::max(0.0, fixed_left_[id]) / fixed_rate_[id];
      if (host_) fixed_end_[id] = std::max(fixed_end_[id], issued_by(id));
    }
    sides_changed_ = false;
  }
  // A side-stream op the engine paces: one that runs slower beside compute or slows it.
  bool side_class(OpId id) const {
    const int k = p_.work_class[id];
    return side_rate_[k] < 1 || compute_rate_[k] < 1;
  }
  // An op whose fixed part the engine paces: a paced side op or a compute op of the compute stream.
  bool paced(OpId id) const { return pace_sides_ && (side_class(id) || main_compute_[id]); }

  // efficiency.beside_compute_wait: a side kernel that starts while the compute stream runs a forward, backward or
  // recompute op gets no SM until the kernel running there has dispatched its last blocks, q of its time (q: the side
  // class's figure): arriving as the op starts (its first kernel dispatched first), q x the op's mean long kernel;
  // arriving later, at a moment uniform over the op, the mean of max(0, q L - x) over its kernels, q^2 x
  // OpWork::kernel_residual_s. Never past the op's end. The wait comes before the op's fixed part (a collective among
  // ranks: before its latency steps). Waiting, it holds no SM: the compute stream keeps its rate until the wait ends
  // (calibrate's efficiency.compute_beside for a kind with a wait is the GEMMs' loss over the side op's time after it).
  // Ops that started at t, after every op starting at t has (a compute op starting with it is ahead of it).
  void assign_waits(Seconds t) {
    for (OpId id : arrivals_) {
      if (state_[id] != State::fixed) continue;
      Seconds wait = 0;
      const double q = wait_q_[p_.work_class[id]];
      for (OpId m : main_fixed_) {
        const int k = p_.work_class[m];
        const Seconds w = r_.ops[m].start_s == t ? q * kernel_mean_s_[k] : q * q * kernel_residual_s_[k];
        wait = std::max(wait, std::min(w, fixed_end_[m] - t));
      }
      if (!(wait > 0)) continue;
      ++r_.side_waits;
      r_.side_wait_s += wait;
      if (side_class(id)) {
        wait_left_[id] = wait;
        sides_changed_ = true;  // pace_side_kernels sets its end
      } else {
        fixed_end_[id] = std::max(fixed_end_[id], t + wait + fixed_s_[p_.work_class[id]]);
      }
    }
    arrivals_.clear();
  }

  // efficiency.host_issue: one host thread issues each step's ops in program order, as zrun's executor does after it
  // has waited for the step before (runtime/exec/executor.cpp run_step); an op starts once the host has made its
  // first call, and its fixed part ends no earlier than the host has issued all of it. The host's issue runs in
  // segments: each step begins one, and so does an op before which the host waits for the GPU (HostIssue::
  // waits_for_gpu: a framework's synchronisation); a segment's issue begins when every op of the one before is done.
  void init_host_issue(const ClusterSpec& c) {
    const std::vector<HostIssue> h = host_issue(s_, c);
    const size_t n = s_.ops.size();
    host_ = true;
    r_.host_issue_s.resize(n);
    for (size_t i = 0; i < n; ++i) r_.host_issue_s[i] = h[i].total_s;
    issue_lead_.assign(n, 0.0);
    issue_end_.assign(n, 0.0);
    segment_of_op_.assign(n, -1);
    std::vector<Seconds> at;  // the host's time into each segment
    int last_step = -1;
    for (const Op& op : s_.ops) {
      const int k = p_.step_of_op[op.id];
      if (k < 0) continue;
      if (k != last_step || h[op.id].waits_for_gpu) {
        at.push_back(0.0);
        segment_left_.push_back(0);
      }
      last_step = k;
      const int g = static_cast<int>(at.size()) - 1;
      segment_of_op_[op.id] = g;
      issue_lead_[op.id] = at[g] + h[op.id].lead_s;
      at[g] += h[op.id].total_s;
      issue_end_[op.id] = at[g];
      ++segment_left_[g];
    }
    asleep_.assign(n, 0);
    segment_base_.assign(at.size(), -1.0);
    if (!segment_base_.empty()) segment_base_[0] = 0;
    parked_.assign(at.size(), {});
  }
  // Whether the host has issued op id's first call by t; if not, the op sleeps until then (or, its segment's issue
  // not begun, until the segment before has ended).
  bool issued(OpId id, Seconds t) {
    const int k = segment_of_op_[id];
    if (k < 0) return true;
    if (segment_base_[k] < 0) {
      parked_[k].push_back(id);
      return false;
    }
    const Seconds at = segment_base_[k] + issue_lead_[id];
    if (t >= at) return true;
    if (!asleep_[id]) sleeping_.push_back({at, id});
    asleep_[id] = 1;
    return false;
  }
  Seconds issued_by(OpId id) const {
    const int k = segment_of_op_[id];
    return k < 0 ? 0 : segment_base_[k] + issue_end_[id];
  }
  // Moves the ops the host has issued by t (or, t infinite, the earliest) back to the candidates; returns the time.
  Seconds wake_sleepers(Seconds t) {
    if (t == std::numeric_limits<double>::infinity())
      for (const auto& [at, id] : sleeping_) t = std::min(t, at);
    std::erase_if(sleeping_, [&](const std::pair<Seconds, OpId>& e) {
      if (e.first > t) return false;
      candidates_.push_back(e.second);
      asleep_[e.second] = 0;
      return true;
    });
    return t;
  }
  // The segment's last op done: the host, which waited for it, begins issuing the next segment.
  void segment_op_done(OpId id, Seconds t) {
    const int k = segment_of_op_[id];
    if (k < 0 || --segment_left_[k] > 0 || k + 1 >= static_cast<int>(segment_base_.size())) return;
    segment_base_[k + 1] = t;
    candidates_.insert(candidates_.end(), parked_[k + 1].begin(), parked_[k + 1].end());
    parked_[k + 1].clear();
  }

  // The figure of a side kind's class in an efficiency.beside_compute-like block (none: 0).
  static double of_kind(SideKind k, const EfficiencySpec::BesideCompute& b) {
    return k == SideKind::memcpy ? b.memcpy : k == SideKind::kernel ? b.kernel
         : k == SideKind::collective ? b.collective : k == SideKind::link_collective ? b.link_collective : 0.0;
  }
  static double beside_compute_wait(SideKind k, const EfficiencySpec::BesideCompute& b) {
    const double q = of_kind(k, b);
    return q > 0 && q <= 1 ? q : 0.0;
  }
  static double beside_compute_rate(SideKind k, const EfficiencySpec::BesideCompute& b) {
    const double r = of_kind(k, b);
    return r > 0 && r < 1 ? r : 1.0;
  }

  void recompute_rates() {
    flow_ids_.clear();
    flow_routes_.clear();
    for (OpId id : running_)
      if (state_[id] == State::flowing) {
        flow_ids_.push_back(id);
        flow_routes_.push_back(route(id));
      }
    max_min_fair_rates(flow_routes_, r_.links.bytes_per_s, rates_, scratch_);
    // A collective among ranks moves at its class's rate beside compute while the compute stream runs.
    const bool computing = pace_flows_ && !main_fixed_.empty();
    for (size_t i = 0; i < flow_ids_.size(); ++i)
      rate_[flow_ids_[i]] = rates_[i] * (computing ? flow_side_rate_[p_.work_class[flow_ids_[i]]] : 1.0);
    flows_changed_ = false;
  }

  static constexpr char kNoGpuMem = 0, kGpuAlloc = 1, kGpuFree = 2;

  const Schedule& s_;
  const SimProgram& p_;
  TimingResult r_;
  // What each work class costs on this cluster (op_work), flat: a fixed part, then flow bytes over its route
  // route_uses_[route_begin_[k] .. route_begin_[k + 1]).
  std::vector<Seconds> fixed_s_;
  std::vector<double> flow_bytes_;
  std::vector<std::size_t> route_begin_;
  std::vector<FlowUse> route_uses_;
  std::vector<State> state_;
  std::vector<int> pending_;
  std::vector<int> link_pending_;                   // ordered: earlier transfers on its links not yet done
  std::vector<std::size_t> link_dependents_begin_;  // ordered, CSR: later transfers waiting for this one's links
  std::vector<OpId> link_dependents_;
  std::vector<double> remaining_, fixed_end_, rate_;
  // efficiency.beside_compute: per class the rate of its fixed part beside compute (1: unaffected);
  // efficiency.compute_beside: per side class the rate it leaves the compute stream's ops (1: unaffected); per op the
  // fixed time left at full rate and the current rate; which ops are the compute stream's forward / backward /
  // recompute; the paced side ops and compute ops in their fixed part.
  std::vector<double> side_rate_, compute_rate_, fixed_left_, fixed_rate_;
  std::vector<char> main_compute_;
  std::vector<OpId> side_running_, main_fixed_;
  // The same two ways for collectives among ranks (.link_collective), in their flow: per class the rate of its flow
  // beside compute and the rate it leaves the compute stream; the paced collectives flowing now.
  std::vector<double> flow_side_rate_, flow_compute_rate_;
  std::vector<OpId> link_flowing_;
  bool pace_flows_ = false;
  // efficiency.beside_compute_wait: per class the side kind's fraction q of the running kernel it waits for (0: none);
  // per compute class its long kernels' mean length and residual (OpWork); per op the wait left; the waiting side ops
  // that started this event, their waits not yet set.
  std::vector<double> wait_q_, kernel_mean_s_, kernel_residual_s_, wait_left_;
  std::vector<OpId> arrivals_;
  bool pace_waits_ = false;
  bool sides_changed_ = false;
  bool pace_sides_ = false;
  std::vector<size_t> head_;                        // by stream: position of its next op in p_.queue
  std::vector<char> busy_;
  std::vector<OpId> candidates_, batch_, running_;
  std::vector<OpId> flow_ids_;                      // recompute_rates' buffers, reused
  std::vector<std::span<const FlowUse>> flow_routes_;
  std::vector<double> rates_;
  MaxMinScratch scratch_;
  bool flows_changed_ = false;
  Bytes gpu_capacity_ = std::numeric_limits<Bytes>::max();
  Bytes live_gpu_ = 0;
  std::vector<OpId> blocked_;
  std::vector<char> waited_;
  OpId forced_ = -1;
  // efficiency.host_issue (none without): per op its segment of the host's issue (-1: none, an init op) and the
  // host's time into that segment when it has made the op's first call and all of them; per segment the time its
  // issue began (-1: the segment before still runs) and its ops not yet done.
  bool host_ = false;
  std::vector<int> segment_of_op_;
  std::vector<Seconds> issue_lead_, issue_end_, segment_base_;
  std::vector<int> segment_left_;
  std::vector<std::vector<OpId>> parked_;            // by segment: ops waiting for the segment's issue to begin
  std::vector<std::pair<Seconds, OpId>> sleeping_;   // (when the host issues it, op)
  std::vector<char> asleep_;                         // by op: in sleeping_
  // By op: the op waiting in comm_wait for it to end (-1: none; SimProgram::comm_prev says whom each waits for).
  std::vector<OpId> comm_waiter_;
};

}  // namespace

SimProgram::SimProgram(const Schedule& s) : schedule(&s) {
  const size_t n = s.ops.size();
  stream_of.resize(n);
  deps.resize(n);
  gpu_mem.assign(n, 0);
  gpu_mem_bytes.assign(n, 0);
  dependents_begin.assign(n + 1, 0);
  queue_begin.assign(s.streams.size() + 1, 0);
  for (const Op& op : s.ops) {
    stream_of[op.id] = op.stream;
    if ((op.kind == OpKind::alloc || op.kind == OpKind::free) && op.mem.tier == Tier::gpu) {
      gpu_mem[op.id] = op.kind == OpKind::alloc ? 1 : 2;
      gpu_mem_bytes[op.id] = op.mem.bytes;
    }
    deps[op.id] = static_cast<int>(op.deps.size());
    for (OpId d : op.deps) ++dependents_begin[d + 1];
    ++queue_begin[op.stream + 1];
  }
  for (size_t i = 0; i < n; ++i) dependents_begin[i + 1] += dependents_begin[i];
  for (size_t st = 0; st < s.streams.size(); ++st) queue_begin[st + 1] += queue_begin[st];
  dependents.resize(dependents_begin[n]);
  queue.resize(n);
  std::vector<std::size_t> next_dependent(dependents_begin.begin(), dependents_begin.end() - 1);
  std::vector<std::size_t> next_in_queue(queue_begin.begin(), queue_begin.end() - 1);
  for (const Op& op : s.ops) {
    for (OpId d : op.deps) dependents[next_dependent[d]++] = op.id;
    queue[next_in_queue[op.stream]++] = op.id;
  }
  step_of_op = find_steps(s, &steps);
  comm_prev = communicator_order_deps(s);
  assign_work_classes(s, work_class, class_op);
}

TimingResult simulate(const ClusterSpec& cluster, const SimProgram& program, const SimOptions& options) {
  const Schedule& schedule = *program.schedule;
  if (!options.schedule_checked) check_schedule(schedule);
  check_shape(cluster, schedule);
  return Engine(cluster, program, options).run();
}

TimingResult simulate(const ClusterSpec& cluster, const Schedule& schedule, const SimOptions& options) {
  if (!options.schedule_checked) check_schedule(schedule);
  check_shape(cluster, schedule);
  const SimProgram program(schedule);
  return Engine(cluster, program, options).run();
}

}  // namespace zsim
