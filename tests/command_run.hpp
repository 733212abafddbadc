// For tests that run a built binary as a user would: a shell command line's exit code, stdout and stderr
// (captured in files of a temporary directory), and a file's whole contents.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace zsim::test {

struct CommandRun {
  int exit_code = -1;  // -1: killed by a signal
  std::string out, err;
};

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs `command` (a shell line) with its output sent to files in `dir` (created if needed).
inline CommandRun run_command(const std::string& command, const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  const std::filesystem::path out = dir / "stdout", err = dir / "stderr";
  const int status = std::system((command + " >" + out.string() + " 2>" + err.string()).c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
}

}  // namespace zsim::test
