// Raw rates the offload benchmark compares zrun's offload pieces with, measured on the same machine in the same run:
//   offload_bench copy BYTES            pinned cudaMemcpyAsync d2h and h2d of BYTES (median of 10)
//   offload_bench copy-under-disk DIR BYTES
//                                       the copies of `copy` while another thread streams O_DIRECT 8 MiB writes, then
//                                       reads, of a 256 MiB file in DIR (the disk traffic an NVMe run's step overlaps
//                                       its copies with): lines "raw d2h_under_disk_write ...", "raw h2d_under_disk_read ..."
//   offload_bench d2h-probes BYTES      what might slow an NVMe run's d2h copies, one line each: a d2h of BYTES after the
//                                       GPU sat idle 0/1/5/20/100 ms ("d2h_after_idle_<n>ms"); beside a second stream
//                                       blocked in a 300 ms host function, as a stream behind an NVMe transfer is
//                                       ("d2h_beside_host_wait"); into successive places of a 4 GiB pinned allocation
//                                       ("d2h_spread_4GiB"); each the median of 10
//   offload_bench disk DIR BYTES        sequential O_DIRECT pwrite then pread of one BYTES file in DIR, 8 MiB requests
//                                       one at a time (plain syscalls, no io_uring), median of 3; then the same with
//                                       runtime/nvme's UringFileIo (1 MiB requests, 32 in flight) outside any step;
//                                       the file is removed
//   offload_bench disk-after-write DIR  reads of 4 and 16 MiB files every 20 ms for 3 s after 3 writes of a 1 GiB file
//                                       (calibrate's order): "after_write ms <t> read_16MiB GBps <r> read_4MiB GBps <r>"
//   offload_bench disk-orders DIR       calibrate's file sizes read in several orders (calibrate's, largest first, after
//                                       2 s idle, two readers at once): "disk <case> round <r> <read|write> bytes <n> us
//                                       <t> GBps <g>" (see disk_orders)
//   offload_bench adam-placement N THREADS
//                                       CPU Adam (kernels/cpu, THREADS OpenMP threads) over N parameters where the buffers
//                                       live and which thread calls it: four heap buffers from the main thread
//                                       (calibrate's way), one heap state buffer [master | exp_avg | exp_avg_sq] from the
//                                       main thread, pinned cudaHostAlloc memory from the main thread, and
//                                       pinned memory from a second thread started after the CUDA context (zrun's way);
//                                       lines "adam <where> threads <t> params_per_s <r> cpus_allowed <c>", median of 5
//   offload_bench disk-moments DIR      what slows calibrate's second disk moment (on every record its small reads ran
//                                       at about half the first's rate): calibrate's own moment (sample_nvme) fresh,
//                                       again at once, after CPU Adam as calibrate runs it (128M parameters on 1, 2, 4,
//                                       ... threads), after 20 s idle, and again at once; each moment's lines as
//                                       calibrate logs them, prefixed "moment <case>"
//   offload_bench disk-buffers DIR      whether the host memory a transfer moves from / into changes the disk's rate:
//                                       zrun's swap path (NvmeStore) at 16 MiB, 256 MiB and 1 GiB, six rounds, each
//                                       round every size written then read from pageable memory (posix_memalign, as
//                                       calibrate's disk moments) and then from pinned memory (cudaHostAlloc, as zrun's
//                                       cpu tier); one line per transfer "buffers <kind> round <r> <write|read> <size>
//                                       GBps <rate>"
//   offload_bench disk-moment DIR NAME  one of calibrate's disk moments, its lines prefixed "moment NAME"
// Each copy or disk mode prints one line "raw <what> bytes <n> seconds <s> GBps <rate>" per direction.
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime_api.h>

#include "kernels/cpu/cpu_adam.hpp"
#include "runtime/calibrate/benches.hpp"
#include "runtime/calibrate/fit.hpp"
#include "runtime/calibrate/nvme_samples.hpp"
#include "runtime/nvme/nvme_store.hpp"
#include "runtime/nvme/uring_file_io.hpp"

