// make_schedule: expands a Plan into the SPMD program of one or more training steps (init, then per
// step: forward/backward per micro-step, then the optimizer step) for ZeRO stages 0-3 with ZeRO++,
// LoCo, sequential all-gather and CPU/NVMe offload. Semantics: docs/schedule-semantics.md.
#pragma once
#include "sim/plan/plan.hpp"
#include "sim/scenario/scenario.hpp"
#include "sim/schedule/schedule.hpp"

namespace zsim {

Schedule make_schedule(const Scenario& s, const Plan& p, int steps = 1);

// The same program with only `built_micro_steps` (>= 2, clamped to grad_accum) of each step's grad_accum
// micro-steps: micro-steps 0 .. built-2 and the last one (grad_accum - 1), i.e. the steady micro-steps
// 1 .. grad_accum-2 cut to built-2 of them. Everything else (meta, model, names, the last micro-step's and the
// optimizer's ops) is what make_schedule emits. With built == grad_accum it IS make_schedule's schedule.
// The pipeline times such truncated programs for a few `built` and extrapolates the figures to grad_accum
// (sim/cli/repeated_micro_steps.hpp); zrun and `zsim plan --emit-schedule` always get make_schedule's.
Schedule make_schedule_with_micro_steps(const Scenario& s, const Plan& p, int steps, int built_micro_steps);

}  // namespace zsim
