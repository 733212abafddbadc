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

// ZRUN_TEST_SHARE_GPU=N (runtime/scripts/device_check_shared_gpu.sh): the tests run as on a machine of N GPUs, every
// rank on GPU 0 (zrun --share-gpu; each rank its own NCCL host, sockets on the loopback), so that the multi-rank
// paths run on a one-GPU machine. 0 when unset.
inline int shared_gpu_ranks() {
  const char* v = std::getenv("ZRUN_TEST_SHARE_GPU");
  return v ? std::atoi(v) : 0;
}

// The GPUs the tests may use: the visible ones, or N with ZRUN_TEST_SHARE_GPU=N on a machine with one.
inline int test_gpus() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) return 0;
  return shared_gpu_ranks() > 0 ? shared_gpu_ranks() : n;
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

// `env` zrun SCENARIO --here --set deepspeed.zero_optimization.stage=STAGE `args` (with ZRUN_TEST_SHARE_GPU=N:
// --share-gpu, and --nproc-per-node N where `args` gives none).
inline ZrunRun run_zrun(const std::string& env, const std::string& scenario, int stage, const std::string& args) {
  namespace fs = std::filesystem;
  const fs::path log = fs::temp_directory_path() / ("zrun_gpu_test_" + std::to_string(::getpid()));
  std::string shared;
  if (const int n = shared_gpu_ranks(); n > 0) {
    shared = " --share-gpu";
    if (args.find("--nproc-per-node") == std::string::npos) shared += " --nproc-per-node " + std::to_string(n);
  }
  const std::string cmd = env + " " + zrun_bin() + " " + scenario +
                          " --here --set deepspeed.zero_optimization.stage=" + std::to_string(stage) + " " + args +
                          shared + " >" + log.string() + " 2>&1";
  const auto t0 = std::chrono::steady_clock::now();
  const int status = std::system(cmd.c_str());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ZrunRun r{WIFEXITED(status) ? WEXITSTATUS(status) : -1, zsim::test::slurp(log), s};
  fs::remove(log);
  return r;
}

}  // namespace zrun::test
