#include "runtime/exec/state_init.hpp"

#include <fmt/format.h>

#include <cstring>
#include <stdexcept>

#include "kernels/half_convert.hpp"
#include "runtime/comm/check.hpp"
#include "runtime/model/init.hpp"
#include "sim/plan/tensor_layout.hpp"

namespace zrun {

Stage3States stage3_states(const zsim::Plan& plan, const model::ModelConfig& cfg, int rank) {
  const zsim::TensorLayout layout = zsim::tensor_layout(plan);
  std::vector<float> part(static_cast<std::size_t>(plan.optimizer_partition), 0.0f);
  std::vector<float> persistent(static_cast<std::size_t>(plan.persistent_params), 0.0f);
  for (std::size_t u = 0; u < plan.units.size(); ++u)
    for (std::size_t k = 0; k < plan.units[u].tensors.size(); ++k) {
      const zsim::TensorShape& t = plan.units[u].tensors[k];
      const std::string name = model::tensor_full_name(plan.units[u].name, t.name);
      // Rank r holds elements [r x chunk, (r + 1) x chunk) of the tensor; past its end, padding (zeros).
      const zsim::Elements chunk = zsim::partition_numel(t.numel(), plan.dp);
      const zsim::Elements first = static_cast<zsim::Elements>(rank) * chunk;
      const zsim::Elements count = std::max<zsim::Elements>(0, std::min(chunk, t.numel() - first));
      if (count > 0) model::init_tensor(cfg, name, first, count, part.data() + layout.partition[u][k]);
      if (layout.persistent[u][k] >= 0)
        model::init_tensor(cfg, name, 0, t.numel(), persistent.data() + layout.persistent[u][k]);
    }
  Stage3States s;
  s.partition = part;
  s.persistent = persistent;
  // The fp32 master is the partition's values before rounding (DeepSpeed copies the fp32 init into it).
  s.optimizer.assign(3 * part.size(), 0.0f);
  zsim::Elements first = 0;
  for (zsim::Elements sub : plan.sub_groups) {
    for (zsim::Elements j = 0; j < sub; ++j) s.optimizer[3 * first + j] = part[first + j];
    first += sub;
  }
  return s;
}

std::vector<std::byte> encode(const std::vector<float>& values, zsim::DType dtype) {
  std::vector<std::byte> out;
  if (dtype == zsim::DType::fp32) {
    out.resize(values.size() * 4);
    std::memcpy(out.data(), values.data(), out.size());
    return out;
  }
  out.resize(values.size() * 2);
  for (std::size_t i = 0; i < values.size(); ++i) {
    const std::uint16_t h = zk::float_to_half16(values[i], dtype == zsim::DType::bf16);
    std::memcpy(out.data() + 2 * i, &h, 2);
  }
  return out;
}

void init_stage3_states(const zsim::Schedule& s, const zsim::Plan& plan, const model::ModelConfig& cfg, int rank,
                        const std::vector<zsim::OpId>& init_ops, const PutState& put_state) {
  const Stage3States st = stage3_states(plan, cfg, rank);
  zsim::OpId partition = -1, partition_nvme = -1, persistent = -1, optimizer = -1;
  for (zsim::OpId id : init_ops) {
    const zsim::MemOp& m = s.ops[id].mem;
    if (m.category == zsim::MemCategory::params)
      (m.detail == "persistent" ? persistent : m.detail == "nvme" ? partition_nvme : partition) = id;
    if (m.category == zsim::MemCategory::optimizer) optimizer = id;
  }
  auto put = [&](zsim::OpId id, const void* data, std::size_t bytes, const char* what) {
    if (id < 0 || s.ops[id].mem.bytes != static_cast<zsim::Bytes>(bytes))
      throw std::logic_error(fmt::format("stage 3: the schedule's {} buffer holds {} bytes, zrun's layout needs {}",
                                         what, id < 0 ? 0 : s.ops[id].mem.bytes, bytes));
    put_state(id, data, bytes);
  };
  const std::vector<std::byte> part = encode(st.partition, plan.dtype), pers = encode(st.persistent, plan.dtype);
  // offload_param nvme: the partition's elements before plan.nvme_params_from in params.partition (pinned CPU memory,
  // DeepSpeed's max_in_cpu), the rest in params.partition.nvme (a swap file).
  const std::size_t in_cpu =
      partition_nvme >= 0 ? static_cast<std::size_t>(plan.nvme_params_from * plan.elem_bytes) : part.size();
  if (partition >= 0 || in_cpu > 0) put(partition, part.data(), in_cpu, "params.partition");
  if (partition_nvme >= 0) put(partition_nvme, part.data() + in_cpu, part.size() - in_cpu, "params.partition.nvme");
  if (!pers.empty()) put(persistent, pers.data(), pers.size(), "params.persistent");
  put(optimizer, st.optimizer.data(), st.optimizer.size() * 4, "optimizer");
}

}  // namespace zrun
