#include "sim/scenario/scalar_values.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>

namespace zsim {
namespace {

std::string trim_and_strip_underscores(std::string_view text) {
  std::string s;
  for (char c : text)
    if (c != '_') s.push_back(c);
  auto not_space = [](unsigned char c) { return !std::isspace(c); };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  return s;
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

bool is_auto(std::string_view text) { return text == "auto"; }

std::optional<double> parse_real(std::string_view text) {
  std::string s = trim_and_strip_underscores(text);
  if (s.empty()) return std::nullopt;
  // Only plain decimal/scientific literals: no hex floats, no inf/nan.
  for (char c : s)
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == 'E' || c == '+' ||
          c == '-'))
      return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<std::int64_t> parse_integer(std::string_view text) {
  std::string s = trim_and_strip_underscores(text);
  if (s.empty()) return std::nullopt;
  std::int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc() && ptr == s.data() + s.size()) return v;
  auto r = parse_real(s);
  if (!r) return std::nullopt;
  // Exactly representable integers only, within int64 range (2^63 is not).
  if (*r != std::floor(*r) || std::fabs(*r) >= 9.2e18) return std::nullopt;
  return static_cast<std::int64_t>(*r);
}

std::optional<Bytes> parse_bytes(std::string_view text) {
  std::string s = trim_and_strip_underscores(text);
  if (auto v = parse_integer(s)) return v;
  size_t split = s.size();
  while (split > 0 && std::isalpha(static_cast<unsigned char>(s[split - 1]))) --split;
  if (split == s.size() || split == 0) return std::nullopt;
  std::string unit = lower(s.substr(split));
  double scale = 0;
  if (unit == "b") scale = 1;
  else if (unit == "kb") scale = 1e3;
  else if (unit == "mb") scale = 1e6;
  else if (unit == "gb") scale = 1e9;
  else if (unit == "tb") scale = 1e12;
  else if (unit == "kib") scale = static_cast<double>(kKiB);
  else if (unit == "mib") scale = static_cast<double>(kMiB);
  else if (unit == "gib") scale = static_cast<double>(kGiB);
  else if (unit == "tib") scale = static_cast<double>(kGiB) * 1024.0;
  else return std::nullopt;
  auto number = parse_real(s.substr(0, split));
  if (!number) return std::nullopt;
  double bytes = *number * scale;
  if (!std::isfinite(bytes) || std::fabs(bytes) >= 9.2e18) return std::nullopt;
  return static_cast<Bytes>(std::llround(bytes));
}

std::optional<bool> parse_bool(std::string_view text) {
  std::string s = lower(trim_and_strip_underscores(text));
  if (s == "true" || s == "yes" || s == "on") return true;
  if (s == "false" || s == "no" || s == "off") return false;
  return std::nullopt;
}

}  // namespace zsim