namespace {

#define CHECK_CUDA(x)                                                                   \
  do {                                                                                  \
    const cudaError_t e_ = (x);                                                         \
    if (e_ != cudaSuccess) {                                                            \
      std::fprintf(stderr, "%s failed: %s (%s:%d)\n", #x, cudaGetErrorString(e_), __FILE__, __LINE__); \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void print(const char* what, long long bytes, double s) {
  std::printf("raw %s bytes %lld seconds %.6f GBps %.3f\n", what, bytes, s, bytes / s / 1e9);
}

// One timed copy of `bytes` on `s`, in seconds.
double timed_copy(void* dst, const void* src, long long bytes, cudaMemcpyKind kind, cudaStream_t s, cudaEvent_t a,
                  cudaEvent_t b) {
  CHECK_CUDA(cudaEventRecord(a, s));
  CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, kind, s));
  CHECK_CUDA(cudaEventRecord(b, s));
  CHECK_CUDA(cudaEventSynchronize(b));
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
  return ms * 1e-3;
}

// `suffix` names the lines of a run under disk traffic ("" alone).
int copy_bench(long long bytes, const std::string& suffix = "") {
  void *host = nullptr, *dev = nullptr;
  CHECK_CUDA(cudaHostAlloc(&host, bytes, cudaHostAllocDefault));
  CHECK_CUDA(cudaMalloc(&dev, bytes));
  std::memset(host, 1, bytes);
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t a, b;
  CHECK_CUDA(cudaEventCreate(&a));
  CHECK_CUDA(cudaEventCreate(&b));
  for (const bool d2h : {true, false}) {
    std::vector<double> t;
    for (int r = 0; r < 12; ++r) {
      const double sec = timed_copy(d2h ? host : dev, d2h ? dev : host, bytes,
                                    d2h ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice, s, a, b);
      if (r >= 2) t.push_back(sec);
    }
    print(((d2h ? "d2h" : "h2d") + suffix).c_str(), bytes, median(t));
  }
  CHECK_CUDA(cudaEventDestroy(a));
  CHECK_CUDA(cudaEventDestroy(b));
  CHECK_CUDA(cudaStreamDestroy(s));
  CHECK_CUDA(cudaFree(dev));
  CHECK_CUDA(cudaFreeHost(host));
  return 0;
}

void CUDART_CB sleep_300ms(void*) { std::this_thread::sleep_for(std::chrono::milliseconds(300)); }

int d2h_probes(long long bytes) {
  const long long spread_bytes = 4LL << 30;
  void *host = nullptr, *dev = nullptr, *big = nullptr;
  CHECK_CUDA(cudaHostAlloc(&host, bytes, cudaHostAllocDefault));
  CHECK_CUDA(cudaMalloc(&dev, bytes));
  std::memset(host, 1, bytes);
  cudaStream_t s, other;
  CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CHECK_CUDA(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  cudaEvent_t a, b;
  CHECK_CUDA(cudaEventCreate(&a));
  CHECK_CUDA(cudaEventCreate(&b));
  for (int r = 0; r < 3; ++r) timed_copy(host, dev, bytes, cudaMemcpyDeviceToHost, s, a, b);  // warm-up
  for (const int idle_ms : {0, 1, 5, 20, 100}) {
    std::vector<double> t;
    for (int r = 0; r < 10; ++r) {
      std::this_thread::sleep_for(std::chrono::milliseconds(idle_ms));
      t.push_back(timed_copy(host, dev, bytes, cudaMemcpyDeviceToHost, s, a, b));
    }
    print(("d2h_after_idle_" + std::to_string(idle_ms) + "ms").c_str(), bytes, median(t));
  }
  {
    CHECK_CUDA(cudaLaunchHostFunc(other, &sleep_300ms, nullptr));
    std::vector<double> t;
    for (int r = 0; r < 10; ++r) t.push_back(timed_copy(host, dev, bytes, cudaMemcpyDeviceToHost, s, a, b));
    print("d2h_beside_host_wait", bytes, median(t));
    CHECK_CUDA(cudaStreamSynchronize(other));
  }
  if (cudaHostAlloc(&big, spread_bytes, cudaHostAllocDefault) == cudaSuccess) {
    std::memset(big, 1, spread_bytes);
    std::vector<double> t;
    const long long places = spread_bytes / bytes;
    for (long long r = 0; r < std::min(places, 10LL); ++r)  // each copy into memory no copy before touched
      t.push_back(timed_copy(static_cast<char*>(big) + (r * 7 % places) * bytes, dev, bytes, cudaMemcpyDeviceToHost, s,
                             a, b));
    print("d2h_spread_4GiB", bytes, median(t));
    CHECK_CUDA(cudaFreeHost(big));
  } else {
    (void)cudaGetLastError();
    std::printf("raw d2h_spread_4GiB skipped: cudaHostAlloc of 4 GiB failed\n");
  }
  CHECK_CUDA(cudaEventDestroy(a));
  CHECK_CUDA(cudaEventDestroy(b));
  CHECK_CUDA(cudaStreamDestroy(s));
  CHECK_CUDA(cudaStreamDestroy(other));
  CHECK_CUDA(cudaFree(dev));
  CHECK_CUDA(cudaFreeHost(host));
  return 0;
}

// The copies of copy_bench while a second thread writes (then reads) a 256 MiB O_DIRECT file in `dir` in 8 MiB
// requests, one at a time, without pause.
int copy_under_disk_bench(const std::string& dir, long long bytes) {
  const long long file_bytes = 256LL << 20, block = 8LL << 20;
  const std::string path = dir + "/offload_bench_load." + std::to_string(::getpid());
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0600);
  if (fd < 0) fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || ::posix_fallocate(fd, 0, file_bytes) != 0) {
    std::perror(path.c_str());
    if (fd >= 0) ::unlink(path.c_str());
    return 1;
  }
  void* buf = std::aligned_alloc(4096, block);
  std::memset(buf, 7, block);
  int rc = 0;
  for (const bool write : {true, false}) {  // writes first: a read of a never-written extent moves no data
    std::atomic<bool> stop{false};
    std::atomic<long long> moved{0};
    std::thread load([&] {
      for (long long at = 0; !stop.load(); at = (at + block) % file_bytes) {
        const ssize_t got = write ? ::pwrite(fd, buf, block, at) : ::pread(fd, buf, block, at);
        if (got != block) break;
        moved += got;
      }
    });
    const auto a = std::chrono::steady_clock::now();
    rc |= copy_bench(bytes, write ? "_under_disk_write" : "_under_disk_read");
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
    stop = true;
    load.join();
    print(write ? "disk_write_beside_copies" : "disk_read_beside_copies", moved.load(), s);
  }
  std::free(buf);
  ::close(fd);
  ::unlink(path.c_str());
  return rc;
}

