// The NVMe tier on the host (CI): swap files in a temporary directory, each piece between the ranges' boundaries at
// an aligned extent of its own (a range that cuts a piece read-modify-writes its partial blocks), written and read back
// exactly, one range at a time and a call's ranges in one batch, through io_uring (skipped with a message where the container refuses io_uring) and through the
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

// params.partition with offload_param nvme: per-tensor chunk reads at unaligned offsets and sizes, and optimizer
// sub-group writes that span and cut them. Each tensor's chunk starts at an aligned extent of the file (DeepSpeed's
// file per parameter); every write, from an aligned or unaligned host pointer, changes exactly its bytes, and every
// read, one range at a time or a call's ranges in one batch, returns what the writes left there. Checked against a
// model of the buffer after each transfer.
void overlapping_round_trip(bool fallback) {
  TempDir d;
  NvmeStore store(d.path.string(), "t0", fallback);
  if (!fallback && !store.io().uses_io_uring())
    GTEST_SKIP() << "io_uring unavailable in this container (" << store.io().fallback_reason()
                 << "); the pread / pwrite path is tested by its own test";
  // Tensor chunks of odd sizes (2-byte elements), and sub-groups of 30001 elements that cut them.
  std::vector<NvmeRange> tensors, subs;
  zsim::Bytes end = 0;
  for (zsim::Bytes b : {2 * 1000, 2 * 5003, 2 * 40000, 2 * 7, 2 * 2048, 2 * 4097 * 3})
    tensors.push_back({end, b}), end += b;
  for (zsim::Bytes at = 0; at < end; at += 2 * 30001) subs.push_back({at, std::min<zsim::Bytes>(2 * 30001, end - at)});
  std::vector<NvmeRange> all = tensors;
  all.insert(all.end(), subs.begin(), subs.end());
  const int id = store.create("params.partition", all);
  EXPECT_EQ(static_cast<zsim::Bytes>(fs::file_size(store.path(id))), NvmeStore::file_bytes(all));
  for (const NvmeRange& t : tensors) EXPECT_EQ(store.file_offset(id, t.offset) % NvmeStore::kAlignBytes, 0);
  std::vector<char> model(static_cast<std::size_t>(end), 0);
  int seed = 0;
  auto write = [&](const NvmeRange& r, std::size_t shift) {
    const std::vector<char> v = pattern(r.bytes, ++seed);
    Aligned a(r.bytes + 64);
    std::memcpy(a.get() + shift, v.data(), r.bytes);
    store.write(id, r.offset, r.bytes, a.get() + shift, "init.params.partition");
    std::memcpy(model.data() + r.offset, v.data(), r.bytes);
  };
  auto read_all = [&](const std::vector<NvmeRange>& rs, std::size_t shift) {
    for (const NvmeRange& r : rs) {
      Aligned a(r.bytes + 64);
      store.read(id, r.offset, r.bytes, a.get() + shift, "fwd.L0.nvme_read");
      ASSERT_EQ(std::memcmp(a.get() + shift, model.data() + r.offset, r.bytes), 0)
          << "read [" << r.offset << ", +" << r.bytes << ") shift " << shift;
    }
  };
  // A swap_in call: the tensors' chunks in one batch, each into a buffer of its own 1024 bytes apart.
  auto read_batch = [&](std::size_t shift) {
    std::vector<NvmeTransfer> batch;
    zsim::Bytes at = 0;
    for (const NvmeRange& r : tensors) batch.push_back({r.offset, r.bytes, nullptr}), at += (r.bytes + 1023) / 1024 * 1024;
    Aligned a(at + 64);
    at = 0;
    for (NvmeTransfer& t : batch) t.buf = a.get() + shift + at, at += (t.bytes + 1023) / 1024 * 1024;
    store.read(id, batch, "fwd.L0.t0+5.r0.nvme_read");
    for (const NvmeTransfer& t : batch)
      ASSERT_EQ(std::memcmp(t.buf, model.data() + t.offset, t.bytes), 0) << "batched read at " << t.offset << " shift " << shift;
  };
  write({0, end}, 0);  // init: the whole buffer
  read_all(tensors, 0);
  read_all(tensors, 2);
  read_batch(0);
  read_batch(2);
  for (std::size_t shift : {std::size_t{0}, std::size_t{2}, std::size_t{64}}) {
    for (const NvmeRange& r : subs) write(r, shift);  // the step's write-back, sub-group by sub-group
    read_all(tensors, shift);
    read_all(subs, 2);
    read_batch(shift);
  }
  // A write of one tensor's chunk between neighbours leaves the neighbours' bytes.
  write(tensors[3], 2);
  read_all(tensors, 0);
  // A range inside a piece, off its blocks' edges (no range the schedule gives), keeps the piece's other bytes.
  write({tensors[2].offset + 4100, 6000}, 2);
  read_all(tensors, 0);
  read_all({{0, end}}, 0);
  // A range outside the buffer's uses is an error naming the op.
  Aligned a(8192);
  try {
    store.read(id, end - 2, 4, a.get(), "fwd.L9.nvme_read");
    FAIL() << "no error";
  } catch (const NvmeError& e) {
    EXPECT_NE(std::string(e.what()).find("fwd.L9.nvme_read"), std::string::npos) << e.what();
  }
}

