// NCCL runs one communicator's calls in the order they are issued, whatever stream each is on: a collective issued
// after another of the same process group waits for it (zrun issues the schedule's ops in program order, one
// communicator per group; DeepSpeed's collectives of one torch process group queue on its NCCL stream likewise).
// Not on a communicator of one rank: NCCL copies on the caller's stream there, and zrun's one-GPU steps show no
// such wait (torch's process group of one rank still queues its calls on one stream: not modelled).
#pragma once
#include <vector>

#include "sim/schedule/schedule.hpp"

namespace zsim {

// By op id: the collective issued just before it on the same group of 2+ ranks, where that one runs on another
// stream and is not already among its deps (its stream or deps order them already); -1 otherwise and for every
// other op.
std::vector<OpId> communicator_order_deps(const Schedule& s);

}  // namespace zsim