int disk_bench(const std::string& dir, long long bytes) {
  const long long block = 8LL << 20;
  bytes = (bytes + 4095) / 4096 * 4096;
  void* buf = std::aligned_alloc(4096, block);
  std::memset(buf, 7, block);
  const std::string path = dir + "/offload_bench." + std::to_string(::getpid());
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0600);
  const bool direct = fd >= 0;
  if (fd < 0) fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) {
    std::perror(path.c_str());
    return 1;
  }
  if (::posix_fallocate(fd, 0, bytes) != 0) {
    std::fprintf(stderr, "%s: cannot allocate %lld bytes\n", path.c_str(), bytes);
    ::unlink(path.c_str());
    return 1;
  }
  std::printf("raw disk file %s O_DIRECT %s\n", path.c_str(), direct ? "yes" : "no (refused by the file system)");
  for (const bool write : {true, false}) {
    std::vector<double> t;
    for (int r = 0; r < 3; ++r) {
      const auto a = std::chrono::steady_clock::now();
      for (long long at = 0; at < bytes; at += block) {
        const long long n = std::min(block, bytes - at);
        const ssize_t got = write ? ::pwrite(fd, buf, n, at) : ::pread(fd, buf, n, at);
        if (got != n) {
          std::perror(write ? "pwrite" : "pread");
          ::unlink(path.c_str());
          return 1;
        }
      }
      if (write) ::fdatasync(fd);
      t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
    }
    print(write ? "nvme_write" : "nvme_read", bytes, median(t));
  }
  void* big = std::aligned_alloc(4096, bytes);
  std::memset(big, 7, bytes);
  zrun::UringFileIo io;
  for (const bool write : {true, false}) {
    std::vector<double> t;
    for (int r = 0; r < 3; ++r) {
      const auto a = std::chrono::steady_clock::now();
      if (write) io.write(fd, 0, bytes, big);
      else io.read(fd, 0, bytes, big);
      if (write) ::fdatasync(fd);
      t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
    }
    print(write ? (io.uses_io_uring() ? "uring_write" : "fallback_write") : (io.uses_io_uring() ? "uring_read" : "fallback_read"),
          bytes, median(t));
  }
  std::free(big);
  ::close(fd);
  ::unlink(path.c_str());
  std::free(buf);
  return 0;
}

