// Nearest-name suggestion for unknown keys and presets ("did you mean ...?").
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace zsim {

// Levenshtein distance (insert, delete, substitute each cost 1).
int edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `name`, or "" when none is within max(2, |name|/3) edits (and fewer edits
// than |name|, so that very short names get no arbitrary suggestion).
std::string nearest_name(std::string_view name, const std::vector<std::string>& candidates);

}  // namespace zsim
