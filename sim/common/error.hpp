// The one user-facing error type: a message that names where in the input it comes from.
// The CLI prints what() and exits with kExitBadInput; nothing else is written.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace zsim {

inline constexpr int kExitBadInput = 2;

// Where a value came from: file, 1-based line and column (0 = unknown), dotted key path.
struct SourceLocation {
  std::string file;
  int line = 0;
  int column = 0;
  std::string key_path;  // e.g. "deepspeed.zero_optimization.stage"
};

// Bad input (syntax, unknown key, wrong type, out of range, missing file).
class InputError : public std::runtime_error {
 public:
  InputError(SourceLocation where, const std::string& message)
      : std::runtime_error(format(where, message)), where_(std::move(where)) {}
  const SourceLocation& where() const { return where_; }

 private:
  static std::string format(const SourceLocation& w, const std::string& message) {
    std::ostringstream s;
    s << (w.file.empty() ? std::string("<input>") : w.file);
    if (w.line > 0) s << ':' << w.line << ':' << w.column;
    s << ": ";
    if (!w.key_path.empty()) s << "key '" << w.key_path << "': ";
    s << message;
    return s.str();
  }
  SourceLocation where_;
};

}  // namespace zsim
