// A subcommand that a layer above sim/ adds to the `zsim` command line: validate/ adds `validate`, and the zsim
// binary (apps/zsim_main.cpp) composes them from the top, so that nothing under sim/ includes a higher layer.
#pragma once
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace zsim {

// Runs a parsed subcommand: its exit code (InputError and other exceptions are the caller's to report).
using SubcommandRun = std::function<int(std::ostream& out, std::ostream& err)>;

struct Subcommand {
  std::string usage;  // its line in `zsim --help`, e.g. "zsim validate RUN.json [--json FILE]"
  // Adds the subcommand and its options to `app` and returns what runs it once parsed; the options write into state
  // the returned function owns.
  std::function<std::pair<CLI::App*, SubcommandRun>(CLI::App& app)> add;
};

}  // namespace zsim
