#include "sim/sweep/sweep_csv.hpp"

#include <algorithm>
#include <charconv>
#include <istream>
#include <map>
#include <ostream>

#include <fmt/format.h>
#include <fmt/ostream.h>

#include "sim/common/error.hpp"

namespace zsim {

namespace {

constexpr const char* kFixedColumns[] = {"valid",          "fits",           "overflow_tier",
                                         "reason",         "step_s",         "tokens_per_s",
                                         "tflops_per_gpu", "gpu_peak_bytes", "cpu_peak_bytes_per_node",
                                         "cross_node_bytes_per_gpu"};
constexpr std::size_t kFixed = std::size(kFixedColumns);

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += (c == '"') ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string value_of(const std::string& override_text) { return override_text.substr(override_text.find('=') + 1); }

// One CSV record (quoted fields may hold commas, quotes and newlines). Returns false at the end of input.
bool read_record(std::istream& in, std::vector<std::string>& fields, int& line) {
  fields.clear();
  if (in.peek() == std::char_traits<char>::eof()) return false;
  std::string field;
  bool quoted = false;
  for (int c; (c = in.get()) != std::char_traits<char>::eof();) {
    if (quoted) {
      if (c == '"' && in.peek() == '"') {
        field += '"';
        in.get();
      } else if (c == '"') {
        quoted = false;
      } else {
        if (c == '\n') ++line;
        field += static_cast<char>(c);
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.push_back(std::move(field));
      field.clear();
    } else if (c == '\n') {
      ++line;
      break;
    } else {
      field += static_cast<char>(c);
    }
  }
  fields.push_back(std::move(field));
  return true;
}

template <typename T>
T number(const std::string& text, const SourceLocation& where) {
  T v{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    throw InputError(where, fmt::format("'{}' is not a number", text));
  return v;
}

bool flag(const std::string& text, const SourceLocation& where) {
  if (text != "0" && text != "1") throw InputError(where, fmt::format("'{}' is not 0 or 1", text));
  return text == "1";
}

}  // namespace

void write_sweep_csv(std::ostream& out, const SweepResult& r) {
  out << "point,";
  for (const auto& a : r.axes) out << csv_field(a.key) << ',';
  for (std::size_t c = 0; c < kFixed; ++c) out << kFixedColumns[c] << (c + 1 < kFixed ? ',' : '\n');
  for (const auto& p : r.points) {
    out << p.index << ',';
    for (const auto& o : p.overrides) out << csv_field(value_of(o)) << ',';
    const std::string reason = p.valid ? p.rejection : p.invalid_reason;
    fmt::print(out, "{},{},{},{},{},{},{},{},{},{}\n", p.valid ? 1 : 0, p.fits ? 1 : 0, p.overflow_tier,
               csv_field(reason), p.step_s, p.tokens_per_s, p.tflops_per_gpu, p.gpu_peak_bytes, p.cpu_peak_bytes,
               p.cross_node_bytes_per_gpu);
  }
}

SweepResult read_sweep_csv(std::istream& in, const std::string& file) {
  int line = 1;
  std::vector<std::string> header;
  if (!read_record(in, header, line)) throw InputError({file, 1, 1, ""}, "empty file: expected a zsim sweep CSV");
  const bool shaped = header.size() >= kFixed + 1 && header.front() == "point" &&
                      std::equal(header.end() - kFixed, header.end(), std::begin(kFixedColumns));
  if (!shaped)
    throw InputError({file, 1, 1, ""}, "not a zsim sweep CSV (expected point, the axis keys, then valid,fits,...)");
  SweepResult r;
  for (std::size_t c = 1; c + kFixed < header.size(); ++c) r.axes.push_back({header[c], {}});
  const std::size_t n_axes = r.axes.size();
  std::vector<std::string> f;
  for (int row_line = line; read_record(in, f, line); row_line = line) {
    if (f.size() == 1 && f[0].empty()) continue;  // a trailing blank line
    const auto at = [&](std::size_t c) { return SourceLocation{file, row_line, 0, header[c]}; };
    if (f.size() != header.size())
      throw InputError({file, row_line, 0, ""},
                       fmt::format("{} fields where the header has {}", f.size(), header.size()));
    SweepPoint p;
    p.index = number<std::size_t>(f[0], at(0));
    for (std::size_t a = 0; a < n_axes; ++a) {
      p.overrides.push_back(r.axes[a].key + "=" + f[1 + a]);
      auto& values = r.axes[a].values;
      if (std::find(values.begin(), values.end(), f[1 + a]) == values.end()) values.push_back(f[1 + a]);
    }
    const std::size_t b = 1 + n_axes;
    p.valid = flag(f[b], at(b));
    p.fits = flag(f[b + 1], at(b + 1));
    p.overflow_tier = f[b + 2];
    (p.valid ? p.rejection : p.invalid_reason) = f[b + 3];
    p.step_s = number<double>(f[b + 4], at(b + 4));
    p.tokens_per_s = number<double>(f[b + 5], at(b + 5));
    p.tflops_per_gpu = number<double>(f[b + 6], at(b + 6));
    p.gpu_peak_bytes = number<Bytes>(f[b + 7], at(b + 7));
    p.cpu_peak_bytes = number<Bytes>(f[b + 8], at(b + 8));
    p.cross_node_bytes_per_gpu = number<Bytes>(f[b + 9], at(b + 9));
    r.points.push_back(std::move(p));
  }
  return r;
}

SweepResult merge_sweeps(const std::vector<SweepResult>& parts, const std::vector<std::string>& files) {
  const SourceLocation merge{"zsim sweep merge", 0, 0, ""};
  if (parts.empty()) throw InputError(merge, "no CSV to merge");
  SweepResult r;
  std::map<std::size_t, std::size_t> from;  // point index -> part it came from
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const auto& part = parts[i];
    const std::string name = i < files.size() ? files[i] : fmt::format("part {}", i + 1);
    if (i == 0) {
      r.axes = part.axes;
      for (auto& a : r.axes) a.values.clear();
    }
    const bool same_keys = std::equal(part.axes.begin(), part.axes.end(), r.axes.begin(), r.axes.end(),
                                      [](const GridAxis& x, const GridAxis& y) { return x.key == y.key; });
    if (!same_keys) throw InputError({name, 1, 1, ""}, fmt::format("its axes differ from those of {}", files.at(0)));
    for (const auto& p : part.points) {
      const auto [it, inserted] = from.emplace(p.index, i);
      if (!inserted)
        throw InputError({name, 0, 0, ""},
                         fmt::format("point {} is also in {}: each point must come from one shard", p.index,
                                     it->second < files.size() ? files[it->second] : "another part"));
      r.points.push_back(p);
    }
  }
  std::sort(r.points.begin(), r.points.end(), [](const auto& a, const auto& b) { return a.index < b.index; });
  for (std::size_t i = 0; i < r.points.size(); ++i)
    if (r.points[i].index != i)
      throw InputError(merge, fmt::format("point {} is in none of the files (is a shard's CSV missing?)", i));
  for (const auto& p : r.points)  // axis values in order of first appearance in grid order
    for (std::size_t a = 0; a < r.axes.size(); ++a) {
      auto& values = r.axes[a].values;
      const std::string v = value_of(p.overrides[a]);
      if (std::find(values.begin(), values.end(), v) == values.end()) values.push_back(v);
    }
  return r;
}

}  // namespace zsim
