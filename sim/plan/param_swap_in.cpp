#include "sim/plan/param_swap_in.hpp"

#include <algorithm>

#include "sim/plan/plan.hpp"
#include "sim/plan/tensor_layout.hpp"

namespace zsim {

Elements swap_io_aligned(Elements numel, Bytes elem_bytes) {
  constexpr Bytes kAioAlignedBytes = 1024;  // swap_tensor/utils.py AIO_ALIGNED_BYTES, x aio.thread_count (1)
  const Elements alignment = std::max<Elements>(1, kAioAlignedBytes / std::max<Bytes>(1, elem_bytes));
  const Elements remainder = numel % alignment;
  return remainder == 0 ? numel : numel + alignment - remainder;
}

ParamSwapPool::ParamSwapPool(int buffers) {
  for (int b = 0; b < buffers; ++b) available_.push_back(b);  // available_buffer_ids = [0, ..., buffer_count)
}

int ParamSwapPool::take() {
  const int b = available_.back();
  available_.pop_back();
  return b;
}

std::vector<std::pair<int, int>> tensors_swapped_in(const Plan& p) {
  std::vector<std::pair<int, int>> out;
  if (p.stage != 3 || p.param_device != OffloadDevice::nvme) return out;
  const TensorLayout l = tensor_layout(p);
  for (int u = 0; u < static_cast<int>(p.units.size()); ++u)
    for (int k = 0; k < static_cast<int>(p.units[u].tensors.size()); ++k)
      if (const Elements part = partition_numel(p.units[u].tensors[k].numel(), p.dp);
          l.gathered[u][k] >= 0 && l.partition[u][k] + part > p.nvme_params_from && part * p.elem_bytes >= kMinAioBytes)
        out.push_back({u, k});
  return out;
}

Elements param_swap_out_elements(const Plan& p) {
  Elements first = 0, at = 0, most = -1;  // the chosen sub-group: its first element and its partition elements
  for (Elements sub : p.sub_groups) {
    if (sub > most) most = sub, first = at;  // `total_elements > max_partition_numel`: the first of the largest
    at += sub;
  }
  if (most <= 0) return 0;
  const TensorLayout l = tensor_layout(p);
  Elements total = 0;
  for (int u = 0; u < static_cast<int>(p.units.size()); ++u)
    for (int k = 0; k < static_cast<int>(p.units[u].tensors.size()); ++k) {
      const Elements numel = p.units[u].tensors[k].numel(), begin = l.partition[u][k];
      const Elements end = begin + partition_numel(numel, p.dp);
      if (begin < first + most && end > first) total += swap_io_aligned(numel, p.elem_bytes);
    }
  return total;
}

}  // namespace zsim
