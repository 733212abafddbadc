// ZeRO-Offload's pieces inside one measured step (host code, tested in CI): per kind (d2h and h2d copies, NVMe
// reads and writes, the CPU optimizer) the ops this rank ran, their bytes or elements and their summed time, and
// the step's exposed offload time by zsim's definition (docs/timing.md): time in the step when a copy (PCIe or
// NVMe) runs and no compute, optimizer (GPU or CPU) or collective / d2d copy does.
#pragma once
#include <vector>

#include "sim/schedule/schedule.hpp"

namespace zrun {

struct OpInterval {
  double start_s = 0, end_s = 0;  // end_s 0: the op did not run (or was not timed)
};

struct PieceFigures {
  int ops = 0;
  zsim::Bytes bytes = 0;          // copies: the schedule's bytes
  zsim::Elements elements = 0;    // the CPU optimizer: parameters updated
  double seconds = 0;             // summed op durations
  double GBps() const { return seconds > 0 ? bytes / seconds / 1e9 : 0; }
  double per_s() const { return seconds > 0 ? elements / seconds : 0; }
};

struct OffloadFigures {
  PieceFigures d2h, h2d, nvme_read, nvme_write, cpu_optimizer;
  double exposed_s = 0;
  bool any() const { return d2h.ops + h2d.ops + nvme_read.ops + nvme_write.ops + cpu_optimizer.ops > 0; }
};

// `times` by op id; `step_ops` the ops of the step; copies with a `rank` other than `rank` are skipped.
OffloadFigures offload_figures(const zsim::Schedule& s, const std::vector<zsim::OpId>& step_ops,
                               const std::vector<OpInterval>& times, int rank);

}  // namespace zrun
