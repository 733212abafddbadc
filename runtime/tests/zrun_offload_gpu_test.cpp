// ZeRO-Offload in zrun on this machine's GPU (skips with a message where there is none, as in CI), on the tiny
// offload scenario: CPU offload ends 10 steps with the GPU optimizer's fp32 master weights within fp32 rounding, NVMe offload
// with exactly CPU offload's, and the NVMe kill-tests (the directory removed mid-run, an injected ENOSPC) end the
// job naming the file and the op, leaving no swap file behind. offload_param cpu (the 16-bit partitions in pinned host
// memory, staged to the GPU before each gather) gives exactly the master weights of the run without it, with the
// optimizer on the GPU or on the CPU. offload_param nvme (the partitions in a swap file, read per tensor into pinned
// buffers before each gather, written back per sub-group after the optimizer) gives exactly offload_param cpu's master
// weights, and its kill-tests (the directory removed mid-run, an injected ENOSPC on a parameter write) end the job
// naming the file and the op, leaving no file behind.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "runtime/tests/zrun_gpu_run.hpp"

namespace {
namespace fs = std::filesystem;

using zrun::test::have_gpu;
using zrun::test::zrun_bin;
using zrun::test::ZrunRun;
using zsim::test::slurp;

#define REQUIRE_GPU() \
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device: zrun's offload tests run on the GPU machine"

fs::path scratch(const std::string& what) {
  const fs::path p = fs::temp_directory_path() / ("zrun_offload_test_" + std::to_string(::getpid()) + "_" + what);
  fs::create_directories(p);
  return p;
}

// The tiny scenario on one GPU at `stage` (micro-batch 2, one micro-step), `args` appended.
ZrunRun zrun(const std::string& env, int stage, const std::string& args) {
  return zrun::test::run_zrun(env, "runtime/scenarios/tiny-zero3-offload-1xh100.yaml", stage, args);
}

std::vector<float> read_floats(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<float> v;
  float f;
  while (in.read(reinterpret_cast<char*>(&f), sizeof f)) v.push_back(f);
  return v;
}

// The master weights after `steps` steps with the optimizer on `device` (gpu, cpu, nvme); `more`: extra arguments.
std::vector<float> master_after(int stage, const std::string& device, int steps, std::string* out = nullptr,
                                const std::string& more = "") {
  const fs::path dir = scratch("master_" + device);
  const std::string offload =
      " --set deepspeed.zero_optimization.offload_optimizer.device=" + (device == "gpu" ? "none" : device);
  const bool on_nvme = device == "nvme" || more.find("offload_param.device=nvme") != std::string::npos;
  const std::string nvme = on_nvme ? " --nvme-dir " + (dir / "swap").string() : "";
  fs::create_directories(dir / "swap");
  const ZrunRun r = zrun("ZRUN_DUMP_MASTER=" + (dir / "master").string(), stage,
                     "--steps " + std::to_string(steps) + " --warmup 0" + offload + nvme + " " + more);
  EXPECT_EQ(r.exit_code, 0) << device << ": " << r.out;
  if (out) *out = r.out;
  EXPECT_TRUE(fs::is_empty(dir / "swap")) << "swap files left behind";
  std::vector<float> w = read_floats(dir / "master.r0");
  fs::remove_all(dir);
  return w;
}

double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    d += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    n += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(d / n);
}

