#include <fcntl.h>
#include <sys/stat.h>
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

#include "kernels/cpu/cpu_adam.hpp"
#include "runtime/calibrate/benches.hpp"

namespace zrun::calibrate {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The median of 5 steps (after one that warms pages and threads) over a partition of 128M parameters, the size of a
// model's optimizer partition and well beyond the caches (4M quick); the rate the profile keeps.
void measure_cpu_adam(Measurements& m, bool quick, std::ostream& log) {
  const std::int64_t n = quick ? (4ll << 20) : (128ll << 20);
  std::vector<float> p(n, 0.1f), a(n, 0.0f), v(n, 0.0f), g(n, 0.01f);
  std::vector<std::uint16_t> w(n);
  zk::AdamHyper h;
  std::vector<double> steps;
  for (int i = 0; i < 6; ++i) {
    const double t0 = now_s();
    zk::cpu_adam_step(p.data(), a.data(), v.data(), g.data(), w.data(), zk::Half16::bf16, n, h);
    if (i > 0) steps.push_back(now_s() - t0);
  }
  std::sort(steps.begin(), steps.end());
  const double median = steps[steps.size() / 2];
  m.cpu_adam_params = n;
  m.cpu_adam_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  m.cpu_adam_params_per_s = n / median;
  log << fmt::format("  CPU Adam ({}): {} params in {:.2f} ms (median of 5; fastest {:.2f}, slowest {:.2f}) on {} "
                     "threads: {:.3g} params/s\n",
                     zk::to_string(zk::best_simd_level()), n, median * 1e3, steps.front() * 1e3, steps.back() * 1e3,
                     m.cpu_adam_threads, n / median);
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Writes then reads `bytes` of a file in `dir`, in 8 MiB requests, O_DIRECT when the file system allows it.
void measure_nvme(Measurements& m, bool quick, const std::string& dir, std::ostream& log) {
  const std::string path = fmt::format("{}/zrun-calibrate-{}.tmp", dir, ::getpid());
  const std::size_t chunk = 8u << 20;
  void* buf = nullptr;
  if (posix_memalign(&buf, 4096, chunk) != 0) throw std::runtime_error("zrun calibrate: posix_memalign failed");
  std::unique_ptr<void, decltype(&std::free)> hold(buf, &std::free);
  std::memset(buf, 0x5a, chunk);
  {
    // O_DIRECT where the file system takes it: one aligned request must go through (tmpfs refuses the open,
    // some file systems the write).
    Fd probe;
    probe.fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_DIRECT, 0600);
    m.nvme_direct = probe.fd >= 0 && ::write(probe.fd, buf, chunk) == static_cast<ssize_t>(chunk);
  }
  {
    Fd probe;
    probe.fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0600);
    if (probe.fd < 0)
      throw std::runtime_error(fmt::format("zrun calibrate: cannot create {}: {} (use --nvme-dir)", path, std::strerror(errno)));
  }
  m.nvme_path = dir;
  const int direct = m.nvme_direct ? O_DIRECT : 0;
  const std::int64_t max_bytes = quick ? (256ll << 20) : (1ll << 30);
  for (std::int64_t bytes = 16ll << 20; bytes <= max_bytes; bytes *= 4) {
    Fd w;
    w.fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | direct);
    if (w.fd < 0) throw std::runtime_error(fmt::format("zrun calibrate: cannot open {}: {}", path, std::strerror(errno)));
    double t0 = now_s();
    for (std::int64_t off = 0; off < bytes; off += chunk)
      if (::write(w.fd, buf, chunk) != static_cast<ssize_t>(chunk))
        throw std::runtime_error(fmt::format("zrun calibrate: write to {} failed: {}", path, std::strerror(errno)));
    ::fsync(w.fd);
    const double tw = now_s() - t0;
    ::posix_fadvise(w.fd, 0, 0, POSIX_FADV_DONTNEED);
    Fd r;
    r.fd = ::open(path.c_str(), O_RDONLY | direct);
    if (r.fd < 0) throw std::runtime_error(fmt::format("zrun calibrate: cannot open {}: {}", path, std::strerror(errno)));
    t0 = now_s();
    for (std::int64_t off = 0; off < bytes; off += chunk)
      if (::read(r.fd, buf, chunk) != static_cast<ssize_t>(chunk))
        throw std::runtime_error(fmt::format("zrun calibrate: read of {} failed: {}", path, std::strerror(errno)));
    const double tr = now_s() - t0;
    m.nvme_write.push_back({static_cast<double>(bytes), tw});
    m.nvme_read.push_back({static_cast<double>(bytes), tr});
    log << fmt::format("  file {} MiB in {}{}: write {:.2f} GB/s, read {:.2f} GB/s\n", bytes >> 20, dir,
                       m.nvme_direct ? " (O_DIRECT)" : "", bytes / tw / 1e9, bytes / tr / 1e9);
  }
  ::unlink(path.c_str());
}

}  // namespace

void measure_host(Measurements& m, bool quick, const std::string& nvme_dir, std::ostream& log) {
  m.host_cores = static_cast<int>(std::thread::hardware_concurrency());
  m.host_memory_bytes = static_cast<std::int64_t>(::sysconf(_SC_PHYS_PAGES)) * ::sysconf(_SC_PAGE_SIZE);
  log << "zrun calibrate: CPU Adam\n";
  measure_cpu_adam(m, quick, log);
  log << "zrun calibrate: file reads and writes (NVMe offload)\n";
  try {
    measure_nvme(m, quick, nvme_dir, log);
  } catch (const std::exception& e) {  // the profile keeps the base's NVMe figures, saying why
    m.nvme_read.clear();
    m.nvme_write.clear();
    log << "  no NVMe figures: " << e.what() << "\n";
  }
}

}  // namespace zrun::calibrate
