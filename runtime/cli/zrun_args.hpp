// The `zrun` command line (CLI11, like zsim's sim/cli/cli_app.cpp): what the user asked for.
#pragma once
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace zrun {

struct ZrunArgs {
  std::string scenario;                 // scenario YAML
  std::vector<std::string> overrides;   // --set KEY=VALUE
  int steps = 10;                       // measured optimizer steps
  int warmup = 2;                       // steps run before measuring
  int nproc_per_node = 0;               // 0 = every visible GPU
  bool here = false;                    // replace the scenario's cluster by this machine's GPUs
  int gpus_per_node = 0;                // > 0: split the launched world into virtual nodes of this many GPUs
  std::string json_file, trace_file, csv_file;
  bool force = false;                   // run a scenario zsim predicts does not fit
  std::string schedule_file;            // run this schedule (zsim plan --emit-schedule) instead of planning
  std::string nvme_dir;                 // NVMe offload: the swap files' directory (default: the scenario's nvme_path)
  bool share_gpu = false;               // every rank on GPU 0, each its own NCCL host: checks, not timings
};

// Parses argv. On --help prints usage to `out` and returns nullopt with exit_code 0; on a bad argument
// prints "zrun: ..." to `err` and returns nullopt with exit_code 2.
std::optional<ZrunArgs> parse_zrun_args(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
                                        int& exit_code);

}  // namespace zrun
