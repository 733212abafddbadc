#include "sim/report/human_units.hpp"

#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

namespace zsim {

namespace {

// v >= 1 printed with three significant digits.
std::string three_digits(double v) {
  if (v < 9.995) return fmt::format("{:.2f}", v);
  if (v < 99.95) return fmt::format("{:.1f}", v);
  return fmt::format("{:.0f}", v);
}

}  // namespace

std::string human_bytes(Bytes b) {
  const char* sign = b < 0 ? "-" : "";
  const double v = std::fabs(static_cast<double>(b));
  if (v < 1024) return fmt::format("{}{} B", sign, static_cast<long long>(v));
  static const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double x = v / 1024;
  int u = 0;
  while (x >= 1023.995 && u < 5) {  // 1023.995 would print as "1024"
    x /= 1024;
    ++u;
  }
  return fmt::format("{}{} {}", sign, three_digits(x), kUnits[u]);
}

std::string human_count(std::int64_t n) {
  const char* sign = n < 0 ? "-" : "";
  const double v = std::fabs(static_cast<double>(n));
  if (v < 1000) return fmt::format("{}{}", sign, static_cast<long long>(v));
  static const char* kSuffix[] = {"k", "M", "B", "T", "P"};
  double x = v / 1000;
  int u = 0;
  while (x >= 999.95 && u < 4) {
    x /= 1000;
    ++u;
  }
  return fmt::format("{}{}{}", sign, three_digits(x), kSuffix[u]);
}

}  // namespace zsim
