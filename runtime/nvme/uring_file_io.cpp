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
  transfer({{fd, offset, bytes, buf}}, false);
}

void UringFileIo::write(int fd, zsim::Bytes offset, zsim::Bytes bytes, const void* buf) {
  transfer({{fd, offset, bytes, const_cast<void*>(buf)}}, true);
}

void UringFileIo::transfer(const std::vector<Range>& ranges, bool write) {
  auto fail = [&](int err, zsim::Bytes at, zsim::Bytes got, zsim::Bytes want) {
    if (err != 0) throw IoError(std::strerror(err), err);
    throw IoError(fmt::format("short {} at offset {}: {} of {} bytes", write ? "write" : "read", at, got, want), EIO);
  };
  if (!ring_) {
    for (const Range& g : ranges) {
      auto* p = static_cast<char*>(g.buf);
      for (zsim::Bytes done = 0; done < g.bytes;) {
        const zsim::Bytes n = std::min(kRequestBytes, g.bytes - done);
        const ssize_t r =
            write ? ::pwrite(g.fd, p + done, n, g.offset + done) : ::pread(g.fd, p + done, n, g.offset + done);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) fail(r < 0 ? errno : 0, g.offset + done, 0, n);
        done += r;
      }
    }
    return;
  }
  io_uring& ring = ring_->ring;
  std::size_t range = 0;    // the range being handed to the ring
  zsim::Bytes queued = 0;   // its bytes handed so far
  unsigned in_flight = 0;
  int first_error = 0;
  zsim::Bytes error_at = -1, short_got = 0, short_want = 0;
  struct Request {
    zsim::Bytes at, bytes;  // where in its file, and how many bytes its completion must say
  };
  std::vector<Request> requests;
  auto more = [&] {
    while (range < ranges.size() && queued >= ranges[range].bytes) ++range, queued = 0;
    return range < ranges.size();
  };
  while (more() || in_flight > 0) {
    while (first_error == 0 && in_flight < kQueueDepth && more()) {
      io_uring_sqe* sqe = io_uring_get_sqe(&ring);
      if (!sqe) break;
      const Range& g = ranges[range];
      const zsim::Bytes n = std::min(kRequestBytes, g.bytes - queued);
      char* const p = static_cast<char*>(g.buf) + queued;
      if (write) io_uring_prep_write(sqe, g.fd, p, static_cast<unsigned>(n), g.offset + queued);
      else io_uring_prep_read(sqe, g.fd, p, static_cast<unsigned>(n), g.offset + queued);
      io_uring_sqe_set_data64(sqe, requests.size());
      requests.push_back({g.offset + queued, n});
      queued += n;
      ++in_flight;
    }
    if (in_flight == 0) break;  // an error stopped queueing and everything queued has completed
    const int s = io_uring_submit_and_wait(&ring, 1);
    if (s < 0 && s != -EINTR) throw IoError(fmt::format("io_uring_submit failed: {}", std::strerror(-s)), -s);
    io_uring_cqe* cqe = nullptr;
    unsigned head = 0, seen = 0;
    io_uring_for_each_cqe(&ring, head, cqe) {
      const Request& q = requests[io_uring_cqe_get_data64(cqe)];
      const zsim::Bytes want = q.bytes, at = q.at;
      if (cqe->res < 0 && first_error == 0) first_error = -cqe->res, error_at = at;
      else if (cqe->res >= 0 && cqe->res != want && first_error == 0) {
        first_error = -1;
        error_at = at, short_got = cqe->res, short_want = want;
      }
      ++seen;
    }
    io_uring_cq_advance(&ring, seen);
    in_flight -= seen;
    if (first_error != 0) range = ranges.size();  // queue no more; drain what is in flight
  }
  if (first_error > 0) fail(first_error, error_at, 0, 0);
  if (first_error < 0) fail(0, error_at, short_got, short_want);
}

}  // namespace zrun