// Issue 14: <= 1e-5 relative (the norm of the difference over the norm of the GPU run's fp32 master weights) after
// 10 steps, with one micro-step per step and with two: offload accumulates the micro-steps' reduced gradients in
// 16 bits through host memory and converts them to fp32 on the GPU (DeepSpeed's order), so its gradients are the GPU
// path's, which adds them into its 16-bit partition. The CPU Adam and the fused GPU Adam round differently (the GPU
// contracts multiply-adds).
TEST(ZrunOffloadGpu, CpuOffloadGivesTheGpuOptimizersMasterWeightsWithinFp32RoundingAfter10Steps) {
  REQUIRE_GPU();
  for (int stage : {1, 2, 3})
    for (const std::string& more : {std::string(""), std::string("--set training.micro_batch=1 --set training.grad_accum=2")}) {
      const std::vector<float> gpu = master_after(stage, "gpu", 10, nullptr, more);
      std::string out;
      const std::vector<float> cpu = master_after(stage, "cpu", 10, &out, more);
      ASSERT_EQ(gpu.size(), cpu.size()) << "stage " << stage << " " << more << ": " << out;
      ASSERT_FALSE(gpu.empty());
      const double rel = relative_difference(cpu, gpu);
      std::cout << "stage " << stage << " " << more << ": CPU offload vs GPU optimizer, master weights after 10 steps: "
                << "relative " << rel << "\n";
      EXPECT_LE(rel, 1e-5) << "stage " << stage << " " << more;
    }
}

// Stage 3 with the optimizer on the CPU and communication_data_type fp32 (bf16 training): each bucket's gradients are
// cast to fp32, interleaved and reduce-scattered in fp32, cast back per tensor and moved to host memory as
// partition_grads does; the master weights after 10 steps are the GPU optimizer's (same casts) within fp32 rounding,
// with one micro-step and with two.
TEST(ZrunOffloadGpu, Stage3CpuOffloadWithAnFp32CommunicationTypeGivesTheGpuOptimizersMasterWeights) {
  REQUIRE_GPU();
  for (const std::string& accum : {std::string(""), std::string(" --set training.micro_batch=1 --set training.grad_accum=2")}) {
    const std::string more = "--set deepspeed.communication_data_type=fp32" + accum;
    const std::vector<float> gpu = master_after(3, "gpu", 10, nullptr, more);
    std::string out;
    const std::vector<float> cpu = master_after(3, "cpu", 10, &out, more);
    ASSERT_EQ(gpu.size(), cpu.size()) << more << ": " << out;
    ASSERT_FALSE(gpu.empty()) << out;
    const double rel = relative_difference(cpu, gpu);
    std::cout << "stage 3, fp32 communication" << accum << ": CPU offload vs GPU optimizer, master weights after 10 "
              << "steps: relative " << rel << "\n";
    EXPECT_LE(rel, 1e-5) << more;
  }
}

// offload_param cpu moves the same 16-bit bytes (partition -> GPU staging -> gathers; updated weights -> partition):
// the master weights after 10 steps are bitwise those of the run that keeps the partition on the GPU, with the
// optimizer on the GPU and with CPU Adam; with two micro-steps (gathers in backward and in the second forward), and
// with qwZ (its quantize reads the staged partition).
TEST(ZrunOffloadGpu, ParamOffloadToCpuGivesExactlyTheMasterWeightsOfTheRunWithout) {
  REQUIRE_GPU();
  for (const std::string optimizer : {"gpu", "cpu"})
    for (const std::string& more : {std::string(""), std::string("--set training.micro_batch=1 --set training.grad_accum=2"),
                                   std::string("--set deepspeed.zero_optimization.zero_quantized_weights=true")}) {
      const std::vector<float> base = master_after(3, optimizer, 10, nullptr, more);
      std::string out;
      const std::vector<float> off =
          master_after(3, optimizer, 10, &out, more + " --set deepspeed.zero_optimization.offload_param.device=cpu");
      ASSERT_EQ(base.size(), off.size()) << out;
      ASSERT_FALSE(base.empty());
      EXPECT_EQ(std::memcmp(base.data(), off.data(), base.size() * sizeof(float)), 0)
          << "optimizer on " << optimizer << " " << more << ": relative difference " << relative_difference(off, base);
    }
}

