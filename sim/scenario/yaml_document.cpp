#include "sim/scenario/yaml_document.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace zsim {
namespace {

// Deepest nesting of flow collections and of block-sequence chains on one line ("- - - x").
// Quoted strings and comments are skipped; this is a guard, not a YAML lexer.
int max_nesting(const std::string& text) {
  int depth = 0, deepest = 0, dash_chain = 0;
  bool line_start = true;
  char quote = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (quote) {
      if (c == '\\' && quote == '"') ++i;
      else if (c == quote) quote = 0;
      continue;
    }
    if (c == '\n') {
      line_start = true;
      dash_chain = 0;
      continue;
    }
    if (c == '#') {
      while (i < text.size() && text[i] != '\n') ++i;
      --i;
      continue;
    }
    if (c == '"' || c == '\'') {
      quote = c;
      line_start = false;
      continue;
    }
    if (c == '[' || c == '{') deepest = std::max(deepest, ++depth);
    if (c == ']' || c == '}') depth = std::max(0, depth - 1);
    if ((c == '-' || c == '?' || c == ':') && line_start) deepest = std::max(deepest, ++dash_chain);
    if (c != ' ' && c != '\t' && c != '-' && c != '?' && c != ':') line_start = false;
  }
  return deepest;
}

}  // namespace

YAML::Node parse_yaml_text(const std::string& text, const std::string& file) {
  if (max_nesting(text) > kMaxYamlNesting)
    throw InputError({file, 0, 0, ""},
                     "nesting deeper than " + std::to_string(kMaxYamlNesting) + " levels; not a scenario");
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    int line = e.mark.is_null() ? 0 : e.mark.line + 1;
    int column = e.mark.is_null() ? 0 : e.mark.column + 1;
    throw InputError({file, line, column, ""}, "syntax error: " + e.msg);
  }
}

std::string read_input_file(const std::string& path, const std::string& what,
                            const SourceLocation& referenced_from) {
  namespace fs = std::filesystem;
  std::error_code ec;
  auto status = fs::status(path, ec);
  if (ec || !fs::exists(status))
    throw InputError(referenced_from, "cannot read " + what + " '" + path + "': no such file");
  if (!fs::is_regular_file(status))
    throw InputError(referenced_from, what + " '" + path + "' is not a regular file");
  auto size = fs::file_size(path, ec);
  if (ec || size > static_cast<std::uintmax_t>(kMaxInputFileBytes))
    throw InputError(referenced_from, what + " '" + path + "' is larger than 16 MiB");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(referenced_from, "cannot open " + what + " '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

SourceLocation location_of(const YAML::Node& node, const std::string& file, const std::string& key_path) {
  YAML::Mark m = node.Mark();
  if (m.is_null()) return {file, 0, 0, key_path};
  return {file, m.line + 1, m.column + 1, key_path};
}

std::string describe_node(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: return "a block of keys";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Scalar: return "'" + node.Scalar() + "'";
    case YAML::NodeType::Null: return "nothing";
    default: return "an undefined value";
  }
}

}  // namespace zsim
