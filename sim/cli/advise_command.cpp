#include "sim/cli/advise_command.hpp"

#include <algorithm>
#include <chrono>
#include <ostream>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "sim/advise/advise.hpp"
#include "sim/cli/pipeline.hpp"
#include "sim/cli/repeated_micro_steps.hpp"
#include "sim/common/atomic_file.hpp"
#include "sim/common/error.hpp"
#include "sim/report/human_units.hpp"
#include "sim/scenario/scenario_parse.hpp"
#include "sim/scenario/yaml_document.hpp"
#include "sim/sweep/parallel_map.hpp"

namespace zsim {

namespace {

// The step's split for the printed reasons: the timing report of the configuration (the same pipeline).
AdviseBreakdown breakdown_of(const Scenario& s, const SweepPoint& p, const PipelineOptions& o) {
  TimingReport t;
  std::optional<RepeatedResult> fast;
  if (tries_repeated_micro_steps(s, o)) {
    RepeatOptions r;
    r.steps = o.steps;
    r.share = o.share;
    fast = report_by_repeated_micro_steps(s, r);
  }
  t = fast ? fast->time : run_pipeline(s, o).time.report;
  AdviseBreakdown b;
  b.step_s = t.step_s;
  b.compute_s = t.compute_s;
  b.optimizer_s = t.optimizer_s;
  b.exposed_comm_s = t.exposed_comm_s;
  b.offload_s = t.offload_s;
  b.idle_s = t.idle_s;
  b.gpu_peak = p.gpu_peak_bytes;
  b.gpu_need = gpu_need(p);
  b.gpu_capacity = s.cluster.gpu.hbm_bytes;
  return b;
}

}  // namespace

int run_advise(const AdviseArguments& a, std::ostream& out, std::ostream& err) {
  const auto start = std::chrono::steady_clock::now();
  const std::string text = read_input_file(a.scenario, "scenario file", {a.scenario, 0, 0, ""});
  const auto parse = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> overrides = a.overrides;
    overrides.insert(overrides.end(), extra.begin(), extra.end());
    return parse_scenario(text, a.scenario, {overrides, {}});
  };
  const Scenario base = parse({});  // bad input stops here (exit 2)
  for (const auto& w : base.warnings) err << w << "\n";
  const AdviseSpace space = advise_space(base);
  const Bytes capacity = base.cluster.gpu.hbm_bytes;
  PipelineOptions o;
  const unsigned threads = a.threads ? a.threads : std::max(1u, std::thread::hardware_concurrency());

  std::vector<AdviseEntry> entries;
  // Evaluates candidates on the pool (memory first: evaluate_sweep_point times only what fits).
  const auto evaluate = [&](const std::vector<AdviseCandidate>& cs) {
    std::vector<SweepPoint> points = parallel_map<SweepPoint>(cs.size(), threads, [&](std::size_t i) {
      const std::vector<std::string> overrides = candidate_overrides(cs[i], space.gpus_per_node);
      SweepPoint p;
      try {
        p = evaluate_sweep_point(parse(overrides), o);
      } catch (const std::exception& e) {  // a combination the scenario's checks or the planner refuse
        p = SweepPoint{};
        p.invalid_reason = e.what();
      }
      p.overrides = overrides;
      return p;
    });
    std::vector<std::size_t> added;
    for (std::size_t i = 0; i < cs.size(); ++i) {
      added.push_back(entries.size());
      entries.push_back({cs[i], std::move(points[i])});
    }
    return added;
  };

