// Reading YAML and JSON text (yaml-cpp parses both) into a node tree, with every failure turned into an
// InputError carrying file:line:column. Also the bounded file reader used for scenario, ds_config,
// hf_config and hardware-profile files.
#pragma once
#include <string>

#include <yaml-cpp/yaml.h>

#include "sim/common/error.hpp"

namespace zsim {

// Nesting deeper than this (flow brackets or "- - -" chains) is rejected before yaml-cpp recurses.
inline constexpr int kMaxYamlNesting = 64;
// Input files larger than this are rejected (a scenario is a few KiB).
inline constexpr long long kMaxInputFileBytes = 16LL * 1024 * 1024;

// Parses `text` (YAML or JSON); `file` names it in messages.
YAML::Node parse_yaml_text(const std::string& text, const std::string& file);

// Reads a regular file of at most kMaxInputFileBytes; `what` says what it is ("ds_config file") and
// `referenced_from` where its name was given (for the error when it cannot be read).
std::string read_input_file(const std::string& path, const std::string& what,
                            const SourceLocation& referenced_from);

// file:line:col (1-based) of a node, with the given key path.
SourceLocation location_of(const YAML::Node& node, const std::string& file, const std::string& key_path);

// Short human form of a node's type, for "expected an integer, got a block of keys".
std::string describe_node(const YAML::Node& node);

}  // namespace zsim
