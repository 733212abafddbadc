// `zsim validate RUN.json`: simulates the scenario zrun ran (its file and --set overrides, on the cluster shape it
// ran on, plus the user's --set, e.g. the GPU's hardware profile) and compares it with what zrun measured.
#pragma once
#include <ostream>
#include <string>
#include <vector>

#include "sim/cli/subcommand.hpp"

namespace zsim {

struct ValidateRequest {
  std::string run_file;                 // zrun's --json
  std::vector<std::string> overrides;   // applied after the run's own
  std::string json_file;                // --json: the figures (docs/validation.md)
  std::string plots_dir;                // --plots: PNGs (validate/plots.py, matplotlib)
  std::vector<std::string> profile_dirs;  // --profile-dir: searched for cluster.profile (a calibrated profile)
};

int run_validate(const ValidateRequest& r, std::ostream& out, std::ostream& err);

// `zsim validate` as a subcommand of the zsim command line (apps/zsim_main.cpp adds it).
Subcommand validate_subcommand();

}  // namespace zsim
