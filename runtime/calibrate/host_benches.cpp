#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kernels/cpu/cpu_adam.hpp"
#include "runtime/calibrate/benches.hpp"
#include "runtime/calibrate/fit.hpp"
#include "runtime/nvme/nvme_store.hpp"

namespace zrun::calibrate {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// CPU Adam over a partition of 128M parameters, the size of a model's optimizer partition and well beyond the caches
// (4M quick), on 1, 2, 4, ... threads and every hardware thread (cpu_adam_thread_counts): at each count one step that
// warms pages and the thread team, then the median of 5 steps (3 where a step takes over 0.25 s: the low counts, so
// that the whole takes ~5 s on the 32-thread H200 host and under ~15 s on a host of 1e8 params/s per core). CPU Adam
// is memory-bandwidth bound: the profile fits rate(t) = min(t x per core, node ceiling) to these (fit_cpu_adam).
void measure_cpu_adam(Measurements& m, bool quick, std::ostream& log) {
  const std::int64_t n = quick ? (4ll << 20) : (128ll << 20);
  std::vector<float> p(n, 0.1f), a(n, 0.0f), v(n, 0.0f), g(n, 0.01f);
  std::vector<std::uint16_t> w(n);
  zk::AdamHyper h;
  const zk::SimdLevel level = zk::best_simd_level();
  const int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const double start = now_s();
  for (const int threads : cpu_adam_thread_counts(hardware)) {
    auto step = [&] {
      const double t0 = now_s();
      zk::cpu_adam_step(p.data(), a.data(), v.data(), g.data(), w.data(), zk::Half16::bf16, n, h, level, threads);
      return now_s() - t0;
    };
    const int reps = step() > 0.25 ? 3 : 5;  // the first warms
    std::vector<double> steps;
    for (int i = 0; i < reps; ++i) steps.push_back(step());
    std::sort(steps.begin(), steps.end());
    const double med = median(steps);
    m.cpu_adam.push_back({threads, static_cast<double>(n), med});
    log << fmt::format("  CPU Adam ({}): {} params in {:.2f} ms (median of {}; fastest {:.2f}, slowest {:.2f}) on {} "
                       "threads: {:.3g} params/s, {:.3g} per thread\n",
                       zk::to_string(level), n, med * 1e3, reps, steps.front() * 1e3, steps.back() * 1e3, threads,
                       n / med, n / med / threads);
  }
  const CpuAdamFit f = fit_cpu_adam(m.cpu_adam);
  log << fmt::format("  CPU Adam fit (in {:.1f} s): min(t x {:.3g}, {:.3g}) params/s, the slope from 1..{} threads, "
                     "rms residual {:.1f}%{}\n",
                     now_s() - start, f.per_core, f.node_params_per_s, f.slope_up_to, 100 * f.residual.rms_rel,
                     f.raised.empty() ? "" : fmt::format(" (slower on {} threads than on fewer)", fmt::join(f.raised, ", ")));
}

// zrun's own NVMe path (runtime/nvme NvmeStore: a swap file per size, O_DIRECT where the file system takes it,
// io_uring with 1 MiB requests, 32 in flight), at the sizes an offloaded step moves, 1 MiB .. 1 GiB (256 MiB with
// --quick), for a latency + rate line per direction, and at 4 KiB .. 1 MiB, transfers of one request each (a 1.5 KB
// norm's read took 50 us in a step where the first line's intercept said 420 us), for the one-request line: in each
// round every file written, then every file read (a read right after the write of its own file ran up to 1.5x slower
// on the GPU machine's virtual disk than the step's reads of files written long before). Rounds: each round writes
// every file once, then reads every file once (5 rounds for one request, 3 above); the disk's rate moves by +-20% over
// a few hundred ms (a 16 MiB read every 20 ms for 3 s: 1.5 to 2.3 GB/s, offload_bench disk-after-write), so a size's
// transfers are spread over the moment, not timed back to back in one stretch.
void sample_nvme_moment(NvmeSamples& s, bool quick, const std::string& dir, std::ostream& log) {
  NvmeStore store(dir, fmt::format("calibrate.{}", ::getpid()));
  s.path = dir;
  s.direct = store.direct();
  const std::int64_t max_bytes = quick ? (256ll << 20) : (1ll << 30);
  void* raw = nullptr;
  if (posix_memalign(&raw, NvmeStore::kAlignBytes, static_cast<std::size_t>(max_bytes)) != 0)
    throw std::runtime_error("zrun calibrate: posix_memalign failed");
  std::unique_ptr<void, decltype(&std::free)> hold(raw, &std::free);
  std::memset(raw, 0x5a, static_cast<std::size_t>(max_bytes));
  const std::int64_t one_request = UringFileIo::kRequestBytes;  // a transfer up to it is one request of the reader
  std::vector<std::int64_t> sizes;  // one request each up to 1 MiB, then many
  for (std::int64_t bytes = 4096; bytes < one_request; bytes *= 4) sizes.push_back(bytes);
  for (std::int64_t bytes = one_request; bytes <= max_bytes; bytes *= 4) sizes.push_back(bytes);
  if (s.sizes.empty()) {
    s.sizes = sizes;
    s.write_s.assign(sizes.size(), {});
    s.read_s.assign(sizes.size(), {});
  }
  std::vector<int> ids;
  for (std::int64_t bytes : sizes) ids.push_back(store.create(fmt::format("calibrate.{}KiB", bytes >> 10), {{0, bytes}}));
  auto reps = [&](std::size_t i) { return sizes[i] <= one_request ? 5 : 3; };
  std::vector<std::vector<double>> write_t(sizes.size()), read_t(sizes.size());
  s.at_s.push_back(now_s());
  for (int round = 0; round < 5; ++round)
    for (const bool write : {true, false})
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        if (round >= reps(i)) continue;
        const double t0 = now_s();
        if (write) store.write(ids[i], 0, sizes[i], raw, "calibrate.nvme_write");
        else store.read(ids[i], 0, sizes[i], raw, "calibrate.nvme_read");
        (write ? write_t : read_t)[i].push_back(now_s() - t0);
      }
  const int moment = static_cast<int>(s.at_s.size());
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const double w = median(write_t[i]), r = median(read_t[i]);
    s.write_s[i].insert(s.write_s[i].end(), write_t[i].begin(), write_t[i].end());
    s.read_s[i].insert(s.read_s[i].end(), read_t[i].begin(), read_t[i].end());
    log << fmt::format("  moment {}: file {} KiB in {}{} ({}): write {:.2f} GB/s ({:.1f} us), read {:.2f} GB/s ({:.1f} us)\n",
                       moment, sizes[i] >> 10, dir, s.direct ? " (O_DIRECT)" : "",
                       store.io().uses_io_uring() ? "io_uring" : "pread/pwrite", sizes[i] / w / 1e9, w * 1e6,
                       sizes[i] / r / 1e9, r * 1e6);
  }
}

