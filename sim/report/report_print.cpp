#include "sim/report/report_print.hpp"

#include <algorithm>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "sim/report/human_units.hpp"

namespace zsim {

namespace {

constexpr int kLabel = 22;  // width of the row-label column
constexpr int kCell = 17;   // width of a value column

std::string row(const std::string& label, const std::vector<std::string>& cells) {
  std::string s = fmt::format("  {:<{}}", label, kLabel);
  for (const std::string& c : cells) s += fmt::format("{:>{}}", c, kCell);
  return s + "\n";
}

const char* tier_name(Tier t) { return t == Tier::gpu ? "GPU" : t == Tier::cpu ? "CPU" : "NVMe"; }

std::string tier_label(const TierMemory& t) {
  return t.tier == Tier::gpu ? "GPU (per GPU)" : t.tier == Tier::cpu ? "CPU (per node)" : "NVMe (per node)";
}

std::string peak_op_text(const TierMemory& t) {
  return t.peak_op < 0 ? "-" : fmt::format("#{} '{}'", t.peak_op, t.peak_op_name);
}

void header(std::string& s, const Report& r) {
  const ReportSetup& u = r.setup;
  s += fmt::format("zsim report ({} v{})\n", kReportFormat, kReportVersion);
  if (!u.source_file.empty()) s += fmt::format("  {:<11}{}\n", "scenario", u.source_file);
  s += fmt::format("  {:<11}{}, {} parameters\n", "model", u.model, human_count(u.params));
  s += fmt::format("  {:<11}{} node{} x {} {} = {} GPUs\n", "cluster", u.nodes, u.nodes == 1 ? "" : "s",
                   u.gpus_per_node, u.gpu, u.world_size);
  std::string zero = fmt::format("stage {}", u.zero_stage);
  for (size_t i = 0; i < u.features.size(); ++i) zero += (i == 0 ? " + " : ", ") + u.features[i];
  s += fmt::format("  {:<11}{}\n\n", "ZeRO", zero);
}

void memory_table(std::string& s, const MemoryWalk& m) {
  const TierMemory* tiers[] = {&m.gpu, &m.cpu, &m.nvme};
  auto cells = [&](auto value) {
    std::vector<std::string> c;
    for (const TierMemory* t : tiers) c.push_back(value(*t));
    return c;
  };
  auto bytes_of = [&](auto member) { return cells([&](const TierMemory& t) { return human_bytes(member(t)); }); };
  s += row("Memory at peak", cells(tier_label));
  s += row("params", bytes_of([](const TierMemory& t) { return t.at_peak.params; }));
  s += row("grads", bytes_of([](const TierMemory& t) { return t.at_peak.grads; }));
  s += row("optimizer", bytes_of([](const TierMemory& t) { return t.at_peak.optimizer; }));
  s += row("activations", bytes_of([](const TierMemory& t) { return t.at_peak.activations; }));
  s += row("buffers", bytes_of([](const TierMemory& t) { return t.at_peak.buffers; }));
  std::set<std::string> details;
  for (const TierMemory* t : tiers)
    for (const auto& [name, bytes] : t->at_peak.buffer_detail) details.insert(name);
  for (const std::string& d : details)
    s += row("  " + d, bytes_of([&](const TierMemory& t) {
               auto it = t.at_peak.buffer_detail.find(d);
               return it == t.at_peak.buffer_detail.end() ? Bytes{0} : it->second;
             }));
  s += row("peak", bytes_of([](const TierMemory& t) { return t.peak; }));
  if (m.gpu.reserved > 0) {  // the verdict reads reserved + outside the allocator where the allocator is modelled
    const auto gpu_only = [](auto value) {
      return [value](const TierMemory& t) { return t.reserved > 0 ? human_bytes(value(t)) : std::string("-"); };
    };
    s += row("reserved (allocator)", cells(gpu_only([](const TierMemory& t) { return t.reserved; })));
    s += row("outside allocator", cells(gpu_only([](const TierMemory& t) { return t.outside_allocator; })));
    s += row("reserved + outside", cells(gpu_only([](const TierMemory& t) { return t.verdict_bytes(); })));
  }
  s += row("capacity", bytes_of([](const TierMemory& t) { return t.capacity; }));
  s += row("headroom", bytes_of([](const TierMemory& t) { return t.headroom(); }));
  s += row("fits", cells([](const TierMemory& t) { return std::string(t.fits() ? "yes" : "NO"); }));
  s += row("persistent (end)", bytes_of([](const TierMemory& t) { return t.at_end.total(); }));
  s += "  peak at op:";
  for (const TierMemory* t : tiers) s += fmt::format(" {} {};", tier_name(t->tier), peak_op_text(*t));
  s.back() = '\n';
  s += "\n";
}

void comm_table(std::string& s, const CommWalk& c) {
  s += row(c.steps > 1 ? fmt::format("Comm per GPU per step (average of {})", c.steps) : "Comm per GPU per step",
           {"sent", "of it scales", "cross-node", "of it scales"});
  auto phase_row = [&](const char* name, Phase p) {
    s += row(name, {human_bytes(c.per_gpu.at(p)), human_bytes(c.scale_per_gpu.at(p)),
                    human_bytes(c.cross_node_per_gpu.at(p)), human_bytes(c.cross_node_scale_per_gpu.at(p))});
  };
  if (c.per_gpu.init > 0) phase_row("init (once)", Phase::init);
  phase_row("forward", Phase::forward);
  phase_row("backward", Phase::backward);
  phase_row("step", Phase::step);
  s += row("total", {human_bytes(c.per_gpu.total()), human_bytes(c.scale_per_gpu.total()),
                     human_bytes(c.cross_node_per_gpu.total()), human_bytes(c.cross_node_scale_per_gpu.total())});
  s += fmt::format("  cross-node per node per step: {} ({} GPUs per node)\n\n",
                   human_bytes(c.cross_node_per_node_total()), c.gpus_per_node);

  if (c.collectives.empty()) return;
  s += "  Collectives per step\n";
  s += fmt::format("  {:<9} {:<15} {:<11} {:>5} {:>11} {:>7} {:>12} {:>16}\n", "phase", "op", "group", "size",
                   "bytes", "count", "sent/GPU", "cross-node/GPU");
  for (const CollectiveSummary& k : c.collectives)
    s += fmt::format("  {:<9} {:<15} {:<11} {:>5} {:>11} {:>7} {:>12} {:>16}\n", to_string(k.phase),
                     to_string(k.op), k.group, k.group_size, human_bytes(k.bytes), k.count,
                     human_bytes(k.bytes_per_gpu), human_bytes(k.cross_node_bytes_per_gpu));
  s += "\n";
}

void copy_table(std::string& s, const CommWalk& c) {
  const PhaseBytes* kinds[] = {&c.h2d, &c.d2h, &c.nvme_read, &c.nvme_write, &c.d2d};
  Bytes any = 0;
  for (const PhaseBytes* k : kinds) any += k->total() + k->init;
  if (any == 0) return;
  s += row("Copies per GPU per step", {"h2d", "d2h", "nvme_read", "nvme_write", "d2d"});
  for (Phase p : {Phase::init, Phase::forward, Phase::backward, Phase::step}) {
    if (p == Phase::init && c.h2d.init + c.d2h.init + c.nvme_read.init + c.nvme_write.init + c.d2d.init == 0) continue;
    std::vector<std::string> cells;
    for (const PhaseBytes* k : kinds) cells.push_back(human_bytes(k->at(p)));
    s += row(to_string(p), cells);
  }
  s += "\n";
}

// Runtime deepspeed: which figures priced it and how far to trust them (DeepSpeedFigures).
void deepspeed_figures_block(std::string& s, const DeepSpeedFigures& f) {
  s += "DeepSpeed's figures (runtime deepspeed)\n";
  s += fmt::format("  {:<18}{}\n", "profile", f.profile.empty() ? "none (the scenario's own cluster keys)" : f.profile);
  const std::string stack = fitted_under_text(f.fitted_under);
  s += fmt::format("  {:<18}{}\n", "fitted under", stack.empty() ? "not recorded (cluster.fitted_under)" : stack);
  s += fmt::format("  {:<18}{}\n", "host", f.host_note);
  s += fmt::format("  {:<18}{}\n", "GPU", f.gpu_note);
  s += fmt::format("  {:<18}{}\n\n", "outside allocator", f.outside_allocator_note);
}

void verdict(std::string& s, const Report& r, const ReportPrintOptions& options) {
  const MemoryWalk& m = r.memory;
  if (r.fits) {
    if (m.gpu.reserved > 0)
      s += fmt::format("FITS: GPU reserved {} + outside the allocator {}{} = {} of {} (headroom {}; allocated peak {})",
                       human_bytes(m.gpu.reserved), human_bytes(m.gpu.outside_allocator),
                       m.gpu.outside_allocator_default ? " (default)" : "",
                       human_bytes(m.gpu.verdict_bytes()), human_bytes(m.gpu.capacity), human_bytes(m.gpu.headroom()),
                       human_bytes(m.gpu.peak));
    else
      s += fmt::format("FITS: GPU peak {} of {} (headroom {})", human_bytes(m.gpu.peak), human_bytes(m.gpu.capacity),
                       human_bytes(m.gpu.headroom()));
    for (const TierMemory* t : {&m.cpu, &m.nvme})
      if (t->peak > 0)
        s += fmt::format("; {} peak {} of {} per node (headroom {})", tier_name(t->tier), human_bytes(t->peak),
                         human_bytes(t->capacity), human_bytes(t->headroom()));
    s += "\n";
  } else {
    s += "DOES NOT FIT:";
    for (const TierMemory* t : {&m.gpu, &m.cpu, &m.nvme})
      if (!t->fits()) {
        if (t->reserved > 0)
          s += fmt::format(" GPU needs reserved {} + outside the allocator {}{} = {} of {} (over by {}; allocated peak {});",
                           human_bytes(t->reserved), human_bytes(t->outside_allocator),
                           t->outside_allocator_default ? " (default)" : "", human_bytes(t->verdict_bytes()),
                           human_bytes(t->capacity), human_bytes(-t->headroom()), human_bytes(t->peak));
        else
          s += fmt::format(" {} needs {} of {}{} (over by {});", tier_name(t->tier), human_bytes(t->peak),
                           human_bytes(t->capacity), t->tier == Tier::gpu ? "" : " per node",
                           human_bytes(-t->headroom()));
      }
    if (const auto& o = m.first_overflow)
      s += fmt::format(" first overflow: {} at op #{} '{}' (over by {})", tier_name(o->tier), o->op, o->op_name,
                       human_bytes(o->over_by));
    else
      s.back() = ' ';
    s += "\n";
  }
  const size_t first = options.scenario_warnings ? 0 : std::min(r.scenario_warnings, r.warnings.size());
  if (first < r.warnings.size()) {
    s += "\nWarnings:\n";
    for (size_t i = first; i < r.warnings.size(); ++i) s += "  - " + r.warnings[i] + "\n";
  }
}

}  // namespace

std::string format_report(const Report& r, const ReportPrintOptions& options) {
  std::string s;
  if (options.header) header(s, r);
  memory_table(s, r.memory);
  comm_table(s, r.comm);
  copy_table(s, r.comm);
  if (r.time) s += r.time->text + "\n";
  if (r.deepspeed_figures) deepspeed_figures_block(s, *r.deepspeed_figures);
  verdict(s, r, options);
  return s;
}

void print_report(const Report& r, std::FILE* out, const ReportPrintOptions& options) {
  const std::string s = format_report(r, options);
  std::fwrite(s.data(), 1, s.size(), out);
}

}  // namespace zsim
