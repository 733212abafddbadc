#include "runtime/calibrate/calibrate_app.hpp"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>

#include "runtime/calibrate/benches.hpp"
#include "runtime/calibrate/calibrate_args.hpp"
#include "runtime/calibrate/measurements.hpp"
#include "runtime/comm/check.hpp"
#include "runtime/comm/communicators.hpp"
#include "runtime/comm/share_gpu.hpp"
#include "runtime/exit_codes.hpp"
#include "runtime/launch/local_launcher.hpp"
#include "runtime/launch/rendezvous.hpp"
#include "runtime/launch/worker_identity.hpp"
#include "sim/common/atomic_file.hpp"
#include "sim/common/error.hpp"

namespace zrun::calibrate {

namespace {

// Writes to stdout and, when given, to the log file.
class Log : public std::stringbuf {
 public:
  explicit Log(const std::string& file) {
    if (!file.empty()) file_.open(file, std::ios::app);
  }
  int sync() override {
    std::cout << str() << std::flush;
    if (file_) file_ << str() << std::flush;
    str("");
    return 0;
  }
  ~Log() override { sync(); }

 private:
  std::ofstream file_;
};

std::string gpu_name(int device) {
  cudaDeviceProp p;
  ZRUN_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  return p.name;
}

std::string resolve_base(const CalibrateArgs& a, const std::string& gpu) {
  const std::string base = a.base.empty() ? base_profile_for_gpu(gpu) : a.base;
  if (base.empty())
    throw zsim::InputError(zsim::SourceLocation{"--base", 0, 0, ""},
                           "no data-sheet profile known for GPU '" + gpu + "': name one with --base (scenarios/hardware)");
  return base;
}

std::string profile_name(const std::string& out) {
  return std::filesystem::path(out).stem().string();
}

// Measures what one GPU and its host can tell, fits, writes and re-reads the profile.
int measure_and_write(const CalibrateArgs& a, Measurements& m, std::ostream& log) {
  int device = 0;
  ZRUN_CUDA_CHECK(cudaGetDevice(&device));
  const std::string base_name = resolve_base(a, gpu_name(device));
  const zsim::ClusterSpec base = load_profile_cluster(base_name);
  const char* tmp = std::getenv("TMPDIR");
  const std::string nvme_dir = !a.nvme_dir.empty() ? a.nvme_dir : tmp && *tmp ? tmp : "/tmp";
  // The disk sampled at three moments: before the GPU benchmarks, after them, and after CPU Adam (measure_host). The
  // GPU machine's virtual disk drifts by 15-30% over tens of seconds (docs/hardware-profiles.md): each size's figure
  // is the median over every moment's rounds, the disk of the whole calibration rather than of one moment.
  NvmeSamples nvme;
  sample_nvme(nvme, a.quick, nvme_dir, log);
  measure_gpu(m, a.quick, log);
  sample_nvme(nvme, a.quick, nvme_dir, log);
  measure_host(m, a.quick, nvme_dir, nvme, log);
  log.flush();
  const CalibratedProfile p = build_profile(m, base, base_name);
  zsim::write_file_atomically(a.out, profile_yaml(p));
  // The profile must load where a scenario names it.
  const std::filesystem::path out(a.out);
  const zsim::ClusterSpec back = load_profile_cluster(profile_name(a.out), out.parent_path().empty() ? "." : out.parent_path().string());
  log << fmt::format("zrun calibrate: wrote {} (loads as cluster.profile: {}; base {}):\n", a.out, profile_name(a.out), base_name);
  for (const ProfileEntry& e : p.cluster) log << fmt::format("  {}: {}  # {}\n", e.key, e.value, e.comment);
  log << fmt::format("zrun calibrate: GEMM model {} launch {:.2f} us, max efficiency {:.3f}, io {:.0f} GB/s, io overlap "
                     "{:.2f}, fitted on attention shapes: {}\n",
                     back.gpu.name, back.efficiency.gemm_model.launch_us, back.efficiency.gemm_model.max_efficiency,
                     back.efficiency.gemm_model.io_GBps, back.efficiency.gemm_model.io_overlap,
                     back.efficiency.gemm_model.attention_shapes ? "yes" : "no");
  log.flush();
  return kExitOk;
}

std::vector<zsim::ProcessGroup> calibration_groups(int world, int gpus_per_node) {
  const int k = gpus_per_node > 0 && gpus_per_node < world && world % gpus_per_node == 0 ? gpus_per_node : world;
  std::vector<zsim::ProcessGroup> g = {{"world", world, k, 1}};
  if (k < world) {
    g.push_back({"intra_node", k, k, 1});
    g.push_back({"inter_node", world / k, 1, k});
  }
  return g;
}

int run_worker(const CalibrateArgs& a, const WorkerIdentity& me) {
  int visible = 0;
  ZRUN_CUDA_CHECK(cudaGetDeviceCount(&visible));
  const int device = a.share_gpu ? 0 : me.local_rank;
  if (device >= visible)
    throw DeviceError(fmt::format("zrun calibrate: rank {}: local rank {} but {} GPU(s) are visible", me.rank,
                                  me.local_rank, visible));
  ZRUN_CUDA_CHECK(cudaSetDevice(device));
  if (a.share_gpu) share_gpu_environment(me.rank);
  Log buf(me.rank == 0 ? a.log_file : "");
  std::ostream log(&buf);
  const std::vector<zsim::ProcessGroup> groups = calibration_groups(me.world_size, a.gpus_per_node);
  RendezvousOptions rv{me.master_addr, me.master_port, 120};
  rv.listener_fd = me.rendezvous_fd;  // rank 0 under zrun's launcher: the socket it already listens on
  const std::vector<std::uint8_t> id =
      rendezvous(me.rank, me.world_size, me.rank == 0 ? new_unique_id_bytes() : std::vector<std::uint8_t>{}, rv);
  Measurements m;
  m.gpus = me.world_size;
  {
    const int k = groups.front().ranks_per_node;
    Communicators comms(me.rank, me.world_size, k, unique_id_from_bytes(id), groups);
    if (me.rank == 0) log << fmt::format("zrun calibrate: collectives on {} ranks ({} per node)\n", me.world_size, k);
    measure_collectives(m, comms, groups, me.rank, a.quick, log);
    measure_link_collective_beside_compute(m, comms.group(0), me.world_size, me.rank, a.quick, log);
    // Every rank's CPU Adam at once, as the data-parallel step runs it; rank 0 times it alone later (measure_host).
    measure_cpu_adam_together(m, comms.group(0), me.world_size, me.rank, a.quick, log);
    if (a.share_gpu)
      m.collectives_note = fmt::format("{} ranks sharing one GPU (--share-gpu): the collectives ran over the loopback's "
                                       "sockets, a check of calibrate's multi-rank path, not a link's figures",
                                       me.world_size);
    else if (k < me.world_size)
      m.collectives_note = fmt::format("virtual nodes of {} GPUs on one host: the 'ib' class measured NVLink/PCIe, not a "
                                       "network", k);
    else
      m.collectives_note = "one node: no inter-node link to measure";
  }
  if (me.rank != 0) return kExitOk;
  measure_one_rank_collectives(m, a.quick, log);
  measure_beside_compute(m, a.quick, log);
  log.flush();
  return measure_and_write(a, m, log);
}

}  // namespace

int run_calibrate(int argc, const char* const* argv) {
  int exit_code = kExitOk;
  const std::optional<CalibrateArgs> args = parse_calibrate_args(argc, argv, std::cout, std::cerr, exit_code);
  if (!args) return exit_code;
  try {
    const std::optional<WorkerIdentity> me = detect_worker([](const char* n) { return std::getenv(n); });
    if (me) return run_worker(*args, *me);
    const std::string stem = profile_name(args->out);
    if (stem.empty() || stem.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
                            std::string::npos)
      throw zsim::InputError(zsim::SourceLocation{"--out", 0, 0, ""},
                             "the profile's file name (without .yaml) is its cluster.profile name: letters, digits, "
                             "'.', '_' and '-', got '" + stem + "'");
    if (!args->refit.empty()) {  // fit the recorded measurements again: no GPU
      Measurements m = measurements_from_profile(args->refit);
      if (args->no_side_wait)
        for (BesideSample& b : m.beside) b.gemm_s = 0;  // the builder's path for records without the GEMM's time
      const std::string base_name = args->base.empty() ? base_profile_for_gpu(m.gpu_name) : args->base;
      if (base_name.empty())
        throw zsim::InputError(zsim::SourceLocation{"--base", 0, 0, ""}, "no data-sheet profile known for GPU '" +
                                                                          m.gpu_name + "': name one with --base");
      const CalibratedProfile p = build_profile(m, load_profile_cluster(base_name), base_name);
      zsim::write_file_atomically(args->out, profile_yaml(p));
      const std::filesystem::path out(args->out);
      load_profile_cluster(profile_name(args->out), out.parent_path().empty() ? "." : out.parent_path().string());
      std::cout << fmt::format("zrun calibrate: refitted {} into {} (base {}):\n", args->refit, args->out, base_name);
      for (const ProfileEntry& e : p.cluster) std::cout << fmt::format("  {}: {}  # {}\n", e.key, e.value, e.comment);
      bool attention = false;
      for (const auto& [dt, samples] : m.gemm)
        for (const GemmSample& g : samples) attention |= g.batched_attention();
      if (!attention)
        std::cout << "zrun calibrate: the record has no attention-shaped batched GEMM (calibrate measures them since "
                     "the GEMM model's attention_shapes): the model is the grid's alone, attention_shapes false, and zsim "
                     "keeps pricing eager attention's core at its unit's GEMM efficiency; run zrun calibrate on the GPU "
                     "to measure them\n";
      return kExitOk;
    }
    int visible = 0;
    if (cudaGetDeviceCount(&visible) != cudaSuccess) visible = 0;
    const int nproc = args->nproc_per_node > 0 ? args->nproc_per_node : visible;
    if (nproc == 0) {
      std::cerr << "zrun calibrate: no CUDA device is visible; calibrate runs on a machine with GPUs\n";
      return kExitBadInput;
    }
    if (nproc > visible && !args->share_gpu) {
      std::cerr << fmt::format("zrun calibrate: --nproc-per-node {} but {} GPU(s) are visible\n", nproc, visible);
      return kExitBadInput;
    }
    load_profile_cluster(resolve_base(*args, gpu_name(0)));  // a bad --base fails before any measurement
    if (nproc == 1) {
      Log buf(args->log_file);
      std::ostream log(&buf);
      Measurements m;
      m.gpus = 1;
      m.collectives_note = "one GPU: no collective to measure (run on 2+ GPUs)";
      log << "zrun calibrate: one GPU: no collective across GPUs to measure; links.nvlink_* and links.ib_* keep the base "
             "profile's values, marked not calibrated\n";
      ZRUN_CUDA_CHECK(cudaSetDevice(0));
      measure_one_rank_collectives(m, args->quick, log);
      measure_beside_compute(m, args->quick, log);
      return measure_and_write(*args, m, log);
    }
    LaunchOptions o;
    o.nproc = nproc;
    std::vector<std::string> worker_argv = {"/proc/self/exe"};
    for (int i = 0; i < argc; ++i) worker_argv.push_back(argv[i]);
    const LaunchResult r = launch_local_workers(worker_argv, o);
    if (!r.message.empty()) std::cerr << r.message << "\n";
    return r.exit_code;
  } catch (const zsim::InputError& e) {
    std::cerr << e.what() << "\n";
    return kExitBadInput;
  } catch (const std::exception& e) {
    std::cerr << "zrun calibrate: " << e.what() << "\n";
    return kExitInternal;
  }
}

}  // namespace zrun::calibrate
