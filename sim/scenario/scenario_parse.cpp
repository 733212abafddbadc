#include "sim/scenario/scenario_parse.hpp"

#include <cmath>
#include <filesystem>

#include "sim/common/error.hpp"
#include "sim/scenario/deepspeed_leniency.hpp"
#include "sim/scenario/edit_distance.hpp"
#include "sim/scenario/flat_config.hpp"
#include "sim/scenario/hf_config.hpp"
#include "sim/scenario/hf_families.hpp"
#include "sim/scenario/overrides.hpp"
#include "sim/scenario/presets.hpp"
#include "sim/scenario/scenario_validate.hpp"
#include "sim/scenario/yaml_document.hpp"

#ifndef ZSIM_SOURCE_DIR
#define ZSIM_SOURCE_DIR "."
#endif

namespace zsim {
namespace {

namespace fs = std::filesystem;

const std::string kZero = "deepspeed.zero_optimization.";

std::string join_names(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

std::string unknown_preset(const std::string& what, const std::string& name,
                           const std::vector<std::string>& known) {
  std::string msg = "unknown " + what + " preset '" + name + "'";
  std::string near = nearest_name(name, known);
  if (!near.empty()) msg += ", did you mean '" + near + "'?";
  return msg + " (known: " + join_names(known) + ")";
}

// A path written in a file, resolved against the directory of that file.
std::string relative_to(const std::string& written, const std::string& referencing_file) {
  fs::path p(written);
  if (p.is_absolute()) return p.string();
  fs::path base = fs::path(referencing_file).parent_path();
  return (base / p).lexically_normal().string();
}

void require_not_auto(const FlatConfig& f, const std::string& path) {
  if (f.is_auto(path))
    throw InputError(f.where(path),
                     "\"auto\" is resolved only for train_micro_batch_size_per_gpu, "
                     "gradient_accumulation_steps, train_batch_size, bf16/fp16.enabled, reduce_bucket_size, "
                     "stage3_prefetch_bucket_size and stage3_param_persistence_threshold (as the Hugging Face "
                     "DeepSpeed integration does)");
}

// Layers below the scenario: the hardware profile (cluster.*) and the ds_config file (deepspeed.*).
FlatConfig load_profile(const FlatConfig& scenario, const std::string& scenario_file, const LoadOptions& options,
                        std::vector<std::string>& warnings) {
  FlatConfig layer;
  auto name = scenario.get_string("cluster.profile");
  if (!name) return layer;
  SourceLocation at = scenario.where("cluster.profile");
  if (name->empty() || name->find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
                           std::string::npos || name->find("..") != std::string::npos)
    throw InputError(at, "a hardware profile name is letters, digits, '.', '_' and '-', got '" + *name + "'");
  fs::path scenario_dir = fs::path(scenario_file).parent_path();
  std::vector<fs::path> dirs = {scenario_dir / "hardware", scenario_dir};
  for (const auto& d : options.profile_dirs) dirs.emplace_back(d);
  dirs.emplace_back(fs::path("scenarios") / "hardware");  // the current directory's (a repo checkout)
  dirs.emplace_back(fs::path(ZSIM_SOURCE_DIR) / "scenarios" / "hardware");
  std::string searched;
  for (const auto& d : dirs) {
    fs::path candidate = d / (*name + ".yaml");
    std::error_code ec;
    if (!fs::is_regular_file(candidate, ec)) {
      searched += (searched.empty() ? "" : ", ") + candidate.lexically_normal().string();
      continue;
    }
    std::string file = candidate.lexically_normal().string();
    YAML::Node root = parse_yaml_text(read_input_file(file, "hardware profile", at), file);
    if (!root.IsMap()) throw InputError({file, 1, 1, ""}, "a hardware profile is a block with a 'cluster:' key");
    for (auto it = root.begin(); it != root.end(); ++it) {
      const YAML::Node key_node = it->first;  // a copy: the iterator's pair is a temporary
      std::string key = key_node.IsScalar() ? key_node.Scalar() : "";
      // 'calibration:' is zrun calibrate's record of its measurements and fits: documentation, never read.
      if (key != "cluster" && key != "description" && key != "calibration")
        throw InputError(location_of(key_node, file, key),
                         "a hardware profile holds only 'cluster:' (and 'description:', 'calibration:'), got '" + key +
                             "'");
    }
    YAML::Node cluster = root["cluster"];
    if (!cluster.IsDefined() || !cluster.IsMap())
      throw InputError({file, 1, 1, "cluster"}, "a hardware profile needs a 'cluster:' block of keys");
    for (const char* banned : {"nodes", "profile"}) {
      if (cluster[banned].IsDefined())
        throw InputError(location_of(cluster[banned], file, std::string("cluster.") + banned),
                         std::string("'") + banned + "' belongs in the scenario, not in a hardware profile");
    }
    layer.add_block(cluster, "cluster", file, {}, warnings);
    return layer;
  }
  throw InputError(at, "no hardware profile '" + *name + "' (searched " + searched + ")");
}

FlatConfig load_ds_config(const FlatConfig& scenario, std::vector<std::string>& warnings) {
  FlatConfig layer;
  auto written = scenario.get_string("deepspeed.ds_config");
  if (!written) return layer;
  SourceLocation at = scenario.where("deepspeed.ds_config");
  std::string file = relative_to(*written, at.file);
  YAML::Node root = parse_yaml_text(read_input_file(file, "ds_config file", at), file);
  if (root.IsMap() && root["ds_config"].IsDefined())
    throw InputError(location_of(root["ds_config"], file, "deepspeed.ds_config"),
                     "a ds_config file cannot name another ds_config");
  layer.add_block(root, "deepspeed", file, {}, warnings);
  return layer;
}

ModelSpec resolve_model(const FlatConfig& f) {
  ModelSpec m;
  bool have_base = false;
  auto preset = f.get_string("model.preset");
  auto hf = f.get_string("model.hf_config");
  if (preset && hf)
    throw InputError(f.where("model.hf_config"), "give either model.preset or model.hf_config, not both");
  if (preset) {
    auto p = model_preset(*preset);
    if (!p) throw InputError(f.where("model.preset"), unknown_preset("model", *preset, model_preset_names()));
    m = *p;
    have_base = true;
  } else if (hf) {
    SourceLocation at = f.where("model.hf_config");
    std::string file = relative_to(*hf, at.file);
    YAML::Node root = parse_yaml_text(read_input_file(file, "hf_config file", at), file);
    m = model_from_hf_config(root, file, *hf);
    have_base = true;
  }
  if (auto v = f.get_string("model.name")) m.name = *v;
  const std::int64_t base_heads = m.heads, base_kv_heads = m.kv_heads;
  auto set_int = [&](const char* key, std::int64_t& field) {
    std::string path = std::string("model.") + key;
    if (auto v = f.get_int(path)) field = *v;
    else if (!have_base && std::string(key) != "max_position_embeddings")
      throw InputError(f.where(path), "missing: give model.preset, model.hf_config, or model." +
                                          std::string(key));
  };
  set_int("layers", m.layers);
  set_int("hidden", m.hidden);
  set_int("heads", m.heads);
  set_int("vocab", m.vocab);
  set_int("max_position_embeddings", m.max_position_embeddings);
  if (auto v = f.get_string("model.mlp")) {
    if (*v == "plain") m.mlp = MlpKind::plain;
    else if (*v == "gated") m.mlp = MlpKind::gated;
    else throw InputError(f.where("model.mlp"), "expected plain or gated, got '" + *v + "'");
  }
  if (auto v = f.get_int("model.ffn_hidden")) m.ffn_hidden = *v;
  else if (!have_base) {
    if (m.mlp == MlpKind::gated)
      throw InputError(f.where("model.ffn_hidden"), "missing: a gated (SwiGLU) MLP needs model.ffn_hidden");
    m.ffn_hidden = m.hidden >= 0 && m.hidden <= kMaxHidden ? 4 * m.hidden : 0;  // an out-of-range hidden fails validation
  }
  // kv_heads: explicit; else a multi-head base (kv = heads) follows a changed head count, a GQA base keeps
  // its kv heads; else (no base) = heads.
  if (auto v = f.get_int("model.kv_heads")) m.kv_heads = *v;
  else if (!have_base || base_heads == base_kv_heads) m.kv_heads = m.heads;
  if (auto v = f.get_bool("model.tie_word_embeddings")) m.tie_word_embeddings = *v;
  if (auto v = f.get_bool("model.bias")) m.bias = *v;
  if (auto v = f.get_string("model.attention")) {
    auto a = attention_from_name(*v);
    if (!a) throw InputError(f.where("model.attention"), "expected flash or eager, got '" + *v + "'");
    m.attention = *a;
  }
  if (auto v = f.get_real("model.attention_dropout")) m.attention_dropout = *v;
  if (auto v = f.get_real("model.hidden_dropout")) m.hidden_dropout = *v;
  if (auto v = f.get_string("model.z3_leaf_modules")) {
    // A module class the model has whose parameters it fetches through one hook: the mixture-of-experts block (its
    // router with its experts); the experts' own class changes nothing (one module of 3-D parameters already).
    const std::string block = moe_block_class(m.arch.model_type), experts = moe_experts_class(m.arch.model_type);
    if (*v == "none" || v->empty() || *v == experts) m.z3_leaf_modules.clear();
    else if (!block.empty() && *v == block) m.z3_leaf_modules = *v;
    else
      throw InputError(f.where("model.z3_leaf_modules"),
                       "'" + *v + "' is not a mixture-of-experts module class of this model" +
                           (block.empty() ? std::string(" (a dense model: none to set)")
                                          : " (" + block + ", " + experts + " or none)"));
  }
  return m;
}

TrainingSpec resolve_training(const FlatConfig& f, std::int64_t world_size) {
  using Wide = __int128;
  TrainingSpec t;
  // A value given both as training.X and as DeepSpeed's key must agree; "auto" takes training's.
  auto both = [&](const std::string& ours, const std::string& theirs) -> std::optional<std::int64_t> {
    auto a = f.get_int(ours);
    std::optional<std::int64_t> b;
    if (!f.is_auto(theirs)) b = f.get_int(theirs);
    if (a && b && *a != *b)
      throw InputError(f.where(theirs), "is " + std::to_string(*b) + " but " + ours + " is " +
                                            std::to_string(*a));
    return a ? a : b;
  };
  auto micro = both("training.micro_batch", "deepspeed.train_micro_batch_size_per_gpu");
  auto gas = both("training.grad_accum", "deepspeed.gradient_accumulation_steps");
  const std::string tbs_key = "deepspeed.train_batch_size";
  if (f.has(tbs_key) && !f.is_auto(tbs_key)) {
    std::int64_t tbs = *f.get_int(tbs_key);
    // DeepSpeed's rule: train_batch_size = micro x grad_accum x data-parallel world size; one missing
    // factor is derived, a missing pair means grad_accum = 1.
    if (tbs <= 0) throw InputError(f.where(tbs_key), "must be positive, got " + std::to_string(tbs));
    if (micro && gas) {
      if (Wide(*micro) * *gas * world_size != tbs)
        throw InputError(f.where(tbs_key), "is " + std::to_string(tbs) + " but micro batch " + std::to_string(*micro) +
                                               " x grad accum " + std::to_string(*gas) + " x " +
                                               std::to_string(world_size) + " GPUs = " +
                                               std::to_string(static_cast<long long>(Wide(*micro) * *gas * world_size)));
    } else {
      std::int64_t known = micro ? *micro : gas ? *gas : 1;
      if (known <= 0 || Wide(tbs) % (Wide(known) * world_size) != 0)
        throw InputError(f.where(tbs_key), "is " + std::to_string(tbs) + ", not a multiple of " +
                                               std::to_string(known) + " x " + std::to_string(world_size) + " GPUs");
      if (micro) gas = tbs / (*micro * world_size);
      else if (gas) micro = tbs / (*gas * world_size);
      else {
        gas = 1;
        micro = tbs / world_size;
      }
    }
  }
  t.micro_batch = micro.value_or(1);
  t.grad_accum = gas.value_or(1);
  if (auto v = f.get_int("training.seq_len")) t.seq_len = *v;

  // Precision: training.precision; else DeepSpeed's bf16/fp16 blocks (neither enabled = fp32); else bf16.
  std::optional<Precision> ours;
  if (auto v = f.get_string("training.precision")) {
    if (*v == "bf16") ours = Precision::bf16;
    else if (*v == "fp16") ours = Precision::fp16;
    else if (*v == "fp32") ours = Precision::fp32;
    else throw InputError(f.where("training.precision"), "expected bf16, fp16 or fp32, got '" + *v + "'");
  }
  auto enabled = [&](const std::string& path) -> std::optional<bool> {
    if (f.is_auto(path)) return std::nullopt;
    return f.get_bool(path);
  };
  auto bf16 = enabled("deepspeed.bf16.enabled");
  auto fp16 = enabled("deepspeed.fp16.enabled");
  if (bf16.value_or(false) && fp16.value_or(false))
    throw InputError(f.where("deepspeed.fp16.enabled"), "bf16 and fp16 cannot both be enabled");
  std::optional<Precision> theirs;
  if (bf16.value_or(false)) theirs = Precision::bf16;
  else if (fp16.value_or(false)) theirs = Precision::fp16;
  else if (bf16 || fp16) theirs = Precision::fp32;  // a block says enabled: false and none says true
  if (ours && theirs && *ours != *theirs) {
    std::string at = *theirs == Precision::fp16 ? "deepspeed.fp16.enabled" : "deepspeed.bf16.enabled";
    throw InputError(f.where(at), "disagrees with training.precision");
  }
  t.precision = ours ? *ours : theirs ? *theirs : Precision::bf16;
  // runtime/config.py get_communication_data_type: null, or fp32 / fp16 / bf16 (lower-cased).
  if (auto v = f.get_string("deepspeed.communication_data_type")) {
    std::string d = *v;
    for (char& c : d) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (d == "fp32") t.communication_data_type = Precision::fp32;
    else if (d == "fp16") t.communication_data_type = Precision::fp16;
    else if (d == "bf16") t.communication_data_type = Precision::bf16;
    else
      throw InputError(f.where("deepspeed.communication_data_type"),
                       "expected fp32, fp16 or bf16 (DeepSpeed's get_communication_data_type), got '" + *v + "'");
  }

  if (auto v = f.get_string("training.activation_checkpointing")) {
    if (*v == "none") t.activation_checkpointing = Checkpointing::none;
    else if (*v == "full") t.activation_checkpointing = Checkpointing::full;
    else throw InputError(f.where("training.activation_checkpointing"), "expected none or full, got '" + *v + "'");
  }
  return t;
}

ClusterSpec resolve_cluster(const FlatConfig& f) {
  ClusterSpec c;
  if (auto v = f.get_string("cluster.profile")) c.profile = *v;
  auto small_int = [&](const std::string& path, int& field) {
    if (auto v = f.get_int(path)) {
      if (*v < -1000000000 || *v > 1000000000) throw InputError(f.where(path), "out of range");
      field = static_cast<int>(*v);
    }
  };
  small_int("cluster.nodes", c.nodes);
  small_int("cluster.gpus_per_node", c.gpus_per_node);
  if (auto name = f.get_string("cluster.gpu.preset")) {
    auto g = gpu_preset(*name);
    if (!g) throw InputError(f.where("cluster.gpu.preset"), unknown_preset("GPU", *name, gpu_preset_names()));
    c.gpu = *g;
  }
  if (auto v = f.get_string("cluster.gpu.name")) c.gpu.name = *v;
  if (auto v = f.get_bytes("cluster.gpu.hbm_bytes")) c.gpu.hbm_bytes = *v;
  if (auto v = f.get_real("cluster.gpu.hbm_GBps")) c.gpu.hbm_GBps = *v;
  if (auto v = f.get_real("cluster.gpu.peak_tflops")) c.gpu.peak_tflops = *v;
  if (auto v = f.get_real("cluster.gpu.peak_fp32_tflops")) c.gpu.peak_fp32_tflops = *v;
  if (auto v = f.get_bytes("cluster.host.memory_bytes")) c.host.memory_bytes = *v;
  small_int("cluster.host.cores", c.host.cores);
  if (auto v = f.get_bytes("cluster.nvme.bytes")) c.nvme.bytes = *v;
  if (auto v = f.get_real("cluster.nvme.read_GBps")) c.nvme.read_GBps = *v;
  if (auto v = f.get_real("cluster.nvme.write_GBps")) c.nvme.write_GBps = *v;
  if (auto v = f.get_real("cluster.nvme.read_latency_us")) c.nvme.read_latency_us = *v;
  if (auto v = f.get_real("cluster.nvme.write_latency_us")) c.nvme.write_latency_us = *v;
  if (auto v = f.get_real("cluster.nvme.one_request_read_latency_us")) c.nvme.one_request_read_latency_us = *v;
  if (auto v = f.get_real("cluster.nvme.one_request_read_GBps")) c.nvme.one_request_read_GBps = *v;
  if (auto v = f.get_real("cluster.nvme.one_request_write_latency_us")) c.nvme.one_request_write_latency_us = *v;
  if (auto v = f.get_real("cluster.nvme.one_request_write_GBps")) c.nvme.one_request_write_GBps = *v;
  for (auto [points, block] : {std::pair{&c.nvme.read_GBps_by_size, "cluster.nvme.read_GBps_by_size."},
                               {&c.nvme.write_GBps_by_size, "cluster.nvme.write_GBps_by_size."}})
    for (const auto& [label, bytes] : kNvlinkBusbwSizes)
      if (auto v = f.get_real(std::string(block) + label)) {
        if (!(*v > 0)) throw InputError(f.where(std::string(block) + label), "a transfer rate must be > 0 GB/s");
        points->emplace_back(bytes, *v);
      }
  auto real = [&](const std::string& path, double& field) {
    if (auto v = f.get_real(path)) field = *v;
  };
  real("cluster.links.nvlink_GBps", c.links.nvlink_GBps);
  real("cluster.links.pcie_GBps", c.links.pcie_GBps);
  real("cluster.links.ib_GBps", c.links.ib_GBps);
  real("cluster.links.nvlink_latency_us", c.links.nvlink_latency_us);
  real("cluster.links.pcie_latency_us", c.links.pcie_latency_us);
  real("cluster.links.ib_latency_us", c.links.ib_latency_us);
  real("cluster.links.ib_oversubscription", c.links.ib_oversubscription);
  small_int("cluster.links.nodes_per_leaf", c.links.nodes_per_leaf);
  for (auto [v, name] : c.fitted_under.fields())
    if (auto given = f.get_string(std::string("cluster.fitted_under.") + name)) *v = *given;
  real("cluster.efficiency.gemm", c.efficiency.gemm);
  real("cluster.efficiency.hbm", c.efficiency.hbm);
  for (HbmKind k : kHbmKinds)
    real(std::string("cluster.efficiency.hbm_by_kind.") + to_string(k), c.efficiency.hbm_by_kind.of(k));
  real("cluster.efficiency.cpu_adam_params_per_s_per_core", c.efficiency.cpu_adam_params_per_s_per_core);
  real("cluster.efficiency.cpu_adam_node_params_per_s", c.efficiency.cpu_adam_node_params_per_s);
  real("cluster.efficiency.pageable_pcie_fraction", c.efficiency.pageable_pcie_fraction);
  if (auto v = f.get_real("cluster.efficiency.pageable_h2d_pcie_fraction")) c.efficiency.pageable_h2d_pcie_fraction = *v;
  real("cluster.efficiency.launch_us", c.efficiency.launch_us);
  if (auto v = f.get_bytes("cluster.efficiency.outside_allocator_bytes")) c.efficiency.outside_allocator_bytes = *v;
  real("cluster.efficiency.torch_misaligned_gemm.forward", c.efficiency.torch_misaligned_gemm.forward);
  real("cluster.efficiency.torch_misaligned_gemm.backward", c.efficiency.torch_misaligned_gemm.backward);
  real("cluster.efficiency.one_rank_collective.latency_us", c.efficiency.one_rank_collective.latency_us);
  real("cluster.efficiency.one_rank_collective.GBps", c.efficiency.one_rank_collective.GBps);
  for (auto [line, kind] : {std::pair{&c.efficiency.one_rank_collective.all_gather, "all_gather"},
                            {&c.efficiency.one_rank_collective.reduce_scatter, "reduce_scatter"},
                            {&c.efficiency.one_rank_collective.all_reduce, "all_reduce"}}) {
    real(std::string("cluster.efficiency.one_rank_collective.") + kind + ".latency_us", line->latency_us);
    real(std::string("cluster.efficiency.one_rank_collective.") + kind + ".GBps", line->GBps);
  }
  for (const char* kind : kNvlinkBusbwKinds)
    for (const auto& [label, bytes] : kNvlinkBusbwSizes)
      if (auto v = f.get_real(std::string("cluster.efficiency.nvlink_busbw.") + kind + "." + label)) {
        if (!(*v > 0))
          throw InputError(f.where(std::string("cluster.efficiency.nvlink_busbw.") + kind + "." + label),
                           "a bus bandwidth must be > 0 GB/s");
        c.efficiency.nvlink_busbw[kind].emplace_back(bytes, *v);
      }
  for (const auto& [n, k] : group_busbw_shapes())
    for (const char* kind : kNvlinkBusbwKinds)
      for (const auto& [label, bytes] : kNvlinkBusbwSizes) {
        const std::string key =
            std::string("cluster.efficiency.group_busbw.") + group_busbw_shape(n, k) + "." + kind + "." + label;
        if (auto v = f.get_real(key)) {
          if (!(*v > 0)) throw InputError(f.where(key), "a bus bandwidth must be > 0 GB/s");
          c.efficiency.group_busbw[group_busbw_shape(n, k)][kind].emplace_back(bytes, *v);
        }
      }
  for (const int ranks : kCpuAdamMeasuredRanks)
    for (const int threads : kCpuAdamMeasuredThreads) {
      const std::string key = "cluster.efficiency.cpu_adam_measured.ranks_" + std::to_string(ranks) + ".threads_" +
                              std::to_string(threads);
      if (auto v = f.get_real(key)) {
        if (!(*v > 0)) throw InputError(f.where(key), "a CPU Adam rate must be > 0 params/s");
        c.efficiency.cpu_adam_measured[ranks].emplace_back(threads, *v);
      }
    }
  real("cluster.efficiency.host_issue.kernel_us", c.efficiency.host_issue.kernel_us);
  real("cluster.efficiency.host_issue.gemm_us", c.efficiency.host_issue.gemm_us);
  real("cluster.efficiency.host_issue.collective_us", c.efficiency.host_issue.collective_us);
  real("cluster.efficiency.host_issue.memcpy_us", c.efficiency.host_issue.memcpy_us);
  real("cluster.efficiency.host_issue.event_us", c.efficiency.host_issue.event_us);
  real("cluster.efficiency.host_issue.link_collective_us", c.efficiency.host_issue.link_collective_us);
  for (auto [v, name] : c.efficiency.deepspeed_host.fields())
    real(std::string("cluster.efficiency.deepspeed_host.") + name, *v);
  for (auto [v, name] : c.efficiency.deepspeed_host.optional_fields())
    if (auto given = f.get_real(std::string("cluster.efficiency.deepspeed_host.") + name)) *v = *given;
  for (auto [v, name] : c.efficiency.deepspeed_host.host_speed_fields())
    if (auto given = f.get_real(std::string("cluster.efficiency.deepspeed_host.") + name)) *v = *given;
  real("cluster.efficiency.beside_compute.memcpy", c.efficiency.beside_compute.memcpy);
  real("cluster.efficiency.beside_compute.kernel", c.efficiency.beside_compute.kernel);
  real("cluster.efficiency.beside_compute.collective", c.efficiency.beside_compute.collective);
  real("cluster.efficiency.beside_compute.link_collective", c.efficiency.beside_compute.link_collective);
  real("cluster.efficiency.compute_beside.memcpy", c.efficiency.compute_beside.memcpy);
  real("cluster.efficiency.compute_beside.kernel", c.efficiency.compute_beside.kernel);
  real("cluster.efficiency.compute_beside.collective", c.efficiency.compute_beside.collective);
  real("cluster.efficiency.compute_beside.link_collective", c.efficiency.compute_beside.link_collective);
  real("cluster.efficiency.beside_compute_wait.memcpy", c.efficiency.beside_compute_wait.memcpy);
  real("cluster.efficiency.beside_compute_wait.kernel", c.efficiency.beside_compute_wait.kernel);
  real("cluster.efficiency.beside_compute_wait.collective", c.efficiency.beside_compute_wait.collective);
  real("cluster.efficiency.beside_compute_wait.link_collective", c.efficiency.beside_compute_wait.link_collective);
  real("cluster.efficiency.flash_attention.forward", c.efficiency.flash_attention.forward);
  real("cluster.efficiency.flash_attention.backward", c.efficiency.flash_attention.backward);
  auto gemm_model = [&](const std::string& block, GemmModel& g) {
    real(block + ".launch_us", g.launch_us);
    real(block + ".max_efficiency", g.max_efficiency);
    real(block + ".io_GBps", g.io_GBps);
    real(block + ".io_overlap", g.io_overlap);
    if (auto v = f.get_bool(block + ".attention_shapes")) g.attention_shapes = *v;
    for (auto [key, field] : {std::pair{".tile_m", &g.tile_m}, {".tile_n", &g.tile_n}, {".sms", &g.sms},
                              {".split_k_depth", &g.split_k_depth}})
      if (auto v = f.get_int(block + key)) *field = *v;
  };
  gemm_model("cluster.efficiency.gemm_model", c.efficiency.gemm_model);
  gemm_model("cluster.efficiency.gemm_model_fp32", c.efficiency.gemm_model_fp32);
  return c;
}

OffloadDevice offload_device(const FlatConfig& f, const std::string& path) {
  auto v = f.get_string(path);
  if (!v || *v == "none") return OffloadDevice::none;
  if (*v == "cpu") return OffloadDevice::cpu;
  if (*v == "nvme") return OffloadDevice::nvme;
  throw InputError(f.where(path), "expected none, cpu or nvme, got '" + *v + "'");
}

ZeroConfig resolve_zero(const FlatConfig& f, const ModelSpec& model) {
  ZeroConfig z;
  auto key = [](const char* k) { return kZero + k; };
  auto small_int = [&](const std::string& path, int& field) {
    require_not_auto(f, path);
    if (auto v = f.get_int(path)) {
      if (*v < -1000000000 || *v > 1000000000) throw InputError(f.where(path), "out of range");
      field = static_cast<int>(*v);
    }
  };
  auto elements = [&](const std::string& path, Elements& field) {
    require_not_auto(f, path);
    if (auto v = f.get_int(path)) field = *v;
  };
  auto flag = [&](const std::string& path, bool& field) {
    require_not_auto(f, path);
    if (auto v = f.get_bool(path)) field = *v;
  };
  small_int(key("stage"), z.stage);
  z.overlap_comm = z.stage == 3;  // DeepSpeed: None -> true for stage 3 only
  flag(key("overlap_comm"), z.overlap_comm);
  flag(key("contiguous_gradients"), z.contiguous_gradients);
  flag(key("reduce_scatter"), z.reduce_scatter);
  flag(key("use_multi_rank_bucket_allreduce"), z.use_multi_rank_bucket_allreduce);
  flag(key("round_robin_gradients"), z.round_robin_gradients);
  // "auto" as the Hugging Face integration fills it from the model's hidden size.
  const Elements h = model.hidden;
  if (f.is_auto(key("reduce_bucket_size"))) z.reduce_bucket_size = h * h;
  else elements(key("reduce_bucket_size"), z.reduce_bucket_size);
  if (f.is_auto(key("stage3_prefetch_bucket_size")))
    z.stage3_prefetch_bucket_size = static_cast<Elements>(std::floor(0.9 * static_cast<double>(h) * static_cast<double>(h)));
  else elements(key("stage3_prefetch_bucket_size"), z.stage3_prefetch_bucket_size);
  if (f.is_auto(key("stage3_param_persistence_threshold"))) z.stage3_param_persistence_threshold = 10 * h;
  else elements(key("stage3_param_persistence_threshold"), z.stage3_param_persistence_threshold);
  elements(key("allgather_bucket_size"), z.allgather_bucket_size);
  elements(key("stage3_max_live_parameters"), z.stage3_max_live_parameters);
  elements(key("stage3_max_reuse_distance"), z.stage3_max_reuse_distance);
  elements(key("sub_group_size"), z.sub_group_size);

  const std::string oo = key("offload_optimizer.");
  z.offload_optimizer.device = offload_device(f, oo + "device");
  flag(oo + "pin_memory", z.offload_optimizer.pin_memory);
  if (auto v = f.get_string(oo + "nvme_path")) z.offload_optimizer.nvme_path = *v;
  small_int(oo + "buffer_count", z.offload_optimizer.buffer_count);
  require_not_auto(f, oo + "ratio");
  if (auto v = f.get_real(oo + "ratio")) z.offload_optimizer.ratio = *v;

  const std::string op = key("offload_param.");
  z.offload_param.device = offload_device(f, op + "device");
  flag(op + "pin_memory", z.offload_param.pin_memory);
  if (auto v = f.get_string(op + "nvme_path")) z.offload_param.nvme_path = *v;
  small_int(op + "buffer_count", z.offload_param.buffer_count);
  elements(op + "buffer_size", z.offload_param.buffer_size);
  elements(op + "max_in_cpu", z.offload_param.max_in_cpu);

  small_int(key("zero_hpz_partition_size"), z.zero_hpz_partition_size);
  flag(key("zero_quantized_weights"), z.zero_quantized_weights);
  flag(key("zero_quantized_gradients"), z.zero_quantized_gradients);
  z.zeropp_loco_param.enabled = f.has(key("zeropp_loco_param"));
  require_not_auto(f, key("zeropp_loco_param.err_beta"));
  if (auto v = f.get_real(key("zeropp_loco_param.err_beta"))) z.zeropp_loco_param.err_beta = *v;
  small_int(key("zeropp_loco_param.reset_T"), z.zeropp_loco_param.reset_T);
  flag(key("stage3_allgather_sequential"), z.stage3_allgather_sequential);
  flag(key("stage3_use_all_reduce_for_fetch_params"), z.stage3_use_all_reduce_for_fetch_params);
  return z;
}

}  // namespace

Scenario parse_scenario(const std::string& text, const std::string& filename, const LoadOptions& options) {
  YAML::Node root = parse_yaml_text(text, filename);
  if (root.IsNull() || !root.IsDefined()) {
    if (options.overrides.empty()) throw InputError({filename, 1, 1, ""}, "empty scenario");
    root = YAML::Node(YAML::NodeType::Map);
  }
  if (!root.IsMap())
    throw InputError(location_of(root, filename, ""), "a scenario is a block of keys (model, training, cluster, "
                                                      "deepspeed), got " + describe_node(root));
  std::set<std::string> overridden = apply_overrides(root, options.overrides);

  Scenario s;
  s.source_file = filename;
  FlatConfig scenario;
  scenario.set_main_file(filename);
  scenario.add_block(root, "", filename, overridden, s.warnings);

  FlatConfig merged;
  merged.set_main_file(filename);
  merged.overlay(load_profile(scenario, filename, options, s.warnings));
  merged.overlay(load_ds_config(scenario, s.warnings));
  merged.overlay(scenario);

  // Resolve and check part by part, so that later parts compute only with checked values.
  LocateKey locate = [&](const std::string& path) { return merged.where(path); };
  s.model = resolve_model(merged);
  validate_model(s.model, locate);
  s.cluster = resolve_cluster(merged);
  validate_cluster(s.cluster, locate);
  s.training = resolve_training(merged, s.cluster.world_size());
  validate_training(s.training, s.cluster, locate);
  s.zero = resolve_zero(merged, s.model);
  if (auto v = merged.get_string("runtime")) {
    auto r = runtime_from_name(*v);
    if (!r) throw InputError(merged.where("runtime"), "expected deepspeed or zrun, got '" + *v + "'");
    s.runtime = *r;
  }
  ignore_what_deepspeed_ignores(s, locate, s.warnings);
  if (const std::string w = hf_pricing_warning(s.model.arch); !w.empty() && s.runtime == RuntimeKind::deepspeed)
    s.warnings.push_back(s.model.name + ": " + w);
  if (s.model.arch.experts > 0 && s.zero.stage == 3)
    s.warnings.push_back(
        s.model.name + ": transformers 5.17 declares each layer's " + std::to_string(s.model.arch.experts) +
        " experts as one module of two 3-D parameters (" + moe_experts_class(s.model.arch.model_type) +
        "): stage 3 gathers all of them on every rank, whichever experts its tokens reach, so ranks never wait on "
        "different experts; " +
        (moe_block_is_leaf(s.model) ? "the router is fetched with them (model.z3_leaf_modules)"
                                    : "set_z3_leaf_modules(model, [" + moe_block_class(s.model.arch.model_type) +
                                          "]) fetches the router with them in one call (model.z3_leaf_modules)"));
  validate_scenario(s, locate);
  return s;
}

Scenario load_scenario(const std::string& path, const LoadOptions& options) {
  std::string text = read_input_file(path, "scenario file", {path, 0, 0, ""});
  return parse_scenario(text, path, options);
}

}  // namespace zsim
