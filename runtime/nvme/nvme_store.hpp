// The NVMe tier of one rank (ZeRO-Infinity's swap files): one file per schedule buffer of tier `nvme`, in a
// directory given by --nvme-dir or the scenario's nvme_path, created at init and removed when the store goes (also
// when the job fails). Each range the schedule reads or writes (an optimizer sub-group's state) gets its own extent
// of the file, starting at a multiple of 4096 bytes, so every transfer is O_DIRECT-aligned; the extents are
// allocated in full up front (posix_fallocate), so a directory without room fails before training starts.
// Reads and writes go through UringFileIo. Before each transfer the file is checked to be still linked (a removed
// directory is an error naming the file and the op, not silent writes into an unlinked inode).
// Fault hook for kill-tests: ZRUN_NVME_FAULT="op=NAME,errno=ENOSPC|EIO" makes the transfers of op NAME fail with
// that errno, as the kernel would return it.
#pragma once
#include <map>
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

  // The bytes the files of these buffers take (extents rounded up to 4096).
  static zsim::Bytes file_bytes(const std::vector<NvmeRange>& ranges);
  // Throws NvmeError naming `dir` unless it is a writable directory.
  static void check_directory(const std::string& dir);
  // Throws NvmeError unless the directory's file system has `bytes` free (statvfs f_bavail).
  static void check_space(const std::string& dir, zsim::Bytes bytes);
  void check_space(zsim::Bytes bytes) const { check_space(dir_, bytes); }

  // Creates the file of buffer `name` holding `ranges` (disjoint; the schedule's uses of it). Returns its id.
  int create(const std::string& name, std::vector<NvmeRange> ranges);
  // Reads / writes range [offset, offset + bytes) of buffer `id`, which must be one of its ranges, for op `op`.
  // `buf` at a multiple of 4096 is transferred directly, anything else through an aligned bounce buffer.
  void read(int id, zsim::Bytes offset, zsim::Bytes bytes, void* buf, const std::string& op);
  void write(int id, zsim::Bytes offset, zsim::Bytes bytes, const void* buf, const std::string& op);

  const std::string& path(int id) const { return files_.at(id).path; }
  std::vector<NvmeRange> ranges(int id) const;
  bool direct() const { return direct_; }  // O_DIRECT accepted by the directory's file system
  const UringFileIo& io() const { return io_; }
  const std::string& dir() const { return dir_; }

 private:
  struct File {
    std::string path;
    int fd = -1;
    std::map<NvmeRange, zsim::Bytes> at;  // range -> file offset
  };
  zsim::Bytes place(const File& f, zsim::Bytes offset, zsim::Bytes bytes, const std::string& op) const;
  void transfer(int id, zsim::Bytes offset, zsim::Bytes bytes, void* buf, bool write, const std::string& op);

  std::string dir_, tag_;
  UringFileIo io_;
  bool direct_ = true;
  std::vector<File> files_;
  std::optional<std::pair<std::string, int>> fault_;  // ZRUN_NVME_FAULT: (op, errno)
};

}  // namespace zrun
