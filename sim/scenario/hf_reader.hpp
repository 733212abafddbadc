// Typed reads of a Hugging Face config.json's keys, each error naming the file, line, column and key.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>

#include <yaml-cpp/yaml.h>

#include "sim/common/error.hpp"

namespace zsim {

class HfReader {
 public:
  HfReader(const YAML::Node& root, std::string file) : root_(root), file_(std::move(file)) {}

  // The first of `keys` present and not null, with its name.
  std::optional<std::pair<std::string, YAML::Node>> first(std::initializer_list<const char*> keys) const;
  bool has(const char* key) const { return first({key}).has_value(); }  // present and not null
  bool written(const char* key) const { return root_[key].IsDefined(); }  // present, null or not
  std::optional<std::int64_t> integer(std::initializer_list<const char*> keys) const;
  std::optional<bool> boolean(const char* key) const;
  std::optional<double> real(std::initializer_list<const char*> keys) const;
  std::string string(const char* key) const;  // "" when absent
  std::int64_t required(std::initializer_list<const char*> keys) const;
  SourceLocation where(const char* key) const;  // the key's place (line 1 when absent)
  const std::string& file() const { return file_; }

 private:
  YAML::Node root_;
  std::string file_;
};

}  // namespace zsim
