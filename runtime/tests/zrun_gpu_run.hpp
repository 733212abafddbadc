// For zrun's GPU tests (training, offload): whether this machine has a CUDA device, and one run of the zrun binary
// on a scenario at a ZeRO stage, stdout and stderr merged as a user reads them, with its wall time.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <cuda_runtime_api.h>

#include "tests/command_run.hpp"

namespace zrun::test {

inline bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

struct ZrunRun {
  int exit_code;    // -1: killed by a signal
  std::string out;  // stdout and stderr
  double seconds;
};

// The binary under test: ZRUN_BIN from the environment (the device check carries it elsewhere), else the build's.
inline std::string zrun_bin() {
  const char* bin = std::getenv("ZRUN_BIN");
  return bin ? bin : ZRUN_BIN;
}

// `env` zrun SCENARIO --here --set deepspeed.zero_optimization.stage=STAGE `args`.
inline ZrunRun run_zrun(const std::string& env, const std::string& scenario, int stage, const std::string& args) {
  namespace fs = std::filesystem;
  const fs::path log = fs::temp_directory_path() / ("zrun_gpu_test_" + std::to_string(::getpid()));
  const std::string cmd = env + " " + zrun_bin() + " " + scenario +
                          " --here --set deepspeed.zero_optimization.stage=" + std::to_string(stage) + " " + args +
                          " >" + log.string() + " 2>&1";
  const auto t0 = std::chrono::steady_clock::now();
  const int status = std::system(cmd.c_str());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ZrunRun r{WIFEXITED(status) ? WEXITSTATUS(status) : -1, zsim::test::slurp(log), s};
  fs::remove(log);
  return r;
}

}  // namespace zrun::test