// Do reads right after a burst of writes run slower than later ones (calibrate times its reads after ~4 GB of
// writes)? Files of 4 and 16 MiB written first, then a 1 GiB file written 3 times, as calibrate does; then, for 3 s, a
// read of the 16 MiB file and of the 4 MiB one every 20 ms: lines "after_write ms <t> read_16MiB GBps <r> read_4MiB
// GBps <r>", t from the end of the last write. UringFileIo (1 MiB requests, 32 in flight), O_DIRECT.
int disk_after_write(const std::string& dir) {
  const long long big = 1LL << 30;
  const long long sizes[] = {4LL << 20, 16LL << 20};
  void* buf = std::aligned_alloc(4096, big);
  std::memset(buf, 7, big);
  zrun::UringFileIo io;
  std::vector<std::string> paths;
  std::vector<int> fds;
  for (const long long b : {sizes[0], sizes[1], big}) {
    paths.push_back(dir + "/offload_bench_settle." + std::to_string(::getpid()) + "." + std::to_string(b));
    int fd = ::open(paths.back().c_str(), O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0600);
    if (fd < 0 || ::posix_fallocate(fd, 0, b) != 0) {
      std::perror(paths.back().c_str());
      for (const std::string& q : paths) ::unlink(q.c_str());
      return 1;
    }
    fds.push_back(fd);
  }
  io.write(fds[0], 0, sizes[0], buf);
  io.write(fds[1], 0, sizes[1], buf);
  for (int r = 0; r < 3; ++r) io.write(fds[2], 0, big, buf);
  const auto end = std::chrono::steady_clock::now();
  auto since_ms = [&] { return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - end).count(); };
  while (since_ms() < 3000) {
    const double t = since_ms();
    double r[2];
    for (int i : {1, 0}) {
      const auto a = std::chrono::steady_clock::now();
      io.read(fds[i], 0, sizes[i], buf);
      r[i] = sizes[i] / std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count() / 1e9;
    }
    std::printf("after_write ms %.1f read_16MiB GBps %.3f read_4MiB GBps %.3f\n", t, r[1], r[0]);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (size_t i = 0; i < fds.size(); ++i) {
    ::close(fds[i]);
    ::unlink(paths[i].c_str());
  }
  std::free(buf);
  return 0;
}

}  // namespace

