// Block I/O of one file for the NVMe tier: reads and writes of aligned ranges through io_uring (liburing, linked
// statically), cut into 1 MiB requests kept in flight together. Where io_uring is unavailable (a container's seccomp
// profile, an old kernel) the same calls fall back to pread / pwrite, and `uses_io_uring()` says so. A failed or short
// request throws IoError with the errno text.
#pragma once
#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/common/units.hpp"

namespace zrun {

struct IoError : std::runtime_error {
  IoError(const std::string& what, int err) : std::runtime_error(what), error(err) {}
  int error;  // errno of the failure
};

class UringFileIo {
 public:
  static constexpr zsim::Bytes kRequestBytes = 1 << 20;
  static constexpr unsigned kQueueDepth = 32;

  // force_fallback: pread / pwrite even where io_uring works (tests, comparisons).
  explicit UringFileIo(bool force_fallback = false);
  ~UringFileIo();
  UringFileIo(const UringFileIo&) = delete;
  UringFileIo& operator=(const UringFileIo&) = delete;

  bool uses_io_uring() const { return ring_ != nullptr; }
  const std::string& fallback_reason() const { return reason_; }  // why not io_uring ("" when it is used)

  // Reads / writes `bytes` at `offset` of fd from / to `buf`; throws IoError on an error or a short transfer.
  void read(int fd, zsim::Bytes offset, zsim::Bytes bytes, void* buf);
  void write(int fd, zsim::Bytes offset, zsim::Bytes bytes, const void* buf);

  // One range of a file and the host memory it moves from / into.
  struct Range {
    int fd = -1;
    zsim::Bytes offset = 0, bytes = 0;
    void* buf = nullptr;
  };
  // All of `ranges` in one batch: their requests are kept in flight together (DeepSpeed's swap_in submits a read per
  // parameter before it waits), in order; returns when every one has completed. Throws IoError as read / write.
  void transfer(const std::vector<Range>& ranges, bool write);

 private:
  struct Ring;
  std::unique_ptr<Ring> ring_;
  std::string reason_;
};

}  // namespace zrun