// Every moment's rounds into the measurements (add_nvme_figures), each size's figure logged.
void finish_nvme(Measurements& m, const NvmeSamples& s, std::ostream& log) {
  add_nvme_figures(s, m);
  for (std::size_t i = 0; i < s.sizes.size(); ++i) {
    const double b = static_cast<double>(s.sizes[i]), w = median(s.write_s[i]), r = median(s.read_s[i]);
    log << fmt::format("  file {} KiB, the median of {} rounds at {} moment(s) {:.0f} s apart: write {:.2f} GB/s ({:.1f} "
                       "us), read {:.2f} GB/s ({:.1f} us)\n",
                       s.sizes[i] >> 10, s.read_s[i].size(), m.nvme_moments, m.nvme_moments_apart_s, b / w / 1e9,
                       w * 1e6, b / r / 1e9, r * 1e6);
  }
}

}  // namespace

void sample_nvme(NvmeSamples& s, bool quick, const std::string& nvme_dir, std::ostream& log) {
  if (!s.error.empty()) return;  // an earlier moment failed: the profile keeps the base's figures
  log << fmt::format("zrun calibrate: file reads and writes (NVMe offload), moment {}\n", s.at_s.size() + 1);
  try {
    sample_nvme_moment(s, quick, nvme_dir, log);
  } catch (const std::exception& e) {
    s.error = e.what();
    log << "  no NVMe figures: " << e.what() << "\n";
  }
}

void measure_host(Measurements& m, bool quick, const std::string& nvme_dir, NvmeSamples& nvme, std::ostream& log) {
  m.host_cores = static_cast<int>(std::thread::hardware_concurrency());
  m.host_memory_bytes = static_cast<std::int64_t>(::sysconf(_SC_PHYS_PAGES)) * ::sysconf(_SC_PAGE_SIZE);
  log << "zrun calibrate: CPU Adam\n";
  measure_cpu_adam(m, quick, log);
  sample_nvme(nvme, quick, nvme_dir, log);
  if (nvme.error.empty() && !nvme.at_s.empty()) finish_nvme(m, nvme, log);
}

}  // namespace zrun::calibrate
