// offload_param nvme: DeepSpeed's swap-in of parameter partitions from NVMe (deepspeed/runtime/swap_tensor/
// partitioned_param_swapper.py AsyncPartitionedParameterSwapper): a pinned pool of `buffer_count` buffers, one taken
// per parameter partition read and given back when the parameter is partitioned again; and which of a plan's tensors
// are read through it.
#pragma once
#include <map>
#include <utility>
#include <vector>

#include "sim/common/units.hpp"

namespace zsim {

struct Plan;

// DeepSpeed's I/O alignment of swapped tensors (_io_aligned_numel): AIO_ALIGNED_BYTES (1024) x aio.thread_count (1,
// DeepSpeed's default; zsim does not read the `aio` block), in elements of `elem_bytes`.
Elements swap_io_aligned(Elements numel, Bytes elem_bytes);

// The pool's free buffers, handed out as DeepSpeed does: available_buffer_ids.pop() takes the last one,
// remove_partition_and_release_buffers appends it again.
class ParamSwapPool {
 public:
  explicit ParamSwapPool(int buffers);
  int free() const { return static_cast<int>(available_.size()); }
  int take();  // the buffer popped; precondition free() > 0
  void give_back(int buffer) { available_.push_back(buffer); }

 private:
  std::vector<int> available_;
};

// swap_tensor/utils.py MIN_AIO_BYTES: the swapper keeps a partition smaller than max(this, aio.block_size: 1 MiB by
// default) in memory (swappable_tensor).
inline constexpr Bytes kMinAioBytes = Bytes{1} << 20;

// Which (unit, tensor) of the plan are read through the pool: gathered tensors whose partition chunk reaches past
// plan.nvme_params_from (a chunk that straddles it is read for its NVMe piece) and is swappable. Empty without
// offload_param nvme. zsim keeps the smaller chunks past nvme_params_from on NVMe too, read through a buffer of
// their own (docs/schedule-semantics.md "Offload").
std::vector<std::pair<int, int>> tensors_swapped_in(const Plan& p);

// The elements of DeepSpeed's pinned 16-bit write-back buffer (stage3.py, where it builds the 16-bit sub-groups and one
// has no flat CPU buffer: `should_create_fp16_flat_reuse_buffer` -> `reserve_partitioned_swap_space`): the first
// sub-group with the most partition elements, and for each of its parameters the io-aligned whole numel
// (`ds_numel`, not the rank's partition: about N x the sub-group at N ranks). zsim's sub-groups are element ranges
// of the partition; a sub-group's parameters are the tensors whose chunk meets its range. 0 without sub-groups.
Elements param_swap_out_elements(const Plan& p);

}  // namespace zsim
