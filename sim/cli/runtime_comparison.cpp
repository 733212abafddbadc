#include "sim/cli/runtime_comparison.hpp"

#include <fmt/format.h>

namespace zsim {

RuntimePrediction predict_under(Scenario scenario, RuntimeKind runtime, const PipelineOptions& options) {
  scenario.runtime = runtime;
  const PipelineResult r = run_pipeline(scenario, options);
  RuntimePrediction p;
  p.runtime = runtime;
  p.step_s = r.time.report.step_s;
  p.host_s = r.time.report.host_s;
  p.host_binds = r.time.report.host_binds();
  p.tokens_per_s = r.time.report.tokens_per_s;
  p.gpu_peak = r.report.memory.gpu.peak;
  p.gpu_verdict = r.report.memory.gpu.verdict_bytes();
  p.gpu_capacity = r.report.memory.gpu.capacity;
  p.fits = r.report.fits;
  return p;
}

namespace {
std::string gib(Bytes b) { return fmt::format("{:.2f} GiB", static_cast<double>(b) / static_cast<double>(kGiB)); }

std::string row(const RuntimePrediction& p) {
  return fmt::format("  {:<10} {:>12} {:>12} {:>14}  {:>10} {:>12}   {}{}\n", to_string(p.runtime),
                     fmt::format("{:.3f} ms", p.step_s * 1e3), p.host_s > 0 ? fmt::format("{:.3f} ms", p.host_s * 1e3) : "-",
                     fmt::format("{:.0f}", p.tokens_per_s), gib(p.gpu_peak), gib(p.gpu_verdict),
                     p.fits ? "fits" : "DOES NOT FIT", p.host_binds ? " (the host binds)" : "");
}
}  // namespace

std::string format_runtime_comparison(const RuntimePrediction& deepspeed, const RuntimePrediction& zrun) {
  std::string o = "\nboth runtimes     step         host       tokens/s   GPU peak   verdict reads\n";
  o += row(deepspeed);
  o += row(zrun);
  if (zrun.step_s > 0)
    o += fmt::format("  DeepSpeed's step is {:.2f}x zrun's (deepspeed: transformers' code and DeepSpeed's host; zrun: "
                     "zsim's schedule issued from C++)\n",
                     deepspeed.step_s / zrun.step_s);
  return o;
}

}  // namespace zsim
