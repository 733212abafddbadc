#include "runtime/cli/zrun_args.hpp"

#include <ostream>

#include <CLI/CLI.hpp>

#include "runtime/cli/parse_cli.hpp"
#include "runtime/exit_codes.hpp"

namespace zrun {

std::optional<ZrunArgs> parse_zrun_args(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
                                        int& exit_code) {
  ZrunArgs a;
  CLI::App app{"zrun: run zsim's schedule for real on this machine's GPUs (CUDA + NCCL)\n"
               "  zrun SCENARIO.yaml [--set KEY=VALUE]... [--steps N] [--warmup K] [--nproc-per-node N]\n"
               "       [--here] [--gpus-per-node K] [--json F] [--trace F] [--csv F] [--force] [--schedule FILE]\n"
               "       [--nvme-dir DIR] [--share-gpu]\n"
               "Under torchrun, srun or mpirun each process is one rank (docs/runtime.md).\n"
               "  zrun calibrate [--out FILE] [--quick] ...: measure this machine, write a hardware profile\n"
               "       (zrun calibrate --help; docs/validation.md)",
               "zrun"};
  app.add_option("scenario", a.scenario, "scenario YAML file (docs/scenario.md)");
  app.add_option("--set", a.overrides, "override a scenario key, e.g. deepspeed.zero_optimization.stage=2 "
                                       "(repeatable)")
      ->allow_extra_args(false)
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--steps", a.steps, "optimizer steps measured")->check(CLI::Range(1, 100000));
  app.add_option("--warmup", a.warmup, "optimizer steps run before measuring")->check(CLI::Range(0, 100000));
  app.add_option("--nproc-per-node", a.nproc_per_node, "worker processes (GPUs) on this node (default: all visible)")
      ->check(CLI::Range(1, 1024));
  app.add_flag("--here", a.here, "replace the scenario's cluster by the GPUs launched on this machine");
  app.add_option("--gpus-per-node", a.gpus_per_node,
                 "split the launched world into virtual nodes of K GPUs (intra/inter-node groups become real, "
                 "separate communicators on one host)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--json", a.json_file, "write the measured report as JSON to FILE");
  app.add_option("--trace", a.trace_file, "write a Chrome trace of the measured steps to FILE");
  app.add_option("--csv", a.csv_file, "write one CSV row per executed op to FILE");
  app.add_option("--nvme-dir", a.nvme_dir, "NVMe offload: directory of the swap files (default: the scenario's "
                                           "offload_optimizer.nvme_path, or offload_param.nvme_path)");
  app.add_flag("--force", a.force, "run even if zsim predicts the scenario does not fit in memory");
  app.add_option("--schedule", a.schedule_file, "run this schedule JSON (zsim plan --emit-schedule) instead of "
                                                "planning one from the scenario");
  app.add_flag("--share-gpu", a.share_gpu,
               "run every rank on GPU 0, each as an NCCL host of its own (sockets on the loopback): multi-rank "
               "correctness on a one-GPU machine; its times are not those of separate GPUs (docs/runtime.md)");
  if (!parse_cli(app, argc, argv, "zrun", out, err, exit_code)) return std::nullopt;
  if (a.scenario.empty()) {
    err << "zrun: no scenario given\nrun 'zrun --help' for usage\n";
    exit_code = kExitBadInput;
    return std::nullopt;
  }
  return a;
}

}  // namespace zrun
