#include "runtime/nvme/nvme_store.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "sim/report/human_units.hpp"

namespace zrun {

namespace {

std::optional<std::pair<std::string, int>> parse_fault(const char* spec) {
  if (!spec || !*spec) return std::nullopt;
  std::string s(spec), op;
  int err = 0;
  for (std::size_t b = 0; b <= s.size();) {
    const std::size_t e = std::min(s.find(',', b), s.size());
    const std::string kv = s.substr(b, e - b);
    if (kv.rfind("op=", 0) == 0) op = kv.substr(3);
    else if (kv == "errno=ENOSPC") err = ENOSPC;
    else if (kv == "errno=EIO") err = EIO;
    else throw std::invalid_argument(fmt::format("ZRUN_NVME_FAULT: '{}' is not op=NAME or errno=ENOSPC|EIO", kv));
    b = e + 1;
  }
  if (op.empty() || err == 0) throw std::invalid_argument("ZRUN_NVME_FAULT needs op=NAME and errno=ENOSPC|EIO");
  return std::make_pair(op, err);
}

// The memory alignment O_DIRECT transfers of `fd` need: the file system's (statx STATX_DIOALIGN, Linux 6.1), or
// NvmeStore::kAlignBytes where the kernel or the file system does not say.
zsim::Bytes dio_memory_alignment(int fd) {
#ifdef STATX_DIOALIGN
  struct statx sx{};
  if (::statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 && (sx.stx_mask & STATX_DIOALIGN) &&
      sx.stx_dio_mem_align > 0 && sx.stx_dio_mem_align <= NvmeStore::kAlignBytes)
    return sx.stx_dio_mem_align;
#endif
  return NvmeStore::kAlignBytes;
}

}  // namespace

NvmeStore::NvmeStore(std::string dir, std::string tag, bool force_fallback_io)
    : dir_(std::move(dir)), tag_(std::move(tag)), io_(force_fallback_io),
      fault_(parse_fault(std::getenv("ZRUN_NVME_FAULT"))) {
  check_directory(dir_);
}

void NvmeStore::check_directory(const std::string& dir) {
  if (dir.empty()) throw NvmeError("NVMe offload needs a directory: --nvme-dir DIR or the scenario's nvme_path");
  struct stat st{};
  if (::stat(dir.c_str(), &st) != 0)
    throw NvmeError(fmt::format("NVMe directory '{}': {}", dir, std::strerror(errno)));
  if (!S_ISDIR(st.st_mode)) throw NvmeError(fmt::format("NVMe directory '{}' is not a directory", dir));
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw NvmeError(fmt::format("NVMe directory '{}' is not writable: {}", dir, std::strerror(errno)));
}

std::vector<NvmeRange> NvmeStore::ranges(int id) const {
  std::vector<NvmeRange> r;
  for (const Piece& p : files_.at(id).pieces) r.push_back({p.offset, p.bytes});
  return r;
}

zsim::Bytes NvmeStore::file_offset(int id, zsim::Bytes offset) const {
  for (const Piece& p : files_.at(id).pieces)
    if (p.offset == offset) return p.at;
  throw std::out_of_range(fmt::format("no piece of NVMe file '{}' starts at byte {}", files_.at(id).path, offset));
}

NvmeStore::~NvmeStore() {
  for (File& f : files_) {
    if (f.fd >= 0) ::close(f.fd);
    ::unlink(f.path.c_str());
  }
}

std::vector<NvmeRange> NvmeStore::pieces(std::vector<NvmeRange> ranges) {
  std::map<zsim::Bytes, int> opens;  // cut -> ranges starting there minus ranges ending there
  for (const NvmeRange& r : ranges)
    if (r.bytes > 0) ++opens[r.offset], --opens[r.offset + r.bytes];
  std::vector<NvmeRange> out;
  int open = 0;
  for (auto it = opens.begin(); it != opens.end(); ++it) {
    open += it->second;
    const auto next = std::next(it);
    if (open > 0 && next != opens.end()) out.push_back({it->first, next->first - it->first});
  }
  return out;
}

zsim::Bytes NvmeStore::file_bytes(std::vector<NvmeRange> ranges) {
  zsim::Bytes total = 0;
  for (const NvmeRange& p : pieces(std::move(ranges))) total += aligned(p.bytes);
  return total;
}

void NvmeStore::check_space(const std::string& dir, zsim::Bytes bytes) {
  struct statvfs v{};
  if (::statvfs(dir.c_str(), &v) != 0)
    throw NvmeError(fmt::format("NVMe directory '{}': statvfs: {}", dir, std::strerror(errno)));
  const zsim::Bytes free_bytes = static_cast<zsim::Bytes>(v.f_bavail) * static_cast<zsim::Bytes>(v.f_frsize);
  if (free_bytes < bytes)
    throw NvmeError(fmt::format("NVMe directory '{}' has {} free; the schedule's NVMe buffers need {}", dir,
                                zsim::human_bytes(free_bytes), zsim::human_bytes(bytes)));
}

int NvmeStore::create(const std::string& name, std::vector<NvmeRange> ranges) {
  File f;
  f.path = fmt::format("{}/zrun.{}.{}", dir_, tag_, name);
  zsim::Bytes at = 0;
  for (const NvmeRange& p : pieces(std::move(ranges))) {
    f.pieces.push_back({p.offset, p.bytes, at});
    at += aligned(p.bytes);
  }
  f.fd = ::open(f.path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_DIRECT, 0600);
  bool direct = f.fd >= 0;
  if (f.fd < 0 && errno == EINVAL) {  // tmpfs and some overlay file systems refuse O_DIRECT
    f.fd = ::open(f.path.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    direct_ = direct = false;
  }
  if (f.fd < 0) throw NvmeError(fmt::format("cannot create NVMe file '{}': {}", f.path, std::strerror(errno)));
  f.mem_align = direct ? dio_memory_alignment(f.fd) : 1;
  files_.push_back(f);  // from here on the destructor removes it
  if (at > 0) {
    const int e = ::posix_fallocate(f.fd, 0, at);
    if (e != 0)
      throw NvmeError(fmt::format("cannot allocate {} for NVMe file '{}': {}", zsim::human_bytes(at), f.path,
                                  std::strerror(e)));
  }
  return static_cast<int>(files_.size()) - 1;
}

std::vector<NvmeStore::Span> NvmeStore::place(const File& f, const NvmeTransfer& t, const std::string& op) const {
  const zsim::Bytes end = t.offset + t.bytes;
  auto outside = [&] {
    const zsim::Bytes last = f.pieces.empty() ? 0 : f.pieces.back().offset + f.pieces.back().bytes;
    return NvmeError(fmt::format("op '{}': range [{}, +{}) is not inside NVMe file '{}''s ranges (they end at byte {})",
                                 op, t.offset, t.bytes, f.path, last));
  };
  if (t.offset < 0 || t.bytes < 0) throw outside();
  // the first piece that ends after the range's start
  auto it = std::upper_bound(f.pieces.begin(), f.pieces.end(), t.offset,
                             [](zsim::Bytes at, const Piece& p) { return at < p.offset + p.bytes; });
  std::vector<Span> out;
  for (zsim::Bytes cur = t.offset; cur < end; ++it) {
    if (it == f.pieces.end() || it->offset > cur) throw outside();  // a gap no range of the buffer covers
    const zsim::Bytes to = std::min(end, it->offset + it->bytes);
    out.push_back({it->at + (cur - it->offset), to - cur, static_cast<char*>(t.buf) + (cur - t.offset)});
    cur = to;
  }
  return out;
}

void NvmeStore::read(int id, zsim::Bytes offset, zsim::Bytes bytes, void* buf, const std::string& op) {
  transfer(id, {{offset, bytes, buf}}, false, op);
}

void NvmeStore::write(int id, zsim::Bytes offset, zsim::Bytes bytes, const void* buf, const std::string& op) {
  transfer(id, {{offset, bytes, const_cast<void*>(buf)}}, true, op);
}

void NvmeStore::read(int id, const std::vector<NvmeTransfer>& ranges, const std::string& op) {
  transfer(id, ranges, false, op);
}

void NvmeStore::write(int id, const std::vector<NvmeTransfer>& ranges, const std::string& op) {
  transfer(id, ranges, true, op);
}

void NvmeStore::transfer(int id, const std::vector<NvmeTransfer>& ranges, bool write, const std::string& op) {
  const File& f = files_.at(id);
  zsim::Bytes total = 0;
  for (const NvmeTransfer& t : ranges) total += t.bytes;
  auto error = [&](const std::string& why) {
    const std::string where = ranges.size() == 1 ? fmt::format("at byte {} of the buffer", ranges[0].offset)
                                                 : fmt::format("{} ranges of the buffer", ranges.size());
    return NvmeError(fmt::format("op '{}': NVMe {} of '{}' ({}, {}) failed: {}", op, write ? "write" : "read", f.path,
                                 zsim::human_bytes(total), where, why));
  };
  std::vector<Span> spans;
  for (const NvmeTransfer& t : ranges) {
    const std::vector<Span> s = place(f, t, op);
    spans.insert(spans.end(), s.begin(), s.end());
  }
  struct stat st{};
  if (::fstat(f.fd, &st) != 0) throw error(std::strerror(errno));
  if (st.st_nlink == 0) throw error("the file was removed (its directory deleted?)");
  if (fault_ && fault_->first == op) throw error(std::string(std::strerror(fault_->second)) + " (injected by ZRUN_NVME_FAULT)");
  // Whole 4096-byte blocks where the file position and the host pointer are both aligned go straight, all in one
  // batch; the rest of each span (a partial tail block, a misaligned pointer or position) through the bounce buffer.
  std::vector<UringFileIo::Range> direct;
  std::vector<Span> rest;
  for (const Span& s : spans) {
    const bool straight = s.at % kAlignBytes == 0 && reinterpret_cast<std::uintptr_t>(s.buf) % f.mem_align == 0;
    const zsim::Bytes n = straight ? s.bytes / kAlignBytes * kAlignBytes : 0;
    if (n > 0) direct.push_back({f.fd, s.at, n, s.buf});
    if (n < s.bytes) rest.push_back({s.at + n, s.bytes - n, s.buf + n});
  }
  try {
    if (!direct.empty()) io_.transfer(direct, write);
    for (const Span& s : rest) bounce(f, s, write);
  } catch (const IoError& e) {
    throw error(e.what());
  }
}

// One span through the aligned bounce buffer, whole blocks at most kBounceBytes at a time. A write reads a block it
// covers partly first, so the block's other bytes (a neighbour's, in a piece a range cuts) stay.
void NvmeStore::bounce(const File& f, const Span& s, bool write) {
  constexpr zsim::Bytes kBounceBytes = zsim::Bytes{8} << 20;
  const zsim::Bytes end = s.at + s.bytes;
  for (zsim::Bytes p = s.at; p < end;) {
    char* const b = s.buf + (p - s.at);
    const zsim::Bytes first = p / kAlignBytes * kAlignBytes;
    const zsim::Bytes last = std::min(aligned(end), first + kBounceBytes);
    const zsim::Bytes piece_end = std::min(end, last), span = last - first;
    if (span > bounce_bytes_) {
      bounce_.reset(static_cast<char*>(std::aligned_alloc(kAlignBytes, span)));
      if (!bounce_) throw IoError("out of host memory for the bounce buffer", ENOMEM);
      bounce_bytes_ = span;
    }
    char* const d = bounce_.get() + (p - first);
    if (write) {
      if (p > first) io_.read(f.fd, first, kAlignBytes, bounce_.get());
      if (piece_end < last && (span > kAlignBytes || p == first))
        io_.read(f.fd, last - kAlignBytes, kAlignBytes, bounce_.get() + span - kAlignBytes);
      std::memcpy(d, b, piece_end - p);
      io_.write(f.fd, first, span, bounce_.get());
    } else {
      io_.read(f.fd, first, span, bounce_.get());
      std::memcpy(b, d, piece_end - p);
    }
    p = piece_end;
  }
}

}  // namespace zrun
