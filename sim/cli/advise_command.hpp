// `zsim advise SCENARIO.yaml`: searches the DeepSpeed configuration for the scenario's model, cluster and batch
// (sim/advise/advise.hpp) with the sweep's evaluation (evaluate_sweep_point on the thread pool), prints the top
// configurations with why each is advised or not (the advice: within --tie of the fastest, the fewest changes to the
// scenario's own choices), and writes the advice as a ds_config.json.
#pragma once
#include <iosfwd>
#include <string>
#include <vector>

namespace zsim {

struct AdviseArguments {
  std::string scenario;
  std::vector<std::string> overrides;  // --set
  std::string out_file;                // --out: the advice's ds_config.json
  std::string json_file;               // --json: the answer for scripts
  unsigned threads = 0;                // 0 = all hardware threads
  std::size_t top = 5;
  double margin = 0.05;                // of the GPU's memory left free
  // Configurations within this fraction of the fastest's tokens/s are ties: the advice is the one of them that
  // changes the fewest of the user's choices (docs/advise.md: zsim's step-time error against DeepSpeed).
  double tie = 0.10;
};

// Exit codes: 0 an answer; 2 bad input (the scenario's errors); 3 no configuration fits (what is short, by how much).
inline constexpr int kExitNoFit = 3;

int run_advise(const AdviseArguments& a, std::ostream& out, std::ostream& err);

}  // namespace zsim
