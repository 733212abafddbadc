#include "sim/scenario/overrides.hpp"

#include "sim/common/error.hpp"
#include "sim/scenario/key_schema.hpp"
#include "sim/scenario/yaml_document.hpp"

namespace zsim {
namespace {

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    parts.push_back(path.substr(start, dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return parts;
}

// Throws unless every component of `path` is a known key (below an uninspected block anything goes).
void check_known(const std::string& path, const SourceLocation& where) {
  std::string parent;
  for (const auto& part : split_path(path)) {
    if (part.empty()) throw InputError(where, "empty key name in override");
    std::string candidate = parent.empty() ? part : parent + "." + part;
    auto info = find_key(candidate);
    if (!info) throw InputError(where, unknown_key_message(parent, part));
    if (info->kind == KeyKind::any) return;
    parent = candidate;
  }
}

}  // namespace

std::set<std::string> apply_overrides(YAML::Node& root, const std::vector<std::string>& overrides) {
  std::set<std::string> paths;
  for (const auto& text : overrides) {
    auto eq = text.find('=');
    if (eq == std::string::npos || eq == 0)
      throw InputError({"--set", 0, 0, ""}, "expected KEY=VALUE (e.g. deepspeed.zero_optimization.stage=2), got '" +
                                                text + "'");
    const std::string path = text.substr(0, eq);
    const SourceLocation where{"--set", 0, 0, path};
    check_known(path, where);
    YAML::Node value = parse_yaml_text(text.substr(eq + 1), "--set " + path);

    if (!root.IsMap() && !root.IsNull())
      throw InputError(where, "the scenario is not a block of keys");
    auto parts = split_path(path);
    YAML::Node node;
    node.reset(root);
    std::string walked;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      walked = walked.empty() ? parts[i] : walked + "." + parts[i];
      YAML::Node child = node[parts[i]];
      if (child.IsScalar()) {
        auto info = find_key(walked);
        if (!info || info->kind != KeyKind::scalar_or_map)
          throw InputError(where, "cannot set a key below '" + walked + "', which is a single value");
        YAML::Node block(YAML::NodeType::Map);
        block["preset"] = child.Scalar();
        node[parts[i]] = block;
        child.reset(node[parts[i]]);
      } else if (!child.IsMap() && !child.IsNull() && child.IsDefined()) {
        throw InputError(where, "cannot set a key below '" + walked + "', which is " + describe_node(child));
      }
      node.reset(child);
    }
    node[parts.back()] = value;
    paths.insert(path);
  }
  return paths;
}

}  // namespace zsim
