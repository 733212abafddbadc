#include "sim/plan/quantization.hpp"

#include <algorithm>

namespace zsim {

std::int64_t qwz_groups(Elements numel) {
  if (numel <= 0) return 0;
  const std::int64_t start = (numel + kQwzTargetGroupSize - 1) / kQwzTargetGroupSize;
  if (numel % 8 != 0) return start;
  std::int64_t groups = start;
  // DeepSpeed searches upwards without bound; zsim gives up after 1e5 steps (keeps the start value).
  std::int64_t steps = 0;
  while (groups < numel && numel % (8 * groups) != 0 && steps < 100000) ++groups, ++steps;
  if (numel % (8 * groups) != 0) return start;
  while (numel % (16 * groups) == 0 && numel / groups > kQwzTargetGroupSize) groups *= 2;
  return groups;
}

QuantizedSize qwz_partition_bytes(Elements partition) {
  return {partition, kScaleBytes * qwz_groups(partition)};
}

QgzSizes qgz_sizes(std::int64_t rows, std::int64_t cols, int world, int gpus_per_node) {
  const Elements numel = rows * cols;
  const std::int64_t groups = std::max<std::int64_t>({rows, cols, world});
  QgzSizes s;
  s.intra = {numel / 2, kScaleBytes * groups};
  s.inter = {numel / gpus_per_node / 2, kScaleBytes * (groups / gpus_per_node)};
  return s;
}

std::int64_t qgz_blocks_per_partition(std::int64_t rows, std::int64_t cols, int world) {
  const Elements partition = rows * cols / world;
  const std::int64_t groups = std::max<std::int64_t>({rows, cols, world});
  Elements block = (partition + groups / world - 1) / (groups / world);
  block += block & 1;
  return (partition + block - 1) / block;
}

Elements qgz_block_elems(Elements partition, std::int64_t blocks) {
  Elements block = (partition + blocks - 1) / blocks;
  return block + (block & 1);
}

bool qgz_applies(std::int64_t rows, std::int64_t cols, int world) {
  return cols != 0 && (rows * cols) % (2 * static_cast<std::int64_t>(world)) == 0;
}

}  // namespace zsim
