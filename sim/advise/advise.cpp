#include "sim/advise/advise.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/report/human_units.hpp"
#include "sim/scenario/scenario_json.hpp"

namespace zsim {

namespace {

const char* device_name(OffloadDevice d) {
  switch (d) {
    case OffloadDevice::none: return "none";
    case OffloadDevice::cpu: return "cpu";
    case OffloadDevice::nvme: return "nvme";
  }
  return "none";
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

std::string elements_text(Elements e) { return fmt::format("{:.3g}", static_cast<double>(e)); }

struct ZeroPlusPlus {
  bool qwz, hpz, qgz;
};
// ZeRO++'s combinations tried on more than one node: none, each alone, weights (qwZ + hpZ), all three.
constexpr ZeroPlusPlus kZeroPlusPlus[] = {{false, false, false}, {true, false, false}, {false, true, false},
                                          {false, false, true},  {true, true, false},  {true, true, true}};

}  // namespace

AdviseSpace advise_space(const Scenario& s) {
  AdviseSpace space;
  space.nodes = s.cluster.nodes;
  space.gpus_per_node = s.cluster.gpus_per_node;
  space.world = s.cluster.nodes * s.cluster.gpus_per_node;
  space.has_nvme = s.cluster.nvme.bytes > 0;
  space.batch_per_gpu = s.training.micro_batch * s.training.grad_accum;
  space.scenario_reduce_bucket_size = s.zero.reduce_bucket_size;
  space.scenario_prefetch_bucket_size = s.zero.stage3_prefetch_bucket_size;
  space.scenario_max_live_parameters = s.zero.stage3_max_live_parameters;
  // engine.py DeepSpeedEngine.communication_data_type: the config's, else fp16 / bf16 as enabled, else fp32.
  space.scenario_communication_data_type = s.training.communication_data_type.value_or(s.training.precision);
  const Precision half = s.training.precision == Precision::fp32 ? Precision::bf16 : s.training.precision;
  space.communication_data_types = {half, Precision::fp32};
  return space;
}

AdviseCandidate candidate_of(const Scenario& s) {
  AdviseCandidate c;
  const ZeroConfig& z = s.zero;
  c.stage = z.stage;
  c.micro_batch = s.training.micro_batch;
  c.grad_accum = s.training.grad_accum;
  c.checkpointing = s.training.activation_checkpointing == Checkpointing::full;
  c.offload_optimizer = z.offload_optimizer.device;
  c.offload_param = z.offload_param.device;
  c.qwz = z.zero_quantized_weights;
  c.hpz = z.zero_hpz_partition_size > 1;
  c.qgz = z.zero_quantized_gradients;
  c.communication_data_type = s.training.communication_data_type;
  return c;
}

std::vector<std::string> candidate_overrides(const AdviseCandidate& c, int gpus_per_node) {
  const std::string z = "deepspeed.zero_optimization.";
  std::vector<std::string> o{
      fmt::format("{}stage={}", z, c.stage),
      fmt::format("training.micro_batch={}", c.micro_batch),
      fmt::format("training.grad_accum={}", c.grad_accum),
      fmt::format("deepspeed.train_micro_batch_size_per_gpu={}", c.micro_batch),
      fmt::format("deepspeed.gradient_accumulation_steps={}", c.grad_accum),
      fmt::format("training.activation_checkpointing={}", c.checkpointing ? "full" : "none"),
      fmt::format("{}offload_optimizer.device={}", z, device_name(c.offload_optimizer)),
  };
  if (c.offload_optimizer != OffloadDevice::none) o.push_back(z + "offload_optimizer.pin_memory=true");
  if (c.stage == 3) {
    o.push_back(fmt::format("{}offload_param.device={}", z, device_name(c.offload_param)));
    if (c.offload_param != OffloadDevice::none) o.push_back(z + "offload_param.pin_memory=true");
    o.push_back(fmt::format("{}zero_quantized_weights={}", z, c.qwz ? "true" : "false"));
    o.push_back(fmt::format("{}zero_hpz_partition_size={}", z, c.hpz ? gpus_per_node : 1));
    o.push_back(fmt::format("{}zero_quantized_gradients={}", z, c.qgz ? "true" : "false"));
    if (c.prefetch_bucket_size > 0)
      o.push_back(fmt::format("{}stage3_prefetch_bucket_size={}", z, c.prefetch_bucket_size));
    if (c.max_live_parameters > 0)
      o.push_back(fmt::format("{}stage3_max_live_parameters={}", z, c.max_live_parameters));
  } else {
    // Stage 3's keys at DeepSpeed's defaults (the scenario's may name them; below stage 3 they are ignored).
    o.push_back(z + "offload_param.device=none");
    o.push_back(z + "zero_quantized_weights=false");
    o.push_back(z + "zero_hpz_partition_size=1");
    o.push_back(z + "zero_quantized_gradients=false");
  }
  if (c.reduce_bucket_size > 0) o.push_back(fmt::format("{}reduce_bucket_size={}", z, c.reduce_bucket_size));
  if (c.communication_data_type)
    o.push_back(fmt::format("deepspeed.communication_data_type={}", to_string(*c.communication_data_type)));
  return o;
}

std::string describe(const AdviseCandidate& c) {
  std::string d = fmt::format("stage {}, micro-batch {} x {}, {}", c.stage, c.micro_batch, c.grad_accum,
                              c.checkpointing ? "checkpointing" : "no checkpointing");
  if (c.offload_optimizer != OffloadDevice::none) d += fmt::format(", optimizer on {}", device_name(c.offload_optimizer));
  if (c.offload_param != OffloadDevice::none) d += fmt::format(", parameters on {}", device_name(c.offload_param));
  std::vector<std::string> zpp;
  if (c.qwz) zpp.push_back("qwZ");
  if (c.hpz) zpp.push_back("hpZ");
  if (c.qgz) zpp.push_back("qgZ");
  if (!zpp.empty()) d += ", " + join(zpp, "+");
  if (c.reduce_bucket_size > 0) d += ", reduce bucket " + elements_text(c.reduce_bucket_size);
  if (c.prefetch_bucket_size > 0) d += ", prefetch bucket " + elements_text(c.prefetch_bucket_size);
  if (c.max_live_parameters > 0) d += ", max live " + elements_text(c.max_live_parameters);
  if (c.communication_data_type) d += fmt::format(", communication {}", to_string(*c.communication_data_type));
  return d;
}

std::vector<OffloadLevel> offload_levels(int stage, bool has_nvme) {
  using D = OffloadDevice;
  std::vector<OffloadLevel> v{{D::none, D::none}};
  if (stage == 0) return v;
  v.push_back({D::cpu, D::none});
  if (stage == 3) v.push_back({D::cpu, D::cpu});
  if (has_nvme) {
    v.push_back({D::nvme, D::none});
    if (stage == 3) v.push_back({D::nvme, D::cpu});
    if (stage == 3) v.push_back({D::nvme, D::nvme});
  }
  return v;
}

std::vector<AdviseCandidate> structures_at_level(const AdviseSpace& space, std::size_t level) {
  std::vector<AdviseCandidate> out;
  std::vector<std::int64_t> micro;
  for (std::int64_t m = 1; m <= std::min(space.batch_per_gpu, space.max_micro_batch); ++m)
    if (space.batch_per_gpu % m == 0) micro.push_back(m);
  for (int stage = 0; stage <= 3; ++stage) {
    const auto levels = offload_levels(stage, space.has_nvme);
    if (level >= levels.size()) continue;
    for (const std::int64_t m : micro)
      for (const bool ckpt : {true, false}) {
        AdviseCandidate c;
        c.stage = stage;
        c.micro_batch = m;
        c.grad_accum = space.batch_per_gpu / m;
        c.checkpointing = ckpt;
        c.offload_optimizer = levels[level].optimizer;
        c.offload_param = levels[level].param;
        out.push_back(c);
      }
  }
  return out;
}

std::vector<AdviseCandidate> bucket_variants(const AdviseCandidate& c, const AdviseSpace& space, int key) {
  std::vector<AdviseCandidate> out;
  if (key == 0) {  // ZeRO++: stage 3 on more than one node
    if (c.stage != 3 || space.nodes < 2) return out;
    for (const ZeroPlusPlus& z : kZeroPlusPlus) {
      // hpZ's secondary partition is not read back from NVMe (DeepSpeed fails on it).
      if (z.hpz && c.offload_param == OffloadDevice::nvme) continue;
      AdviseCandidate d = c;
      d.qwz = z.qwz;
      d.hpz = z.hpz;
      d.qgz = z.qgz;
      if (!(d == c)) out.push_back(d);
    }
    return out;
  }
  if (key == 1) {  // communication_data_type: the dtype of the gradient reductions
    // One rank reduces nothing; qgZ across nodes quantizes the gradients whatever the dtype
    // (stage3.py __avg_scatter_grads: all_to_all_quant_reduce).
    if (space.world < 2 || (c.qgz && space.nodes > 1)) return out;
    const Precision current = c.communication_data_type.value_or(space.scenario_communication_data_type);
    for (const Precision p : space.communication_data_types) {
      if (p == current) continue;
      AdviseCandidate d = c;
      d.communication_data_type = p;
      out.push_back(d);
    }
    return out;
  }
  key -= 2;
  if (key != 0 && c.stage != 3) return out;
  if (key == 0 && c.stage == 0) return out;  // stage 0 all-reduces through DeepSpeed's own buckets
  const auto& values = key == 0 ? space.reduce_bucket_sizes
                       : key == 1 ? space.prefetch_bucket_sizes
                                  : space.max_live_parameters;
  const Elements own = key == 0 ? space.scenario_reduce_bucket_size
                      : key == 1 ? space.scenario_prefetch_bucket_size
                                 : space.scenario_max_live_parameters;
  const Elements current = key == 0 ? c.reduce_bucket_size : key == 1 ? c.prefetch_bucket_size : c.max_live_parameters;
  for (const Elements v : values) {
    if (v == (current > 0 ? current : own)) continue;  // the candidate itself
    AdviseCandidate d = c;
    (key == 0 ? d.reduce_bucket_size : key == 1 ? d.prefetch_bucket_size : d.max_live_parameters) = v;
    if (!(d == c)) out.push_back(d);
  }
  return out;
}

Bytes gpu_need(const SweepPoint& p) { return std::max(p.gpu_peak_bytes, p.gpu_verdict_bytes); }

bool fits_with_margin(const SweepPoint& p, Bytes gpu_capacity, double margin) {
  return p.valid && p.fits && static_cast<double>(gpu_need(p)) <= (1.0 - margin) * static_cast<double>(gpu_capacity);
}

std::vector<std::size_t> rank_entries(const std::vector<AdviseEntry>& entries, Bytes gpu_capacity, double margin) {
  std::vector<std::size_t> idx;
  for (std::size_t i = 0; i < entries.size(); ++i)
    if (fits_with_margin(entries[i].point, gpu_capacity, margin) && entries[i].point.tokens_per_s > 0) idx.push_back(i);
  std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
    return entries[a].point.tokens_per_s > entries[b].point.tokens_per_s;
  });
  return idx;
}

