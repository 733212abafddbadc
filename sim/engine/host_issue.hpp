// The issuing thread's time for each op of a schedule, as zrun's executor issues it in a step without per-op timing
// (runtime/exec/executor.cpp `launch`; the step zsim predicts): the event waits for its deps on other streams, its
// calls (cuBLASLt GEMMs, kernels, NCCL calls, cudaMemcpyAsync, host functions; an alloc's memset, a free's fence
// event), and the event a later op of another stream waits for. Priced at the profile's efficiency.host_issue; pure.
#pragma once
#include <vector>

#include "sim/schedule/schedule.hpp"
#include "sim/scenario/scenario.hpp"

namespace zsim {

struct HostIssue {
  Seconds total_s = 0;  // the whole op
  Seconds lead_s = 0;   // up to and including its first call (its GPU work cannot start before)
  // Before the op the host waits until every op of its step before it is done (a framework's synchronisation: DeepSpeed
  // stage 3's gradient epilogue, sim/engine/deepspeed_host.hpp); the engine's host issue begins a segment there.
  bool waits_for_gpu = false;
};

// Calls the op makes, by kind (what efficiency.host_issue prices).
struct HostCalls {
  int gemms = 0, kernels = 0, collectives = 0, memcpys = 0;
  int events = 0;  // records and waits
};

// The calls of one op: `waits` of its deps are on other streams (not already ordered), `records` whether a later op
// of another stream waits for it, `zeroed` whether an alloc fills its buffer with zeros (zeroed_allocs).
HostCalls host_calls(const Op& op, const Schedule& s, int waits, bool records, bool zeroed = false);

// Every op's host time (all 0 without efficiency.host_issue). A schedule of runtime deepspeed with
// efficiency.deepspeed_host takes that model instead (sim/engine/deepspeed_host.hpp).
std::vector<HostIssue> host_issue(const Schedule& s, const ClusterSpec& c);

}  // namespace zsim
