// make_schedule: expands a Plan into the SPMD program of one or more training steps (init, then per
// step: forward/backward per micro-step, then the optimizer step) for ZeRO stages 0-3 with ZeRO++,
// LoCo, sequential all-gather and CPU/NVMe offload. Semantics: docs/schedule-semantics.md.
#pragma once
#include "sim/plan/plan.hpp"
#include "sim/scenario/scenario.hpp"
#include "sim/schedule/schedule.hpp"

namespace zsim {

Schedule make_schedule(const Scenario& s, const Plan& p, int steps = 1);

}  // namespace zsim
