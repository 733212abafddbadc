#include "sim/engine/host_issue.hpp"

#include <algorithm>

#include "sim/engine/deepspeed_host.hpp"
#include "sim/engine/op_work.hpp"
#include "sim/schedule/stream_waits.hpp"
#include "sim/schedule/zeroed_allocs.hpp"

namespace zsim {

namespace {

// The executor's GPU compute calls: the unit's cuBLASLt GEMMs, the rest of its kernel launches kernels.
void compute_calls(const Op& op, const Schedule& s, HostCalls& h) {
  if (op.compute.device == Device::cpu) {  // a host function queued on its stream
    h.kernels = 1;
    return;
  }
  const bool layer_work = op.compute.what == ComputeKind::forward || op.compute.what == ComputeKind::backward ||
                          op.compute.what == ComputeKind::recompute;
  int gemms = 0;
  if (layer_work)
    for (const GemmShape& g : unit_gemms(op, s.model, true)) gemms += static_cast<int>(g.calls);
  const int launches = std::max(1, op.compute.kernel_launches);
  h.gemms = std::min(gemms, launches);
  h.kernels = launches - h.gemms;
}

// The executor's copy calls (run_copy): a host function for an NVMe transfer; a d2d torch.cat its batched-copy
// launches; otherwise one call per (input, output) pair: a kernel for a cast or an add, else a cudaMemcpyAsync.
void copy_calls(const Op& op, HostCalls& h) {
  if (op.copy.rank > 0) return;  // another rank's copy: rank 0 issues nothing
  if (op.copy.what == CopyKind::nvme_read || op.copy.what == CopyKind::nvme_write) {
    h.kernels = 1;
    return;
  }
  const int pairs = std::max(1, copy_use_pairs(op));
  const CopyRun run = copy_run(op);
  if (run == CopyRun::batched) h.kernels = std::max(1, op.copy.kernel_launches);
  else (run == CopyRun::kernel_per_piece ? h.kernels : h.memcpys) = pairs;
}

}  // namespace

HostCalls host_calls(const Op& op, const Schedule& s, int waits, bool records, bool zeroed) {
  HostCalls h;
  switch (op.kind) {
    case OpKind::alloc: h.kernels = zeroed ? 1 : 0; break;  // a cudaMemsetAsync where the buffer starts at zero
    case OpKind::free: h.events = 1; break;                 // the arena's fence: the range returns once it is done
    case OpKind::compute: compute_calls(op, s, h); break;
    case OpKind::collective: h.collectives = 1; break;
    case OpKind::copy: copy_calls(op, h); break;
  }
  // The step zsim predicts is one without per-op timing events (zrun's untimed steps, whose median it reports, and a
  // user's run): an event per wait and per record another stream waits for.
  h.events += waits + (records ? 1 : 0);
  return h;
}

std::vector<HostIssue> host_issue(const Schedule& s, const ClusterSpec& c) {
  if (deepspeed_host_applies(s, c)) return deepspeed_host_issue(s, c);
  std::vector<HostIssue> out(s.ops.size());
  const EfficiencySpec::HostIssue& e = c.efficiency.host_issue;
  if (!e.present()) return out;
  const StreamWaits w = stream_waits(s);
  const std::vector<char> zeroed = zeroed_allocs(s);
  for (const Op& op : s.ops) {
    const HostCalls h =
        host_calls(op, s, static_cast<int>(w.waits[op.id].size()), w.records_event[op.id], zeroed[op.id]);
    // An NCCL call among 2+ ranks at calibrate's enqueue among the GPUs, where the profile has it.
    const double collective_us =
        e.collective_call_us(op.kind == OpKind::collective ? s.groups[op.collective.group].size : 1);
    const double us = h.gemms * e.gemm_us + h.kernels * e.kernel_us + h.collectives * collective_us +
                      h.memcpys * e.memcpy_us + h.events * e.event_us;
    // Before the first call: the waits, then one call of the op's first kind.
    const double first = h.gemms > 0 ? e.gemm_us : h.collectives > 0 ? collective_us
                         : h.memcpys > 0 && h.kernels == 0 ? e.memcpy_us : h.kernels > 0 ? e.kernel_us : 0;
    const std::size_t waits = w.waits[op.id].size();
    const double lead = static_cast<double>(waits) * e.event_us + first;
    out[op.id] = {us * 1e-6, std::min(us, lead) * 1e-6};
  }
  return out;
}

}  // namespace zsim