std::string binding(const AdviseBreakdown& b) {
  if (b.step_s <= 0) return "";
  const auto pct = [&](Seconds s) { return 100.0 * s / b.step_s; };
  struct Part {
    const char* name;
    Seconds s;
  };
  const Part others[] = {{"exposed communication", b.exposed_comm_s},
                         {"exposed offload copies (PCIe, NVMe)", b.offload_s},
                         {"optimizer step (GPU or CPU Adam)", b.optimizer_s},
                         {"idle (dependency latency)", b.idle_s}};
  const Part* worst = std::max_element(std::begin(others), std::end(others),
                                       [](const Part& x, const Part& y) { return x.s < y.s; });
  std::string text;
  if (b.compute_s >= worst->s)
    text = fmt::format("compute binds ({:.0f}% of the step; {} {:.0f}%)", pct(b.compute_s), worst->name, pct(worst->s));
  else
    text = fmt::format("{} binds ({:.0f}% of the step; compute {:.0f}%)", worst->name, pct(worst->s), pct(b.compute_s));
  if (b.gpu_need > b.gpu_peak)
    text += fmt::format("; GPU reserved + outside the allocator {} of {} (headroom {}; allocated peak {})",
                        human_bytes(b.gpu_need), human_bytes(b.gpu_capacity), human_bytes(b.gpu_capacity - b.gpu_need),
                        human_bytes(b.gpu_peak));
  else
    text += fmt::format("; GPU peak {} of {} (headroom {})", human_bytes(b.gpu_peak), human_bytes(b.gpu_capacity),
                        human_bytes(b.gpu_capacity - b.gpu_peak));
  return text;
}


