// The scenario's keys as one flat map "dotted.path" -> (value node, where it was written), built by
// walking each input document (scenario YAML, ds_config JSON, hardware profile) against the key schema.
// Layers merge key by key: the scenario overrides a profile and a ds_config. Typed getters turn a bad
// value into an InputError at the value's own file:line:column.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "sim/common/error.hpp"
#include "sim/common/units.hpp"

namespace zsim {

struct FlatValue {
  YAML::Node node;        // a scalar, or a map (recorded so that a block's presence is known)
  SourceLocation where;   // file:line:col and the canonical key path
};

class FlatConfig {
 public:
  // Walks `block` as the key `path` ("" = document root) of document `file`. Unknown keys are errors
  // with a suggestion; keys DeepSpeed accepts but zsim does not model add a warning; null values are
  // treated as absent. Paths in `overridden` (and below) are reported as coming from --set.
  void add_block(const YAML::Node& block, const std::string& path, const std::string& file,
                 const std::set<std::string>& overridden, std::vector<std::string>& warnings);

  // Puts every entry of `top` over this one. A top layer that names cluster.gpu.preset replaces the
  // whole cluster.gpu block below it (a different GPU does not inherit the profile's GPU numbers).
  void overlay(const FlatConfig& top);

  bool has(const std::string& path) const { return values_.count(path) > 0; }
  const FlatValue* find(const std::string& path) const;
  // Where `path` was written, else where its nearest written parent was, else the main file.
  SourceLocation where(const std::string& path) const;
  void set_main_file(const std::string& file) { main_file_ = file; }

  bool is_auto(const std::string& path) const;
  std::optional<std::string> get_string(const std::string& path) const;
  std::optional<std::int64_t> get_int(const std::string& path) const;
  std::optional<Bytes> get_bytes(const std::string& path) const;
  std::optional<double> get_real(const std::string& path) const;
  std::optional<bool> get_bool(const std::string& path) const;

 private:
  const FlatValue* scalar(const std::string& path) const;  // throws when the value is not a scalar
  void record(const std::string& path, const YAML::Node& node, const SourceLocation& where);
  std::map<std::string, FlatValue> values_;
  std::string main_file_;
};

}  // namespace zsim
