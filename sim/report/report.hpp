// Report: what zsim tells the user about one scenario and its schedule: memory per tier, communication
// volume, whether it fits, and warnings. Every figure is derived by walking the schedule
// (memory_walk, comm_walk); JSON in report_json.*, terminal tables in report_print.*.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/report/comm_walk.hpp"
#include "sim/report/memory_walk.hpp"
#include "sim/scenario/scenario.hpp"
#include "sim/schedule/schedule.hpp"

namespace zsim {

inline constexpr const char* kReportFormat = "zsim.report";
inline constexpr int kReportVersion = 1;

// Identifies what was simulated (for the header of the report).
struct ReportSetup {
  std::string source_file;   // scenario file ("" if built in code)
  std::string model;         // model name (preset, HF config path, or "custom")
  Elements params = 0;       // model parameters (count), from the schedule's meta
  int nodes = 1;
  int gpus_per_node = 1;
  int world_size = 1;
  std::string gpu;           // GPU name
  int zero_stage = 0;
  std::vector<std::string> features;  // e.g. "qwZ", "hpZ=8", "qgZ", "LoCo", "offload_optimizer=cpu"
};

// Step time. The timing work computes it (sim/engine: summarize -> timing_json, format_timing) and the
// caller attaches it; the report only places it: JSON under "time", terminal text before the verdict.
// (Kept as rendered output so sim/report does not depend on sim/engine.)
struct ReportTime {
  nlohmann::ordered_json json;  // the "time" object (docs/timing.md)
  std::string text;             // terminal block, ending in a newline
};

// Under runtime deepspeed: which figures priced the step and the GPU verdict, and how far to trust them (issue 59),
// so that a prediction from a data-sheet preset without DeepSpeed's host figures says so instead of reading as one.
struct DeepSpeedFigures {
  std::string profile;       // cluster.profile ("" = none)
  FittedUnder fitted_under;  // cluster.fitted_under (empty: not recorded)
  std::string host;          // "deepspeed_host" (DeepSpeed's Python, fitted), "host_issue" (zrun's calls), "none"
  std::string host_note;
  std::string gpu;           // "measured" (efficiency.hbm_by_kind given) or "data_sheet"
  std::string gpu_note;
  Bytes outside_allocator = 0;
  bool outside_allocator_default = false;  // kDeepSpeedOutsideAllocatorDefaultBytes: no profile gave it
  std::string outside_allocator_note;
};

// The DeepSpeedFigures of a scenario under runtime deepspeed (nullopt under runtime zrun).
std::optional<DeepSpeedFigures> deepspeed_figures_of(const Scenario& scenario);

// "DeepSpeed 0.14.5, torch 2.11.0, transformers 5.17.0; python 3.12.3; CUDA 13.0; NVIDIA H200; 2026-12-03" (the
// fields given, in that order), or "" where none is.
std::string fitted_under_text(const FittedUnder& f);

struct Report {
  ReportSetup setup;
  MemoryWalk memory;         // gpu per GPU; cpu, nvme per node
  CommWalk comm;             // per GPU, per step
  bool fits = false;         // every tier's peak <= its capacity
  std::vector<std::string> warnings;  // the scenario's own, then the report's
  size_t scenario_warnings = 0;       // how many of `warnings` (at the front) are the scenario's
  std::optional<ReportTime> time;      // attached by the caller when a step was simulated
  std::optional<DeepSpeedFigures> deepspeed_figures;  // runtime deepspeed: the figures used (make_report)
  // The resolved scenario (sim/scenario: scenario_to_json), attached by the caller so that the JSON
  // report says exactly what it describes (after presets, "auto" and --set overrides).
  std::optional<nlohmann::ordered_json> scenario;
};

// The memory walk of `schedule` (planned from `scenario`) with the scenario's capacities and, under runtime deepspeed,
// PyTorch's caching allocator on the GPU tier: its reserved peak (walk_reserved, the allocator allowed the GPU's memory
// less cluster.efficiency.outside_allocator_bytes) and that outside figure, so that the GPU's fits() / headroom() read
// reserved + outside, what can actually run out. Under runtime zrun (its own arena) the plain walk. Every fits verdict
// (report, sweep points, advise) comes from this walk.
MemoryWalk walk_memory_of(const Scenario& scenario, const Schedule& schedule);

// Walks `schedule` (planned from `scenario`): capacities come from the scenario, everything else from
// the schedule. Throws std::logic_error if the schedule is structurally broken (see check_schedule).
Report make_report(const Scenario& scenario, const Schedule& schedule);

// The report's note (one of its warnings) when the schedule lists a unit's own GEMM calls (eager attention's core)
// and the run's calibrated GEMM model was fitted without such shapes (GemmModel::attention_shapes false): zsim then
// keeps the older pricing of the core (sim/engine/op_work.cpp). nullopt otherwise (no model, or one fitted on them).
std::optional<std::string> attention_core_pricing_warning(const Scenario& scenario, const Schedule& schedule);

}  // namespace zsim
