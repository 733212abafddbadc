// The fuzzer's seeds and past findings, replayed in the ordinary test run (no sanitizers here; the
// sanitizer run is scripts/fuzz-scenario.sh): each input loads or raises InputError, nothing else.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "sim/scenario/scenario_parse.hpp"

namespace zsim {
namespace fs = std::filesystem;

static void replay_directory(const std::string& dir, int& loaded, int& rejected) {
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (!entry.is_regular_file() || entry.path().extension() == ".md") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    LoadOptions options;
    options.profile_dirs = {"sim/scenario/testdata"};
    try {
      parse_scenario(text.str(), "tests/fuzz/input.yaml", options);
      ++loaded;
    } catch (const InputError&) {
      ++rejected;
    } catch (const std::exception& e) {
      ADD_FAILURE() << entry.path() << ": escaped as " << typeid(e).name() << ": " << e.what();
    }
  }
}

TEST(FuzzCorpus, SeedsAndRegressionsLoadOrRaiseInputError) {
  int loaded = 0, rejected = 0;
  replay_directory("tests/fuzz/corpus", loaded, rejected);
  replay_directory("tests/fuzz/regressions", loaded, rejected);
  // The bundled scenarios among the seeds are valid, so some inputs must load.
  EXPECT_GE(loaded, 7);
}

}  // namespace zsim
