// The scenario's key tree: every key zsim reads (modelled), every key DeepSpeed accepts that zsim does not
// model (a warning, not an error), DeepSpeed's alias names, and the nearest-key suggestion for typos.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace zsim {

enum class KeyKind {
  map,            // a block of keys
  scalar,         // one value
  scalar_or_map,  // a preset name or a block (cluster.gpu)
  any,            // not inspected (unmodelled blocks such as deepspeed.optimizer)
};
enum class KeyStatus { modelled, unmodelled };

struct KeyInfo {
  KeyKind kind;
  KeyStatus status;
  std::string canonical_path;  // the dotted path (aliases map to their canonical key)
};

// Looks up a dotted path ("deepspeed.zero_optimization.stage"); aliases resolve to the canonical key.
std::optional<KeyInfo> find_key(const std::string& dotted_path);

// The names one level below `parent_path` ("" = the top level), modelled and unmodelled.
std::vector<std::string> child_key_names(const std::string& parent_path);

// Every dotted path of the schema (modelled, unmodelled and aliases), in schema order.
std::vector<std::string> all_key_paths();

// "unknown key 'x'" plus ", did you mean 'y'?" when a sibling is close.
std::string unknown_key_message(const std::string& parent_path, const std::string& key);

}  // namespace zsim
