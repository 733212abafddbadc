#include "runtime/cli/job_setup.hpp"

#include <fmt/format.h>

#include "runtime/model/flash_attention.hpp"
#include "runtime/nvme/nvme_layout.hpp"
#include "sim/common/error.hpp"
#include "sim/plan/plan.hpp"
#include "sim/plan/schedule_builder.hpp"
#include "sim/report/human_units.hpp"
#include "sim/report/report.hpp"
#include "sim/scenario/scenario_parse.hpp"
#include "sim/schedule/schedule_json.hpp"

namespace zrun {

namespace {

// zrun's layers are Llama's (RMSNorm, separate q/k/v/o, SiLU-gated MLP) or GPT's (LayerNorm and biases, GeLU), built
// from ModelSpec's bias and mlp; a config.json of another family (hf_families.cpp) runs under DeepSpeed only.
bool zrun_builds_layer(const zsim::ModelSpec& m) {
  if (m.arch.model_type.empty()) return true;
  const zsim::ArchSpec& a = m.arch;
  const bool llama = a.norm == zsim::NormKind::rms && a.act == zsim::ActKind::silu && !a.qkv_bias && !a.o_bias &&
                     !a.mlp_bias;
  const bool gpt = a.norm == zsim::NormKind::layer && a.act == zsim::ActKind::gelu_new && m.bias;
  return (llama || gpt) && !a.fused_qkv && !a.fused_gate_up && a.qk_norm == zsim::QkNorm::none &&
         a.block == zsim::BlockKind::pre_norm && a.position_offset == 0 && zsim::head_dim(m) * m.heads == m.hidden;
}

}  // namespace

using zsim::InputError;

zsim::Scenario load_job_scenario(const ZrunArgs& args, const LaunchShape& launched,
                                 const std::optional<LocalGpu>& here_gpu) {
  std::vector<std::string> overrides = args.overrides;
  const int world = launched.world_size;
  const auto shape_error = [&](const std::string& why) {
    return InputError({args.scenario, 0, 0, "cluster"}, why);
  };
  int gpus_per_node = 0;  // 0: keep the scenario's shape
  if (args.gpus_per_node > 0) {
    gpus_per_node = args.gpus_per_node;
  } else if (args.here) {
    gpus_per_node = launched.local_world_size > 0 ? launched.local_world_size : world;
  }
  if (gpus_per_node > 0) {
    if (world % gpus_per_node != 0)
      throw shape_error(fmt::format("{} GPUs per node do not divide the {} ranks launched ({})", gpus_per_node, world,
                                    launched.how));
    overrides.push_back(fmt::format("cluster.nodes={}", world / gpus_per_node));
    overrides.push_back(fmt::format("cluster.gpus_per_node={}", gpus_per_node));
  }
  if (args.here && here_gpu && here_gpu->hbm_bytes > 0)
    overrides.push_back(fmt::format("cluster.gpu.hbm_bytes={}", here_gpu->hbm_bytes));
  // zrun runs its own layers and allocates the schedule's buffers: the schedule of runtime zrun, whatever the file says.
  overrides.push_back("runtime=zrun");
  zsim::Scenario s = zsim::load_scenario(args.scenario, overrides);
  if (s.world_size() != world)
    throw shape_error(fmt::format("the scenario's cluster is {} node(s) x {} GPUs per node = {} ranks, but {} "
                                  "rank(s) were launched ({}); pass --here to run on the GPUs launched, or "
                                  "--gpus-per-node K to split them into virtual nodes",
                                  s.cluster.nodes, s.cluster.gpus_per_node, s.world_size(), world, launched.how));
  // zrun's model (runtime/model) runs eager attention (the scores materialised) or flash attention (its own
  // kernels: bf16 / fp16, head dim 64 or 128), and applies no dropout: a scenario that says otherwise would be
  // measured against a prediction for another model.
  if (s.model.attention == zsim::Attention::flash) {
    const std::int64_t head_dim = zsim::head_dim(s.model);
    const zrun::model::DType dt = s.training.precision == zsim::Precision::bf16   ? zrun::model::DType::bf16
                                  : s.training.precision == zsim::Precision::fp16 ? zrun::model::DType::fp16
                                                                                  : zrun::model::DType::fp32;
    if (!zrun::model::flash_attention_supported(dt, head_dim))
      throw InputError({args.scenario, 0, 0, "model.attention"},
                       fmt::format("zrun's flash attention runs bf16 / fp16 with head dim 64 or 128 (this model: {}, "
                                   "head dim {}); set model.attention: eager",
                                   zrun::model::dtype_name(dt), head_dim));
  }
  if (!zrun_builds_layer(s.model))
    throw InputError({args.scenario, 0, 0, "model.hf_config"},
                     fmt::format("zrun's model builds Llama's and GPT's layers; this model ({}) has a layer of its own "
                                 "(transformers' model, run under DeepSpeed): zsim predicts it with runtime deepspeed",
                                 s.model.arch.model_type));
  if (s.model.attention_dropout > 0 || s.model.hidden_dropout > 0)
    throw InputError({args.scenario, 0, 0, s.model.attention_dropout > 0 ? "model.attention_dropout" : "model.hidden_dropout"},
                     "zrun's model applies no dropout; set model.attention_dropout and model.hidden_dropout to 0");
  return s;
}

namespace {

// NVMe offload: the directory exists, is writable and has room for the swap files of every rank of the node. Every
// NVMe buffer of the rank (optimizer state, parameter partitions) goes into one directory: --nvme-dir, else
// offload_optimizer.nvme_path when the optimizer is on NVMe, else offload_param.nvme_path.
std::string nvme_directory(const ZrunArgs& args, const zsim::Scenario& s, const zsim::Schedule& sch) {
  const bool from_args = !args.nvme_dir.empty();
  const bool optimizer = s.zero.offload_optimizer.device == zsim::OffloadDevice::nvme;
  const std::string dir = from_args ? args.nvme_dir
                          : optimizer ? s.zero.offload_optimizer.nvme_path
                                      : s.zero.offload_param.nvme_path;
  try {
    NvmeStore::check_directory(dir);
    NvmeStore::check_space(dir, nvme_bytes_per_rank(sch) * s.cluster.gpus_per_node);
  } catch (const NvmeError& e) {
    throw InputError({from_args ? std::string("--nvme-dir") : args.scenario, 0, 0,
                      from_args   ? ""
                      : optimizer ? "deepspeed.zero_optimization.offload_optimizer.nvme_path"
                                  : "deepspeed.zero_optimization.offload_param.nvme_path"},
                     e.what());
  }
  return dir;
}

}  // namespace

Job plan_job(const ZrunArgs& args, zsim::Scenario scenario) {
  Job job;
  // Made even when --schedule gives the schedule: the planner refuses combinations the validator lets by.
  const zsim::Plan plan = [&] {
    try {
      return zsim::make_plan(scenario);
    } catch (const std::invalid_argument& e) {
      throw InputError({args.scenario, 0, 0, ""}, e.what());
    }
  }();
  if (!args.schedule_file.empty()) {
    job.schedule = zsim::read_schedule_json(args.schedule_file);
    const zsim::ScheduleMeta& m = job.schedule.meta;
    if (m.world_size != scenario.world_size() || m.gpus_per_node != scenario.cluster.gpus_per_node)
      throw InputError({args.schedule_file, 0, 0, "meta"},
                       fmt::format("the schedule is for {} ranks of {} GPUs per node, the job has {} ranks of {}",
                                   m.world_size, m.gpus_per_node, scenario.world_size(),
                                   scenario.cluster.gpus_per_node));
  } else {
    try {
      job.schedule = zsim::make_schedule(scenario, plan, args.warmup + args.steps);
    } catch (const std::invalid_argument& e) {  // the builder refused a combination the validator let by
      throw InputError({args.scenario, 0, 0, ""}, e.what());
    }
  }
  const zsim::Report report = zsim::make_report(scenario, job.schedule);
  job.fits = report.fits;
  const zsim::MemoryWalk& m = report.memory;
  for (const zsim::TierMemory* t : {&m.gpu, &m.cpu, &m.nvme}) {
    if (t->peak == 0 && t->fits()) continue;
    const std::string line = fmt::format("{} peak {} {} capacity {}", zsim::to_string(t->tier),
                                         zsim::human_bytes(t->peak), t->fits() ? "<=" : ">",
                                         zsim::human_bytes(t->capacity));
    if (!t->fits()) {
      job.fit_summary = line + (t->peak_op_name.empty() ? "" : " (at op '" + t->peak_op_name + "')");
      break;
    }
    if (job.fit_summary.empty()) job.fit_summary = line;
  }
  if (!job.fits && !args.force)
    throw InputError({args.scenario, 0, 0, ""},
                     "zsim predicts this does not fit: " + job.fit_summary + "; --force runs it anyway");
  if (plan.optimizer_device == zsim::OffloadDevice::nvme || plan.param_device == zsim::OffloadDevice::nvme)
    job.nvme_dir = nvme_directory(args, scenario, job.schedule);
  job.scenario = std::move(scenario);
  return job;
}

}  // namespace zrun
