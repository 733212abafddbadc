// `zrun calibrate`'s command line: what to measure and where the profile goes.
#pragma once
#include <iosfwd>
#include <optional>
#include <string>

namespace zrun::calibrate {

struct CalibrateArgs {
  std::string out = "calibrated.yaml";  // the hardware profile written
  bool quick = false;                   // fewer shapes and sizes (about a minute on one GPU)
  std::string base;                     // data-sheet profile for what is not measured ("" = by GPU name)
  int nproc_per_node = 0;               // 0 = every visible GPU
  int gpus_per_node = 0;                // > 0: virtual nodes of K GPUs (intra/inter groups measured apart)
  std::string nvme_dir;                 // "" = $TMPDIR or /tmp
  std::string log_file;                 // every measurement as it is taken ("" = stdout only)
  std::string refit;                    // fit again the record of this profile (no GPU needed)
  bool no_side_wait = false;            // with refit: the side kinds as before 2026-11-29 (no wait; the largest size's
                                        // fraction), to compare zsim with and without efficiency.beside_compute_wait
  bool share_gpu = false;               // every rank on GPU 0 over sockets: checks the multi-rank path, not timings
};

// argv[0] is "calibrate". On --help prints usage to `out`, returns nullopt, exit_code 0; on a bad argument
// prints "zrun calibrate: ..." to `err`, returns nullopt, exit_code 2.
std::optional<CalibrateArgs> parse_calibrate_args(int argc, const char* const* argv, std::ostream& out,
                                                  std::ostream& err, int& exit_code);

}  // namespace zrun::calibrate
