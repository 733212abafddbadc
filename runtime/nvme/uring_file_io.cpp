#include "runtime/nvme/uring_file_io.hpp"

#include <liburing.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace zrun {

struct UringFileIo::Ring {
  io_uring ring{};
};

UringFileIo::UringFileIo(bool force_fallback) {
  if (force_fallback) {
    reason_ = "pread / pwrite asked for";
    return;
  }
  auto r = std::make_unique<Ring>();
  const int e = io_uring_queue_init(kQueueDepth, &r->ring, 0);
  if (e < 0) {
    reason_ = fmt::format("io_uring_queue_init failed: {}", std::strerror(-e));
    return;
  }
  ring_ = std::move(r);
}

UringFileIo::~UringFileIo() {
  if (ring_) io_uring_queue_exit(&ring_->ring);
}

void UringFileIo::read(int fd, zsim::Bytes offset, zsim::Bytes bytes, void* buf) {
  transfer(fd, offset, bytes, buf, false);
}

void UringFileIo::write(int fd, zsim::Bytes offset, zsim::Bytes bytes, const void* buf) {
  transfer(fd, offset, bytes, const_cast<void*>(buf), true);
}

void UringFileIo::transfer(int fd, zsim::Bytes offset, zsim::Bytes bytes, void* buf, bool write) {
  auto* p = static_cast<char*>(buf);
  auto fail = [&](int err, zsim::Bytes at, zsim::Bytes got, zsim::Bytes want) {
    if (err != 0) throw IoError(std::strerror(err), err);
    throw IoError(fmt::format("short {} at offset {}: {} of {} bytes", write ? "write" : "read", at, got, want), EIO);
  };
  if (!ring_) {
    for (zsim::Bytes done = 0; done < bytes;) {
      const zsim::Bytes n = std::min(kRequestBytes, bytes - done);
      const ssize_t r = write ? ::pwrite(fd, p + done, n, offset + done) : ::pread(fd, p + done, n, offset + done);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) fail(r < 0 ? errno : 0, offset + done, 0, n);
      done += r;
    }
    return;
  }
  io_uring& ring = ring_->ring;
  zsim::Bytes queued = 0;   // bytes handed to the ring
  unsigned in_flight = 0;
  int first_error = 0;
  zsim::Bytes short_at = -1;
  while (queued < bytes || in_flight > 0) {
    while (queued < bytes && in_flight < kQueueDepth && first_error == 0) {
      io_uring_sqe* sqe = io_uring_get_sqe(&ring);
      if (!sqe) break;
      const zsim::Bytes n = std::min(kRequestBytes, bytes - queued);
      if (write) io_uring_prep_write(sqe, fd, p + queued, static_cast<unsigned>(n), offset + queued);
      else io_uring_prep_read(sqe, fd, p + queued, static_cast<unsigned>(n), offset + queued);
      io_uring_sqe_set_data64(sqe, static_cast<std::uint64_t>(n));
      queued += n;
      ++in_flight;
    }
    if (in_flight == 0) break;  // an error stopped queueing and everything queued has completed
    const int s = io_uring_submit_and_wait(&ring, 1);
    if (s < 0 && s != -EINTR) throw IoError(fmt::format("io_uring_submit failed: {}", std::strerror(-s)), -s);
    io_uring_cqe* cqe = nullptr;
    unsigned head = 0, seen = 0;
    io_uring_for_each_cqe(&ring, head, cqe) {
      const auto want = static_cast<zsim::Bytes>(io_uring_cqe_get_data64(cqe));
      if (cqe->res < 0 && first_error == 0) first_error = -cqe->res;
      else if (cqe->res >= 0 && cqe->res != want && first_error == 0) {
        first_error = -1;
        short_at = cqe->res;
      }
      ++seen;
    }
    io_uring_cq_advance(&ring, seen);
    in_flight -= seen;
    if (first_error != 0 && queued < bytes) queued = bytes;  // queue no more; drain what is in flight
  }
  if (first_error > 0) fail(first_error, offset, 0, bytes);
  if (first_error < 0) fail(0, offset, short_at, kRequestBytes);
}

}  // namespace zrun
