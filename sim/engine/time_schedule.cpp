#include "sim/engine/time_schedule.hpp"

#include <sstream>

#include "sim/engine/deepspeed_host.hpp"
#include "sim/engine/timing_report_io.hpp"
#include "sim/engine/trace_writer.hpp"

namespace zsim {
namespace {

// The host speed DeepSpeed's figures were taken at, where the profile gives a reference loop.
void note_host_speed(const ClusterSpec& c, const Schedule& s, TimingReport& r) {
  const EfficiencySpec::DeepSpeedHost& h = c.efficiency.deepspeed_host;
  if (!deepspeed_host_applies(s, c) || !h.reference_loop_us) return;
  r.host_reference_loop_us = *h.reference_loop_us;
  r.host_loop_us = h.loop_us.value_or(0);
  r.host_speed_scale = h.host_speed_scale();
  r.host_autograd_loop_us = h.autograd_loop_us.value_or(0);
  r.host_autograd_speed_scale = h.autograd_host_speed_scale();
}

}  // namespace

TimeOutputs time_schedule(const Scenario& scenario, const Schedule& schedule, const TimeRequest& request) {
  SimOptions options;
  options.precision = scenario.training.precision;
  options.share = request.share;
  options.schedule_checked = request.schedule_checked;
  TimeOutputs out;
  out.result = request.program ? simulate(scenario.cluster, *request.program, options)
                               : simulate(scenario.cluster, schedule, options);
  if (request.throughput_only) {
    out.report = summarize_throughput(schedule, out.result);
    return out;
  }
  out.report = summarize(schedule, out.result, request.top_contributors);
  note_host_speed(scenario.cluster, schedule, out.report);
  out.terminal = format_timing(out.report);
  out.json = timing_report_json(out.report);
  if (request.want_trace) {
    std::ostringstream s;
    write_chrome_trace(s, schedule, out.result);
    out.trace_json = s.str();
  }
  if (request.want_csv) {
    std::ostringstream s;
    write_op_csv(s, schedule, out.result);
    out.csv = s.str();
  }
  return out;
}

}  // namespace zsim