std::vector<std::string> changed_choices(const AdviseCandidate& c, const AdviseCandidate& own, const AdviseSpace& space) {
  std::vector<std::string> d;
  if (c.stage != own.stage) d.push_back(fmt::format("stage {}", c.stage));
  if (c.micro_batch != own.micro_batch) d.push_back(fmt::format("micro-batch {} x {}", c.micro_batch, c.grad_accum));
  if (c.checkpointing != own.checkpointing) d.push_back(c.checkpointing ? "checkpointing" : "no checkpointing");
  if (c.offload_optimizer != own.offload_optimizer)
    d.push_back(fmt::format("optimizer on {}", c.offload_optimizer == OffloadDevice::none ? "GPU"
                                                                                          : device_name(c.offload_optimizer)));
  // Parameters, ZeRO++, prefetch and max live are stage 3's: below it they are off, whatever the scenario names.
  const auto at3 = [](const AdviseCandidate& x, auto value, auto off) { return x.stage == 3 ? value : off; };
  if (at3(c, c.offload_param, OffloadDevice::none) != at3(own, own.offload_param, OffloadDevice::none))
    d.push_back(fmt::format("parameters on {}", c.offload_param == OffloadDevice::none || c.stage != 3
                                                    ? "GPU" : device_name(c.offload_param)));
  const auto flag = [&](bool AdviseCandidate::*f, const char* name) {
    const bool on = c.stage == 3 && c.*f;
    if (on != (own.stage == 3 && own.*f)) d.push_back(fmt::format("{}{}", on ? "" : "no ", name));
  };
  flag(&AdviseCandidate::qwz, "qwZ");
  flag(&AdviseCandidate::hpz, "hpZ");
  flag(&AdviseCandidate::qgz, "qgZ");
  const auto size = [](Elements v, Elements scenario) { return v > 0 ? v : scenario; };
  if (c.stage > 0 && own.stage > 0 &&
      size(c.reduce_bucket_size, space.scenario_reduce_bucket_size) !=
          size(own.reduce_bucket_size, space.scenario_reduce_bucket_size))
    d.push_back("reduce bucket " + elements_text(size(c.reduce_bucket_size, space.scenario_reduce_bucket_size)));
  if (c.stage == 3 && own.stage == 3) {
    if (size(c.prefetch_bucket_size, space.scenario_prefetch_bucket_size) !=
        size(own.prefetch_bucket_size, space.scenario_prefetch_bucket_size))
      d.push_back("prefetch bucket " + elements_text(size(c.prefetch_bucket_size, space.scenario_prefetch_bucket_size)));
    if (size(c.max_live_parameters, space.scenario_max_live_parameters) !=
        size(own.max_live_parameters, space.scenario_max_live_parameters))
      d.push_back("max live " + elements_text(size(c.max_live_parameters, space.scenario_max_live_parameters)));
  }
  const Precision dtype = c.communication_data_type.value_or(space.scenario_communication_data_type);
  if (dtype != own.communication_data_type.value_or(space.scenario_communication_data_type))
    d.push_back(fmt::format("communication {}", to_string(dtype)));
  return d;
}

