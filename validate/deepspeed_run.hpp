// zsim against DeepSpeed itself: a run of validate/deepspeed/harness.py (format "zsim.deepspeed_run" v1,
// validate/deepspeed/README.md) read into structs, and compared with zsim's prediction of the case's scenario (peak
// allocated and reserved GPU memory, memory at the phase points, the collective calls of one step, the step time).
// Pure: validate_cli.cpp finds the files, builds the prediction (deepspeed_prediction below) and prints.
// Errors are signed fractions, (predicted - measured) / measured. docs/validation.md, "Validating against DeepSpeed".
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/common/collective_kind.hpp"
#include "sim/common/units.hpp"
#include "sim/scenario/scenario.hpp"
#include "sim/schedule/schedule.hpp"

namespace zsim {

inline constexpr const char* kDeepSpeedRunFormat = "zsim.deepspeed_run";
inline constexpr int kDeepSpeedRunVersion = 1;

// One row of a rank's `collectives.calls`: the harness's calls grouped by (phase, op, group size, bytes, dtype).
struct DsCollectiveCalls {
  std::string phase;  // forward / backward / step: where the training loop was
  std::string op;     // torch.distributed's function as recorded (all_gather_into_tensor, _reduce_scatter_base, ...)
  int group_size = 1;
  Bytes input_bytes = 0, output_bytes = 0;  // per call: the rank's contribution; what it receives into
  std::string dtype;                        // torch's name: bfloat16, float32, float64, ...
  int count = 0;                            // calls of this shape in the step
};

struct DsMemoryPoint {
  Bytes allocated = 0, reserved = 0;
};

// One rank of the run. An ok rank has every block (the reader insists); a failed one what it reached.
struct DsRank {
  int rank = 0;
  std::string status;  // "ok" / "failed"
  std::string error, failure_kind, stage_reached;
  bool has_peaks = false;  // memory.steady_peak_allocated / _reserved read
  Bytes steady_peak_allocated = 0, steady_peak_reserved = 0;
  std::map<std::string, DsMemoryPoint> points;       // after_forward / after_backward / after_step (last micro-step)
  std::map<std::string, DsMemoryPoint> phase_peaks;  // forward / backward / step (max over the micro-steps)
  bool has_collectives = false;
  int collectives_step = -1;
  std::vector<DsCollectiveCalls> calls;
  double median_step_s = 0;  // timing.median_step_seconds; 0: no timed step
  // The host's speed beside the timed steps: timing.reference_loop_seconds (a pooled result: the median of its runs'),
  // else the median of timing.host_per_step[].reference_work_seconds over the steps timing.step_kinds calls "timed"
  // (validate/deepspeed/host_cpu.py's reference loop, timed after each step); 0: not measured.
  double reference_loop_s = 0;
  // The same on autograd's device thread, where the backward's Python runs: timing.autograd_reference_loop_seconds,
  // else the timed steps' median of host_per_step[].autograd_reference_work_seconds; 0: not measured.
  double autograd_reference_loop_s = 0;
};

struct DeepSpeedRun {
  std::string source;               // the file read
  std::string case_name, case_dir;  // case.name; case.dir as the harness was given it (relative to where it ran)
  std::string scenario_file = "scenario.yaml", ds_config_file = "ds_config.json";  // case.files, names in case.dir
  nlohmann::json ds_config;  // case.ds_config: the file's contents as run (null if absent)
  int world = 1;             // case.world: ranks run
  bool shared_gpu = false;   // every rank on GPU 0
  std::string status, error, failure_kind, expected_status;
  bool as_expected = true, timed_out = false;
  std::string deepspeed_version, torch_version, transformers_version, gpu;  // versions.*; empty when absent
  std::string python_version, cuda_version;                                  // versions.python, versions.cuda
  std::vector<DsRank> ranks;

