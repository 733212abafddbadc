// zsim against zrun: the same schedule simulated (sim/engine) and measured (zrun's --json `measured` block),
// compared step by step and op by op. Errors are signed fractions, (predicted - measured) / measured. Pure:
// the CLI (validate_cli.*) reads the files and prints.
#pragma once
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/engine/simulate.hpp"
#include "sim/report/memory_walk.hpp"
#include "sim/schedule/schedule.hpp"

namespace zsim {

// What zrun measured (docs/runtime.md, `measured`): the step, the ops of its last step, GPU memory.
struct MeasuredRun {
  std::string scenario;                    // measured.command: the scenario file zrun ran
  std::vector<std::string> overrides;      // and its --set overrides
  int nodes = 1, gpus_per_node = 1;        // setup: the cluster shape zrun ran on
  double step_s = 0;
  std::map<OpId, std::pair<double, double>> ops;  // id -> (start_s, end_s) in the last step (rank 0)
  std::map<OpId, double> collective_s;     // id -> the collective's time (minimum over ranks)
  // What one timing event costs the GPU's timeline (zrun's probe, reports since 2026-11-27; 0: older reports): every
  // op of the op-timed step carries one in its measured time, which validate_run takes off.
  double timing_event_s = 0;
  // The issuing thread's wall time per untimed step, first op to last (zrun's `host_issue_s`, reports since
  // 2026-11-27; 0: not reported).
  double host_issue_s = 0;
  // The same per op of the step (zrun's `host_issue_ops`, reports since 2026-11-29; empty: not reported): the
  // issuing thread's wall time from the op's first call to the next op's, the median over the untimed steps.
  struct OpIssue {
    OpId id = 0;
    std::string name;  // empty: match by id only
    int micro_step = 0;
    double s = 0;
  };
  std::vector<OpIssue> op_issue;
  // Each tier's peak and each category's own peak on it, this rank's (zrun's `peak_bytes_by_tier`, reports since
  // 2026-11-27; older reports give the GPU's only).
  struct TierPeak {
    Bytes peak = 0;
    std::map<std::string, Bytes> by_category;
  };
  std::map<std::string, TierPeak> tier_peaks;  // "gpu", "cpu", "nvme"
  // id -> (name, micro_step) of the op zrun ran under that id, where the report names its ops (zrun since the
  // activation-gradient buffers; older reports match by id only).
  std::map<OpId, std::pair<std::string, int>> op_names;
  Bytes gpu_peak_bytes = 0;                // arena peak: schedule buffers and what was beyond them
  std::map<std::string, Bytes> gpu_peak_by_category, beyond_by_category;
};

// Reads zrun's report JSON; throws InputError naming `source` and the key that is missing or malformed.
MeasuredRun measured_run_from_json(const nlohmann::json& run, const std::string& source);

// The run's op ids as ids of `s` (whose step 0 zsim simulates): where ops are named, the k-th op zrun ran with a
// (name, micro_step) becomes the k-th op of step 0 of `s` with that name and micro-step, so a schedule that gained
// or lost ops (alloc / free of new buffers) since the run still compares each op with itself; ops `s` no longer
// has are dropped (counted in `unmatched`). Without names, the ids are kept.
MeasuredRun match_ops_by_name(const zsim::Schedule& s, const MeasuredRun& m, int* unmatched = nullptr);

struct ErrorStats {
  int count = 0;
  double median = 0;  // signed
  double p90 = 0;     // of |error|
  double worst = 0;   // signed, largest |error|
};

struct OpComparison {
  OpId id = 0;
  std::string name, kind;  // kind: "forward", "backward", "all_reduce@world", "d2d", ...
  Bytes bytes = 0;         // collective / copy bytes
  double predicted_s = 0, measured_s = 0;
  std::string phase, stream;
  double predicted_start_s = 0, measured_start_s = 0;  // from the first compared op's start, each timeline its own
  double predicted_issue_s = -1, measured_issue_s = -1;  // the host's time in the op (compare_host_issue; -1: none)
};

// Communication of one phase not hidden behind compute: the time a collective of the phase runs while no GPU
// compute op runs (the union of its collectives' intervals minus the union of all compute intervals).
struct ExposedComm {
  double predicted_s = 0, measured_s = 0;
};

// One tier's peak per rank, predicted (zsim's memory walk; a node's CPU and NVMe figures over its GPUs) and measured,
// and each category's own peak (category_peaks).
struct MemoryComparison {
  std::string tier;
  Bytes predicted = 0, measured = 0;
  std::map<std::string, std::pair<Bytes, Bytes>> by_category;  // category -> (predicted, measured)
};

// Collectives of one kind and group (op kind "all_gather@world", ...) in one size range [from, to).
struct CollectiveSizeBin {
  std::string kind;
  Bytes from = 0, to = 0;  // to 0: no upper bound
  ErrorStats stats;
};

// The issuing thread's time per step spent on the ops of one kind ("alloc", "forward", "all_gather@world", "d2d",
// ...): zsim's host model against zrun's measure.
struct HostIssueKind {
  int ops = 0;
  double predicted_s = 0, measured_s = 0;
};

struct Validation {
  double step_predicted_s = 0, step_measured_s = 0, step_rel_error = 0;
  Bytes gpu_peak_predicted = 0, gpu_peak_measured = 0;
  double gpu_peak_rel_error = 0;
  std::map<std::string, ErrorStats> by_kind;  // per op kind (alloc / free excluded)
  std::vector<OpComparison> ops;              // the measured step's ops, in program order
  std::map<std::string, ExposedComm> exposed_comm;  // by phase, phases with a collective only
  int unmatched_ops = 0;                       // named ops of the run the schedule no longer has
  double timing_event_s = 0;                   // taken off each op's measured time (MeasuredRun::timing_event_s)
  int unresolved_ops = 0;                      // ops measured at or below timing_event_s: not compared
  // GPU compute busy time of the step: the union of its GPU compute ops' intervals (measured: each op's interval less
  // its timing event at its start).
  double compute_predicted_s = 0, compute_measured_s = 0;
  std::vector<CollectiveSizeBin> collectives_by_size;  // per kind and group, by size: < 64 KiB, .. 1, 16, 256 MiB, more
  std::vector<MemoryComparison> memory;        // per tier where either side has bytes (compare_memory)
  // The host's time to issue one step: zsim's host model (predicted_host_issue_s; 0 without efficiency.host_issue)
  // against zrun's issuing thread (0: not reported).
  double host_issue_predicted_s = 0, host_issue_measured_s = 0;
  std::map<OpId, double> op_issue_measured_s;              // the run's host_issue_ops, as ids of the schedule
  std::map<std::string, HostIssueKind> host_issue_by_kind;  // compare_host_issue; empty without host_issue_ops
};

// zsim's host model's time to issue the ops of step 0 of `s` (sim/engine/host_issue: the sum of their calls' prices;
// 0 where the profile has no efficiency.host_issue).
double predicted_host_issue_s(const Schedule& s, const ClusterSpec& c);

// The host model's time (sim/engine/host_issue) for each op zrun timed on its issuing thread (v.op_issue_measured_s)
// against that time: per op kind into v.host_issue_by_kind, per op into v.ops' issue fields. Nothing where the run
// has no per-op host times or `c` no host model.
void compare_host_issue(const Schedule& s, const ClusterSpec& c, Validation& v);

// Every tier where zsim or zrun has bytes: predicted per rank from `walk` (CPU and NVMe divided by the node's GPUs)
// and category_peaks; measured from the run's tier_peaks.
std::vector<MemoryComparison> compare_memory(const Schedule& s, const MemoryWalk& walk, const MeasuredRun& m);

// Length of the union of `comm` intervals outside the union of `compute` intervals.
double exposed_seconds(std::vector<std::pair<double, double>> comm, std::vector<std::pair<double, double>> compute);

// `predicted`: simulate() of `s`, whose step-0 op ids are the ones zrun ran (and repeated).
Validation validate_run(const Schedule& s, const TimingResult& predicted, Bytes gpu_peak_predicted,
                        const MeasuredRun& measured);

double rel_error(double predicted, double measured);
ErrorStats error_stats(std::vector<double> errors);

nlohmann::ordered_json validation_json(const Validation& v);
std::string format_validation(const Validation& v);
std::string validation_ops_csv(const Validation& v);  // id,name,kind,bytes,predicted_s,measured_s

}  // namespace zsim
