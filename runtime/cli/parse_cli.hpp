// One CLI11 parse for zrun's commands (zrun, zrun calibrate): --help prints the usage (exit 0), a bad command line
// prints CLI11's message and where to find the usage (exit 2); in both cases the command does not run.
#pragma once
#include <ostream>
#include <string>

#include <CLI/CLI.hpp>

#include "runtime/exit_codes.hpp"

namespace zrun {

// True when `argv` parsed and the command should run; otherwise `exit_code` says how to end.
inline bool parse_cli(CLI::App& app, int argc, const char* const* argv, const std::string& command,
                      std::ostream& out, std::ostream& err, int& exit_code) {
  try {
    app.parse(argc, argv);
    return true;
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    exit_code = kExitOk;
  } catch (const CLI::ParseError& e) {
    err << command << ": " << e.what() << "\nrun '" << command << " --help' for usage\n";
    exit_code = kExitBadInput;
  }
  return false;
}

}  // namespace zrun