  // Round one: the structures, offload level by level; a structure goes one level further only while it does
  // not fit with the margin (more offload only slows a configuration that fits). Inside a level, micro-batches in
  // ascending order: a structure whose micro-batch m leaves too little of the GPU is not tried at larger ones (the
  // activations only grow with it).
  const Bytes usable = static_cast<Bytes>((1.0 - a.margin) * static_cast<double>(capacity));
  const auto without_batch = [](AdviseCandidate c) {
    c.micro_batch = 0;
    c.grad_accum = 0;
    return c;
  };
  std::size_t max_levels = 0;
  for (int stage = 0; stage <= 3; ++stage) max_levels = std::max(max_levels, offload_levels(stage, space.has_nvme).size());
  std::vector<AdviseCandidate> pending = structures_at_level(space, 0);
  for (std::size_t level = 0; level < max_levels && !pending.empty(); ++level) {
    std::vector<std::size_t> added;
    std::vector<AdviseCandidate> blocked;  // structures (micro-batch 0) too large on the GPU at a smaller micro-batch
    std::vector<std::int64_t> micro;
    for (const AdviseCandidate& c : pending) micro.push_back(c.micro_batch);
    std::sort(micro.begin(), micro.end());
    micro.erase(std::unique(micro.begin(), micro.end()), micro.end());
    for (const std::int64_t m : micro) {
      std::vector<AdviseCandidate> batch;
      for (const AdviseCandidate& c : pending)
        if (c.micro_batch == m && std::find(blocked.begin(), blocked.end(), without_batch(c)) == blocked.end())
          batch.push_back(c);
      for (const std::size_t i : evaluate(batch)) {
        added.push_back(i);
        const SweepPoint& p = entries[i].point;
        if (p.valid && gpu_need(p) > usable) blocked.push_back(without_batch(entries[i].candidate));
      }
    }
    if (level + 1 == max_levels) break;
    // What did not fit at this level (tried or blocked), at the next one.
    std::vector<AdviseCandidate> next;
    for (const AdviseCandidate& c : structures_at_level(space, level + 1)) {
      AdviseCandidate at_level = c;
      const auto levels = offload_levels(c.stage, space.has_nvme);
      at_level.offload_optimizer = levels[level].optimizer;
      at_level.offload_param = levels[level].param;
      const auto it = std::find_if(added.begin(), added.end(), [&](std::size_t i) { return entries[i].candidate == at_level; });
      if (it == added.end() || !fits_with_margin(entries[*it].point, capacity, a.margin)) next.push_back(c);
    }
    pending = std::move(next);
  }
  const std::size_t structures = entries.size();

  // Round two: ZeRO++ and the bucket sizes, one key at a time, around the best few configurations so far.
  {
    std::vector<std::size_t> ranked = rank_entries(entries, capacity, a.margin);
    const std::size_t around = std::min<std::size_t>(3, ranked.size());
    for (int key = 0; key < kAdviseVariantKeys; ++key) {
      std::vector<AdviseCandidate> variants;
      std::vector<AdviseCandidate> bases;
      ranked = rank_entries(entries, capacity, a.margin);
      for (std::size_t k = 0; k < std::min(around, ranked.size()); ++k) bases.push_back(entries[ranked[k]].candidate);
      for (const AdviseCandidate& b : bases)
        for (const AdviseCandidate& v : bucket_variants(b, space, key))
          if (std::none_of(entries.begin(), entries.end(), [&](const AdviseEntry& e) { return e.candidate == v; }) &&
              std::find(variants.begin(), variants.end(), v) == variants.end())
            variants.push_back(v);
      evaluate(variants);
    }
  }

  std::vector<std::size_t> ranked = rank_entries(entries, capacity, a.margin);
  if (ranked.empty()) {
    const std::string why = shortfall(entries, capacity, a.margin);
    err << "zsim advise: " << a.scenario << ": " << why << "\n";
    if (!a.json_file.empty()) {
      nlohmann::ordered_json j;
      j["fits"] = false;
      j["shortfall"] = why;
      j["evaluated"] = entries.size();
      write_file_atomically(a.json_file, j.dump(2) + "\n");
    }
    return kExitNoFit;
  }

  // The advice first: of the configurations within the tie of the fastest, the fewest changes to the user's; the
  // rest by tokens/s.
  const AdviseCandidate yours = candidate_of(base);
  const std::size_t fastest = ranked.front();
  const std::size_t advised_at = advised_position(entries, ranked, yours, space, a.tie);
  std::rotate(ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(advised_at),
              ranked.begin() + static_cast<std::ptrdiff_t>(advised_at) + 1);

