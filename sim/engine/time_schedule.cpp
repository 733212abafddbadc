#include "sim/engine/time_schedule.hpp"

#include <sstream>

#include "sim/engine/timing_report_io.hpp"
#include "sim/engine/trace_writer.hpp"

namespace zsim {

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
