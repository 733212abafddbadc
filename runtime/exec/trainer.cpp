#include "runtime/exec/trainer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <fstream>
#include <iostream>

#include <unistd.h>

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <nlohmann/json.hpp>

#include "runtime/comm/check.hpp"
#include "kernels/cpu/cpu_adam.hpp"
#include "runtime/exec/bus_bandwidth.hpp"
#include "runtime/exec/cpu_threads.hpp"
#include "runtime/exec/executor.hpp"
#include "runtime/exec/offload_figures.hpp"
#include "runtime/exec/timing_event_probe.hpp"
#include "runtime/memory/cuda_memory_backend.hpp"
#include "runtime/memory/memory_accounting.hpp"
#include "runtime/model/model_config.hpp"
#include "sim/common/atomic_file.hpp"
#include "sim/engine/time_schedule.hpp"
#include "sim/engine/trace_writer.hpp"
#include "sim/report/human_units.hpp"
#include "sim/report/memory_walk.hpp"
#include "sim/report/report.hpp"
#include "sim/report/report_json.hpp"

namespace zrun {

using nlohmann::ordered_json;
using zsim::Bytes;
using zsim::human_bytes;
using zsim::MemCategory;
using zsim::Tier;

namespace {

constexpr MemCategory kCategories[] = {MemCategory::params, MemCategory::grads, MemCategory::optimizer,
                                       MemCategory::activations, MemCategory::buffers};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// FLOPs of the step's ops as zsim counts them: forward and backward ops (model FLOPs), and recompute.
void step_flops(const zsim::Schedule& s, const std::vector<zsim::OpId>& step_ops, double& model, double& recompute) {
  model = recompute = 0;
  for (zsim::OpId id : step_ops) {
    const zsim::Op& op = s.ops[id];
    if (op.kind != zsim::OpKind::compute) continue;
    if (op.compute.what == zsim::ComputeKind::forward || op.compute.what == zsim::ComputeKind::backward)
      model += op.compute.flops;
    if (op.compute.what == zsim::ComputeKind::recompute) recompute += op.compute.flops;
  }
}


// Arenas: the GPU's free memory less what NCCL, cuBLAS and the CUDA context need later (with --share-gpu, every
// rank's equal share of the GPU's memory less that); pinned host memory as the schedule's CPU tier peak per rank,
// plus half of it as room for the arena's fragmentation, ranges 4096-aligned for O_DIRECT NVMe transfers.
struct Memory {
  Memory(const ZrunArgs& args, const zsim::Scenario& sc, const zsim::Schedule& sch, int rank)
      : predicted(zsim::walk_memory(sch, zsim::capacity_of(sc))),
        gpu_dev(Tier::gpu),
        cpu_dev(Tier::cpu),
        gpu(Tier::gpu, gpu_bytes(args, sch), gpu_dev, rank, acc),
        cpu(Tier::cpu, cpu_bytes(predicted, sch), cpu_dev, rank, acc, 4096) {}
  static Bytes gpu_bytes(const ZrunArgs& args, const zsim::Schedule& sch) {
    std::size_t free_b = 0, total_b = 0;
    ZRUN_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    const Bytes reserve = 1536LL << 20;
    if (args.share_gpu)
      free_b = std::min<std::size_t>(free_b, total_b / static_cast<std::size_t>(std::max(1, sch.meta.world_size)));
    return static_cast<Bytes>(free_b) - reserve;
  }
  static Bytes cpu_bytes(const zsim::MemoryWalk& predicted, const zsim::Schedule& sch) {
    const Bytes cpu_peak = predicted.cpu.peak / std::max(1, sch.meta.gpus_per_node);
    return cpu_peak + cpu_peak / 2 + (64LL << 20);
  }
  const zsim::MemoryWalk predicted;
  MemoryAccounting acc;
  CudaMemoryBackend gpu_dev, cpu_dev;
  Arena gpu, cpu;
};

ExecOptions exec_options(const ZrunArgs& args, const Job& job, int rank) {
  const zsim::Scenario& sc = job.scenario;
  ExecOptions o;
  o.time_ops = !args.json_file.empty() || !args.trace_file.empty() || !args.csv_file.empty();
  if (const char* t = std::getenv("ZRUN_OP_TIMEOUT_S")) o.op_timeout_s = std::atof(t);
  if (const char* lr = std::getenv("ZRUN_LR")) o.lr = static_cast<float>(std::atof(lr));
  if (const char* e = std::getenv("ZRUN_QGZ_ERROR")) o.qgz_error = std::string(e) == "1";
  // Each rank's CPU Adam on the scenario's cores per rank (host.cores / gpus_per_node), the cores zsim prices it on;
  // a scenario without host.cores: OpenMP's default (every hardware thread).
  o.cpu_adam_threads = cpu_adam_threads(sc.cluster.host.cores, sc.cluster.gpus_per_node);
  o.nvme_dir = job.nvme_dir;
  o.nvme_tag = fmt::format("r{}.{}", rank, ::getpid());
  return o;
}

// The steps run: warm-up, measured (untimed), and with per-op timing one more.
struct StepRuns {
  std::vector<StepResult> steps;
  std::vector<double> times, issue_times;     // the untimed steps' GPU times and the host's time to issue them
  std::vector<std::vector<double>> op_issue;  // per op of the step (step_ops order): the host's time in it, per step
  int measured_end = 0;                       // steps before it are warm-up or measured
};

// Per-op timing (--json, --trace, --csv) runs one more step after the measured ones, with a CUDA event per op; the
// measured steps run without them, which would slow them by 2-8% on the suite's models
// (runtime/scripts/timing_events_overhead.sh), so the step time reported is the untimed steps' median.
StepRuns run_steps(Executor& ex, const ZrunArgs& args, bool time_ops, int rank) {
  StepRuns runs;
  runs.measured_end = args.warmup + args.steps;
  const int total = runs.measured_end + (time_ops ? 1 : 0);
  for (int i = 0; i < total; ++i) {
    const bool timed_step = i >= runs.measured_end;
    StepResult r = ex.run_step(i, timed_step);
    if (rank == 0)
      std::cout << fmt::format("step {:4d}  loss {:.6f}  {:9.3f} ms{}{}\n", i, r.loss, r.seconds * 1e3,
                               r.qgz_error >= 0 ? fmt::format("  qgz error {:.3e}", r.qgz_error) : "",
                               i < args.warmup ? "  (warm-up)" : timed_step ? "  (per-op timing, not in the median)" : "")
                << std::flush;
    if (i >= args.warmup && !timed_step) {
      runs.times.push_back(r.seconds), runs.issue_times.push_back(r.host_issue_s);
      runs.op_issue.resize(r.op_issue_s.size());
      for (std::size_t k = 0; k < r.op_issue_s.size(); ++k) runs.op_issue[k].push_back(r.op_issue_s[k]);
    }
    runs.steps.push_back(std::move(r));
  }
  return runs;
}

// What each op's measured time carries of its timing event (zsim validate takes it off).
double measure_timing_event_s() {
  cudaStream_t probe = nullptr;
  ZRUN_CUDA_CHECK(cudaStreamCreateWithFlags(&probe, cudaStreamNonBlocking));
  const double s = timing_event_cost_s(probe);
  ZRUN_CUDA_CHECK(cudaStreamDestroy(probe));
  return s;
}

// ZRUN_DUMP_MASTER=PREFIX: this rank's fp32 master weights after the last step, raw floats in PREFIX.r<rank> (the
// offload tests compare them across optimizer placements).
void dump_master_weights_if_asked(Executor& ex, int rank) {
  const char* dump = std::getenv("ZRUN_DUMP_MASTER");
  if (!dump) return;
  const std::vector<float> w = ex.master_weights();
  std::ofstream f(fmt::format("{}.r{}", dump, rank), std::ios::binary);
  f.write(reinterpret_cast<const char*>(w.data()), static_cast<std::streamsize>(w.size() * sizeof(float)));
  if (!f) throw std::runtime_error(fmt::format("ZRUN_DUMP_MASTER: cannot write {}.r{}", dump, rank));
}

// The last step's collectives and their times: rank 0's own, and the minimum over ranks.
struct CollectiveTimes {
  std::vector<zsim::OpId> ids;
  std::vector<float> seconds, rank0_seconds;
};

// A collective's time on one rank includes waiting for the others to arrive: the rank that arrives last
// measures the collective itself, so each collective's duration is the minimum over ranks (durations do not
// depend on the ranks' clocks).
CollectiveTimes collective_times(const zsim::Schedule& sch, const StepResult& last, Communicators& comms) {
  CollectiveTimes c;
  for (std::size_t id = 0; id < last.ops.size(); ++id)
    if (sch.ops[id].kind == zsim::OpKind::collective && last.ops[id].end_s > 0) c.ids.push_back(id);
  c.seconds.resize(c.ids.size());
  for (std::size_t i = 0; i < c.ids.size(); ++i)
    c.seconds[i] = static_cast<float>(last.ops[c.ids[i]].end_s - last.ops[c.ids[i]].start_s);
  c.rank0_seconds = c.seconds;
  if (!c.seconds.empty() && sch.meta.world_size > 1) {
    float* d = nullptr;
    ZRUN_CUDA_CHECK(cudaMalloc(&d, c.seconds.size() * sizeof(float)));
    ZRUN_CUDA_CHECK(cudaMemcpy(d, c.seconds.data(), c.seconds.size() * sizeof(float), cudaMemcpyHostToDevice));
    ZRUN_NCCL_CHECK(ncclAllReduce(d, d, c.seconds.size(), ncclFloat32, ncclMin, comms.world(), nullptr));
    ZRUN_CUDA_CHECK(cudaMemcpy(c.seconds.data(), d, c.seconds.size() * sizeof(float), cudaMemcpyDeviceToHost));
    ZRUN_CUDA_CHECK(cudaFree(d));
  }
  return c;
}

// The step's figures rank 0 reports.
struct StepFigures {
  double step_s = 0, tflops = 0, hw_tflops = 0, tokens_s = 0;
  Bytes outside_arena = 0;  // CUDA context, NCCL, cuBLAS workspace
};

StepFigures step_figures(const zsim::Schedule& sch, const Executor& ex, const StepRuns& runs, const Arena& gpu) {
  StepFigures f;
  f.step_s = median(runs.times);
  double model_flops = 0, recompute_flops = 0;
  step_flops(sch, ex.step_ops(), model_flops, recompute_flops);
  f.tflops = f.step_s > 0 ? model_flops / f.step_s / 1e12 : 0;
  f.hw_tflops = f.step_s > 0 ? (model_flops + recompute_flops) / f.step_s / 1e12 : 0;
  f.tokens_s = f.step_s > 0 ? static_cast<double>(sch.meta.tokens_per_step) / f.step_s : 0;
  std::size_t free_after = 0, total_b = 0;
  ZRUN_CUDA_CHECK(cudaMemGetInfo(&free_after, &total_b));
  f.outside_arena = static_cast<Bytes>(total_b - free_after) - gpu.capacity_bytes();
  return f;
}

}  // namespace

int train(const ZrunArgs& args, const Job& job, int rank, Communicators& comms, Watchdog& dog,
          const FaultInjector& faults) {
  const zsim::Scenario& sc = job.scenario;
  const zsim::Schedule& sch = job.schedule;
  const zsim::Plan plan = zsim::make_plan(sc);
  model::Model model(model::model_config(sc, plan), plan.units);
  Memory mem(args, sc, sch, rank);
  const ExecOptions o = exec_options(args, job, rank);
  const int adam_threads = zk::cpu_adam_thread_count(o.cpu_adam_threads);
  Executor ex(sch, plan, rank, comms, mem.gpu, mem.cpu, model, dog, faults, o);
  ex.run_init();

  const StepRuns runs = run_steps(ex, args, o.time_ops, rank);
  const std::vector<StepResult>& steps = runs.steps;
  const double timing_event_s = o.time_ops ? measure_timing_event_s() : 0;
  dump_master_weights_if_asked(ex, rank);
  const StepResult& last = steps.back();
  const CollectiveTimes colls = collective_times(sch, last, comms);
  const double qgz_accumulated = ex.qgz_accumulated_error();  // every rank: an all-reduce
  if (rank != 0) return 0;

  // ---- the report: measured beside predicted -------------------------------------------------------
  const StepFigures fig = step_figures(sch, ex, runs, mem.gpu);
  const double step_s = fig.step_s, tflops = fig.tflops, hw_tflops = fig.hw_tflops, tokens_s = fig.tokens_s;
  const Bytes outside_arena = fig.outside_arena;
  const MemoryAccounting& acc = mem.acc;
  const zsim::MemoryWalk& predicted = mem.predicted;
  const int measured_end = runs.measured_end;
  const std::vector<double>& issue_times = runs.issue_times;
  const std::vector<std::vector<double>>& op_issue = runs.op_issue;
  const std::vector<zsim::OpId>& coll_ids = colls.ids;
  const std::vector<float>& coll_s = colls.seconds;
  const std::vector<float>& rank0_coll_s = colls.rank0_seconds;

  std::cout << fmt::format("\nzrun measured {} step(s) after {} warm-up, {} rank(s)\n", args.steps, args.warmup,
                           sch.meta.world_size);
  std::cout << fmt::format("time per step      {:.3f} ms (median)\n", step_s * 1e3);
  if (o.time_ops)
    std::cout << fmt::format("per-op timed step  {:.3f} ms (step {}, one CUDA event per op; the ops' times are its)\n",
                             steps.back().seconds * 1e3, steps.size() - 1);
  std::cout << fmt::format("TFLOPS per GPU     {:.1f} model, {:.1f} with recomputation\n", tflops / sch.meta.world_size,
                           hw_tflops / sch.meta.world_size);
  std::cout << fmt::format("tokens/s           {:.0f}\n", tokens_s);
  std::cout << fmt::format("loss               {:.4f} -> {:.4f}\n", steps.front().loss, steps.back().loss);
  if (qgz_accumulated >= 0)
    std::cout << fmt::format("qgz error          {:.3e} accumulated over {} steps (the summed reduced gradients against "
                             "the summed fp32 reductions)\n",
                             qgz_accumulated, steps.size());
  // zsim's peak of each category over the program (its memory walk's own peak is of the total).
  std::map<MemCategory, Bytes> zsim_peak = zsim::category_peaks(sch, Tier::gpu);
  std::cout << "\n  GPU memory peak per category   measured: schedule's buffers (+ beyond them)   zsim's peak\n";
  for (MemCategory c : kCategories) {
    const Bytes beyond = acc.detail(Tier::gpu, c, kBeyondSchedule).peak;
    std::cout << fmt::format("  {:<28} {:>12} (+ {:>10})    {:>12}\n", zsim::to_string(c),
                             human_bytes(acc.category(Tier::gpu, c).peak), human_bytes(beyond),
                             human_bytes(zsim_peak[c]));
  }
  std::cout << fmt::format("  {:<28} {:>12}                    {:>12}\n", "peak (all categories)",
                           human_bytes(acc.tier(Tier::gpu).peak), human_bytes(predicted.gpu.peak));
  std::cout << fmt::format("  outside the arena (CUDA context, NCCL, cuBLAS): {}; the model's scratch: {}\n",
                           human_bytes(outside_arena), human_bytes(model.scratch_bytes()));
  // ZeRO-Offload's pieces in the last step (rank 0), beside zsim's timing of the same ops.
  std::vector<OpInterval> measured_ops;
  for (const OpTime& t : last.ops) measured_ops.push_back({t.start_s, t.end_s});
  const OffloadFigures off = offload_figures(sch, ex.step_ops(), measured_ops, rank);
  OffloadFigures predicted_off;
  double zsim_exposed_offload_s = 0;
  if (off.any()) {
    try {  // zsim's timing of the same schedule (the scenario's cluster, host and NVMe figures)
      const zsim::TimeOutputs zt = zsim::time_schedule(sc, sch);
      std::vector<OpInterval> sim_ops;
      for (const zsim::OpTiming& t : zt.result.ops) sim_ops.push_back({t.start_s, t.end_s});
      predicted_off = offload_figures(sch, ex.step_ops(), sim_ops, rank);
      zsim_exposed_offload_s = zt.report.offload_s;
    } catch (const std::exception& e) {
      std::cout << "  (zsim cannot time this schedule: " << e.what() << ")\n";
    }
    std::cout << "\n  Offload in the last step (rank 0)   ops        bytes    measured        rate     zsim's time\n";
    auto line = [](const char* what, const PieceFigures& m, const PieceFigures& p) {
      if (m.ops == 0) return;
      std::cout << fmt::format("  {:<34} {:>4} {:>12} {:>9.3f} ms {:>7.2f} GB/s {:>9.3f} ms\n", what, m.ops,
                               human_bytes(m.bytes), m.seconds * 1e3, m.GBps(), p.seconds * 1e3);
    };
    line("d2h (gradients down)", off.d2h, predicted_off.d2h);
    line("h2d (16-bit weights, grads up)", off.h2d, predicted_off.h2d);
    line("nvme_read (state, params)", off.nvme_read, predicted_off.nvme_read);
    line("nvme_write (state, params)", off.nvme_write, predicted_off.nvme_write);
    if (off.cpu_optimizer.ops > 0)
      std::cout << fmt::format("  {:<34} {:>4} {:>9} par. {:>9.3f} ms {:>7.3g} par/s {:>8.3f} ms\n",
                               fmt::format("CPU Adam ({} threads)", adam_threads),
                               off.cpu_optimizer.ops, off.cpu_optimizer.elements, off.cpu_optimizer.seconds * 1e3,
                               off.cpu_optimizer.per_s(), predicted_off.cpu_optimizer.seconds * 1e3);
    std::cout << fmt::format("  exposed offload (zsim's definition) {:.3f} ms measured, {:.3f} ms zsim\n",
                             off.exposed_s * 1e3, zsim_exposed_offload_s * 1e3);
    if (const NvmeStore* nv = ex.nvme())
      std::cout << fmt::format("  NVMe swap files in {}: {}, {}\n", nv->dir(),
                               !nv->direct() ? "buffered (the file system refused O_DIRECT)"
                               : nv->files() > 0 ? fmt::format("O_DIRECT (host memory aligned to {} B)",
                                                               nv->memory_alignment(0))
                                                 : std::string("O_DIRECT"),
                               nv->io().uses_io_uring() ? "io_uring" :
                               "pread/pwrite (" + nv->io().fallback_reason() + ")");
  }
  for (const BufferMismatch& m : ex.buffer_mismatches())
    std::cout << fmt::format("  buffer {} ({}{}): the schedule gives {}, the model needs {}\n", m.buffer,
                             zsim::to_string(m.category), m.detail.empty() ? "" : "/" + m.detail,
                             human_bytes(m.schedule_bytes), human_bytes(m.needed_bytes));

  if (!args.json_file.empty()) {
    zsim::Report rep = zsim::make_report(sc, sch);
    ordered_json j = zsim::report_to_json(rep);
    ordered_json m;
    m["steps"] = ordered_json::array();
    for (std::size_t i = 0; i < steps.size(); ++i)
      m["steps"].push_back({{"step", i}, {"warmup", static_cast<int>(i) < args.warmup},
                            {"timed_ops", static_cast<int>(i) >= measured_end}, {"time_s", steps[i].seconds},
                            {"loss", steps[i].loss}});
    m["command"] = {{"scenario", args.scenario}, {"overrides", args.overrides}, {"steps", args.steps},
                    {"warmup", args.warmup}};
    m["step_time_s"] = step_s;                      // the median of the measured steps, untimed
    // The issuing thread's time per untimed step (median): what zsim's host model predicts.
    if (!issue_times.empty()) m["host_issue_s"] = median(issue_times);
    // ... and per op (the median over the same steps): the issuing thread's wall time from the op's first call to
    // the next op's, waits included (an allocation that waits for a free, a full queue).
    if (!op_issue.empty()) {
      m["host_issue_ops"] = ordered_json::array();
      for (std::size_t k = 0; k < op_issue.size(); ++k)
        m["host_issue_ops"].push_back({{"id", ex.step_ops()[k]}, {"name", sch.ops[ex.step_ops()[k]].name},
                                       {"micro_step", sch.ops[ex.step_ops()[k]].micro_step},
                                       {"s", median(op_issue[k])}});
    }
    m["timed_step_time_s"] = steps.back().seconds;  // the step whose ops are timed (ops, trace)
    if (o.time_ops) m["timing_event_s"] = timing_event_s;  // a timing event's cost on the GPU's timeline, per op
    if (qgz_accumulated >= 0) {
      ordered_json per_step = ordered_json::array();
      for (const StepResult& r : steps) per_step.push_back(r.qgz_error);
      m["qgz_error"] = {{"per_step", per_step}, {"accumulated", qgz_accumulated}};
    }
    // The OpenMP threads each rank's CPU Adam ran on (the scenario's host.cores / gpus_per_node, else OpenMP's default).
    m["cpu_adam_threads"] = adam_threads;
    m["tflops_per_gpu"] = tflops / sch.meta.world_size;
    m["hardware_tflops_per_gpu"] = hw_tflops / sch.meta.world_size;
    m["tokens_per_s"] = tokens_s;
    ordered_json peaks, beyond, predicted_peaks;
    for (MemCategory c : kCategories) {
      predicted_peaks[zsim::to_string(c)] = zsim_peak[c];
      peaks[zsim::to_string(c)] = acc.category(Tier::gpu, c).peak;
      beyond[zsim::to_string(c)] = acc.detail(Tier::gpu, c, kBeyondSchedule).peak;
    }
    m["gpu_peak_bytes"] = acc.tier(Tier::gpu).peak;
    m["gpu_peak_bytes_by_category"] = peaks;
    m["gpu_beyond_schedule_peak_bytes_by_category"] = beyond;
    m["zsim_gpu_peak_bytes_by_category"] = predicted_peaks;
    m["zsim_gpu_peak_bytes"] = predicted.gpu.peak;
    // Every tier's peak and each category's own peak on it, this rank's: the GPU and CPU arenas' accounting as the
    // schedule's allocs and frees ran, the NVMe swap files' bytes on disk (made at init, held for the run).
    ordered_json tiers;
    for (Tier t : {Tier::gpu, Tier::cpu}) {
      ordered_json by_category;
      for (MemCategory c : kCategories) by_category[zsim::to_string(c)] = acc.category(t, c).peak;
      tiers[zsim::to_string(t)] = {{"peak", acc.tier(t).peak}, {"by_category", by_category}};
    }
    ordered_json nvme_by_category;
    Bytes nvme_total = 0;
    for (MemCategory c : kCategories) {
      const auto it = ex.nvme_file_bytes().find(c);
      const Bytes bytes = it == ex.nvme_file_bytes().end() ? 0 : it->second;
      nvme_by_category[zsim::to_string(c)] = bytes;
      nvme_total += bytes;
    }
    tiers["nvme"] = {{"peak", nvme_total}, {"by_category", nvme_by_category}};
    m["peak_bytes_by_tier"] = tiers;
    m["device_bytes_outside_arena"] = outside_arena;
    m["model_scratch_bytes"] = model.scratch_bytes();
    m["buffer_mismatches"] = ordered_json::array();
    for (const BufferMismatch& b : ex.buffer_mismatches())
      m["buffer_mismatches"].push_back({{"buffer", b.buffer}, {"category", zsim::to_string(b.category)},
                                        {"detail", b.detail}, {"schedule_bytes", b.schedule_bytes},
                                        {"needed_bytes", b.needed_bytes}});
    // Per-op times (rank 0) and per-collective bandwidth of the last measured step.
    m["ops"] = ordered_json::array();
    for (std::size_t id = 0; id < last.ops.size(); ++id)
      if (last.ops[id].end_s > 0)
        m["ops"].push_back({{"id", id}, {"name", sch.ops[id].name}, {"micro_step", sch.ops[id].micro_step},
                            {"start_s", last.ops[id].start_s}, {"end_s", last.ops[id].end_s}});
    // ZeRO++'s quantization kernels of the last step (rank 0): their measured times beside their sizes.
    m["quantization"] = ordered_json::array();
    for (const zsim::OpId id : ex.step_ops()) {
      const zsim::Op& op = sch.ops[id];
      if (op.kind != zsim::OpKind::compute || op.compute.what == zsim::ComputeKind::forward ||
          op.compute.what == zsim::ComputeKind::backward || op.compute.what == zsim::ComputeKind::recompute ||
          op.compute.what == zsim::ComputeKind::optimizer)
        continue;
      m["quantization"].push_back({{"id", id}, {"name", op.name}, {"compute", zsim::to_string(op.compute.what)},
                                   {"dtype", zsim::to_string(op.compute.dtype)}, {"elements", op.compute.elements},
                                   {"seconds", last.ops[id].end_s - last.ops[id].start_s}});
    }
    m["collectives"] = ordered_json::array();
    for (std::size_t i = 0; i < coll_ids.size(); ++i) {
      const zsim::Op& op = sch.ops[coll_ids[i]];
      const int n = sch.groups[op.collective.group].size;
      m["collectives"].push_back({{"id", coll_ids[i]}, {"name", op.name}, {"kind", zsim::to_string(op.collective.what)},
                                  {"bytes", op.collective.bytes},
                                  {"group", sch.groups[op.collective.group].name}, {"dtype", zsim::to_string(op.collective.dtype)},
                                  {"seconds", coll_s[i]}, {"rank0_seconds", rank0_coll_s[i]},
                                  {"bus_GBps", bus_GBps(op.collective.what, n, op.collective.bytes, coll_s[i])}});
    }
    if (off.any()) {
      auto piece = [](const PieceFigures& f, const PieceFigures& p) {
        return ordered_json{{"ops", f.ops},         {"bytes", f.bytes},     {"elements", f.elements},
                            {"seconds", f.seconds}, {"zsim_seconds", p.seconds}};
      };
      m["offload"] = {{"d2h", piece(off.d2h, predicted_off.d2h)},
                      {"h2d", piece(off.h2d, predicted_off.h2d)},
                      {"nvme_read", piece(off.nvme_read, predicted_off.nvme_read)},
                      {"nvme_write", piece(off.nvme_write, predicted_off.nvme_write)},
                      {"cpu_optimizer", piece(off.cpu_optimizer, predicted_off.cpu_optimizer)},
                      {"exposed_s", off.exposed_s},
                      {"zsim_exposed_s", zsim_exposed_offload_s}};
    }
    j["measured"] = m;
    zsim::write_file_atomically(args.json_file, j.dump(1) + "\n");
  }
  if (!args.trace_file.empty() || !args.csv_file.empty()) {
    zsim::TimingResult tr;
    tr.ops.assign(sch.ops.size(), {});
    for (std::size_t id = 0; id < steps.back().ops.size(); ++id)
      tr.ops[id] = {steps.back().ops[id].start_s, steps.back().ops[id].end_s};
    tr.makespan_s = steps.back().seconds;
    if (!args.trace_file.empty()) {
      std::ostringstream out;
      zsim::write_chrome_trace(out, sch, tr);
      zsim::write_file_atomically(args.trace_file, out.str());
    }
    if (!args.csv_file.empty()) {
      std::ostringstream out;
      zsim::write_op_csv(out, sch, tr);
      zsim::write_file_atomically(args.csv_file, out.str());
    }
  }
  return 0;
}

}  // namespace zrun
