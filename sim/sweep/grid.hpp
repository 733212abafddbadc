// Sweep grids: `--grid KEY=V1,V2,...` axes and their cartesian product as lists of `KEY=V` overrides.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace zsim {

struct GridAxis {
  std::string key;                  // dotted scenario key, e.g. deepspeed.zero_optimization.stage
  std::vector<std::string> values;  // as written by the user
};

// Parses "KEY=V1,V2,..."; throws InputError (key path = "--grid") on a missing '=', empty key or value.
GridAxis parse_grid_axis(const std::string& text);

// Number of points in the product (1 for no axes).
std::size_t grid_size(const std::vector<GridAxis>& axes);

// The i-th point of the product as "KEY=V" overrides, last axis varying fastest.
std::vector<std::string> grid_point(const std::vector<GridAxis>& axes, std::size_t index);

}  // namespace zsim
