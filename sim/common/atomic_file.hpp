// Writing an output file all-or-nothing: a temporary file in the same directory, renamed over the target
// only once fully written, so a failed run never leaves a partial or stale-looking output.
#pragma once
#include <string>

namespace zsim {

// Throws InputError (file = path) when the file cannot be created or written.
void write_file_atomically(const std::string& path, const std::string& contents);

}  // namespace zsim
