#include "sim/scenario/edit_distance.hpp"

#include <algorithm>

namespace zsim {

int edit_distance(std::string_view a, std::string_view b) {
  std::vector<int> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    int diagonal = row[0];
    row[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      int above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string nearest_name(std::string_view name, const std::vector<std::string>& candidates) {
  int limit = std::max<int>(2, static_cast<int>(name.size()) / 3);
  std::string best;
  int best_distance = limit + 1;
  for (const auto& c : candidates) {
    // Cap the work on absurdly long (fuzzed) names: a suggestion is only useful for short ones.
    if (name.size() > 256) break;
    int d = edit_distance(name, c);
    if (d < best_distance && d < static_cast<int>(name.size())) {  // not "a" -> "aio"
      best_distance = d;
      best = c;
    }
  }
  return best;
}

}  // namespace zsim