  bool ok() const { return status == "ok"; }
};

// Whether `j` is a harness result (its "format" says so).
bool is_deepspeed_run(const nlohmann::json& j);

// Reads a harness result. Throws InputError naming `source` and the key that is missing or malformed (e.g.
// "ranks[1].memory.steady_peak_allocated"). A failed run (status "failed") is read as far as it goes: its ranks'
// missing blocks are left empty, never an error.
DeepSpeedRun deepspeed_run_from_json(const nlohmann::json& j, const std::string& source);

// Where the case's scenario may be, best first (validate_cli.cpp takes the first that exists; `--scenario FILE`
// overrides them all): `case.dir`/`case.files.scenario` if case.dir is absolute; then that path under each folder
// from the run file's folder up to the root (a run under validate/results/<gpu>-deepspeed/runs/ finds
// validate/deepspeed/cases/<case>/ at the repository root), then under each folder from `cwd` up; then
// validate/deepspeed/cases/<case name>/`case.files.scenario` under the same folders (a run whose case.dir was another
// machine's absolute path, or relative to validate/deepspeed/). `run_dir` and `cwd` absolute; no duplicates.
std::vector<std::string> deepspeed_scenario_candidates(const DeepSpeedRun& run, const std::string& run_dir,
                                                       const std::string& cwd);

// torch.distributed's collective as the harness records it -> zsim's kind: all_gather_into_tensor, _all_gather_base,
// all_gather, all_gather_coalesced -> all_gather; reduce_scatter_tensor, _reduce_scatter_base, reduce_scatter ->
// reduce_scatter; all_reduce, all_reduce_coalesced -> all_reduce; all_to_all_single, all_to_all -> all_to_all;
// broadcast; reduce. nullopt for those zsim has no kind for (gather, scatter, batch_isend_irecv, ...).
std::optional<CollectiveKind> collective_kind_of_torch_op(std::string_view op);

// One call's bytes as the schedule counts a collective of `kind` (nccl-tests' "size", docs/schedule-format.md):
// all_gather the gathered output, reduce_scatter the whole input, all_reduce / broadcast / reduce the buffer,
// all_to_all the rank's whole send buffer.
Bytes schedule_bytes_of_call(CollectiveKind kind, Bytes input_bytes, Bytes output_bytes);

// torch's dtype name -> zsim's ("bfloat16" -> "bf16", "float32" -> "fp32", ...); other names as they are.
std::string zsim_dtype_name(std::string_view torch_dtype);

// zsim's collectives of one step of a schedule: the collective ops of step `step` (every micro-step; init excluded),
// grouped by (phase, kind, group size, bytes, dtype).
struct PredictedCollectives {
  Phase phase = Phase::forward;
  CollectiveKind kind = CollectiveKind::all_gather;
  int group_size = 1;
  Bytes bytes = 0;  // per call, the schedule's convention
  DType dtype = DType::bf16;
  int count = 0;
};
std::vector<PredictedCollectives> step_collectives(const Schedule& s, int step = 0);

// zsim's GPU memory (per rank, program order, as walk_memory replays it) in the last step of `s`: live after the last
// op of each phase of the last micro-step (after_forward, after_backward; after_step: after the step's last op) and
// each phase's own peak over its ops of that step (forward, backward, step).
struct PhaseMemory {
  std::map<std::string, Bytes> points;       // after_forward / after_backward / after_step
  std::map<std::string, Bytes> phase_peaks;  // forward / backward / step
};
PhaseMemory phase_memory(const Schedule& s);

// What zsim predicts for the case (validate_cli.cpp builds it from the scenario).
struct DsPrediction {
  std::string scenario;    // the scenario file
  Bytes gpu_peak = 0;      // walk_memory(...).gpu.peak: allocated bytes at the peak, per GPU
  Bytes gpu_reserved = 0;  // the caching allocator's reserved bytes at the peak; 0: not modelled
  double step_s = 0;       // steady-state step
  double host_speed_scale = 1;  // the host figures' scale at the run's reference loop (efficiency.deepspeed_host)
  double autograd_host_speed_scale = 1;  // the backward's figures' scale, at autograd's thread's loop
  PhaseMemory phases;
  std::vector<PredictedCollectives> collectives;  // step_collectives(schedule, 0)
};

// The caching-allocator hook: zsim's predicted reserved GPU bytes from its report JSON (report_to_json): the
// integer `memory.gpu.reserved` when the report has it (a model of PyTorch's caching allocator writes it there), else
// 0 (= not modelled).
Bytes predicted_reserved_from_report(const nlohmann::ordered_json& report);

// One (phase, op, group size) of the step: calls and bytes (per step, the schedule's convention) of both sides.
struct DsCollectiveRow {
  std::string phase;  // forward / backward / step
  std::string op;     // zsim's kind: all_gather, reduce_scatter, ...
  int group_size = 1;
  int predicted_calls = 0, measured_calls = 0;
  Bytes predicted_bytes = 0, measured_bytes = 0;
  std::vector<std::string> predicted_dtypes, measured_dtypes;  // zsim's names
  std::vector<std::string> measured_ops;                       // the torch functions DeepSpeed called
  bool calls_match() const { return predicted_calls == measured_calls; }
  bool bytes_match() const;  // within kBytesTolerance (both zero: a match)
};
inline constexpr double kCollectiveBytesTolerance = 0.005;  // issue 38's target: bytes per op and step within 0.5%

// A measured call left out of the comparison, and why: DeepSpeed's bookkeeping (a collective of at most
// kTinyCollectiveBytes per rank, e.g. the fp64 all_reduce of the gradient norm / overflow check) where zsim has no
// call of that phase, kind and group of at most kTinyCollectiveBytes x group size; or a torch function zsim has no
// kind for.
struct DsNotModelled {
  DsCollectiveCalls call;
  std::string why;
};
inline constexpr Bytes kTinyCollectiveBytes = 8;

struct DsValidation {
  std::string case_name, run_file, scenario;
  int world = 1;
  bool shared_gpu = false;
  std::string deepspeed_version, torch_version, transformers_version, gpu;
  // Peak allocated: zsim's GPU peak against each rank's steady_peak_allocated (rank 0's and the largest).
  Bytes peak_predicted = 0, peak_measured_rank0 = 0, peak_measured_max = 0;
  int peak_max_rank = 0;
  double peak_rel_error = 0;        // against the largest over ranks
  double peak_rel_error_rank0 = 0;  // against rank 0's
  // Peak reserved: steady_peak_reserved beside zsim's predicted reserved (0: not modelled).
  Bytes reserved_predicted = 0, reserved_measured_rank0 = 0, reserved_measured_max = 0;
  // Rank 0's memory at the phase points and each phase's own peak: (predicted, measured allocated).
  std::map<std::string, std::pair<Bytes, Bytes>> points, phase_peaks;
  // Rank 0's collectives of the recorded step against zsim's step 0.
  int collectives_step = -1;
  std::vector<DsCollectiveRow> collectives;  // forward, backward, step; then op, group size
  std::vector<DsNotModelled> not_modelled;
  bool collectives_match = true;                     // every row: calls equal, bytes within kCollectiveBytesTolerance
  double step_predicted_s = 0, step_measured_s = 0;  // rank 0's median timed step
  double reference_loop_s = 0;   // rank 0's host speed (DsRank::reference_loop_s); 0: not measured
  double host_speed_scale = 1;   // zsim's host figures scaled to it
  double autograd_reference_loop_s = 0;  // rank 0's on autograd's thread (DsRank::autograd_reference_loop_s)
  double autograd_host_speed_scale = 1;  // zsim's backward figures scaled to it
  // Where the run's stack differs from the one the scenario's figures were fitted under (stack_differences; set by
  // validate_cli.cpp, which also warns of it).
  std::vector<std::string> stack_differences;
};

// The scenario overrides that tell zsim the run's host speed (cluster.efficiency.deepspeed_host.loop_us, and
// autograd_loop_us where rank 0 timed the loop on autograd's thread too), or none where rank 0 did not time the
// reference loop.
std::vector<std::string> host_speed_overrides(const DeepSpeedRun& run);

// Compares an ok run with zsim's prediction (the run must be ok: throws std::logic_error otherwise).
DsValidation compare_deepspeed_run(const DeepSpeedRun& run, const DsPrediction& predicted);

// Whether a version recorded by the run agrees with one a profile was fitted under: their releases (the leading digits
// and dots, before a local part such as "+cu130" or a suffix such as "rc1") agree where the shorter is the longer or
// begins it at a dot ("2.11" and "2.11.0+cu130" agree; "2.11.0" and "2.11.1", "0.14" and "0.15.0" differ). A version
// with no leading digit (a GPU's name) agrees only when equal. Either empty: nothing to compare (true).
bool versions_agree(std::string_view run, std::string_view fitted);

// Where the run's stack (versions.deepspeed, .torch, .transformers, .python, .cuda, .gpu) differs from the one its
// scenario's figures were fitted under (cluster.fitted_under): one line per difference, "torch 2.12.0 (the profile's
// figures: 2.11.0+cu130)"; none where they agree or either side does not record the field (versions_agree).
std::vector<std::string> stack_differences(const FittedUnder& fitted, const DeepSpeedRun& run);

nlohmann::ordered_json deepspeed_validation_json(const DsValidation& v);
std::string format_deepspeed_validation(const DsValidation& v);

// A failed run: what failed, on which rank, how far each got (what `zsim validate` prints and exits 1 on).
std::string format_deepspeed_failure(const DeepSpeedRun& run);
nlohmann::ordered_json deepspeed_failure_json(const DeepSpeedRun& run);

// --- The committed record: validate/results/<gpu>-deepspeed/ ---------------------------------------------------

// One run of the record as validated: the validation (ok runs) or the run's failure.
struct DsRecordEntry {
  std::string name;  // the run file's stem (the case)
  DeepSpeedRun run;
  std::optional<DsValidation> validation;  // empty: the run failed
};

// summary.md: per case the peak allocated (predicted, measured, error), reserved, the collective calls' match, the
// step time; the failed runs; the median and worst |error| of the peak against issue 38's targets, and the bands.
std::string deepspeed_summary_markdown(const std::vector<DsRecordEntry>& entries, const std::string& record_dir,
                                       double band_margin);

// The bands CI holds the record to (validate/results_band_test.cpp): per ok run the recorded peak-allocated error
// and [error - margin, error + margin]; per failed run its status.
nlohmann::ordered_json deepspeed_bands_json(const std::vector<DsRecordEntry>& entries, double band_margin);
inline constexpr double kDeepSpeedBandMargin = 0.005;  // +-0.5 percentage points
inline constexpr const char* kDeepSpeedBandsFile = "deepspeed_bands.json";

}  // namespace zsim