// CPU Adam's rate over the buffers given (master weights, exp_avg, exp_avg_sq, fp32 grads, 16-bit weights), the median
// of 5 steps after one that warms; the CPUs the calling thread may run on beside it.
void adam_rate(const char* where, float* master, float* exp_avg, float* exp_avg_sq, float* grads,
               std::uint16_t* weights, long long n, int threads) {
  for (long long i = 0; i < n; ++i) master[i] = 0.1f, exp_avg[i] = 0.0f, exp_avg_sq[i] = 0.0f, grads[i] = 0.01f;
  zk::AdamHyper h;
  std::vector<double> t;
  for (int r = 0; r < 6; ++r) {
    h.step = r + 1;
    const auto a = std::chrono::steady_clock::now();
    zk::cpu_adam_step(master, exp_avg, exp_avg_sq, grads, weights, zk::Half16::bf16, n, h, zk::best_simd_level(),
                      threads);
    if (r > 0) t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  const int allowed = ::sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : -1;
  std::printf("adam %s threads %d params_per_s %.4g cpus_allowed %d\n", where, threads, n / median(t), allowed);
  std::fflush(stdout);
}

// The same over one state buffer laid out as zrun's step keeps it: [master | exp_avg | exp_avg_sq].
void adam_rate_state(const char* where, float* state, float* grads, std::uint16_t* weights, long long n, int threads) {
  adam_rate(where, state, state + n, state + 2 * n, grads, weights, n, threads);
}

int adam_placement(long long n, int threads) {
  {  // four heap buffers as calibrate's measure_cpu_adam allocates them
    std::vector<float> p(n), m(n), v(n), g(n);
    std::vector<std::uint16_t> w(n);
    adam_rate("heap_separate_main_thread", p.data(), m.data(), v.data(), g.data(), w.data(), n, threads);
  }
  {
    std::vector<float> state(3 * n), grads(n);
    std::vector<std::uint16_t> weights(n);
    adam_rate_state("heap_state_main_thread", state.data(), grads.data(), weights.data(), n, threads);
  }
  CHECK_CUDA(cudaSetDevice(0));
  void *state = nullptr, *grads = nullptr, *weights = nullptr;
  CHECK_CUDA(cudaHostAlloc(&state, 12 * n, cudaHostAllocDefault));
  CHECK_CUDA(cudaHostAlloc(&grads, 4 * n, cudaHostAllocDefault));
  CHECK_CUDA(cudaHostAlloc(&weights, 2 * n, cudaHostAllocDefault));
  auto run = [&](const char* where) {
    adam_rate_state(where, static_cast<float*>(state), static_cast<float*>(grads),
                    static_cast<std::uint16_t*>(weights), n, threads);
  };
  run("pinned_main_thread");
  std::thread([&] { run("pinned_second_thread"); }).join();
  CHECK_CUDA(cudaFreeHost(state));
  CHECK_CUDA(cudaFreeHost(grads));
  CHECK_CUDA(cudaFreeHost(weights));
  return 0;
}

// Why does calibrate find 1 .. 64 MiB reads slower (0.9 .. 1.2 GB/s on record AB's lease) than a step's reads of the
// same sizes (1.4 .. 1.7)? Files of calibrate's sizes (4 KiB x 4^i up to 1 GiB) read and written in several orders,
// one line each "disk <case> round <r> <read|write> bytes <n> us <t> GBps <g>":
//   calibrate      3 rounds of calibrate's order: every file written (ascending), then every file read (ascending)
//   descending     every file written, then read largest first
//   settled        every file written, 2 s idle, then read ascending; 2 s idle, read descending
//   two_readers    two threads, each with its own ring and its own copy of each size, reading at once (ascending;
//                  the rate is the pair's bytes over the slower one's time), as two ranks of a node do
// UringFileIo (1 MiB requests, 32 in flight), O_DIRECT.
int disk_orders(const std::string& dir) {
  std::vector<long long> sizes;
  for (long long b = 4096; b <= (1LL << 30); b *= 4) sizes.push_back(b);
  const long long big = sizes.back();
  void* buf = std::aligned_alloc(4096, big);
  void* buf2 = std::aligned_alloc(4096, big);
  std::memset(buf, 7, big);
  std::memset(buf2, 7, big);
  std::vector<std::string> paths;
  std::vector<int> fds, fds2;
  auto open_file = [&](long long b, const char* tag) {
    paths.push_back(dir + "/offload_bench_orders." + std::to_string(::getpid()) + "." + tag + "." + std::to_string(b));
    const int fd = ::open(paths.back().c_str(), O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0600);
    if (fd < 0 || ::posix_fallocate(fd, 0, b) != 0) {
      std::perror(paths.back().c_str());
      return -1;
    }
    return fd;
  };
  for (long long b : sizes) fds.push_back(open_file(b, "a"));
  for (long long b : sizes) if (b >= (1LL << 20) && b <= (256LL << 20)) fds2.push_back(open_file(b, "b"));
  bool ok = std::find(fds.begin(), fds.end(), -1) == fds.end() && std::find(fds2.begin(), fds2.end(), -1) == fds2.end();
  zrun::UringFileIo io;
  auto timed = [&](bool write, std::size_t i) {
    const auto a = std::chrono::steady_clock::now();
    if (write) io.write(fds[i], 0, sizes[i], buf);
    else io.read(fds[i], 0, sizes[i], buf);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
  };
  auto line = [](const char* c, int round, bool write, long long bytes, double s) {
    std::printf("disk %s round %d %s bytes %lld us %.1f GBps %.3f\n", c, round, write ? "write" : "read", bytes,
                s * 1e6, bytes / s / 1e9);
  };
  auto write_all = [&](const char* c, int round) {
    for (std::size_t i = 0; i < sizes.size(); ++i) line(c, round, true, sizes[i], timed(true, i));
  };
  auto read_all = [&](const char* c, int round, bool descending) {
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      const std::size_t i = descending ? sizes.size() - 1 - k : k;
      line(c, round, false, sizes[i], timed(false, i));
    }
  };
  auto idle = [] { std::this_thread::sleep_for(std::chrono::seconds(2)); };
  if (ok) {
    std::printf("disk io %s\n", io.uses_io_uring() ? "io_uring" : io.fallback_reason().c_str());
    for (int r = 0; r < 3; ++r) write_all("calibrate", r), read_all("calibrate", r, false);
    write_all("descending", 0), read_all("descending", 0, true);
    write_all("settled", 0), idle(), read_all("settled", 0, false), idle(), read_all("settled", 1, true);
    // Two readers: the second thread's files written once, both sets then settled 2 s.
    zrun::UringFileIo io2;
    std::size_t j = 0;
    for (std::size_t i = 0; i < sizes.size(); ++i)
      if (sizes[i] >= (1LL << 20) && sizes[i] <= (256LL << 20)) io2.write(fds2[j++], 0, sizes[i], buf2);
    idle();
    j = 0;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      if (sizes[i] < (1LL << 20) || sizes[i] > (256LL << 20)) continue;
      double other = 0;
      const int fd2 = fds2[j++];
      const auto a = std::chrono::steady_clock::now();
      std::thread t([&] {
        const auto b = std::chrono::steady_clock::now();
        io2.read(fd2, 0, sizes[i], buf2);
        other = std::chrono::duration<double>(std::chrono::steady_clock::now() - b).count();
      });
      io.read(fds[i], 0, sizes[i], buf);
      const double mine = std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
      t.join();
      line("two_readers", 0, false, 2 * sizes[i], std::max(mine, other));
    }
  }
  for (std::size_t i = 0; i < paths.size(); ++i) ::unlink(paths[i].c_str());
  for (int fd : fds) if (fd >= 0) ::close(fd);
  for (int fd : fds2) if (fd >= 0) ::close(fd);
  std::free(buf);
  std::free(buf2);
  return ok ? 0 : 1;
}

