// `zsim validate RUN.json`: simulates the scenario zrun ran (its file and --set overrides, on the cluster shape it
// ran on, plus the user's --set, e.g. the GPU's hardware profile) and compares it with what zrun measured. A result
// of validate/deepspeed/harness.py ("format": "zsim.deepspeed_run") is compared with zsim's prediction of its case's
// scenario instead (validate/deepspeed_run.hpp); `--deepspeed-summary DIR` does that for every run of DIR/runs/ and
// writes DIR/summary.md (and with --write-bands DIR/deepspeed_bands.json).
#pragma once
#include <ostream>
#include <string>
#include <vector>

#include "sim/cli/subcommand.hpp"

namespace zsim {

struct ValidateRequest {
  std::string run_file;                 // zrun's --json, or a DeepSpeed harness result
  std::vector<std::string> overrides;   // applied after the run's own
  std::string json_file;                // --json: the figures (docs/validation.md)
  std::string plots_dir;                // --plots: PNGs (validate/plots.py, matplotlib)
  std::vector<std::string> profile_dirs;  // --profile-dir: searched for cluster.profile (a calibrated profile)
  std::string scenario_file;            // --scenario: a DeepSpeed run's scenario (else found from its case)
  std::string deepspeed_summary_dir;    // --deepspeed-summary DIR: every DeepSpeed run of DIR/runs/ into DIR/summary.md
  bool write_bands = false;             // --write-bands: with --deepspeed-summary, also DIR/deepspeed_bands.json
};

// Exit code of `zsim validate` on a DeepSpeed run that failed (status "failed"): its failure is printed, nothing is
// compared.
inline constexpr int kExitRunFailed = 1;

int run_validate(const ValidateRequest& r, std::ostream& out, std::ostream& err);

// `zsim validate` as a subcommand of the zsim command line (apps/zsim_main.cpp adds it).
Subcommand validate_subcommand();

}  // namespace zsim