  // The user's own configuration, as the scenario has it.
  const SweepPoint own = evaluate_sweep_point(base, o);
  const Scenario advised = parse(entries[ranked.front()].point.overrides);
  const std::size_t shown = std::min(a.top, ranked.size());
  std::vector<AdviseBreakdown> breakdowns = parallel_map<AdviseBreakdown>(shown, threads, [&](std::size_t k) {
    const AdviseEntry& e = entries[ranked[k]];
    return breakdown_of(parse(e.point.overrides), e.point, o);
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const AdviseEntry& best = entries[ranked.front()];
  const bool advice_keeps_yours = changed_choices(best.candidate, yours, space).empty();
  std::size_t fitting = 0;
  for (const AdviseEntry& e : entries) fitting += fits_with_margin(e.point, capacity, a.margin);
  out << fmt::format("zsim advise: {} on {} x {} {} (micro-batch x accumulation = {} per GPU kept)\n",
                     base.model.name, base.cluster.nodes, base.cluster.gpus_per_node, base.cluster.gpu.name,
                     space.batch_per_gpu);
  out << fmt::format("searched {} configurations ({} structures, {} ZeRO++ and bucket variants), {} fit with {:.0f}% of the GPU "
                     "free, in {:.1f} s; within {:.0f}% of the fastest, the fewest changes to yours is advised\n\n",
                     entries.size(), structures, entries.size() - structures, fitting, 100 * a.margin, seconds,
                     100 * a.tie);
  nlohmann::ordered_json top = nlohmann::ordered_json::array();
  for (std::size_t k = 0; k < shown; ++k) {
    const AdviseEntry& e = entries[ranked[k]];
    std::string why = reason(e, breakdowns[k], best, space, k == 0);
    const std::vector<std::string> changes = changed_choices(e.candidate, yours, space);
    if (k == 0) {
      if (ranked[0] != fastest)
        why += fmt::format("\n   advised over the fastest ({:.0f} tokens/s, +{:.1f}% in zsim): within the tie ({:.0f}%, "
                           "--tie: zsim's step-time error against DeepSpeed) it changes the fewest of your choices ({})",
                           entries[fastest].point.tokens_per_s,
                           100.0 * (entries[fastest].point.tokens_per_s / e.point.tokens_per_s - 1.0), 100 * a.tie,
                           changes.empty() ? "none: it is yours" : fmt::format("{}", fmt::join(changes, ", ")));
      const std::string limits = memory_limits(entries, e.candidate, space, capacity, a.margin);
      if (!limits.empty()) why += "\n   " + limits;
    }
    out << fmt::format("{}. {:>12.0f} tokens/s  {:6.1f} TFLOPS/GPU  step {:.3f} s  GPU peak {}\n   {}\n   {}\n",
                       k + 1, e.point.tokens_per_s, e.point.tflops_per_gpu, e.point.step_s,
                       human_bytes(e.point.gpu_peak_bytes), describe(e.candidate), why);
    nlohmann::ordered_json j;
    j["rank"] = k + 1;
    j["configuration"] = describe(e.candidate);
    j["overrides"] = e.point.overrides;
    j["tokens_per_s"] = e.point.tokens_per_s;
    j["tflops_per_gpu"] = e.point.tflops_per_gpu;
    j["step_s"] = e.point.step_s;
    j["gpu_peak_bytes"] = e.point.gpu_peak_bytes;
    j["gpu_need_bytes"] = gpu_need(e.point);
    j["reason"] = why;
    j["changes_from_yours"] = changes;
    top.push_back(j);
  }
  std::string own_text;
  if (own.valid && own.fits && own.tokens_per_s > 0)
    own_text = fmt::format("{:.0f} tokens/s: {}{}\n   {}", own.tokens_per_s,
                           advice_keeps_yours
                               ? std::string("the advice keeps it")
                               : fmt::format("the advice is {:+.1f}%", 100.0 * (best.point.tokens_per_s / own.tokens_per_s - 1)),
                           fits_with_margin(own, capacity, a.margin) ? "" : " (yours leaves less than the margin free)",
                           binding(breakdown_of(base, own, o)));
  else
    own_text = fmt::format("does not fit ({})", own.rejection.empty() ? own.invalid_reason : own.rejection);
  out << fmt::format("\nyour configuration ({}): {}\n", describe(yours), own_text);
  out << fmt::format("activation checkpointing: {} (the model's setting, e.g. gradient_checkpointing_enable() in "
                     "transformers; not a ds_config key)\n",
                     best.candidate.checkpointing ? "on" : "off");
  const std::string ds = ds_config_json(advised);
  if (!a.out_file.empty()) {
    write_file_atomically(a.out_file, ds);
    out << "ds_config written to " << a.out_file << "\n";
  }
  if (!a.json_file.empty()) {
    nlohmann::ordered_json j;
    j["fits"] = true;
    j["evaluated"] = entries.size();
    j["seconds"] = seconds;
    j["tie"] = a.tie;
    j["top"] = top;
    j["activation_checkpointing"] = best.candidate.checkpointing ? "full" : "none";
    j["yours"] = {{"configuration", describe(yours)},
                  {"fits", own.valid && own.fits},
                  {"tokens_per_s", own.tokens_per_s},
                  {"gpu_peak_bytes", own.gpu_peak_bytes},
                  {"gpu_need_bytes", gpu_need(own)}};
    j["ds_config"] = nlohmann::ordered_json::parse(ds);
    write_file_atomically(a.json_file, j.dump(2) + "\n");
  }
  return 0;
}

}  // namespace zsim
