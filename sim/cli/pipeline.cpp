#include "sim/cli/pipeline.hpp"

#include <fmt/format.h>

#include "sim/cli/repeated_micro_steps.hpp"
#include "sim/cli/scenario_summary.hpp"
#include "sim/engine/timing_report_io.hpp"
#include "sim/plan/plan.hpp"
#include "sim/plan/schedule_builder.hpp"
#include "sim/report/human_units.hpp"
#include "sim/report/report_json.hpp"
#include "sim/report/report_print.hpp"
#include "sim/scenario/scenario_json.hpp"
#include "sim/schedule/schedule_json.hpp"

namespace zsim {

PipelineResult run_pipeline(const Scenario& scenario, const PipelineOptions& options) {
  const Plan plan = make_plan(scenario);
  PipelineResult r;
  r.schedule = make_schedule(scenario, plan, options.steps);
  r.report = make_report(scenario, r.schedule);
  r.report.warnings.insert(r.report.warnings.end(), plan.warnings.begin(), plan.warnings.end());
  TimeRequest request;
  request.want_trace = options.want_trace;
  request.want_csv = options.want_csv;
  request.share = options.share;
  request.throughput_only = options.throughput_only;
  request.schedule_checked = true;  // make_report ran check_schedule on r.schedule
  r.time = time_schedule(scenario, r.schedule, request);
  r.report.time = ReportTime{r.time.json, r.time.terminal};
  return r;
}

bool tries_repeated_micro_steps(const Scenario& scenario, const PipelineOptions& options) {
  return options.repeat_from_micro_steps > 0 && scenario.training.grad_accum >= options.repeat_from_micro_steps &&
         !options.want_trace && !options.want_csv;
}

namespace {

RepeatOptions repeat_options(const PipelineOptions& options) {
  RepeatOptions o;
  o.steps = options.steps;
  o.share = options.share;
  return o;
}

}  // namespace

ReportOutputs scenario_to_report(const Scenario& scenario, const PipelineOptions& options) {
  ReportOutputs out;
  Report report;
  if (auto fast = tries_repeated_micro_steps(scenario, options)
                      ? report_by_repeated_micro_steps(scenario, repeat_options(options))
                      : std::nullopt) {
    report = std::move(fast->report);
    report.time = ReportTime{timing_report_json(fast->time), format_timing(fast->time)};
  } else {
    PipelineResult r = run_pipeline(scenario, options);
    report = std::move(r.report);
    out.trace = std::move(r.time.trace_json);
    out.csv = std::move(r.time.csv);
  }
  report.scenario = scenario_to_json(scenario);
  ReportPrintOptions print;
  print.header = false;             // the scenario summary says what was simulated
  print.scenario_warnings = false;  // the CLI printed them on stderr while loading
  out.terminal = scenario_summary(scenario) + "\n" + format_report(report, print);
  out.json = report_json_text(report);
  return out;
}

std::string scenario_to_schedule_json(const Scenario& scenario, int steps) {
  return schedule_to_json_text(make_schedule(scenario, make_plan(scenario), steps));
}

namespace {

// A sweep point's memory figures and, when it does not fit, why.
SweepPoint sweep_point_from(const MemoryWalk& m) {
  SweepPoint p;
  p.valid = true;
  p.fits = m.fits();
  p.gpu_peak_bytes = m.gpu.peak;
  p.gpu_verdict_bytes = m.gpu.verdict_bytes();
  p.cpu_peak_bytes = m.cpu.peak;
  for (const TierMemory* t : {&m.gpu, &m.cpu, &m.nvme}) {
    if (t->fits()) continue;
    p.overflow_tier = to_string(t->tier);
    p.rejection = t->reserved > 0
                      ? fmt::format("gpu reserved {} + outside the allocator {} > capacity {} (allocated peak {})",
                                    human_bytes(t->reserved), human_bytes(t->outside_allocator),
                                    human_bytes(t->capacity), human_bytes(t->peak))
                      : fmt::format("{} peak {} > capacity {}", to_string(t->tier), human_bytes(t->peak),
                                    human_bytes(t->capacity));
    break;
  }
  return p;
}

}  // namespace

SweepPoint evaluate_sweep_point(const Scenario& scenario, const PipelineOptions& options) {
  // Prune before timing: the memory walk alone decides whether the point fits. A point that does not fit
  // is neither walked for communication nor simulated (its step figures stay 0); one that fits gets the
  // same figures as run_pipeline (bench/fast_paths_test.cpp).
  if (tries_repeated_micro_steps(scenario, options)) {
    if (auto fast = report_by_repeated_micro_steps(scenario, repeat_options(options))) {
      SweepPoint p = sweep_point_from(fast->report.memory);
      if (!p.fits) return p;
      p.cross_node_bytes_per_gpu = fast->report.comm.cross_node_per_gpu.total();
      p.step_s = fast->time.step_s;
      p.tokens_per_s = fast->time.tokens_per_s;
      p.tflops_per_gpu = fast->time.tflops_per_gpu;
      return p;
    }
  }
  const Plan plan = make_plan(scenario);
  const Schedule schedule = make_schedule(scenario, plan, options.steps);
  check_schedule(schedule);
  return sweep_point_of_schedule(scenario, schedule, walk_memory_of(scenario, schedule), options);
}

SweepPoint sweep_point_of_schedule(const Scenario& scenario, const Schedule& schedule, const MemoryWalk& memory,
                                   const PipelineOptions& options, std::optional<Bytes> cross_node_bytes_per_gpu,
                                   const SimProgram* program) {
  SweepPoint p = sweep_point_from(memory);
  if (!p.fits) return p;
  p.cross_node_bytes_per_gpu =
      cross_node_bytes_per_gpu ? *cross_node_bytes_per_gpu : walk_comm(schedule).cross_node_per_gpu.total();
  TimeRequest request;
  request.share = options.share;
  request.throughput_only = true;  // a point needs step time, tokens/s and TFLOPS, not the full timing report
  request.schedule_checked = true;
  request.program = program;
  const TimeOutputs time = time_schedule(scenario, schedule, request);
  p.step_s = time.report.step_s;
  p.tokens_per_s = time.report.tokens_per_s;
  p.tflops_per_gpu = time.report.tflops_per_gpu;
  return p;
}

}  // namespace zsim
