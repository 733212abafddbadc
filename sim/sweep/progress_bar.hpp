// A one-line progress bar on stderr, drawn only when stderr is a terminal (never into a pipe or file).
#pragma once
#include <cstddef>
#include <cstdio>

#include <unistd.h>

namespace zsim {

class ProgressBar {
 public:
  explicit ProgressBar(bool enabled = isatty(fileno(stderr)) != 0) : enabled_(enabled) {}
  void update(std::size_t done, std::size_t total) {
    if (!enabled_ || total == 0) return;
    const int width = 40;
    const int filled = static_cast<int>(width * done / total);
    std::fprintf(stderr, "\r[%.*s%*s] %zu/%zu", filled, "########################################",
                 width - filled, "", done, total);
    if (done == total) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  }

 private:
  bool enabled_;
};

}  // namespace zsim
