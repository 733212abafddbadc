#include "sim/scenario/key_schema.hpp"

#include <iterator>
#include <map>

#include "sim/scenario/edit_distance.hpp"
#include "sim/scenario/scenario.hpp"

namespace zsim {
namespace {

struct Entry {
  const char* path;
  KeyKind kind;
  KeyStatus status;
  const char* alias_of = nullptr;  // canonical path when this is an alias
  const char* harmless = "";       // refused keys: values that change nothing
  const char* why = "";            // refused keys: the reason, with DeepSpeed's source
};

constexpr KeyKind M = KeyKind::map, S = KeyKind::scalar, SM = KeyKind::scalar_or_map, A = KeyKind::any;
constexpr KeyStatus Y = KeyStatus::modelled, N = KeyStatus::unmodelled, R = KeyStatus::refused;

const Entry kEntries[] = {
    {"runtime", S, Y},
    {"model", M, Y},
    {"model.preset", S, Y},
    {"model.hf_config", S, Y},
    {"model.name", S, Y},
    {"model.layers", S, Y},
    {"model.hidden", S, Y},
    {"model.ffn_hidden", S, Y},
    {"model.heads", S, Y},
    {"model.kv_heads", S, Y},
    {"model.vocab", S, Y},
    {"model.max_position_embeddings", S, Y},
    {"model.tie_word_embeddings", S, Y},
    {"model.mlp", S, Y},
    {"model.bias", S, Y},
    {"model.attention", S, Y},
    {"model.attention_dropout", S, Y},
    {"model.hidden_dropout", S, Y},
    {"model.z3_leaf_modules", S, Y},

    {"training", M, Y},
    {"training.micro_batch", S, Y},
    {"training.grad_accum", S, Y},
    {"training.seq_len", S, Y},
    {"training.precision", S, Y},
    {"training.activation_checkpointing", S, Y},

    {"cluster", M, Y},
    {"cluster.profile", S, Y},
    {"cluster.nodes", S, Y},
    {"cluster.gpus_per_node", S, Y},
    {"cluster.gpu", SM, Y},
    {"cluster.gpu.preset", S, Y},
    {"cluster.gpu.name", S, Y},
    {"cluster.gpu.hbm_bytes", S, Y},
    {"cluster.gpu.hbm_GBps", S, Y},
    {"cluster.gpu.peak_tflops", S, Y},
    {"cluster.gpu.peak_fp32_tflops", S, Y},
    {"cluster.host", M, Y},
    {"cluster.host.memory_bytes", S, Y},
    {"cluster.host.cores", S, Y},
    {"cluster.nvme", M, Y},
    {"cluster.nvme.bytes", S, Y},
    {"cluster.nvme.read_GBps", S, Y},
    {"cluster.nvme.write_GBps", S, Y},
    {"cluster.nvme.read_latency_us", S, Y},
    {"cluster.nvme.write_latency_us", S, Y},
    {"cluster.nvme.one_request_read_latency_us", S, Y},
    {"cluster.nvme.one_request_read_GBps", S, Y},
    {"cluster.nvme.one_request_write_latency_us", S, Y},
    {"cluster.nvme.one_request_write_GBps", S, Y},
    {"cluster.links", M, Y},
    {"cluster.links.nvlink_GBps", S, Y},
    {"cluster.links.pcie_GBps", S, Y},
    {"cluster.links.ib_GBps", S, Y},
    {"cluster.links.nvlink_latency_us", S, Y},
    {"cluster.links.pcie_latency_us", S, Y},
    {"cluster.links.ib_latency_us", S, Y},
    {"cluster.links.ib_oversubscription", S, Y},
    {"cluster.links.nodes_per_leaf", S, Y},
    {"cluster.fitted_under", M, Y},
    {"cluster.fitted_under.deepspeed", S, Y},
    {"cluster.fitted_under.torch", S, Y},
    {"cluster.fitted_under.transformers", S, Y},
    {"cluster.fitted_under.python", S, Y},
    {"cluster.fitted_under.cuda", S, Y},
    {"cluster.fitted_under.gpu", S, Y},
    {"cluster.fitted_under.date", S, Y},
    {"cluster.efficiency", M, Y},
    {"cluster.efficiency.gemm", S, Y},
    {"cluster.efficiency.hbm", S, Y},
    {"cluster.efficiency.hbm_by_kind", M, Y},
    {"cluster.efficiency.hbm_by_kind.norm", S, Y},
    {"cluster.efficiency.hbm_by_kind.softmax", S, Y},
    {"cluster.efficiency.hbm_by_kind.activation", S, Y},
    {"cluster.efficiency.hbm_by_kind.adam", S, Y},
    {"cluster.efficiency.hbm_by_kind.quantize", S, Y},
    {"cluster.efficiency.hbm_by_kind.copy", S, Y},
    {"cluster.efficiency.hbm_by_kind.cross_entropy", S, Y},
    {"cluster.efficiency.hbm_by_kind.norm_backward", S, Y},
    {"cluster.efficiency.hbm_by_kind.softmax_backward", S, Y},
    {"cluster.efficiency.hbm_by_kind.activation_backward", S, Y},
    {"cluster.efficiency.hbm_by_kind.cross_entropy_backward", S, Y},
    {"cluster.efficiency.launch_us", S, Y},
    {"cluster.efficiency.outside_allocator_bytes", S, Y},
    {"cluster.efficiency.torch_misaligned_gemm", M, Y},
    {"cluster.efficiency.torch_misaligned_gemm.forward", S, Y},
    {"cluster.efficiency.torch_misaligned_gemm.backward", S, Y},
    {"cluster.efficiency.one_rank_collective", M, Y},
    {"cluster.efficiency.one_rank_collective.latency_us", S, Y},
    {"cluster.efficiency.one_rank_collective.GBps", S, Y},
    {"cluster.efficiency.one_rank_collective.all_gather", M, Y},
    {"cluster.efficiency.one_rank_collective.all_gather.latency_us", S, Y},
    {"cluster.efficiency.one_rank_collective.all_gather.GBps", S, Y},
    {"cluster.efficiency.one_rank_collective.reduce_scatter", M, Y},
    {"cluster.efficiency.one_rank_collective.reduce_scatter.latency_us", S, Y},
    {"cluster.efficiency.one_rank_collective.reduce_scatter.GBps", S, Y},
    {"cluster.efficiency.one_rank_collective.all_reduce", M, Y},
    {"cluster.efficiency.one_rank_collective.all_reduce.latency_us", S, Y},
    {"cluster.efficiency.one_rank_collective.all_reduce.GBps", S, Y},
    {"cluster.efficiency.host_issue", M, Y},
    {"cluster.efficiency.host_issue.kernel_us", S, Y},
    {"cluster.efficiency.host_issue.gemm_us", S, Y},
    {"cluster.efficiency.host_issue.collective_us", S, Y},
    {"cluster.efficiency.host_issue.memcpy_us", S, Y},
    {"cluster.efficiency.host_issue.event_us", S, Y},
    {"cluster.efficiency.host_issue.link_collective_us", S, Y},
    {"cluster.efficiency.deepspeed_host", M, Y},
    {"cluster.efficiency.deepspeed_host.llama_forward_layer_us", S, Y},
    {"cluster.efficiency.deepspeed_host.gpt2_forward_layer_us", S, Y},
    {"cluster.efficiency.deepspeed_host.forward_fixed_us", S, Y},
    {"cluster.efficiency.deepspeed_host.llama_backward_layer_us", S, Y},
    {"cluster.efficiency.deepspeed_host.gpt2_backward_layer_us", S, Y},
    {"cluster.efficiency.deepspeed_host.backward_fixed_us", S, Y},
    {"cluster.efficiency.deepspeed_host.checkpoint_forward_layer_us", S, Y},
    {"cluster.efficiency.deepspeed_host.recompute_layer_us", S, Y},
    {"cluster.efficiency.deepspeed_host.stage3_forward_module_us", S, Y},
    {"cluster.efficiency.deepspeed_host.stage3_backward_module_us", S, Y},
    {"cluster.efficiency.deepspeed_host.stage3_checkpoint_forward_module_us", S, Y},
    {"cluster.efficiency.deepspeed_host.stage3_recompute_module_us", S, Y},
    {"cluster.efficiency.deepspeed_host.stage1_reduce_param_us", S, Y},
    {"cluster.efficiency.deepspeed_host.stage12_offload_param_us", S, Y},
    {"cluster.efficiency.deepspeed_host.step_fixed_us", S, Y},
    {"cluster.efficiency.deepspeed_host.step_param_us", S, Y},
    {"cluster.efficiency.deepspeed_host.stage3_step_param_us", S, Y},
    {"cluster.efficiency.deepspeed_host.stage12_reduce_param_us", S, Y},
    {"cluster.efficiency.deepspeed_host.eager_forward_layer_us", S, Y},
    {"cluster.efficiency.deepspeed_host.eager_backward_layer_us", S, Y},
    {"cluster.efficiency.deepspeed_host.reference_loop_us", S, Y},
    {"cluster.efficiency.deepspeed_host.loop_speed_exponent", S, Y},
    {"cluster.efficiency.deepspeed_host.loop_us", S, Y},
    {"cluster.efficiency.deepspeed_host.autograd_loop_us", S, Y},
    {"cluster.efficiency.beside_compute", M, Y},
    {"cluster.efficiency.beside_compute.memcpy", S, Y},
    {"cluster.efficiency.beside_compute.kernel", S, Y},
    {"cluster.efficiency.beside_compute.collective", S, Y},
    {"cluster.efficiency.beside_compute.link_collective", S, Y},
    {"cluster.efficiency.compute_beside", M, Y},
    {"cluster.efficiency.compute_beside.memcpy", S, Y},
    {"cluster.efficiency.compute_beside.kernel", S, Y},
    {"cluster.efficiency.compute_beside.collective", S, Y},
    {"cluster.efficiency.compute_beside.link_collective", S, Y},
    {"cluster.efficiency.beside_compute_wait", M, Y},
    {"cluster.efficiency.beside_compute_wait.memcpy", S, Y},
    {"cluster.efficiency.beside_compute_wait.kernel", S, Y},
    {"cluster.efficiency.beside_compute_wait.collective", S, Y},
    {"cluster.efficiency.beside_compute_wait.link_collective", S, Y},
    {"cluster.efficiency.flash_attention", M, Y},
    {"cluster.efficiency.flash_attention.forward", S, Y},
    {"cluster.efficiency.flash_attention.backward", S, Y},
    {"cluster.efficiency.cpu_adam_params_per_s_per_core", S, Y},
    {"cluster.efficiency.cpu_adam_node_params_per_s", S, Y},
    {"cluster.efficiency.pageable_pcie_fraction", S, Y},
    {"cluster.efficiency.pageable_h2d_pcie_fraction", S, Y},
    {"cluster.efficiency.gemm_model", M, Y},
    {"cluster.efficiency.gemm_model.launch_us", S, Y},
    {"cluster.efficiency.gemm_model.max_efficiency", S, Y},
    {"cluster.efficiency.gemm_model.io_GBps", S, Y},
    {"cluster.efficiency.gemm_model.io_overlap", S, Y},
    {"cluster.efficiency.gemm_model.attention_shapes", S, Y},
    {"cluster.efficiency.gemm_model.tile_m", S, Y},
    {"cluster.efficiency.gemm_model.tile_n", S, Y},
    {"cluster.efficiency.gemm_model.sms", S, Y},
    {"cluster.efficiency.gemm_model.split_k_depth", S, Y},
    {"cluster.efficiency.gemm_model_fp32", M, Y},
    {"cluster.efficiency.gemm_model_fp32.launch_us", S, Y},
    {"cluster.efficiency.gemm_model_fp32.max_efficiency", S, Y},
    {"cluster.efficiency.gemm_model_fp32.io_GBps", S, Y},
    {"cluster.efficiency.gemm_model_fp32.io_overlap", S, Y},
    {"cluster.efficiency.gemm_model_fp32.attention_shapes", S, Y},
    {"cluster.efficiency.gemm_model_fp32.tile_m", S, Y},
    {"cluster.efficiency.gemm_model_fp32.tile_n", S, Y},
    {"cluster.efficiency.gemm_model_fp32.sms", S, Y},
    {"cluster.efficiency.gemm_model_fp32.split_k_depth", S, Y},

    {"deepspeed", M, Y},
    {"deepspeed.ds_config", S, Y},
    {"deepspeed.train_micro_batch_size_per_gpu", S, Y},
    {"deepspeed.gradient_accumulation_steps", S, Y},
    {"deepspeed.train_batch_size", S, Y},
    {"deepspeed.bf16", M, Y},
    {"deepspeed.bf16.enabled", S, Y},
    {"deepspeed.bf16.immediate_grad_update", A, N},
    {"deepspeed.bf16.check_grad_overflow", A, N},
    {"deepspeed.fp16", M, Y},
    {"deepspeed.fp16.enabled", S, Y},
    {"deepspeed.fp16.auto_cast", A, N},
    {"deepspeed.fp16.loss_scale", A, N},
    {"deepspeed.fp16.initial_scale_power", A, N},
    {"deepspeed.fp16.loss_scale_window", A, N},
    {"deepspeed.fp16.hysteresis", A, N},
    {"deepspeed.fp16.consecutive_hysteresis", A, N},
    {"deepspeed.fp16.min_loss_scale", A, N},
    {"deepspeed.fp16.fp16_master_weights_and_grads", A, R, nullptr, "false",
     "keeps the master weights and gradients in fp16 (stage_1_and_2.py _configure_master_weights, CPU offload only), "
     "which changes the optimizer state per parameter"},
    {"deepspeed.zero_optimization", M, Y},
    {"deepspeed.zero_optimization.stage", S, Y},
    {"deepspeed.zero_optimization.overlap_comm", S, Y},
    {"deepspeed.zero_optimization.contiguous_gradients", S, Y},
    {"deepspeed.zero_optimization.reduce_bucket_size", S, Y},
    {"deepspeed.zero_optimization.allgather_bucket_size", S, Y},
    {"deepspeed.zero_optimization.reduce_scatter", S, Y},
    {"deepspeed.zero_optimization.use_multi_rank_bucket_allreduce", S, Y},
    {"deepspeed.zero_optimization.round_robin_gradients", S, Y},
    {"deepspeed.zero_optimization.stage3_prefetch_bucket_size", S, Y},
    {"deepspeed.zero_optimization.stage3_max_live_parameters", S, Y},
    {"deepspeed.zero_optimization.stage3_max_reuse_distance", S, Y},
    {"deepspeed.zero_optimization.stage3_param_persistence_threshold", S, Y},
    {"deepspeed.zero_optimization.sub_group_size", S, Y},
    {"deepspeed.zero_optimization.offload_optimizer", M, Y},
    {"deepspeed.zero_optimization.offload_optimizer.device", S, Y},
    {"deepspeed.zero_optimization.offload_optimizer.pin_memory", S, Y},
    {"deepspeed.zero_optimization.offload_optimizer.nvme_path", S, Y},
    {"deepspeed.zero_optimization.offload_optimizer.buffer_count", S, Y},
    {"deepspeed.zero_optimization.offload_optimizer.ratio", S, Y},
    {"deepspeed.zero_optimization.offload_optimizer.pipeline_read", A, R, nullptr, "false",
     "overlaps the NVMe reads of optimizer swaps with the step (swap_tensor/pipelined_optimizer_swapper.py), "
     "which changes the step time"},
    {"deepspeed.zero_optimization.offload_optimizer.pipeline_write", A, R, nullptr, "false",
     "overlaps the NVMe writes of optimizer swaps with the step (swap_tensor/pipelined_optimizer_swapper.py), "
     "which changes the step time"},
    {"deepspeed.zero_optimization.offload_optimizer.fast_init", A, N},
    {"deepspeed.zero_optimization.offload_param", M, Y},
    {"deepspeed.zero_optimization.offload_param.device", S, Y},
    {"deepspeed.zero_optimization.offload_param.pin_memory", S, Y},
    {"deepspeed.zero_optimization.offload_param.nvme_path", S, Y},
    {"deepspeed.zero_optimization.offload_param.buffer_count", S, Y},
    {"deepspeed.zero_optimization.offload_param.buffer_size", S, Y},
    {"deepspeed.zero_optimization.offload_param.max_in_cpu", S, Y},
    {"deepspeed.zero_optimization.zero_hpz_partition_size", S, Y},
    {"deepspeed.zero_optimization.zero_quantized_weights", S, Y},
    {"deepspeed.zero_optimization.zero_quantized_gradients", S, Y},
    {"deepspeed.zero_optimization.zeropp_loco_param", M, Y},
    {"deepspeed.zero_optimization.zeropp_loco_param.err_beta", S, Y},
    {"deepspeed.zero_optimization.zeropp_loco_param.reset_T", S, Y},
    {"deepspeed.zero_optimization.stage3_allgather_sequential", S, Y},
    {"deepspeed.zero_optimization.stage3_use_all_reduce_for_fetch_params", S, Y},
    // DeepSpeed's field names that the stage3_* keys alias (pydantic populate_by_name).
    {"deepspeed.zero_optimization.prefetch_bucket_size", S, Y,
     "deepspeed.zero_optimization.stage3_prefetch_bucket_size"},
    {"deepspeed.zero_optimization.param_persistence_threshold", S, Y,
     "deepspeed.zero_optimization.stage3_param_persistence_threshold"},
    {"deepspeed.zero_optimization.max_live_parameters", S, Y,
     "deepspeed.zero_optimization.stage3_max_live_parameters"},
    {"deepspeed.zero_optimization.max_reuse_distance", S, Y,
     "deepspeed.zero_optimization.stage3_max_reuse_distance"},
    {"deepspeed.zero_optimization.allgather_sequential", S, Y,
     "deepspeed.zero_optimization.stage3_allgather_sequential"},
    {"deepspeed.zero_optimization.use_all_reduce_for_fetch_params", S, Y,
     "deepspeed.zero_optimization.stage3_use_all_reduce_for_fetch_params"},
    // zero_optimization keys DeepSpeed accepts and zsim does not model.
    {"deepspeed.zero_optimization.ignore_unused_parameters", A, N},
    {"deepspeed.zero_optimization.memory_efficient_linear", A, N},
    {"deepspeed.zero_optimization.load_from_fp32_weights", A, N},
    {"deepspeed.zero_optimization.elastic_checkpoint", A, N},
    {"deepspeed.zero_optimization.allgather_partitions", A, N},
    {"deepspeed.zero_optimization.stage3_gather_16bit_weights_on_model_save", A, N},
    {"deepspeed.zero_optimization.gather_16bit_weights_on_model_save", A, N},
    {"deepspeed.zero_optimization.stage3_gather_fp16_weights_on_model_save", A, N},
    {"deepspeed.zero_optimization.stage3_model_persistence_threshold", A, R, nullptr, "9223372036854775807",
     "caps the elements kept whole by stage3_param_persistence_threshold (parameter_offload.py "
     "persistent_parameters), which changes what stage 3 gathers"},
    {"deepspeed.zero_optimization.model_persistence_threshold", A, R, nullptr, "9223372036854775807",
     "caps the elements kept whole by stage3_param_persistence_threshold (parameter_offload.py "
     "persistent_parameters), which changes what stage 3 gathers"},
    {"deepspeed.zero_optimization.stage3_module_granularity_threshold", A, R, nullptr, "0",
     "fetches small modules' parameters with their parent module (parameter_offload.py leaf modules), "
     "which changes the stage-3 gather granularity"},
    {"deepspeed.zero_optimization.module_granularity_threshold", A, R, nullptr, "0",
     "fetches small modules' parameters with their parent module (parameter_offload.py leaf modules), "
     "which changes the stage-3 gather granularity"},
    {"deepspeed.zero_optimization.zero_quantized_nontrainable_weights", A, N},
    {"deepspeed.zero_optimization.mics_shard_size", A, R, nullptr, "-1",
     "turns on MiCS (runtime/zero/mics.py): parameters partitioned over groups of mics_shard_size ranks and "
     "replicated across them, a partitioning scheme zsim does not model"},
    {"deepspeed.zero_optimization.mics_hierarchical_params_gather", A, R, nullptr, "false",
     "MiCS's hierarchical all-gather (runtime/zero/mics.py); MiCS is not modelled"},
    {"deepspeed.zero_optimization.pipeline_loading_checkpoint", A, N},
    {"deepspeed.zero_optimization.override_module_apply", A, N},
    {"deepspeed.zero_optimization.legacy_stage1", A, R, nullptr, "false",
     "selects the old stage-1 optimizer (its own partitioning and reduction), not modelled"},
    {"deepspeed.zero_optimization.log_trace_cache_warnings", A, N},
    {"deepspeed.zero_optimization.cpu_offload", A, R, nullptr, "false",
     "the deprecated spelling of offload_optimizer: {device: cpu} (zero/config.py); write that instead"},
    {"deepspeed.zero_optimization.cpu_offload_param", A, R, nullptr, "false",
     "the deprecated spelling of offload_param: {device: cpu} (zero/config.py); write that instead"},
    {"deepspeed.zero_optimization.cpu_offload_use_pin_memory", A, N},
    // Top-level DeepSpeed blocks and keys zsim does not model.
    {"deepspeed.optimizer", A, N},
    {"deepspeed.scheduler", A, N},
    {"deepspeed.gradient_clipping", A, N},
    {"deepspeed.wall_clock_breakdown", A, N},
    {"deepspeed.steps_per_print", A, N},
    {"deepspeed.prescale_gradients", A, N},
    {"deepspeed.gradient_predivide_factor", A, N},
    {"deepspeed.sparse_gradients", A, N},
    {"deepspeed.zero_allow_untested_optimizer", A, N},
    {"deepspeed.zero_force_ds_cpu_optimizer", A, N},
    {"deepspeed.activation_checkpointing", A, N},
    {"deepspeed.flops_profiler", A, N},
    {"deepspeed.tensorboard", A, N},
    {"deepspeed.wandb", A, N},
    {"deepspeed.csv_monitor", A, N},
    {"deepspeed.comet", A, N},
    {"deepspeed.comms_logger", A, N},
    {"deepspeed.communication_data_type", S, Y},
    {"deepspeed.seq_parallel_communication_data_type", A, N},
    {"deepspeed.memory_breakdown", A, N},
    {"deepspeed.dump_state", A, N},
    {"deepspeed.elasticity", A, N},
    {"deepspeed.autotuning", A, N},
    {"deepspeed.data_efficiency", A, N},
    {"deepspeed.curriculum_learning", A, N},
    {"deepspeed.compression_training", A, N},
    {"deepspeed.checkpoint", A, N},
    {"deepspeed.data_types", A, R, nullptr, "",
     "data_types.grad_accum_dtype fp32 with bf16 selects BF16_Optimizer at stage 1 (engine "
     "_do_optimizer_sanity_check) with fp32 gradient accumulation, which zsim does not model"},
    {"deepspeed.aio", A, N},
    {"deepspeed.amp", A, R, nullptr, "",
     "apex amp (engine._configure_optimizer AMP); DeepSpeed rejects it with ZeRO and zsim does not model it; "
     "use bf16 or fp16"},
    {"deepspeed.sparse_attention", A, N},
    {"deepspeed.pipeline", A, N},
    {"deepspeed.eigenvalue", A, N},
    {"deepspeed.progressive_layer_drop", A, N},
    {"deepspeed.hybrid_engine", A, N},
    {"deepspeed.torch_autocast", A, R, nullptr, "",
     "torch autocast keeps fp32 parameters and reduces in per-parameter dtypes (stage_1_and_2.py "
     "get_all_comm_dtypes), which changes memory and traffic"},
    {"deepspeed.graph_harvesting", A, N},
    {"deepspeed.nebula", A, N},
    {"deepspeed.disable_allgather", A, N},
};

// Every key: kEntries, then efficiency.nvlink_busbw's block per collective kind and key per size, nvme's
// read_GBps_by_size / write_GBps_by_size key per size, group_busbw's block per group shape, and
// efficiency.cpu_adam_measured's block per rank count and key per thread count, from the lists the parser reads them by
// (kNvlinkBusbwKinds, kNvlinkBusbwSizes, group_busbw_shapes, kCpuAdamMeasuredRanks, kCpuAdamMeasuredThreads).
const std::vector<Entry>& entries() {
  static const std::vector<std::pair<std::string, KeyKind>> generated = [] {
    const std::string block = "cluster.efficiency.nvlink_busbw";
    std::vector<std::pair<std::string, KeyKind>> g{{block, M}};
    for (const char* kind : kNvlinkBusbwKinds) {
      g.emplace_back(block + "." + kind, M);
      for (const auto& [label, bytes] : kNvlinkBusbwSizes) g.emplace_back(block + "." + kind + "." + label, S);
    }
    for (const std::string nvme : {"cluster.nvme.read_GBps_by_size", "cluster.nvme.write_GBps_by_size"}) {
      g.emplace_back(nvme, M);
      for (const auto& [label, bytes] : kNvlinkBusbwSizes) g.emplace_back(nvme + "." + label, S);
    }
    const std::string groups = "cluster.efficiency.group_busbw";
    g.emplace_back(groups, M);
    for (const auto& [n, k] : group_busbw_shapes()) {
      const std::string shape = groups + "." + group_busbw_shape(n, k);
      g.emplace_back(shape, M);
      for (const char* kind : kNvlinkBusbwKinds) {
        g.emplace_back(shape + "." + kind, M);
        for (const auto& [label, bytes] : kNvlinkBusbwSizes) g.emplace_back(shape + "." + kind + "." + label, S);
      }
    }
    const std::string adam = "cluster.efficiency.cpu_adam_measured";
    g.emplace_back(adam, M);
    for (const int ranks : kCpuAdamMeasuredRanks) {
      const std::string r = adam + ".ranks_" + std::to_string(ranks);
      g.emplace_back(r, M);
      for (const int threads : kCpuAdamMeasuredThreads) g.emplace_back(r + ".threads_" + std::to_string(threads), S);
    }
    return g;
  }();
  static const std::vector<Entry> all = [] {
    std::vector<Entry> v(std::begin(kEntries), std::end(kEntries));
    for (const auto& [path, kind] : generated) v.push_back({path.c_str(), kind, Y});
    return v;
  }();
  return all;
}

const std::map<std::string, const Entry*>& index() {
  static const std::map<std::string, const Entry*> idx = [] {
    std::map<std::string, const Entry*> m;
    for (const auto& e : entries()) m.emplace(e.path, &e);
    return m;
  }();
  return idx;
}

}  // namespace

std::optional<KeyInfo> find_key(const std::string& dotted_path) {
  const auto& idx = index();
  auto it = idx.find(dotted_path);
  if (it == idx.end()) return std::nullopt;
  const Entry& e = *it->second;
  return KeyInfo{e.kind, e.status, e.alias_of ? e.alias_of : e.path, e.harmless, e.why};
}

std::vector<std::string> child_key_names(const std::string& parent_path) {
  std::vector<std::string> names;
  std::string prefix = parent_path.empty() ? "" : parent_path + ".";
  for (const auto& e : entries()) {
    std::string p = e.path;
    if (p.compare(0, prefix.size(), prefix) != 0) continue;
    std::string rest = p.substr(prefix.size());
    if (!rest.empty() && rest.find('.') == std::string::npos) names.push_back(rest);
  }
  return names;
}

std::vector<std::string> all_key_paths() {
  std::vector<std::string> paths;
  for (const auto& e : entries()) paths.emplace_back(e.path);
  return paths;
}

std::string unknown_key_message(const std::string& parent_path, const std::string& key) {
  std::string msg = "unknown key '" + key + "'";
  std::string near = nearest_name(key, child_key_names(parent_path));
  if (!near.empty()) msg += ", did you mean '" + near + "'?";
  else {
    auto names = child_key_names(parent_path);
    if (!names.empty() && names.size() <= 12) {
      msg += " (valid here:";
      for (const auto& n : names) msg += " " + n;
      msg += ")";
    }
  }
  return msg;
}

}  // namespace zsim
