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
// refused: DeepSpeed would change memory, traffic or time in a way zsim does not model, so any value but
// the harmless ones (DeepSpeed's default) is an error that says why.
enum class KeyStatus { modelled, unmodelled, refused };

struct KeyInfo {
  KeyKind kind;
  KeyStatus status;
  std::string canonical_path;  // the dotted path (aliases map to their canonical key)
  const char* harmless = "";   // refused keys: values accepted as changing nothing, comma-separated
                               // ("" = none); null, an empty block and a block with enabled: false always are
  const char* why = "";        // refused keys: what DeepSpeed does with the key
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
