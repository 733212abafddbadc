// The sweep CSV: one row per evaluated point, written by `zsim sweep --csv` and read back by `zsim sweep merge`.
// Columns: point (grid index), the axis values, valid, fits, overflow_tier, reason, then the figures. Numbers are
// written with the shortest text that reads back to the same double, so a CSV read back ranks exactly as the
// sweep that wrote it.
#pragma once
#include <iosfwd>
#include <string>
#include <vector>

#include "sim/sweep/sweep.hpp"

namespace zsim {

void write_sweep_csv(std::ostream& out, const SweepResult& r);

// Reads what write_sweep_csv wrote. `file` names the source in errors (InputError with file and line). The axes'
// values are the distinct values of each axis column, in order of first appearance.
SweepResult read_sweep_csv(std::istream& in, const std::string& file);

// Joins the CSVs of the shards of one sweep (any order) into the sweep's result, points in grid order. Throws
// InputError naming the file when the columns differ, a point appears twice, or a point is missing (a point
// index below the largest one that no file holds).
SweepResult merge_sweeps(const std::vector<SweepResult>& parts, const std::vector<std::string>& files);

}  // namespace zsim
