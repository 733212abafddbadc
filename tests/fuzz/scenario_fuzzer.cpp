// libFuzzer target for the scenario reader: any input must either load or raise InputError; anything
// else (a crash, a sanitizer report, another exception, a hang) is a bug. Leading "#! KEY=VALUE" lines
// (YAML comments) are also applied as --set overrides, so the override path is fuzzed too.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sim/scenario/scenario_parse.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  zsim::LoadOptions options;
  options.profile_dirs = {"sim/scenario/testdata"};  // the test-hgx fixture profile
  std::size_t pos = 0;
  while (text.compare(pos, 3, "#! ") == 0) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    options.overrides.push_back(text.substr(pos + 3, end - pos - 3));
    pos = end + 1 > text.size() ? text.size() : end + 1;
  }
  try {
    // Relative ds_config / hf_config / profile names resolve against tests/fuzz/ (run from the repo root).
    zsim::parse_scenario(text, "tests/fuzz/input.yaml", options);
  } catch (const zsim::InputError&) {
  }
  return 0;
}