TEST(NvmeStore, TensorChunksAndSubGroupWritesThatCutThemRoundTripExactlyThroughIoUring) { overlapping_round_trip(false); }

TEST(NvmeStore, TensorChunksAndSubGroupWritesThatCutThemRoundTripExactlyThroughPreadPwrite) { overlapping_round_trip(true); }

std::vector<std::pair<zsim::Bytes, zsim::Bytes>> spans(const std::vector<NvmeRange>& rs) {
  std::vector<std::pair<zsim::Bytes, zsim::Bytes>> out;
  for (const NvmeRange& r : rs) out.emplace_back(r.offset, r.bytes);
  return out;
}

TEST(NvmeStore, TheBufferIsCutAtEveryRangesStartAndEndWhereSomeRangeCoversIt) {
  using V = std::vector<std::pair<zsim::Bytes, zsim::Bytes>>;
  EXPECT_EQ(spans(NvmeStore::pieces({{0, 8192}, {8192, 100}, {0, 8192}})), (V{{0, 8192}, {8192, 100}}));
  EXPECT_EQ(spans(NvmeStore::pieces({{0, 8192}, {4096, 4096}})), (V{{0, 4096}, {4096, 4096}}));
  EXPECT_EQ(spans(NvmeStore::pieces({{0, 100}, {200, 100}})), (V{{0, 100}, {200, 100}}));  // no piece in the gap
  EXPECT_EQ(spans(NvmeStore::pieces({{0, 300}, {100, 100}, {50, 0}})), (V{{0, 100}, {100, 100}, {200, 100}}));
  EXPECT_EQ(NvmeStore::file_bytes({{0, 8192}, {4096, 4097}}), 3 * 4096);
  TempDir d;
  NvmeStore store(d.path.string(), "t0");
  const int id = store.create("params.partition", {{0, 100}, {100, 5000}, {0, 5100}});
  EXPECT_EQ(spans(store.ranges(id)), (V{{0, 100}, {100, 5000}}));
  EXPECT_EQ(store.file_offset(id, 0), 0);
  EXPECT_EQ(store.file_offset(id, 100), 4096);
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

// DeepSpeed's swap-in buffers are 1024-byte aligned (partitioned_param_swapper.py _io_aligned_numel): a host pointer at
// the file system's O_DIRECT memory alignment (statx STATX_DIOALIGN, 4096 where the kernel does not say, 1 without
// O_DIRECT) moves whole blocks straight, and the bytes come back exactly.
TEST(NvmeStore, ATransferAtTheFileSystemsDirectIoMemoryAlignmentIsExact) {
  TempDir d;
  NvmeStore store(d.path.string(), "t0");
  const zsim::Bytes bytes = (3 << 20) + 100;
  const int id = store.create("params.swap_in", {{0, bytes}});
  const zsim::Bytes align = store.memory_alignment(id);
  EXPECT_GT(align, 0);
  EXPECT_LE(align, NvmeStore::kAlignBytes);
  EXPECT_EQ(align & (align - 1), 0) << align << " is not a power of two";
  EXPECT_EQ(align == 1, !store.direct());
  const std::vector<char> want = pattern(static_cast<std::size_t>(bytes), 5);
  Aligned from(bytes + 4096), to(bytes + 4096);
  std::memcpy(from.get() + align, want.data(), want.size());
  store.write(id, 0, bytes, from.get() + align, "init.params.partition.nvme");
  store.read(id, 0, bytes, to.get() + align, "fwd.L0.mlp.up.t0.nvme_read");
  EXPECT_EQ(std::memcmp(to.get() + align, want.data(), want.size()), 0);
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
