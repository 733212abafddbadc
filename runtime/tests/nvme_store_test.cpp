// The NVMe tier on the host (CI): swap files in a temporary directory, each range at an aligned extent, written and
// read back exactly through io_uring (skipped with a message where the container refuses io_uring) and through the
// pread / pwrite fallback; a missing directory, too little space, a removed file and an injected ENOSPC are errors
// naming the directory or the file and the op; the files go with the store.
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/nvme/nvme_store.hpp"

namespace zrun {
namespace {
namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("zrun_nvme_test_" + std::to_string(::getpid()) + "_" + std::to_string(next++));
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  static inline int next = 0;
};

struct Aligned {
  std::unique_ptr<char, decltype(&std::free)> p{nullptr, &std::free};
  explicit Aligned(std::size_t n) : p(static_cast<char*>(std::aligned_alloc(4096, (n + 4095) / 4096 * 4096)), &std::free) {}
  char* get() const { return p.get(); }
};

std::vector<char> pattern(std::size_t n, int seed) {
  std::vector<char> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<char>((i * 131 + seed * 7) % 251);
  return v;
}

// Three ranges of one buffer, of sizes that are and are not multiples of 4096, each written from an aligned or an
// unaligned buffer and read back into the other kind.
void round_trip(bool fallback) {
  TempDir d;
  NvmeStore store(d.path.string(), "t0", fallback);
  if (!fallback && !store.io().uses_io_uring())
    GTEST_SKIP() << "io_uring unavailable in this container (" << store.io().fallback_reason()
                 << "); the pread / pwrite path is tested by its own test";
  const std::vector<NvmeRange> ranges{{0, 12 * 1000}, {12 * 1000, 3 << 20}, {12 * 1000 + (3 << 20), 4096 * 3}};
  const int id = store.create("optimizer", ranges);
  int seed = 0;
  for (const NvmeRange& r : ranges) {
    const std::vector<char> want = pattern(r.bytes, ++seed);
    Aligned a(r.bytes + 64);
    std::memcpy(a.get() + (seed % 2 ? 0 : 64), want.data(), r.bytes);  // odd: aligned, even: unaligned source
    store.write(id, r.offset, r.bytes, a.get() + (seed % 2 ? 0 : 64), "step.sub0.nvme_write");
  }
  seed = 0;
  for (const NvmeRange& r : ranges) {
    const std::vector<char> want = pattern(r.bytes, ++seed);
    Aligned a(r.bytes + 64);
    char* dst = a.get() + (seed % 2 ? 64 : 0);
    store.read(id, r.offset, r.bytes, dst, "step.sub0.nvme_read");
    EXPECT_EQ(std::memcmp(dst, want.data(), r.bytes), 0) << "range at " << r.offset;
  }
  EXPECT_EQ(static_cast<zsim::Bytes>(fs::file_size(store.path(id))), NvmeStore::file_bytes(ranges));
}

TEST(NvmeStore, EachRangeIsWrittenAndReadBackExactlyThroughIoUring) { round_trip(false); }

TEST(NvmeStore, EachRangeIsWrittenAndReadBackExactlyThroughPreadPwrite) { round_trip(true); }

TEST(NvmeStore, EveryRangeTakesAWhole4096ByteExtentOfTheFile) {
  EXPECT_EQ(NvmeStore::file_bytes({{0, 1}, {1, 4096}, {4097, 4097}}), 4096 + 4096 + 8192);
}

TEST(NvmeStore, AMissingDirectoryIsAnErrorNamingIt) {
  try {
    NvmeStore store("/nonexistent/zrun_nvme", "t0");
    FAIL() << "no error";
  } catch (const NvmeError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/zrun_nvme"), std::string::npos) << e.what();
  }
}

TEST(NvmeStore, ADirectoryWithoutRoomForTheBuffersIsAnErrorBeforeAnyFileIsMade) {
  TempDir d;
  NvmeStore store(d.path.string(), "t0");
  struct statvfs v{};
  ASSERT_EQ(::statvfs(d.path.c_str(), &v), 0);
  const zsim::Bytes free_bytes = static_cast<zsim::Bytes>(v.f_bavail) * v.f_frsize;
  EXPECT_NO_THROW(store.check_space(4096));
  try {
    store.check_space(free_bytes + (1LL << 40));
    FAIL() << "no error";
  } catch (const NvmeError& e) {
    EXPECT_NE(std::string(e.what()).find(d.path.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("need"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::is_empty(d.path));
}

TEST(NvmeStore, OverlappingRangesAreRefused) {
  TempDir d;
  NvmeStore store(d.path.string(), "t0");
  EXPECT_THROW(store.create("optimizer", {{0, 8192}, {4096, 4096}}), NvmeError);
}

TEST(NvmeStore, AFileRemovedUnderTheStoreIsAnErrorNamingTheFileAndTheOp) {
  TempDir d;
  NvmeStore store(d.path.string(), "t0");
  const int id = store.create("optimizer", {{0, 8192}});
  Aligned a(8192);
  store.write(id, 0, 8192, a.get(), "step.sub0.nvme_write");
  const std::string path = store.path(id);
  fs::remove_all(d.path);
  try {
    store.read(id, 0, 8192, a.get(), "step.sub0.nvme_read");
    FAIL() << "no error";
  } catch (const NvmeError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("step.sub0.nvme_read"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("removed"), std::string::npos) << e.what();
  }
}

TEST(NvmeStore, AnInjectedEnospcFailsTheNamedOpOnlyNamingTheFile) {
  TempDir d;
  ::setenv("ZRUN_NVME_FAULT", "op=step.sub0.nvme_write,errno=ENOSPC", 1);
  NvmeStore store(d.path.string(), "t0");
  ::unsetenv("ZRUN_NVME_FAULT");
  const int id = store.create("optimizer", {{0, 8192}});
  Aligned a(8192);
  EXPECT_NO_THROW(store.read(id, 0, 8192, a.get(), "step.sub0.nvme_read"));
  try {
    store.write(id, 0, 8192, a.get(), "step.sub0.nvme_write");
    FAIL() << "no error";
  } catch (const NvmeError& e) {
    EXPECT_NE(std::string(e.what()).find(store.path(id)), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(std::strerror(ENOSPC)), std::string::npos) << e.what();
  }
}

TEST(NvmeStore, AMalformedFaultSpecIsRejected) {
  TempDir d;
  ::setenv("ZRUN_NVME_FAULT", "op=x,errno=EPERM", 1);
  EXPECT_THROW(NvmeStore(d.path.string(), "t0"), std::invalid_argument);
  ::unsetenv("ZRUN_NVME_FAULT");
}

TEST(NvmeStore, TheStoreRemovesItsFilesWhenItGoes) {
  TempDir d;
  {
    NvmeStore store(d.path.string(), "t0");
    store.create("optimizer", {{0, 4096}});
    store.create("params.partition", {{0, 100}});
    EXPECT_EQ(std::distance(fs::directory_iterator(d.path), fs::directory_iterator()), 2);
  }
  EXPECT_TRUE(fs::is_empty(d.path));
}

}  // namespace
}  // namespace zrun
