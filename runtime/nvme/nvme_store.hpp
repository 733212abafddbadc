// The NVMe tier of one rank (ZeRO-Infinity's swap files): one file per schedule buffer of tier `nvme`, in a
// directory given by --nvme-dir or the scenario's nvme_path, created at init and removed when the store goes (also
// when the job fails). Two layouts:
// - disjoint ranges (an optimizer's sub-groups): each range the schedule reads or writes gets its own extent of the
//   file, starting at a multiple of 4096 bytes, so every transfer starts O_DIRECT-aligned; the tail block of an
//   extent is its own (written zero-padded).
// - overlapping ranges (params.partition: per-tensor chunk reads, optimizer sub-group writes that span and cut
//   tensors): the file mirrors the buffer (file offset = buffer offset). A transfer moves whole 4096-byte blocks
//   directly where the file position is 4096-aligned and the host pointer at the file system's O_DIRECT memory
//   alignment (File::mem_align: 512 bytes on ext4 over most disks); a partial block at either end is
//   read-modify-written through an aligned bounce buffer, so the bytes of a neighbouring range in that block are
//   kept. This needs one file's transfers not to run concurrently: the schedule puts every NVMe op on its one `nvme`
//   stream, whose host functions run in order.
// Either way the file is allocated in full up front (posix_fallocate), so a directory without room fails before
// training starts.
// Reads and writes go through UringFileIo. Before each transfer the file is checked to be still linked (a removed
// directory is an error naming the file and the op, not silent writes into an unlinked inode).
// Fault hook for kill-tests: ZRUN_NVME_FAULT="op=NAME,errno=ENOSPC|EIO" makes the transfers of op NAME fail with
// that errno, as the kernel would return it.
#pragma once
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/nvme/uring_file_io.hpp"

namespace zrun {

struct NvmeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct NvmeRange {
  zsim::Bytes offset = 0, bytes = 0;  // in the buffer
  bool operator<(const NvmeRange& o) const { return offset < o.offset || (offset == o.offset && bytes < o.bytes); }
};

class NvmeStore {
 public:
  static constexpr zsim::Bytes kAlignBytes = 4096;
  static zsim::Bytes aligned(zsim::Bytes b) { return (b + kAlignBytes - 1) / kAlignBytes * kAlignBytes; }

  // Checks that `dir` is a writable directory (NvmeError naming it otherwise). `tag` makes the file names unique
  // (rank and process id).
  NvmeStore(std::string dir, std::string tag, bool force_fallback_io = false);
  ~NvmeStore();  // removes every file it created
  NvmeStore(const NvmeStore&) = delete;
  NvmeStore& operator=(const NvmeStore&) = delete;

  // The bytes the file of a buffer with these ranges takes: the extents rounded up to 4096 (disjoint ranges), or the
  // buffer's bytes up to the last range's end rounded up to 4096 (overlapping ranges).
  static zsim::Bytes file_bytes(std::vector<NvmeRange> ranges);
  // Whether some of these ranges overlap (after dropping duplicates).
  static bool overlapping(std::vector<NvmeRange> ranges);
  // Throws NvmeError naming `dir` unless it is a writable directory.
  static void check_directory(const std::string& dir);
  // Throws NvmeError unless the directory's file system has `bytes` free (statvfs f_bavail).
  static void check_space(const std::string& dir, zsim::Bytes bytes);
  void check_space(zsim::Bytes bytes) const { check_space(dir_, bytes); }

  // Creates the file of buffer `name` holding `ranges` (the schedule's uses of it). Returns its id.
  int create(const std::string& name, std::vector<NvmeRange> ranges);
  // Reads / writes range [offset, offset + bytes) of buffer `id` for op `op`: one of its ranges (disjoint layout), or
  // any range inside [0, end of its last range) (overlapping layout). Whole 4096-byte blocks at an aligned `buf` go
  // directly, anything else through an aligned bounce buffer.
  void read(int id, zsim::Bytes offset, zsim::Bytes bytes, void* buf, const std::string& op);
  void write(int id, zsim::Bytes offset, zsim::Bytes bytes, const void* buf, const std::string& op);

  const std::string& path(int id) const { return files_.at(id).path; }
  // The ranges of buffer `id` (overlapping layout: the one range [0, end of its last range)).
  std::vector<NvmeRange> ranges(int id) const;
  bool flat(int id) const { return files_.at(id).flat; }
  bool direct() const { return direct_; }  // O_DIRECT accepted by the directory's file system
  const UringFileIo& io() const { return io_; }
  const std::string& dir() const { return dir_; }
  // The host pointer alignment at which buffer `id`'s transfers skip the bounce buffer (File::mem_align).
  zsim::Bytes memory_alignment(int id) const { return files_.at(id).mem_align; }
  int files() const { return static_cast<int>(files_.size()); }

 private:
  struct File {
    std::string path;
    int fd = -1;
    std::map<NvmeRange, zsim::Bytes> at;  // disjoint layout: range -> file offset
    bool flat = false;                    // overlapping layout: file offset = buffer offset
    zsim::Bytes end = 0;                  // overlapping layout: the end of the last range
    // The host pointer alignment a transfer needs to go straight from / into the caller's buffer: the file system's
    // O_DIRECT memory alignment (statx STATX_DIOALIGN; 4096 where the kernel does not say), 1 without O_DIRECT.
    zsim::Bytes mem_align = kAlignBytes;
  };
  zsim::Bytes place(const File& f, zsim::Bytes offset, zsim::Bytes bytes, const std::string& op) const;
  void transfer(int id, zsim::Bytes offset, zsim::Bytes bytes, void* buf, bool write, const std::string& op);

  std::string dir_, tag_;
  UringFileIo io_;
  bool direct_ = true;
  std::vector<File> files_;
  std::optional<std::pair<std::string, int>> fault_;  // ZRUN_NVME_FAULT: (op, errno)
  // Kept between transfers (they run one at a time, on the `nvme` stream's host functions): a fresh allocation per
  // transfer costs its pages' first touch each time.
  struct FreeDeleter {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, FreeDeleter> bounce_;
  zsim::Bytes bounce_bytes_ = 0;
};

}  // namespace zrun