std::string reason(const AdviseEntry& e, const AdviseBreakdown& b, const AdviseEntry& best, const AdviseSpace& space,
                   bool is_best) {
  if (is_best) return "advised: " + binding(b);
  const double gain = 100.0 * (e.point.tokens_per_s / best.point.tokens_per_s - 1.0);
  const std::string than = gain > 0 ? fmt::format("{:.1f}% faster in zsim than #1", gain)
                                    : fmt::format("{:.1f}% slower than #1", -gain);
  const std::vector<std::string> d = changed_choices(e.candidate, best.candidate, space);
  return fmt::format("{} with {}: {}", than, d.empty() ? "the same choices" : join(d, ", "), binding(b));
}

std::size_t advised_position(const std::vector<AdviseEntry>& entries, const std::vector<std::size_t>& ranked,
                             const AdviseCandidate& own, const AdviseSpace& space, double tie) {
  if (ranked.empty()) return 0;
  const double floor = (1.0 - tie) * entries[ranked.front()].point.tokens_per_s;
  std::size_t best = 0;
  std::size_t fewest = std::numeric_limits<std::size_t>::max();
  for (std::size_t k = 0; k < ranked.size() && entries[ranked[k]].point.tokens_per_s >= floor; ++k) {
    const std::size_t n = changed_choices(entries[ranked[k]].candidate, own, space).size();
    if (n < fewest) {  // strictly fewer: of equals, the faster (earlier) stays
      fewest = n;
      best = k;
    }
  }
  return best;
}

