// libzrun_kernel_trace.so (runtime/bench/cupti_kernel_trace.cpp) on a real zrun run (skips where there is no GPU):
// loaded by the CUDA driver through CUDA_INJECTION64_PATH, it writes one row per kernel the run launched, with the
// GPU's start and end times, to the path ZRUN_KERNEL_TRACE names ("%p": the process id).
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/tests/zrun_gpu_run.hpp"

namespace {
namespace fs = std::filesystem;

// The library under test: ZRUN_KERNEL_TRACE_LIB from the environment (the device check carries it), else the build's.
std::string trace_lib() {
  const char* lib = std::getenv("ZRUN_KERNEL_TRACE_LIB");
  return lib ? lib : ZRUN_KERNEL_TRACE_LIB;
}

struct Row {
  std::string kind, name;
  unsigned long long start_ns = 0, end_ns = 0;
};

std::vector<Row> read_trace(const fs::path& p) {
  std::ifstream f(p);
  std::string line;
  std::getline(f, line);
  EXPECT_EQ(line, "kind\tstream\tstart_ns\tend_ns\tgrid_x\tblock_x\tbytes\tname");
  std::vector<Row> rows;
  while (std::getline(f, line)) {
    std::istringstream in(line);
    Row r;
    std::string stream, grid, block, bytes;
    std::getline(in, r.kind, '\t');
    std::getline(in, stream, '\t');
    in >> r.start_ns >> r.end_ns;
    in.ignore(1);
    std::getline(in, grid, '\t');
    std::getline(in, block, '\t');
    std::getline(in, bytes, '\t');
    std::getline(in, r.name);
    rows.push_back(r);
  }
  return rows;
}

TEST(KernelTraceGpu, AZrunRunUnderTheTracerWritesEachKernelWithItsGpuTimes) {
  if (!zrun::test::have_gpu()) GTEST_SKIP() << "no CUDA device: the kernel tracer runs on the GPU machine";
  const fs::path dir = fs::temp_directory_path() / ("kernel_trace_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const zrun::test::ZrunRun r = zrun::test::run_zrun(
      "CUDA_INJECTION64_PATH=" + trace_lib() + " ZRUN_KERNEL_TRACE=" + (dir / "t.%p.tsv").string(),
      "runtime/scenarios/tiny-zero3-1xh100.yaml", 0, "--steps 3 --warmup 0");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  // One file per process that ran work on the GPU: the worker's (the launcher runs none on one GPU).
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path());
  ASSERT_EQ(files.size(), 1u) << r.out;
  EXPECT_NE(files[0].filename().string().find("t."), std::string::npos);
  EXPECT_EQ(files[0].filename().string().find("%p"), std::string::npos) << "the process id replaces %p";
  const std::vector<Row> rows = read_trace(files[0]);
  fs::remove_all(dir);
  // Three steps: three optimizer kernels (stage 0, one fused Adam over the flat partition), each after the forward's
  // embedding lookup of its step; every record ends after it starts.
  const auto count = [&](const std::string& part) {
    return std::count_if(rows.begin(), rows.end(), [&](const Row& x) { return x.name.find(part) != std::string::npos; });
  };
  EXPECT_EQ(count("fused_adam_kernel"), 3) << r.out;
  EXPECT_EQ(count("embed_fwd"), 3) << r.out;
  for (const Row& x : rows) {
    EXPECT_TRUE(x.kind == "kernel" || x.kind == "memcpy" || x.kind == "memset") << x.kind;
    EXPECT_GT(x.end_ns, x.start_ns) << x.name;
  }
}

}  // namespace
