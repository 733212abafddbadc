#include "sim/scenario/flat_config.hpp"

#include <algorithm>
#include <cctype>

#include "sim/scenario/key_schema.hpp"
#include "sim/scenario/scalar_values.hpp"
#include "sim/scenario/yaml_document.hpp"

namespace zsim {
namespace {

bool is_overridden(const std::set<std::string>& overridden, const std::string& path) {
  for (const auto& o : overridden)
    if (path == o || path.compare(0, o.size() + 1, o + ".") == 0) return true;
  return false;
}

// A refused key's value that changes nothing: null, an empty block, a block with enabled: false, or one of
// the comma-separated `harmless` values (booleans and numbers compared as written, case-insensitively).
bool is_harmless(const YAML::Node& value, const std::string& harmless) {
  if (value.IsNull()) return true;
  if (value.IsMap()) {
    if (value.size() == 0) return true;
    const YAML::Node enabled = value["enabled"];
    return enabled && enabled.IsScalar() && (enabled.Scalar() == "false" || enabled.Scalar() == "False");
  }
  if (!value.IsScalar()) return false;
  std::string v = value.Scalar();
  for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  size_t start = 0;
  while (start <= harmless.size()) {
    const size_t end = std::min(harmless.find(',', start), harmless.size());
    if (!harmless.empty() && harmless.substr(start, end - start) == v) return true;
    start = end + 1;
  }
  return false;
}

std::string join(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

}  // namespace

void FlatConfig::record(const std::string& path, const YAML::Node& node, const SourceLocation& where) {
  values_[path] = FlatValue{node, where};
}

void FlatConfig::add_block(const YAML::Node& block, const std::string& path, const std::string& file,
                           const std::set<std::string>& overridden, std::vector<std::string>& warnings) {
  auto loc = [&](const YAML::Node& n, const std::string& p) {
    if (is_overridden(overridden, p)) return SourceLocation{"--set", 0, 0, p};
    return location_of(n, file, p);
  };
  if (!block.IsMap())
    throw InputError(loc(block, path), "expected a block of keys, got " + describe_node(block));
  if (!path.empty()) record(path, block, loc(block, path));
  std::set<std::string> seen;
  std::map<std::string, std::string> canonical_seen;  // canonical path -> the name it was written as
  for (auto it = block.begin(); it != block.end(); ++it) {
    // Copies: the iterator's pair is a temporary, references to its members would dangle.
    const YAML::Node key_node = it->first;
    const YAML::Node value = it->second;
    if (!key_node.IsScalar())
      throw InputError(loc(key_node, path), "a key must be a plain name, got " + describe_node(key_node));
    const std::string key = key_node.Scalar();
    const std::string written_path = join(path, key);
    if (!seen.insert(key).second)
      throw InputError(loc(key_node, written_path), "duplicate key '" + key + "'");
    auto info = find_key(written_path);
    if (!info) throw InputError(loc(key_node, written_path), unknown_key_message(path, key));
    if (info->status == KeyStatus::refused && !is_harmless(value, info->harmless))
      throw InputError(loc(key_node, written_path),
                       "key '" + written_path + "' " + info->why + "; zsim does not model it, so it accepts only " +
                           (std::string(info->harmless).empty() ? std::string("null") : info->harmless) +
                           " here (docs/scenario.md, \"Keys zsim refuses\")");
    if (info->status != KeyStatus::modelled) {
      SourceLocation w = loc(key_node, written_path);
      std::string at = w.file + (w.line > 0 ? ":" + std::to_string(w.line) + ":" + std::to_string(w.column) : "");
      warnings.push_back(at + ": warning: key '" + written_path +
                         "' is accepted by DeepSpeed but not modelled by zsim; ignored");
      continue;
    }
    if (value.IsNull()) continue;  // "key:" or JSON null: as if absent (DeepSpeed's Optional = None)
    const std::string& canonical = info->canonical_path;
    auto [prior, fresh] = canonical_seen.emplace(canonical, key);
    if (!fresh)
      throw InputError(loc(key_node, written_path),
                       "'" + key + "' and '" + prior->second + "' are the same DeepSpeed key; give one");
    if (info->kind == KeyKind::map) {
      add_block(value, canonical, file, overridden, warnings);
    } else if (info->kind == KeyKind::scalar_or_map) {
      if (value.IsScalar()) {
        record(canonical, value, loc(value, written_path));
        record(canonical + ".preset", value, loc(value, written_path));
      } else {
        add_block(value, canonical, file, overridden, warnings);
      }
    } else {
      if (!value.IsScalar())
        throw InputError(loc(value, written_path), "expected a single value, got " + describe_node(value));
      SourceLocation w = loc(value, written_path);
      w.key_path = canonical;
      record(canonical, value, w);
    }
  }
}

void FlatConfig::overlay(const FlatConfig& top) {
  if (top.has("cluster.gpu.preset")) {
    for (auto it = values_.begin(); it != values_.end();) {
      if (it->first.rfind("cluster.gpu", 0) == 0) it = values_.erase(it);
      else ++it;
    }
  }
  for (const auto& [path, value] : top.values_) values_[path] = value;
}

const FlatValue* FlatConfig::find(const std::string& path) const {
  auto it = values_.find(path);
  return it == values_.end() ? nullptr : &it->second;
}

SourceLocation FlatConfig::where(const std::string& path) const {
  std::string p = path;
  while (true) {
    if (const FlatValue* v = find(p)) {
      SourceLocation w = v->where;
      w.key_path = path;
      return w;
    }
    auto dot = p.rfind('.');
    if (dot == std::string::npos) break;
    p = p.substr(0, dot);
  }
  return {main_file_, 0, 0, path};
}

const FlatValue* FlatConfig::scalar(const std::string& path) const {
  const FlatValue* v = find(path);
  if (v && !v->node.IsScalar())
    throw InputError(v->where, "expected a single value, got " + describe_node(v->node));
  return v;
}

bool FlatConfig::is_auto(const std::string& path) const {
  const FlatValue* v = find(path);
  return v && v->node.IsScalar() && zsim::is_auto(v->node.Scalar());
}

std::optional<std::string> FlatConfig::get_string(const std::string& path) const {
  const FlatValue* v = scalar(path);
  if (!v) return std::nullopt;
  return v->node.Scalar();
}

std::optional<std::int64_t> FlatConfig::get_int(const std::string& path) const {
  const FlatValue* v = scalar(path);
  if (!v) return std::nullopt;
  auto r = parse_integer(v->node.Scalar());
  if (!r) throw InputError(v->where, "expected an integer, got '" + v->node.Scalar() + "'");
  return r;
}

std::optional<Bytes> FlatConfig::get_bytes(const std::string& path) const {
  const FlatValue* v = scalar(path);
  if (!v) return std::nullopt;
  auto r = parse_bytes(v->node.Scalar());
  if (!r)
    throw InputError(v->where, "expected a size in bytes (e.g. 85899345920 or 80GiB), got '" +
                                   v->node.Scalar() + "'");
  return r;
}

std::optional<double> FlatConfig::get_real(const std::string& path) const {
  const FlatValue* v = scalar(path);
  if (!v) return std::nullopt;
  auto r = parse_real(v->node.Scalar());
  if (!r) throw InputError(v->where, "expected a number, got '" + v->node.Scalar() + "'");
  return r;
}

std::optional<bool> FlatConfig::get_bool(const std::string& path) const {
  const FlatValue* v = scalar(path);
  if (!v) return std::nullopt;
  auto r = parse_bool(v->node.Scalar());
  if (!r) throw InputError(v->where, "expected true or false, got '" + v->node.Scalar() + "'");
  return r;
}

}  // namespace zsim
