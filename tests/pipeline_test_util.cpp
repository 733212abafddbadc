#include "tests/pipeline_test_util.hpp"

#include <algorithm>
#include <filesystem>

#include "sim/scenario/scenario_parse.hpp"

namespace zsim::test {

namespace fs = std::filesystem;

static fs::path scenarios_dir() { return fs::path(ZSIM_SOURCE_DIR) / "scenarios"; }

std::vector<std::string> bundled_scenario_files() {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(scenarios_dir()))
    if (e.is_regular_file() && e.path().extension() == ".yaml") files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  return files;
}

Scenario load_bundled(const std::string& file, const std::vector<std::string>& overrides) {
  return load_scenario((scenarios_dir() / file).string(), overrides);
}

std::vector<std::string> small_overrides(int layers) {
  return {"model.layers=" + std::to_string(layers), "training.grad_accum=1", "deepspeed.train_batch_size=auto"};
}

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace zsim::test
