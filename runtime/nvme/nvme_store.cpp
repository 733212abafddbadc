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
  if (files_.at(id).flat) return {{0, files_.at(id).end}};
  std::vector<NvmeRange> r;
  for (const auto& [range, at] : files_.at(id).at) r.push_back(range);
  return r;
}

NvmeStore::~NvmeStore() {
  for (File& f : files_) {
    if (f.fd >= 0) ::close(f.fd);
    ::unlink(f.path.c_str());
  }
}

namespace {

void sort_unique(std::vector<NvmeRange>& ranges) {
  std::sort(ranges.begin(), ranges.end());
  ranges.erase(std::unique(ranges.begin(), ranges.end(),
                           [](const NvmeRange& a, const NvmeRange& b) { return a.offset == b.offset && a.bytes == b.bytes; }),
               ranges.end());
}

}  // namespace

bool NvmeStore::overlapping(std::vector<NvmeRange> ranges) {
  sort_unique(ranges);
  zsim::Bytes end = 0;
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    if (i > 0 && ranges[i].offset < end) return true;
    end = std::max(end, ranges[i].offset + ranges[i].bytes);
  }
  return false;
}

zsim::Bytes NvmeStore::file_bytes(std::vector<NvmeRange> ranges) {
  sort_unique(ranges);
  zsim::Bytes total = 0, end = 0;
  for (const NvmeRange& r : ranges) {
    total += aligned(r.bytes);
    end = std::max(end, r.offset + r.bytes);
  }
  return overlapping(ranges) ? aligned(end) : total;
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
  sort_unique(ranges);
  zsim::Bytes at = 0;
  if (overlapping(ranges)) {  // the file mirrors the buffer
    f.flat = true;
    for (const NvmeRange& r : ranges) f.end = std::max(f.end, r.offset + r.bytes);
    at = aligned(f.end);
  } else {
    for (const NvmeRange& r : ranges) {
      f.at[r] = at;
      at += aligned(r.bytes);
    }
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

zsim::Bytes NvmeStore::place(const File& f, zsim::Bytes offset, zsim::Bytes bytes, const std::string& op) const {
  if (f.flat) {
    if (offset < 0 || bytes < 0 || offset + bytes > f.end)
      throw NvmeError(fmt::format("op '{}': range [{}, +{}) is outside NVMe file '{}' (its ranges end at byte {})", op,
                                  offset, bytes, f.path, f.end));
    return offset;
  }
  const auto it = f.at.find({offset, bytes});
  if (it == f.at.end())
    throw NvmeError(fmt::format("op '{}': range [{}, +{}) is not one of NVMe file '{}''s ranges", op, offset, bytes, f.path));
  return it->second;
}

void NvmeStore::read(int id, zsim::Bytes offset, zsim::Bytes bytes, void* buf, const std::string& op) {
  transfer(id, offset, bytes, buf, false, op);
}

void NvmeStore::write(int id, zsim::Bytes offset, zsim::Bytes bytes, const void* buf, const std::string& op) {
  transfer(id, offset, bytes, const_cast<void*>(buf), true, op);
}

void NvmeStore::transfer(int id, zsim::Bytes offset, zsim::Bytes bytes, void* buf, bool write, const std::string& op) {
  const File& f = files_.at(id);
  const char* what = write ? "write" : "read";
  auto error = [&](const std::string& why) {
    return NvmeError(fmt::format("op '{}': NVMe {} of '{}' ({}, at byte {} of the buffer) failed: {}", op, what, f.path,
                                 zsim::human_bytes(bytes), offset, why));
  };
  const zsim::Bytes pos = place(f, offset, bytes, op);
  struct stat st{};
  if (::fstat(f.fd, &st) != 0) throw error(std::strerror(errno));
  if (st.st_nlink == 0) throw error("the file was removed (its directory deleted?)");
  if (fault_ && fault_->first == op) throw error(std::string(std::strerror(fault_->second)) + " (injected by ZRUN_NVME_FAULT)");
  // Whole 4096-byte blocks straight from / into the caller's buffer where the file position and the pointer are both
  // aligned; everything else through an aligned bounce buffer of whole blocks (at most kBounceBytes at a time). A
  // partial block is read first when written (overlapping layout: read-modify-write keeps a neighbouring range's
  // bytes; disjoint layout: the extent's tail is its own and is written zero-padded).
  constexpr zsim::Bytes kBounceBytes = zsim::Bytes{8} << 20;
  char* const base = static_cast<char*>(buf);
  const zsim::Bytes end = pos + bytes;
  auto& bounce = bounce_;
  auto& bounce_bytes = bounce_bytes_;
  try {
    for (zsim::Bytes p = pos; p < end;) {
      char* const b = base + (p - pos);
      if (p % kAlignBytes == 0 && reinterpret_cast<std::uintptr_t>(b) % f.mem_align == 0 && end - p >= kAlignBytes) {
        const zsim::Bytes n = (end - p) / kAlignBytes * kAlignBytes;
        if (write) io_.write(f.fd, p, n, b);
        else io_.read(f.fd, p, n, b);
        p += n;
        continue;
      }
      const zsim::Bytes first = p / kAlignBytes * kAlignBytes;
      const zsim::Bytes last = std::min(aligned(end), first + kBounceBytes);
      const zsim::Bytes piece_end = std::min(end, last), span = last - first;
      if (span > bounce_bytes) {
        bounce.reset(static_cast<char*>(std::aligned_alloc(kAlignBytes, span)));
        if (!bounce) throw error("out of host memory for the bounce buffer");
        bounce_bytes = span;
      }
      char* const d = bounce.get() + (p - first);
      if (write) {
        const bool partial = p > first || piece_end < last;
        if (partial && f.flat) io_.read(f.fd, first, span, bounce.get());
        else if (partial) std::memset(bounce.get(), 0, span);
        std::memcpy(d, b, piece_end - p);
        io_.write(f.fd, first, span, bounce.get());
      } else {
        io_.read(f.fd, first, span, bounce.get());
        std::memcpy(b, d, piece_end - p);
      }
      p = piece_end;
    }
  } catch (const IoError& e) {
    throw error(e.what());
  }
}

}  // namespace zrun