std::string memory_limits(const std::vector<AdviseEntry>& entries, const AdviseCandidate& winner,
                          const AdviseSpace& space, Bytes gpu_capacity, double margin) {
  const Bytes usable = static_cast<Bytes>((1.0 - margin) * static_cast<double>(gpu_capacity));
  std::vector<std::pair<std::string, AdviseCandidate>> neighbours;
  if (winner.checkpointing) {
    AdviseCandidate c = winner;
    c.checkpointing = false;
    neighbours.emplace_back("no checkpointing", c);
  }
  for (std::int64_t m = winner.micro_batch + 1; m <= space.batch_per_gpu; ++m)
    if (space.batch_per_gpu % m == 0) {
      AdviseCandidate c = winner;
      c.micro_batch = m;
      c.grad_accum = space.batch_per_gpu / m;
      neighbours.emplace_back(fmt::format("micro-batch {}", m), c);
      break;
    }
  const auto levels = offload_levels(winner.stage, space.has_nvme);
  for (std::size_t l = 1; l < levels.size(); ++l)
    if (levels[l].optimizer == winner.offload_optimizer && levels[l].param == winner.offload_param) {
      AdviseCandidate c = winner;
      c.offload_optimizer = levels[l - 1].optimizer;
      c.offload_param = levels[l - 1].param;
      neighbours.emplace_back(c.offload_optimizer == OffloadDevice::none ? "the optimizer on the GPU" : "less offload", c);
    }
  if (winner.stage > 0) {  // the stage below, as the winner otherwise is (its offload where that stage has it)
    AdviseCandidate c = winner;
    c.stage = winner.stage - 1;
    if (c.stage < 3) c.offload_param = OffloadDevice::none;
    if (c.stage == 0) c.offload_optimizer = OffloadDevice::none;
    neighbours.emplace_back(fmt::format("stage {}", c.stage), c);
  }
  std::vector<std::string> parts;
  for (const auto& [what, c] : neighbours) {
    // The neighbour as round one tried it: without round two's choices.
    AdviseCandidate plain = c;
    plain.qwz = plain.hpz = plain.qgz = false;
    plain.reduce_bucket_size = plain.prefetch_bucket_size = plain.max_live_parameters = 0;
    plain.communication_data_type.reset();
    // Then at smaller micro-batches: a structure too large at one is not tried at larger ones.
    std::vector<AdviseCandidate> keys{c, plain};
    for (std::int64_t m = c.micro_batch - 1; m >= 1; --m)
      if (space.batch_per_gpu % m == 0) {
        AdviseCandidate smaller = plain;
        smaller.micro_batch = m;
        smaller.grad_accum = space.batch_per_gpu / m;
        keys.push_back(smaller);
      }
    for (const AdviseCandidate& k : keys) {
      const auto it = std::find_if(entries.begin(), entries.end(), [&](const AdviseEntry& e) { return e.candidate == k; });
      if (it == entries.end() || !it->point.valid || fits_with_margin(it->point, gpu_capacity, margin)) continue;
      const std::string at = k.micro_batch == c.micro_batch ? "" : fmt::format(" already at micro-batch {}", k.micro_batch);
      if (gpu_need(it->point) > usable)
        parts.push_back(fmt::format("{} needs {} of the GPU's {} usable{}", what, human_bytes(gpu_need(it->point)),
                                    human_bytes(usable), at));
      else
        parts.push_back(fmt::format("{} overflows{}: {}", what, at, it->point.rejection));
      break;
    }
  }
  return parts.empty() ? "" : "memory limits it: " + join(parts, "; ");
}

std::string shortfall(const std::vector<AdviseEntry>& entries, Bytes gpu_capacity, double margin) {
  const AdviseEntry* smallest = nullptr;
  for (const AdviseEntry& e : entries)
    if (e.point.valid && (!smallest || gpu_need(e.point) < gpu_need(smallest->point))) smallest = &e;
  if (!smallest) return "no configuration of the search is a valid scenario";
  const Bytes usable = static_cast<Bytes>((1.0 - margin) * static_cast<double>(gpu_capacity));
  const Bytes peak = gpu_need(smallest->point);
  std::string text = fmt::format("no configuration fits: the smallest GPU peak, {}, ", describe(smallest->candidate));
  if (peak > usable)
    text += fmt::format("needs {} of {} ({} with {:.0f}% of it kept free): short by {}", human_bytes(peak),
                        human_bytes(gpu_capacity), human_bytes(usable), 100 * margin, human_bytes(peak - usable));
  else
    text += fmt::format("fits the GPU ({} of {})", human_bytes(peak), human_bytes(gpu_capacity));
  if (!smallest->point.rejection.empty() && smallest->point.overflow_tier != "gpu")
    text += fmt::format(", but overflows the {}: {}", smallest->point.overflow_tier, smallest->point.rejection);
  return text;
}

