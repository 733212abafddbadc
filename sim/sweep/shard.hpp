// A shard of a sweep: `--shard K/N` names the K-th (1-based) of N deterministic slices of the grid, so that a
// job runner (a Slurm job array, `xargs -P`) can spread one sweep over machines; `zsim sweep merge` joins them.
// Point i (grid order) belongs to shard (i mod N) + 1: strided, so every shard gets a share of every axis value.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace zsim {

struct SweepShard {
  std::size_t k = 1;  // 1..n
  std::size_t n = 1;  // number of shards; 1 = the whole grid
  bool operator==(const SweepShard&) const = default;
};

// Parses "K/N" with 1 <= K <= N; throws InputError (key path = "--shard") otherwise.
SweepShard parse_shard(const std::string& text);

// The grid indices (ascending) of a grid of `grid_points` that belong to `shard`.
std::vector<std::size_t> shard_indices(std::size_t grid_points, const SweepShard& shard);

}  // namespace zsim
