// The `zsim` command line: argument parsing (CLI11), loading the scenario, calling the pipeline, writing
// outputs atomically. Exit codes: 0 ok, 1 feature not in this build, 2 bad input (any InputError or bad
// arguments; nothing is written).
#pragma once
#include <iosfwd>
#include <vector>

#include "sim/cli/subcommand.hpp"

namespace zsim {

// `extra`: the subcommands layers above sim/ add (apps/zsim_main.cpp passes validate/'s).
int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
            const std::vector<Subcommand>& extra = {});

}  // namespace zsim