std::string ds_config_json(const Scenario& s) {
  const ZeroConfig& z = s.zero;
  nlohmann::ordered_json j;
  j["train_micro_batch_size_per_gpu"] = s.training.micro_batch;
  j["gradient_accumulation_steps"] = s.training.grad_accum;
  j["train_batch_size"] = s.training.micro_batch * s.training.grad_accum * s.world_size();
  j["bf16"] = {{"enabled", s.training.precision == Precision::bf16}};
  j["fp16"] = {{"enabled", s.training.precision == Precision::fp16}};
  if (s.training.communication_data_type) j["communication_data_type"] = to_string(*s.training.communication_data_type);
  nlohmann::ordered_json zo;
  zo["stage"] = z.stage;
  zo["overlap_comm"] = z.overlap_comm;
  zo["contiguous_gradients"] = z.contiguous_gradients;
  zo["reduce_bucket_size"] = z.reduce_bucket_size;
  zo["allgather_bucket_size"] = z.allgather_bucket_size;
  zo["reduce_scatter"] = z.reduce_scatter;
  zo["use_multi_rank_bucket_allreduce"] = z.use_multi_rank_bucket_allreduce;
  zo["round_robin_gradients"] = z.round_robin_gradients;
  zo["sub_group_size"] = z.sub_group_size;
  if (z.offload_optimizer.device != OffloadDevice::none) {
    nlohmann::ordered_json o;
    o["device"] = device_name(z.offload_optimizer.device);
    o["pin_memory"] = z.offload_optimizer.pin_memory;
    if (z.offload_optimizer.device == OffloadDevice::nvme) {
      o["nvme_path"] = z.offload_optimizer.nvme_path.empty() ? "/local_nvme" : z.offload_optimizer.nvme_path;
      o["buffer_count"] = z.offload_optimizer.buffer_count;
    }
    o["ratio"] = z.offload_optimizer.ratio;
    zo["offload_optimizer"] = o;
  }
  if (z.stage == 3) {
    zo["stage3_prefetch_bucket_size"] = z.stage3_prefetch_bucket_size;
    zo["stage3_max_live_parameters"] = z.stage3_max_live_parameters;
    zo["stage3_max_reuse_distance"] = z.stage3_max_reuse_distance;
    zo["stage3_param_persistence_threshold"] = z.stage3_param_persistence_threshold;
    if (z.offload_param.device != OffloadDevice::none) {
      nlohmann::ordered_json o;
      o["device"] = device_name(z.offload_param.device);
      o["pin_memory"] = z.offload_param.pin_memory;
      if (z.offload_param.device == OffloadDevice::nvme) {
        o["nvme_path"] = z.offload_param.nvme_path.empty() ? "/local_nvme" : z.offload_param.nvme_path;
        o["buffer_count"] = z.offload_param.buffer_count;
        o["buffer_size"] = z.offload_param.buffer_size;
        o["max_in_cpu"] = z.offload_param.max_in_cpu;
      }
      zo["offload_param"] = o;
    }
    zo["zero_hpz_partition_size"] = z.zero_hpz_partition_size;
    zo["zero_quantized_weights"] = z.zero_quantized_weights;
    zo["zero_quantized_gradients"] = z.zero_quantized_gradients;
    if (z.zeropp_loco_param.enabled)
      zo["zeropp_loco_param"] = {{"err_beta", z.zeropp_loco_param.err_beta}, {"reset_T", z.zeropp_loco_param.reset_T}};
    // Not a key of DeepSpeed 0.14.5's zero_optimization (its pydantic model forbids unknown keys): only when on.
    if (z.stage3_allgather_sequential) zo["stage3_allgather_sequential"] = true;
    zo["stage3_use_all_reduce_for_fetch_params"] = z.stage3_use_all_reduce_for_fetch_params;
  }
  j["zero_optimization"] = zo;
  return j.dump(2) + "\n";
}

}  // namespace zsim