// hpZ with offload_param cpu (2 nodes of 2): the forward keeps each unit's secondary partition in pinned CPU memory
// and the backward's gathers (and the second micro-step's forward) copy it up and gather it on the hpz group
// (docs/schedule-semantics.md "hpZ"). It moves the same bytes from other ranks, so rank 0's master weights after 10
// steps are bitwise those of the run without hpZ, with the optimizer on the GPU and on the CPU.
TEST(ZrunOffloadGpu, HpzWithParamOffloadGivesExactlyTheMasterWeightsOfParamOffloadWithoutIt) {
  REQUIRE_GPU();
  if (zrun::test::test_gpus() < 4)
    GTEST_SKIP() << "needs 4 GPUs (this machine has " << zrun::test::test_gpus() << "): run it on the 4-GPU machine, "
                 << "or with ZRUN_TEST_SHARE_GPU=4 on one";
  const std::string more = "--nproc-per-node 4 --gpus-per-node 2 --set training.micro_batch=1 --set "
                           "training.grad_accum=2 --set deepspeed.zero_optimization.offload_param.device=cpu";
  for (const std::string optimizer : {"gpu", "cpu"}) {
    const std::vector<float> base = master_after(3, optimizer, 10, nullptr, more);
    std::string out;
    const std::vector<float> hpz =
        master_after(3, optimizer, 10, &out, more + " --set deepspeed.zero_optimization.zero_hpz_partition_size=2");
    ASSERT_EQ(base.size(), hpz.size()) << out;
    ASSERT_FALSE(base.empty());
    EXPECT_EQ(std::memcmp(base.data(), hpz.data(), base.size() * sizeof(float)), 0)
        << "optimizer on " << optimizer << ": relative difference " << relative_difference(hpz, base);
  }
}

// Two micro-steps of one sequence, so the 16-bit accumulation through host memory is exercised too; at stage 3 the
// fp32 gradients go through the NVMe gradient swap files.
TEST(ZrunOffloadGpu, NvmeOffloadGivesExactlyTheCpuOffloadsMasterWeights) {
  REQUIRE_GPU();
  const std::string accum = "--set training.micro_batch=1 --set training.grad_accum=2";
  for (int stage : {2, 3}) {
    const std::vector<float> cpu = master_after(stage, "cpu", 10, nullptr, accum);
    std::string out;
    const std::vector<float> nvme = master_after(stage, "nvme", 10, &out, accum);
    ASSERT_EQ(cpu.size(), nvme.size()) << out;
    ASSERT_FALSE(cpu.empty());
    EXPECT_EQ(std::memcmp(cpu.data(), nvme.data(), cpu.size() * sizeof(float)), 0) << "stage " << stage;
  }
}

// The tiny offload scenario with `zero_key` (under deepspeed.zero_optimization) set and its swap files in `swap`,
// which is deleted once the job has logged its third step: the job's exit status, how long it ran, its log.
struct KilledRun {
  int status = 0;
  double seconds = 0;
  std::string out;
};
KilledRun remove_swap_directory_mid_run(const std::string& zero_key, const fs::path& swap, const fs::path& log) {
  fs::create_directories(swap);
  const std::string cmd = "bash -c '" + zrun_bin() +
                          " runtime/scenarios/tiny-zero3-offload-1xh100.yaml --here --steps 1000 --warmup 0 --set "
                          "deepspeed.zero_optimization." + zero_key + " --nvme-dir " + swap.string() +
                          " >" + log.string() + " 2>&1 & pid=$!; for i in $(seq 600); do grep -q \"step    3\" " +
                          log.string() + " && break; sleep 0.05; done; rm -rf " + swap.string() +
                          "; wait $pid; exit $?'";
  const auto t0 = std::chrono::steady_clock::now();
  KilledRun run;
  run.status = std::system(cmd.c_str());
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  run.out = slurp(log);
  return run;
}

