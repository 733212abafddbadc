#include "runtime/cli/zrun_app.hpp"

#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "runtime/calibrate/calibrate_app.hpp"
#include "runtime/cli/job_setup.hpp"
#include "runtime/cli/zrun_args.hpp"
#include "runtime/comm/check.hpp"
#include "runtime/exec/trainer.hpp"
#include "runtime/comm/communicators.hpp"
#include "runtime/comm/fault_injection.hpp"
#include "runtime/comm/share_gpu.hpp"
#include "runtime/comm/watchdog.hpp"
#include "runtime/exit_codes.hpp"
#include "runtime/launch/local_launcher.hpp"
#include "runtime/launch/rendezvous.hpp"
#include "runtime/launch/worker_identity.hpp"
#include "sim/common/error.hpp"

namespace zrun {
namespace {

double env_seconds(const char* name, double fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  if (*end != '\0' || s <= 0) throw std::invalid_argument(fmt::format("{}='{}' is not a positive number of seconds", name, v));
  return s;
}

int visible_gpu_count() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

std::optional<LocalGpu> local_gpu(int device) {
  cudaDeviceProp p;
  if (cudaGetDeviceProperties(&p, device) != cudaSuccess) return std::nullopt;
  return LocalGpu{p.name, static_cast<zsim::Bytes>(p.totalGlobalMem)};
}

// The launcher: checks everything that does not need a GPU of its own, then starts the workers.
int run_launcher(const ZrunArgs& args, int argc, const char* const* argv) {
  const int visible = visible_gpu_count();
  const int nproc = args.nproc_per_node > 0 ? args.nproc_per_node : visible;
  LaunchShape shape{nproc, nproc, fmt::format("--nproc-per-node {}", nproc)};
  if (args.nproc_per_node == 0) shape.how = fmt::format("{} visible GPU(s)", visible);
  if (nproc == 0) {
    std::cerr << "zrun: no CUDA device is visible; zrun runs on a machine with GPUs\n";
    return kExitBadInput;
  }
  Job job = plan_job(args, load_job_scenario(args, shape, args.here ? local_gpu(0) : std::nullopt));
  if (!job.fits) std::cerr << "zrun: --force: running although zsim predicts " << job.fit_summary << "\n";
  if (nproc > visible && !args.share_gpu) {
    std::cerr << fmt::format("zrun: --nproc-per-node {} but {} GPU(s) are visible\n", nproc, visible);
    return kExitBadInput;
  }
  LaunchOptions o;
  o.nproc = nproc;
  std::vector<std::string> worker_argv = {"/proc/self/exe"};
  for (int i = 1; i < argc; ++i) worker_argv.push_back(argv[i]);
  const LaunchResult r = launch_local_workers(worker_argv, o);
  if (!r.message.empty()) std::cerr << r.message << "\n";
  return r.exit_code;
}

// Runs `work` as op `op` of group `group` under the watchdog, after asking the fault injector.
template <class Work>
void watched_op(Watchdog& dog, const FaultInjector& faults, int rank, const std::string& op, const std::string& group,
                Work&& work) {
  const std::uint64_t token = dog.begin(op, group);
  if (const auto fault = faults.should_fault(rank, op)) inject_fault(*fault, rank, op);
  work();
  dog.end(token);
}

// One worker = one rank = one GPU (with --share-gpu: every rank on GPU 0).
int run_worker(const ZrunArgs& args, const WorkerIdentity& me) {
  const FaultInjector faults = FaultInjector::from_env();
  const int visible = visible_gpu_count();
  const int device = args.share_gpu ? 0 : me.local_rank;
  if (device >= visible)
    throw DeviceError(fmt::format("zrun: rank {}: local rank {} but {} GPU(s) are visible", me.rank, me.local_rank,
                                  visible));
  ZRUN_CUDA_CHECK(cudaSetDevice(device));
  if (args.share_gpu) share_gpu_environment(me.rank);
  LaunchShape shape{me.world_size, me.local_world_size,
                    fmt::format("{} world of {}", me.launcher, me.world_size)};
  Job job = plan_job(args, load_job_scenario(args, shape, args.here ? local_gpu(device) : std::nullopt));

  RendezvousOptions rv{me.master_addr, me.master_port, env_seconds("ZRUN_RENDEZVOUS_TIMEOUT_S", 120)};
  rv.listener_fd = me.rendezvous_fd;  // rank 0 under zrun's launcher: the socket it already listens on
  const std::vector<std::uint8_t> id =
      rendezvous(me.rank, me.world_size, me.rank == 0 ? new_unique_id_bytes() : std::vector<std::uint8_t>{}, rv);
  Communicators comms(me.rank, me.world_size, job.scenario.cluster.gpus_per_node, unique_id_from_bytes(id),
                      job.schedule.groups);
  Watchdog dog(me.rank, env_seconds("ZRUN_OP_TIMEOUT_S", 300), 0.1, comms.watchdog_hooks());

  // Every group's communicator works: a one-float sum all-reduce gives the group size.
  cudaStream_t stream;
  ZRUN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  float* one = nullptr;
  ZRUN_CUDA_CHECK(cudaMalloc(&one, sizeof(float)));
  for (std::size_t g = 0; g < comms.group_count(); ++g) {
    const zsim::ProcessGroup& shape_g = comms.shape(static_cast<int>(g));
    const std::string op = "init.comm_check." + shape_g.name;
    float value = 1.0f;
    watched_op(dog, faults, me.rank, op, shape_g.name, [&] {
      ZRUN_CUDA_CHECK(cudaMemcpyAsync(one, &value, sizeof value, cudaMemcpyHostToDevice, stream));
      comms.all_reduce_sum(one, 1, static_cast<int>(g), stream);
      ZRUN_CUDA_CHECK(cudaMemcpyAsync(&value, one, sizeof value, cudaMemcpyDeviceToHost, stream));
      ZRUN_CUDA_CHECK(cudaStreamSynchronize(stream));
    });
    if (value != static_cast<float>(shape_g.size))
      throw DeviceError(fmt::format("zrun: rank {}: the check all-reduce on group '{}' gave {}, expected {}", me.rank,
                                    shape_g.name, value, shape_g.size));
  }
  ZRUN_CUDA_CHECK(cudaFree(one));
  ZRUN_CUDA_CHECK(cudaStreamDestroy(stream));
  if (me.rank == 0) {
    std::cout << fmt::format("zrun: {} rank(s) ({}) met at {}:{}; communicators ready for {} group(s):", me.world_size,
                             me.launcher, me.master_addr, me.master_port, comms.group_count());
    for (std::size_t g = 0; g < comms.group_count(); ++g) {
      const auto& s = comms.shape(static_cast<int>(g));
      std::cout << fmt::format(" {}(size {}, stride {})", s.name, s.size, s.stride);
    }
    std::cout << fmt::format("\nzrun: schedule of {} ops; zsim predicts {}\n", job.schedule.ops.size(),
                             job.fit_summary);
  }
  return train(args, job, me.rank, comms, dog, faults);
}

}  // namespace

int run_zrun(int argc, const char* const* argv) {
  // `zrun calibrate ...`: the subcommand has its own arguments (runtime/calibrate).
  if (argc >= 2 && std::string(argv[1]) == "calibrate") return calibrate::run_calibrate(argc - 1, argv + 1);
  int exit_code = kExitOk;
  const std::optional<ZrunArgs> args = parse_zrun_args(argc, argv, std::cout, std::cerr, exit_code);
  if (!args) return exit_code;
  try {
    const std::optional<WorkerIdentity> me = detect_worker([](const char* n) { return std::getenv(n); });
    if (!me) return run_launcher(*args, argc, argv);
    return run_worker(*args, *me);
  } catch (const zsim::InputError& e) {
    std::cerr << e.what() << "\n";
    return kExitBadInput;
  } catch (const std::invalid_argument& e) {  // malformed launcher environment, ZRUN_FAULT, timeouts
    std::cerr << "zrun: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const std::exception& e) {
    std::cerr << "zrun: " << e.what() << "\n";
    return kExitInternal;
  }
}

}  // namespace zrun
