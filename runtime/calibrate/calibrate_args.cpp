#include "runtime/calibrate/calibrate_args.hpp"

#include <ostream>

#include <CLI/CLI.hpp>

#include "runtime/cli/parse_cli.hpp"
#include "runtime/exit_codes.hpp"

namespace zrun::calibrate {

std::optional<CalibrateArgs> parse_calibrate_args(int argc, const char* const* argv, std::ostream& out,
                                                  std::ostream& err, int& exit_code) {
  CalibrateArgs a;
  CLI::App app{"zrun calibrate: measure this machine (GEMMs, memory-bound kernels, collectives, host copies, CPU\n"
               "Adam, NVMe, launch overhead) and write a hardware profile that cluster.profile accepts\n"
               "  zrun calibrate [--out FILE] [--quick] [--base PROFILE] [--nproc-per-node N] [--gpus-per-node K]\n"
               "                 [--nvme-dir DIR] [--log FILE] [--share-gpu]\n"
               "  zrun calibrate --refit PROFILE.yaml --out FILE   (fit a recorded calibration again)\n"
               "docs/validation.md says how to use the profile; docs/hardware-profiles.md its format.",
               "zrun calibrate"};
  app.add_option("--out", a.out, "hardware profile YAML to write (default calibrated.yaml)");
  app.add_flag("--quick", a.quick, "fewer shapes and sizes (collectives up to 64 MiB)");
  app.add_option("--base", a.base, "data-sheet profile for the values not measured (default: by GPU name, e.g. "
                                   "h100-hgx-ib400)");
  app.add_option("--nproc-per-node", a.nproc_per_node, "GPUs to use (default: all visible); collectives need 2+")
      ->check(CLI::Range(1, 1024));
  app.add_option("--gpus-per-node", a.gpus_per_node, "split the GPUs into virtual nodes of K (intra-node and "
                                                     "inter-node groups measured apart)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--nvme-dir", a.nvme_dir, "directory of the temp file for the NVMe measurement (default $TMPDIR or /tmp)");
  app.add_option("--log", a.log_file, "also write every measurement to FILE");
  app.add_flag("--share-gpu", a.share_gpu,
               "every rank on GPU 0, each its own NCCL host over the loopback's sockets: checks the multi-rank "
               "measurements on a one-GPU machine; their collective figures are the sockets', not a calibration");
  app.add_option("--refit", a.refit, "measure nothing: fit again the calibration: record of PROFILE.yaml (written by "
                                     "zrun calibrate) and write --out; needs no GPU");
  app.add_flag("--no-side-wait", a.no_side_wait,
               "with --refit: fit the side kinds beside GEMMs as before 2026-11-29 (one fraction at the largest size, "
               "no efficiency.beside_compute_wait), to compare zsim with and without the wait");
  if (!parse_cli(app, argc, argv, "zrun calibrate", out, err, exit_code)) return std::nullopt;
  if (a.no_side_wait && a.refit.empty()) {
    err << "zrun calibrate: --no-side-wait only applies to --refit (a record fitted again)\n";
    exit_code = kExitBadInput;
    return std::nullopt;
  }
  const std::string out_file = a.out;
  if (out_file.empty()) {
    err << "zrun calibrate: --out needs a file name\n";
    exit_code = kExitBadInput;
    return std::nullopt;
  }
  return a;
}

}  // namespace zrun::calibrate
