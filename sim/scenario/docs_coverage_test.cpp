// docs/scenario.md documents every key the reader accepts (modelled keys with their full path under
// their section, unmodelled ones by name in the warnings list).
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "sim/scenario/key_schema.hpp"

namespace zsim {

TEST(DocsCoverage, ScenarioDocNamesEveryKey) {
  std::ifstream in("docs/scenario.md");
  ASSERT_TRUE(in) << "run from the source root";
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  for (const auto& path : all_key_paths()) {
    auto info = find_key(path);
    ASSERT_TRUE(info);
    std::string name = path.substr(path.rfind('.') + 1);
    // Modelled keys appear as `name` or as the tail of a dotted path in a table row.
    // Blocks appear as a section heading or as the head of a documented key (`host.memory_bytes`).
    bool found = doc.find("`" + name + "`") != std::string::npos || doc.find("." + name + "`") != std::string::npos ||
                 doc.find("## " + name + "\n") != std::string::npos || doc.find("`" + name + ".") != std::string::npos;
    EXPECT_TRUE(found) << path << " is not documented in docs/scenario.md";
  }
}

}  // namespace zsim
