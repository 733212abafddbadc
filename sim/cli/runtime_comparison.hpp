// The same scenario predicted under both runtimes, side by side (issue 39): DeepSpeed + PyTorch eager running
// transformers' code (`runtime: deepspeed`: its buffers, the tensors transformers keeps, its host) and zrun running
// zsim's own schedule (`runtime: zrun`). What `zsim SCENARIO --both-runtimes` prints after the report.
#pragma once
#include <string>

#include "sim/cli/pipeline.hpp"
#include "sim/scenario/scenario.hpp"

namespace zsim {

struct RuntimePrediction {
  RuntimeKind runtime = RuntimeKind::deepspeed;
  Seconds step_s = 0;
  Seconds host_s = 0;        // the host's time to issue the step (0: no host model)
  bool host_binds = false;
  double tokens_per_s = 0;
  Bytes gpu_peak = 0;        // allocated
  Bytes gpu_verdict = 0;     // what the GPU's fits verdict reads (deepspeed: reserved + outside the allocator)
  Bytes gpu_capacity = 0;
  bool fits = false;
};

// One runtime's prediction of `scenario` (its own runtime key replaced).
RuntimePrediction predict_under(Scenario scenario, RuntimeKind runtime, const PipelineOptions& options);

// The table of both (deepspeed first), with the ratio of the step times.
std::string format_runtime_comparison(const RuntimePrediction& deepspeed, const RuntimePrediction& zrun);

}  // namespace zsim
