// Reading a measured run's JSON: a missing or malformed key stops with an InputError naming the file and the key.
#pragma once
#include <string>

#include "sim/common/error.hpp"

namespace zsim::json_input {

[[noreturn]] inline void bad(const std::string& source, const std::string& key, const std::string& why) {
  throw InputError(SourceLocation{source, 0, 0, key}, why);
}

}  // namespace zsim::json_input