// One of calibrate's disk moments (sample_nvme), its lines as calibrate logs them and its duration, prefixed
// "moment <name>".
int disk_moment(const std::string& dir, const std::string& name) {
  zrun::calibrate::NvmeSamples samples;
  std::ostringstream log;
  const auto t0 = std::chrono::steady_clock::now();
  zrun::calibrate::sample_nvme(samples, false, dir, log);
  std::istringstream lines(log.str());
  for (std::string line; std::getline(lines, line);)
    if (line.find("moment 1:") != std::string::npos) std::printf("moment %s %s\n", name.c_str(), line.c_str());
  std::printf("moment %s took %.1f s%s\n", name.c_str(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
              samples.error.empty() ? "" : (" error: " + samples.error).c_str());
  std::fflush(stdout);
  return samples.error.empty() ? 0 : 1;
}

// Calibrate's disk moment under different histories (see the usage above).
int disk_moments(const std::string& dir) {
  auto moment = [&](const char* name) { disk_moment(dir, name); };
  moment("fresh");
  moment("again");
  {  // CPU Adam as calibrate's measure_cpu_adam runs it: 128M parameters, 1, 2, 4, ... every hardware thread
    const long long n = 128ll << 20;
    std::vector<float> p(n, 0.1f), a(n, 0.0f), v(n, 0.0f), g(n, 0.01f);
    std::vector<std::uint16_t> w(n);
    zk::AdamHyper h;
    const int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    const auto t0 = std::chrono::steady_clock::now();
    for (const int threads : zrun::calibrate::cpu_adam_thread_counts(hardware))
      for (int r = 0; r < 4; ++r)
        zk::cpu_adam_step(p.data(), a.data(), v.data(), g.data(), w.data(), zk::Half16::bf16, n, h,
                          zk::best_simd_level(), threads);
    std::printf("cpu_adam took %.1f s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  moment("after_cpu_adam");
  std::this_thread::sleep_for(std::chrono::seconds(20));
  moment("after_20s_idle");
  moment("again_after_idle");
  return 0;
}

int disk_buffers(const std::string& dir) {
  const std::vector<long long> sizes{16ll << 20, 256ll << 20, 1ll << 30};
  const long long max_bytes = sizes.back();
  void* pageable = nullptr;
  if (posix_memalign(&pageable, zrun::NvmeStore::kAlignBytes, static_cast<std::size_t>(max_bytes)) != 0) return 1;
  std::memset(pageable, 0x5a, static_cast<std::size_t>(max_bytes));
  void* pinned = nullptr;
  CHECK_CUDA(cudaHostAlloc(&pinned, static_cast<std::size_t>(max_bytes), cudaHostAllocDefault));
  std::memset(pinned, 0x5a, static_cast<std::size_t>(max_bytes));
  zrun::NvmeStore store(dir, "disk_buffers." + std::to_string(::getpid()));
  std::vector<int> ids;
  for (const long long b : sizes) ids.push_back(store.create("buffers." + std::to_string(b >> 20) + "MiB", {{0, b}}));
  for (int round = 0; round < 6; ++round)
    for (const bool pin : {false, true})
      for (const bool write : {true, false})
        for (std::size_t i = 0; i < sizes.size(); ++i) {
          void* buf = pin ? pinned : pageable;
          const auto t0 = std::chrono::steady_clock::now();
          if (write) store.write(ids[i], 0, sizes[i], buf, "disk_buffers.write");
          else store.read(ids[i], 0, sizes[i], buf, "disk_buffers.read");
          const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          std::printf("buffers %s round %d %s %lldMiB GBps %.3f\n", pin ? "pinned" : "pageable", round,
                      write ? "write" : "read", sizes[i] >> 20, sizes[i] / sec / 1e9);
        }
  std::fflush(stdout);
  CHECK_CUDA(cudaFreeHost(pinned));
  std::free(pageable);
  return 0;
}

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "";
  if (what == "copy" && argc == 3) return copy_bench(std::atoll(argv[2]));
  if (what == "copy-under-disk" && argc == 4) return copy_under_disk_bench(argv[2], std::atoll(argv[3]));
  if (what == "d2h-probes" && argc == 3) return d2h_probes(std::atoll(argv[2]));
  if (what == "disk" && argc == 4) return disk_bench(argv[2], std::atoll(argv[3]));
  if (what == "disk-after-write" && argc == 3) return disk_after_write(argv[2]);
  if (what == "disk-orders" && argc == 3) return disk_orders(argv[2]);
  if (what == "adam-placement" && argc == 4) return adam_placement(std::atoll(argv[2]), std::atoi(argv[3]));
  if (what == "disk-moments" && argc == 3) return disk_moments(argv[2]);
  if (what == "disk-buffers" && argc == 3) return disk_buffers(argv[2]);
  if (what == "disk-moment" && argc == 4) return disk_moment(argv[2], argv[3]);
  std::fprintf(stderr, "usage: offload_bench copy BYTES | offload_bench copy-under-disk DIR BYTES | offload_bench d2h-probes "
                       "BYTES | offload_bench disk DIR BYTES | offload_bench disk-after-write DIR | offload_bench disk-orders DIR | "
                       "offload_bench adam-placement N "
                       "THREADS | offload_bench disk-moments DIR | offload_bench disk-buffers DIR | offload_bench disk-moment DIR NAME\n");
  return 2;
}
