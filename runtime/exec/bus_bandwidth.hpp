// nccl-tests' bandwidth conventions, so that zrun's per-collective figures compare with raw NCCL runs:
// algorithm bandwidth = size / time; bus bandwidth = algorithm bandwidth x the collective's factor
// (all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all (n-1)/n; broadcast, reduce 1). `size` is the
// schedule's collective bytes, which follow nccl-tests' "size" (docs/schedule-format.md).
#pragma once
#include "sim/common/units.hpp"
#include "sim/schedule/schedule.hpp"

namespace zrun {

double bus_factor(zsim::CollectiveKind kind, int ranks);
double algorithm_GBps(zsim::Bytes size, double seconds);
double bus_GBps(zsim::CollectiveKind kind, int ranks, zsim::Bytes size, double seconds);

}  // namespace zrun
