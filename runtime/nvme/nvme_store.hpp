// The NVMe tier of one rank (ZeRO-Infinity's swap files): one file per schedule buffer of tier `nvme`, in a
// directory given by --nvme-dir or the scenario's nvme_path, created at init and removed when the store goes (also
// when the job fails).
// Layout: the buffer is cut at every start and end of the ranges the schedule uses (an optimizer's sub-groups;
// params.partition's per-tensor chunks and the sub-group writes that span and cut them), and each piece between two
// cuts gets its own extent of the file, starting at a multiple of 4096 bytes (DeepSpeed keeps a file per parameter,
// io-aligned: partitioned_param_swapper.py). A range the schedule moves is then whole pieces, each starting
// O_DIRECT-aligned in the file, and a piece's partial tail block is its own. Whole 4096-byte blocks go straight from /
// into the caller's buffer where the host pointer is at the file system's O_DIRECT memory alignment (File::mem_align:
// 512 bytes on ext4 over most disks); anything else goes through an aligned bounce buffer, and a partial block is
// read-modify-written (a range that cuts a piece keeps the piece's other bytes).
// The ranges of one call are one batch: their requests are in flight together (DeepSpeed's swap_in submits a read per
// parameter before it waits).
// The file is allocated in full up front (posix_fallocate), so a directory without room fails before training starts.
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

// One range of a buffer of tier nvme and the host memory it moves from / into.
struct NvmeTransfer {
  zsim::Bytes offset = 0, bytes = 0;  // in the buffer
  void* buf = nullptr;
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

  // The pieces of a buffer with these ranges (the schedule's uses of it): the spans between consecutive starts and
  // ends of the ranges that some range covers, in order.
  static std::vector<NvmeRange> pieces(std::vector<NvmeRange> ranges);
  // The bytes the file of a buffer with these ranges takes: its pieces, each rounded up to 4096.
  static zsim::Bytes file_bytes(std::vector<NvmeRange> ranges);
  // Throws NvmeError naming `dir` unless it is a writable directory.
  static void check_directory(const std::string& dir);
  // Throws NvmeError unless the directory's file system has `bytes` free (statvfs f_bavail).
  static void check_space(const std::string& dir, zsim::Bytes bytes);
  void check_space(zsim::Bytes bytes) const { check_space(dir_, bytes); }

  // Creates the file of buffer `name` holding `ranges` (the schedule's uses of it). Returns its id.
  int create(const std::string& name, std::vector<NvmeRange> ranges);
  // Reads / writes range [offset, offset + bytes) of buffer `id` for op `op`: any range its pieces cover.
  void read(int id, zsim::Bytes offset, zsim::Bytes bytes, void* buf, const std::string& op);
  void write(int id, zsim::Bytes offset, zsim::Bytes bytes, const void* buf, const std::string& op);
  // Several disjoint ranges of buffer `id` in one batch (one schedule op's pairs): their direct blocks in flight
  // together, then what goes through the bounce buffer.
  void read(int id, const std::vector<NvmeTransfer>& ranges, const std::string& op);
  void write(int id, const std::vector<NvmeTransfer>& ranges, const std::string& op);

  const std::string& path(int id) const { return files_.at(id).path; }
  // The pieces of buffer `id`, in order.
  std::vector<NvmeRange> ranges(int id) const;
  // Where piece `offset` of buffer `id` starts in its file.
  zsim::Bytes file_offset(int id, zsim::Bytes offset) const;
  bool direct() const { return direct_; }  // O_DIRECT accepted by the directory's file system
  const UringFileIo& io() const { return io_; }
  const std::string& dir() const { return dir_; }
  // The host pointer alignment at which buffer `id`'s transfers skip the bounce buffer (File::mem_align).
  zsim::Bytes memory_alignment(int id) const { return files_.at(id).mem_align; }
  int files() const { return static_cast<int>(files_.size()); }

 private:
  struct Piece {
    zsim::Bytes offset = 0, bytes = 0;  // in the buffer
    zsim::Bytes at = 0;                 // in the file (a multiple of 4096)
  };
  struct File {
    std::string path;
    int fd = -1;
    std::vector<Piece> pieces;  // by offset
    // The host pointer alignment a transfer needs to go straight from / into the caller's buffer: the file system's
    // O_DIRECT memory alignment (statx STATX_DIOALIGN; 4096 where the kernel does not say), 1 without O_DIRECT.
    zsim::Bytes mem_align = kAlignBytes;
  };
  // A stretch of one transfer inside one piece: its file position, bytes and host memory.
  struct Span {
    zsim::Bytes at = 0, bytes = 0;
    char* buf = nullptr;
  };
  std::vector<Span> place(const File& f, const NvmeTransfer& t, const std::string& op) const;
  void transfer(int id, const std::vector<NvmeTransfer>& ranges, bool write, const std::string& op);
  void bounce(const File& f, const Span& s, bool write);

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
