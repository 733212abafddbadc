#include "sim/common/atomic_file.hpp"

#include <cstdio>
#include <filesystem>
#include <unistd.h>

#include "sim/common/error.hpp"

namespace zsim {

void write_file_atomically(const std::string& path, const std::string& contents) {
  namespace fs = std::filesystem;
  fs::path target(path);
  fs::path dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  std::string temp = (dir / ("." + target.filename().string() + ".tmp-XXXXXX")).string();
  int fd = ::mkstemp(temp.data());
  if (fd < 0) throw InputError({path, 0, 0, ""}, "cannot create an output file in '" + dir.string() + "'");
  const char* p = contents.data();
  size_t left = contents.size();
  bool ok = true;
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n <= 0) {
      ok = false;
      break;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  ok = (::close(fd) == 0) && ok;
  if (ok) ok = std::rename(temp.c_str(), path.c_str()) == 0;
  if (!ok) {
    std::remove(temp.c_str());
    throw InputError({path, 0, 0, ""}, "cannot write output file");
  }
}

}  // namespace zsim