// The swap directory is deleted while the job trains: the next NVMe transfer names the removed file and its op, the
// job exits non-zero, and nothing is left (the directory is gone with its files).
TEST(ZrunOffloadGpu, RemovingTheNvmeDirectoryMidRunEndsTheJobNamingTheFileAndTheOp) {
  REQUIRE_GPU();
  const fs::path dir = scratch("kill_rm");
  const fs::path swap = dir / "swap";
  const KilledRun run = remove_swap_directory_mid_run("offload_optimizer.device=nvme", swap, dir / "out.txt");
  const std::string& out = run.out;
  EXPECT_TRUE(WIFEXITED(run.status) && WEXITSTATUS(run.status) != 0) << out;
  EXPECT_LT(run.seconds, 60) << out;
  EXPECT_NE(out.find("was removed"), std::string::npos) << out;
  EXPECT_NE(out.find(swap.string() + "/zrun."), std::string::npos) << out;
  EXPECT_NE(out.find("nvme_"), std::string::npos) << out;  // the op: step.sub0.nvme_read or _write
  EXPECT_FALSE(fs::exists(swap));
  fs::remove_all(dir);
}

// A full disk, by the fault hook (a real full file system cannot be made on the device machine): the write of the
// optimizer state fails with ENOSPC naming the file and the op; the job exits non-zero and removes its files.
TEST(ZrunOffloadGpu, AnInjectedEnospcEndsTheJobNamingTheFileAndTheOpAndLeavesNoFiles) {
  REQUIRE_GPU();
  const fs::path swap = scratch("kill_enospc");
  const ZrunRun r = zrun("ZRUN_NVME_FAULT=op=step.sub0.nvme_write,errno=ENOSPC", 3,
                     "--steps 3 --warmup 0 --set deepspeed.zero_optimization.offload_optimizer.device=nvme "
                     "--nvme-dir " + swap.string());
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("No space left on device"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("step.sub0.nvme_write"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(swap.string() + "/zrun."), std::string::npos) << r.out;
  EXPECT_TRUE(fs::is_empty(swap)) << "swap files left behind";
  fs::remove_all(swap);
}

// offload_param nvme moves the same 16-bit bytes as offload_param cpu, through the swap file: each fetch reads every
// tensor's chunk on NVMe into a pinned buffer and copies it up, the step's persistent gathers read theirs too, and each
// sub-group's updated weights go through the pinned write-back buffer into the file (writes that span and cut
// tensors, reads of single tensors: the store's mirrored layout). max_in_cpu 0 puts the whole partition on NVMe;
// 300000 keeps the first sub-group in CPU memory (DeepSpeed's max_in_cpu), so a tensor straddles the two. After 10
// steps the master weights are bitwise offload_param cpu's, with the optimizer on the GPU, on the CPU and on NVMe; with
// two micro-steps, and with sub-groups that cut tensors.
TEST(ZrunOffloadGpu, ParamOffloadToNvmeGivesExactlyTheMasterWeightsOfParamOffloadToCpu) {
  REQUIRE_GPU();
  const std::string all_nvme = " --set deepspeed.zero_optimization.offload_param.max_in_cpu=0";
  const std::string sub_groups = "--set deepspeed.zero_optimization.sub_group_size=300000";
  // Wide enough that every matrix's partition is at least 1 MiB: read through the swapper's pool of 2e6-element
  // buffers, released after each use (5 buffers), or kept from the forward for the backward (20 buffers).
  const std::string pooled = "--set model.hidden=1024 --set model.ffn_hidden=1024 --set model.heads=8 --set "
                             "model.kv_heads=8 --set deepspeed.zero_optimization.offload_param.buffer_size=2000000";
  for (const std::string optimizer : {"gpu", "cpu", "nvme"})
    for (const std::string& more : {all_nvme, "--set training.micro_batch=1 --set training.grad_accum=2" + all_nvme,
                                    sub_groups + all_nvme,
                                    sub_groups + " --set deepspeed.zero_optimization.offload_param.max_in_cpu=300000",
                                    pooled + " --set deepspeed.zero_optimization.stage3_max_reuse_distance=0" + all_nvme,
                                    pooled + " --set deepspeed.zero_optimization.offload_param.buffer_count=20" +
                                        all_nvme}) {
      const std::vector<float> cpu =
          master_after(3, optimizer, 10, nullptr, more + " --set deepspeed.zero_optimization.offload_param.device=cpu");
      std::string out;
      const std::vector<float> nvme =
          master_after(3, optimizer, 10, &out, more + " --set deepspeed.zero_optimization.offload_param.device=nvme");
      ASSERT_EQ(cpu.size(), nvme.size()) << out;
      ASSERT_FALSE(cpu.empty());
      EXPECT_EQ(std::memcmp(cpu.data(), nvme.data(), cpu.size() * sizeof(float)), 0)
          << "optimizer on " << optimizer << " " << more << ": relative difference " << relative_difference(nvme, cpu);
    }
}

// The parameters' swap directory is deleted while the job trains (CPU Adam, parameters on NVMe): the next parameter
// transfer (a fetch's nvme_read or a sub-group's param_nvme_write) names the removed file and its op, the job exits
// non-zero, and nothing is left in the scratch directory but the log.
TEST(ZrunOffloadGpu, RemovingTheParamNvmeDirectoryMidRunEndsTheJobNamingTheFileAndTheOp) {
  REQUIRE_GPU();
  const fs::path dir = scratch("kill_rm_param");
  const fs::path swap = dir / "swap", log = dir / "out.txt";
  const KilledRun run = remove_swap_directory_mid_run(
      "offload_param.device=nvme --set deepspeed.zero_optimization.offload_param.max_in_cpu=0", swap, log);
  const std::string& out = run.out;
  EXPECT_TRUE(WIFEXITED(run.status) && WEXITSTATUS(run.status) != 0) << out;
  EXPECT_LT(run.seconds, 60) << out;
  EXPECT_NE(out.find("was removed"), std::string::npos) << out;
  EXPECT_NE(out.find(swap.string() + "/zrun."), std::string::npos) << out;
  EXPECT_NE(out.find("params.partition"), std::string::npos) << out;  // the parameters' file
  EXPECT_TRUE(out.find(".nvme_read'") != std::string::npos || out.find(".param_nvme_write'") != std::string::npos)
      << out;  // the op
  EXPECT_FALSE(fs::exists(swap));
  std::size_t left = 0;
  for (const auto& e : fs::directory_iterator(dir)) left += e.path() != log;
  EXPECT_EQ(left, 0u) << "stray files in " << dir;
  fs::remove_all(dir);
}

// A full disk on a parameter write (the fault hook): the first sub-group's param_nvme_write fails with ENOSPC naming
// the parameters' file and the op; the job exits non-zero and removes its files. With the GPU optimizer (the weights
// come down by param_d2h first) and with CPU Adam.
TEST(ZrunOffloadGpu, AnInjectedEnospcOnAParamWriteEndsTheJobNamingTheFileAndTheOpAndLeavesNoFiles) {
  REQUIRE_GPU();
  for (const std::string optimizer : {"none", "cpu"}) {
    const fs::path swap = scratch("kill_enospc_param_" + optimizer);
    const ZrunRun r = zrun("ZRUN_NVME_FAULT=op=step.sub0.param_nvme_write,errno=ENOSPC", 3,
                           "--steps 3 --warmup 0 --set deepspeed.zero_optimization.offload_param.device=nvme "
                           "--set deepspeed.zero_optimization.offload_param.max_in_cpu=0 "
                           "--set deepspeed.zero_optimization.offload_optimizer.device=" + optimizer +
                           " --nvme-dir " + swap.string());
    EXPECT_NE(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("No space left on device"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("step.sub0.param_nvme_write"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(swap.string() + "/zrun."), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("params.partition"), std::string::npos) << r.out;
    EXPECT_TRUE(fs::is_empty(swap)) << optimizer << ": swap files left behind";
    fs::remove_all(swap);
  }
}

}  // namespace
