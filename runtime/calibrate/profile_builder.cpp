#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cost_models/collective_cost.hpp"
#include "runtime/calibrate/measurements.hpp"

namespace zrun::calibrate {

namespace {

std::string num(double v) { return fmt::format("{:.6g}", v); }
std::string integer(std::int64_t v) { return std::to_string(v); }
std::string pct(double f) { return fmt::format("{:.1f}%", 100.0 * f); }
std::string residual_text(const FitResidual& r) {
  return fmt::format("fit residual rms {} / worst {} over {} measurements", pct(r.rms_rel), pct(r.max_abs_rel),
                     r.samples);
}
nlohmann::json residual_json(const FitResidual& r) {
  return {{"rms_rel", r.rms_rel}, {"max_abs_rel", r.max_abs_rel}, {"samples", r.samples}};
}
nlohmann::json samples_json(const std::vector<SizeSample>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (const SizeSample& s : v) a.push_back({s.bytes, s.seconds * 1e6});
  return a;
}

struct Builder {
  CalibratedProfile p;
  std::string base_name;
  void add(const std::string& key, const std::string& value, const std::string& comment) {
    p.cluster.push_back({key, value, comment});
  }
  void keep(const std::string& key, const std::string& value, const std::string& why = "") {
    add(key, value, "not calibrated: " + base_name + (why.empty() ? "" : " (" + why + ")"));
  }
};

// A collective kind's calls on one group at calibrate's sizes (bus bytes per second of each call, by size) as bus
// bandwidths: the median call at each size, then no size slower than a larger one: NCCL cannot move fewer bytes in more
// time (a larger call would do), and a kind's first small calls in calibrate can run slow (the H200's all-gather: 15.2
// us at 16 KiB, 6.5 us at 64 KiB). A size's time is the least of its own and every larger size's.
struct BusbwAtSize {
  const char* label;
  double GBps;
  bool raised = false;  // that of a larger size, which ran faster
};
std::vector<BusbwAtSize> busbw_by_size(zsim::CollectiveKind what, int n,
                                       const std::map<double, std::vector<double>>& rates_by_size) {
  struct AtSize {
    const char* label;
    double bus_bytes, seconds;
    bool raised = false;
  };
  std::vector<AtSize> at_size;  // ascending size
  for (const auto& [label, bytes] : zsim::kNvlinkBusbwSizes)
    if (auto at = rates_by_size.find(bytes); at != rates_by_size.end()) {
      std::vector<double> v = at->second;
      std::sort(v.begin(), v.end());
      const double bus = zsim::bus_bytes(what, bytes, n);
      at_size.push_back({label, bus, bus / v[v.size() / 2]});
    }
  for (std::size_t i = at_size.size(); i-- > 1;)
    if (at_size[i - 1].seconds > at_size[i].seconds) {
      at_size[i - 1].seconds = at_size[i].seconds;
      at_size[i - 1].raised = true;
    }
  std::vector<BusbwAtSize> out;
  for (const AtSize& a : at_size) out.push_back({a.label, a.bus_bytes / a.seconds / 1e9, a.raised});
  return out;
}

}  // namespace

std::string base_profile_for_gpu(const std::string& gpu_name) {
  std::string n;
  for (char c : gpu_name) n += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (n.find("h200") != std::string::npos) return "h200-hgx-ib400";
  if (n.find("h100") != std::string::npos) return "h100-hgx-ib400";
  if (n.find("a100") != std::string::npos) return "a100-hgx-ib200";
  if (n.find("v100") != std::string::npos) return "v100-dgx2-ib100";
  return "";
}

CalibratedProfile build_profile(const Measurements& m, const zsim::ClusterSpec& base, const std::string& base_name) {
  Builder b;
  b.base_name = base_name;
  nlohmann::json& cal = b.p.calibration;
  cal["tool"] = "zrun calibrate";
  cal["base_profile"] = base_name;
  cal["gpu"] = m.gpu_name;
  cal["sms"] = m.sms;
  cal["quick"] = m.quick;
  cal["timing"] = m.timing;
  cal["gpus"] = m.gpus;
  cal["hbm_bytes"] = m.hbm_bytes;
  cal["host_memory_bytes"] = m.host_memory_bytes;
  cal["host_cores"] = m.host_cores;
  cal["units"] = "samples: [bytes, microseconds]; gemm samples: [m, n, k, microseconds]; gemm batched_samples: "
                 "[product, m, n, k, batch, microseconds]; flash_attention samples: [dtype, direction, b, heads, kv_heads, seq, "
                 "head_dim, microseconds]";

  b.add("gpus_per_node", integer(m.gpus), "GPUs zrun calibrate ran on (a scenario sets its own)");
  b.add("gpu.name", m.gpu_name.empty() ? base.gpu.name : "\"" + m.gpu_name + "\"", "cudaGetDeviceProperties");
  b.add("gpu.hbm_bytes", integer(m.hbm_bytes > 0 ? m.hbm_bytes : base.gpu.hbm_bytes), "cudaDeviceProp.totalGlobalMem");
  b.keep("gpu.hbm_GBps", num(base.gpu.hbm_GBps), "data sheet; efficiency.hbm is measured against it");
  b.keep("gpu.peak_tflops", num(base.gpu.peak_tflops), "data sheet; the GEMM models are measured against it");
  b.keep("gpu.peak_fp32_tflops", num(base.gpu.peak_fp32_tflops), "data sheet");
  b.add("host.memory_bytes", integer(m.host_memory_bytes > 0 ? m.host_memory_bytes : base.host.memory_bytes),
        "sysconf(_SC_PHYS_PAGES) x page size");
  b.add("host.cores", integer(m.host_cores > 0 ? m.host_cores : base.host.cores), "std::thread::hardware_concurrency");
  b.keep("nvme.bytes", integer(base.nvme.bytes));

  // NVMe.
  auto nvme = [&](const std::vector<SizeSample>& v, const char* key, const char* lat_key, const char* what,
                  double base_value, double base_latency) {
    if (v.size() < 2) {
      b.keep(key, num(base_value), "no NVMe measurement");
      b.keep(lat_key, num(base_latency), "no NVMe measurement");
      return;
    }
    const LatencyBandwidthFit f = fit_latency_bandwidth(v);
    const std::string moments =
        m.nvme_moments > 1 ? fmt::format(", each size the median of its rounds at {} moments {:.0f} s apart",
                                         m.nvme_moments, m.nvme_moments_apart_s)
                           : "";
    b.add(key, num(f.GBps), fmt::format("{} of zrun's swap files in {}{}{}: {}; calibration.nvme.{}", what, m.nvme_path,
                                        m.nvme_direct ? " (O_DIRECT)" : " (page cache: O_DIRECT refused)", moments,
                                        residual_text(f.residual), what));
    b.add(lat_key, num(f.latency_s * 1e6), fmt::format("the same line's intercept, per transfer; calibration.nvme.{}", what));
    cal["nvme"][what] = {{"GBps", f.GBps}, {"latency_us", f.latency_s * 1e6}, {"residual", residual_json(f.residual)},
                         {"samples", samples_json(v)}};
  };
  nvme(m.nvme_read, "nvme.read_GBps", "nvme.read_latency_us", "read", base.nvme.read_GBps, base.nvme.read_latency_us);
  nvme(m.nvme_write, "nvme.write_GBps", "nvme.write_latency_us", "write", base.nvme.write_GBps,
       base.nvme.write_latency_us);
  // Transfers of one request (4 KiB .. 1 MiB): their own line, which zsim takes for a transfer of at most 1 MiB.
  nvme(m.nvme_read_one, "nvme.one_request_read_GBps", "nvme.one_request_read_latency_us", "read_one_request",
       base.nvme.one_request_read_GBps, base.nvme.one_request_read_latency_us);
  nvme(m.nvme_write_one, "nvme.one_request_write_GBps", "nvme.one_request_write_latency_us", "write_one_request",
       base.nvme.one_request_write_GBps, base.nvme.one_request_write_latency_us);
  // Each measured size's own figure (nvme.read_GBps_by_size / write_GBps_by_size.<size>, latency included), which
  // zsim takes for a transfer of more than one request: on a disk whose rate changes with the transfer's size the line
  // above leaves the residual it reports.
  auto nvme_by_size = [&](const std::vector<SizeSample>& v, const char* block, const char* what) {
    if (v.size() < 2) return;
    for (const SizeSample& s : v)
      for (const auto& [label, bytes] : zsim::kNvlinkBusbwSizes)
        if (bytes == s.bytes && s.seconds > 0)
          b.add(fmt::format("nvme.{}.{}", block, label), num(s.bytes / s.seconds / 1e9),
                fmt::format("{} of {}: its bytes over its measured time; calibration.nvme.{}", what, label, what));
  };
  nvme_by_size(m.nvme_read, "read_GBps_by_size", "read");
  nvme_by_size(m.nvme_write, "write_GBps_by_size", "write");
  cal["nvme"]["path"] = m.nvme_path;
  cal["nvme"]["direct"] = m.nvme_direct;
  if (m.nvme_moments > 0) {
    cal["nvme"]["moments"] = m.nvme_moments;
    cal["nvme"]["moments_apart_s"] = m.nvme_moments_apart_s;
  }

  // Collectives per link class.
  auto link = [&](const char* cls, const char* bw_key, const char* lat_key, double base_bw, double base_lat) {
    auto it = m.collectives.find(cls);
    if (it == m.collectives.end() || it->second.size() < 2) {
      const std::string why = m.collectives_note.empty() ? "no collective measured on this link" : m.collectives_note;
      b.keep(bw_key, num(base_bw), why);
      b.keep(lat_key, num(base_lat), why);
      cal["collectives"][cls] = {{"calibrated", false}, {"why", why}};
      return;
    }
    const LinkFit f = fit_link(it->second);
    const std::string src = fmt::format("fit of {} collectives (zsim's ring steps and bytes): {}; calibration.collectives.{}",
                                        it->second.size(), residual_text(f.residual), cls);
    b.add(bw_key, num(f.GBps), src);
    b.add(lat_key, num(f.latency_per_step_s * 1e6), src);
    nlohmann::json samples = nlohmann::json::array();
    for (const CollectiveSample& s : it->second)
      samples.push_back({zsim::to_string(s.kind), s.n, s.k, s.size_bytes, s.seconds * 1e6});
    cal["collectives"][cls] = {{"calibrated", true}, {"GBps", f.GBps}, {"latency_per_step_us", f.latency_per_step_s * 1e6},
                               {"residual", residual_json(f.residual)}, {"samples [kind, n, k, bytes, us]", samples}};
  };
  link("nvlink", "links.nvlink_GBps", "links.nvlink_latency_us", base.links.nvlink_GBps, base.links.nvlink_latency_us);

  // Host copies: pinned H2D and D2H fitted apart; the profile's one PCIe figure is their mean.
  if (m.h2d_pinned.size() >= 2 && m.d2h_pinned.size() >= 2) {
    const LatencyBandwidthFit h2d = fit_latency_bandwidth(m.h2d_pinned), d2h = fit_latency_bandwidth(m.d2h_pinned);
    const double pinned = 0.5 * (h2d.GBps + d2h.GBps);
    b.add("links.pcie_GBps", num(pinned),
          fmt::format("mean of pinned cudaMemcpyAsync H2D {} and D2H {} GB/s (H2D {}; D2H {}); calibration.host_copies",
                      num(h2d.GBps), num(d2h.GBps), residual_text(h2d.residual), residual_text(d2h.residual)));
    link("ib", "links.ib_GBps", "links.ib_latency_us", base.links.ib_GBps, base.links.ib_latency_us);
    b.add("links.pcie_latency_us", num(0.5 * (h2d.latency_s + d2h.latency_s) * 1e6),
          "mean fitted latency of the pinned H2D and D2H copies");
    cal["host_copies"]["h2d_pinned"] = {{"GBps", h2d.GBps}, {"latency_us", h2d.latency_s * 1e6},
                                        {"residual", residual_json(h2d.residual)}, {"samples", samples_json(m.h2d_pinned)}};
    cal["host_copies"]["d2h_pinned"] = {{"GBps", d2h.GBps}, {"latency_us", d2h.latency_s * 1e6},
                                        {"residual", residual_json(d2h.residual)}, {"samples", samples_json(m.d2h_pinned)}};
  } else {
    b.keep("links.pcie_GBps", num(base.links.pcie_GBps), "no host copy measured");
    link("ib", "links.ib_GBps", "links.ib_latency_us", base.links.ib_GBps, base.links.ib_latency_us);
    b.keep("links.pcie_latency_us", num(base.links.pcie_latency_us), "no host copy measured");
  }
  b.keep("links.ib_oversubscription", num(base.links.ib_oversubscription), "fabric design");
  b.keep("links.nodes_per_leaf", integer(base.links.nodes_per_leaf), "fabric design");

  // GEMMs.
  const std::int64_t sms = m.sms > 0 ? m.sms : 132;
  std::map<std::string, GemmFit> gemm_fits;
  for (const auto& [dtype, samples] : m.gemm) {
    if (samples.size() < 4) continue;
    const int bytes = dtype == "fp32" ? 4 : 2;
    const double peak = dtype == "fp32" ? base.gpu.peak_fp32_tflops : base.gpu.peak_tflops;
    const GemmFit f = fit_gemm_model(samples, bytes, peak, sms);
    gemm_fits[dtype] = f;
    nlohmann::json s = nlohmann::json::array(), batched = nlohmann::json::array();
    for (const GemmSample& g : samples)
      if (g.batched_attention())
        batched.push_back({g.product, g.m, g.n, g.k, g.batch, g.seconds * 1e6});
      else
        s.push_back({g.m, g.n, g.k, g.seconds * 1e6});
    cal["gemm"][dtype] = {{"launch_us", f.model.launch_us}, {"max_efficiency", f.model.max_efficiency},
                          {"io_GBps", f.model.io_GBps}, {"io_overlap", f.model.io_overlap},
                          {"tile", {f.model.tile_m, f.model.tile_n}}, {"split_k_depth", f.model.split_k_depth},
                          {"sms", sms}, {"peak_tflops", peak}, {"attention_shapes", f.model.attention_shapes},
                          {"residual", residual_json(f.residual)}, {"samples", s}};
    if (!batched.empty()) {
      cal["gemm"][dtype]["residual_grid"] = residual_json(f.grid);
      cal["gemm"][dtype]["residual_batched"] = residual_json(f.batched);
      cal["gemm"][dtype]["batched_samples"] = batched;
    }
  }
  const char* sixteen = gemm_fits.count("bf16") ? "bf16" : gemm_fits.count("fp16") ? "fp16" : nullptr;
  if (sixteen) {
    // The constant, for tools that read one number: the median measured efficiency of the grid's GEMMs of
    // 1 GFLOP or more.
    std::vector<double> eff;
    for (const GemmSample& g : m.gemm.at(sixteen)) {
      if (g.batched_attention()) continue;  // the grid's: the figure predates the attention shapes
      const double f = 2.0 * g.m * g.n * g.k;
      if (f >= 1e9) eff.push_back(f / g.seconds / (base.gpu.peak_tflops * 1e12));
    }
    b.add("efficiency.gemm", num(std::min(1.0, eff.empty() ? gemm_fits.at(sixteen).model.max_efficiency : median(eff))),
          fmt::format("median measured {} cuBLASLt efficiency of the grid's GEMMs >= 1 GFLOP (used where no gemm_model "
                      "applies); calibration.gemm.{}", sixteen, sixteen));
  } else {
    b.keep("efficiency.gemm", num(base.efficiency.gemm), "no GEMM measured");
  }

  // Memory-bound kernels: one fixed cost for every kernel and each kernel's rate (fit_kernel_latency over its sizes,
  // timed on the GPU alone), the fixed cost being efficiency.launch_us below. Each kind's figure is the bandwidth of
  // running each of the kind's kernels once at its largest size at their fitted rates (SwiGLU's and GeLU's for
  // activation). Backward kernels are kinds of their own (norm_backward, softmax_backward, activation_backward,
  // cross_entropy_backward), as zsim prices a backward op's bytes: the cross-entropy reads the logits forward at a
  // quarter of the rate at which it rewrites them backward. A kernel the fit gives no rate (or a record of one size per kernel):
  // its bytes over its time at its largest size, as for every kernel of an older record (timed host-inclusive, whose
  // launch_us is the empty kernel's). efficiency.hbm is the median over kinds.
  double kernel_latency_s = 0;  // the fit's, where the profile charges it as efficiency.launch_us; 0: none
  if (!m.kernels.empty()) {
    std::map<std::string, double> largest;
    for (const KernelSample& k : m.kernels) largest[k.name] = std::max(largest[k.name], k.bytes);
    KernelLatencyFit lf;
    try {
      lf = fit_kernel_latency(m.kernels);
    } catch (const std::invalid_argument&) {
    }
    if (m.timing == "gpu_alone" && lf.latency_s > 0) kernel_latency_s = lf.latency_s;
    else lf.GBps.clear();  // rates at the largest size
    std::map<std::string, std::pair<double, double>> at_largest;  // kind: bytes, seconds of its kernels' bytes
    nlohmann::json ks = nlohmann::json::array();
    for (const KernelSample& k : m.kernels) {
      const double gbps = k.bytes / k.seconds / 1e9;
      if (k.bytes == largest[k.name]) {
        const double rate = lf.GBps.count(k.name) ? lf.GBps.at(k.name) : 0;
        at_largest[k.kind].first += k.bytes;
        at_largest[k.kind].second += rate > 0 ? k.bytes / (rate * 1e9) : k.seconds;
      }
      nlohmann::json j = {{"name", k.name}, {"kind", k.kind}, {"bytes", k.bytes}, {"us", k.seconds * 1e6},
                          {"GBps", gbps}, {"of_hbm_GBps", gbps / base.gpu.hbm_GBps}};
      if (k.launches != 1) j["launches"] = k.launches;
      if (k.host_inclusive_s > 0) j["host_inclusive_us"] = k.host_inclusive_s * 1e6;
      ks.push_back(std::move(j));
    }
    if (kernel_latency_s > 0) {
      nlohmann::json rates;
      for (const auto& [name, gbps] : lf.GBps) rates[name] = gbps;
      cal["memory_bound"]["fit"] = {{"latency_us", kernel_latency_s * 1e6}, {"GBps_by_kernel", rates},
                                    {"residual", residual_json(lf.residual)}};
    }
    std::map<std::string, double> gbps_by_kind;
    for (const auto& [kind, bs] : at_largest) gbps_by_kind[kind] = bs.first / bs.second / 1e9;
    std::vector<double> eff;
    std::string per_kind;
    for (const auto& [kind, gbps] : gbps_by_kind) {
      eff.push_back(gbps / base.gpu.hbm_GBps);
      per_kind += fmt::format("{}{} {}", per_kind.empty() ? "" : ", ", kind, pct(gbps / base.gpu.hbm_GBps));
      cal["memory_bound"]["by_kind"][kind] = gbps / base.gpu.hbm_GBps;
    }
    const std::string how = kernel_latency_s > 0
        ? fmt::format("(read + write) bytes over their time less {} us a kernel (the fit of calibration.memory_bound.fit: "
                      "{}) at their largest size", num(kernel_latency_s * 1e6), residual_text(lf.residual))
        : std::string("(read + write) bytes over their time at their largest size");
    const double e = std::min(1.0, median(eff));
    b.add("efficiency.hbm", num(e), fmt::format("median over kernel kinds of the kind's kernels' {} / {} GB/s: {}; "
                                                 "calibration.memory_bound", how, num(base.gpu.hbm_GBps), per_kind));
    cal["memory_bound"]["kernels"] = ks;
    // Per kind, the same figure for the kernels zsim prices as that kind (efficiency.hbm_by_kind): softmax for eager
    // attention's scores, cross_entropy for the head's loss, quantization's kernels as quantize.
    for (const auto& [kind, gbps] : gbps_by_kind) {
      const std::string key = kind == "quantization" ? "quantize" : kind;
      std::string names;
      for (const KernelSample& k : m.kernels)
        if (k.kind == kind && k.bytes == largest[k.name] && names.find(k.name) == std::string::npos)
          names += (names.empty() ? "" : ", ") + k.name;
      b.add("efficiency.hbm_by_kind." + key, num(std::min(1.0, gbps / base.gpu.hbm_GBps)),
            fmt::format("{} kernels ({}): {} / {} GB/s", kind, names, how, num(base.gpu.hbm_GBps)));
    }
  } else {
    b.keep("efficiency.hbm", num(base.efficiency.hbm), "no kernel measured");
  }

  // CPU Adam: rate(t) = min(t x per core, node ceiling) fitted on the thread counts measured (fit_cpu_adam); a record
  // of one thread count (before calibrate measured several) gives the per-core figure alone, no ceiling.
  if (!m.cpu_adam.empty()) {
    const CpuAdamFit f = fit_cpu_adam(m.cpu_adam);
    std::vector<CpuAdamSample> sorted, together;  // one rank's; several ranks' at once
    for (const CpuAdamSample& s : m.cpu_adam) (s.ranks == 1 ? sorted : together).push_back(s);
    std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.threads < b.threads; });
    std::sort(together.begin(), together.end(), [](const auto& a, const auto& b) { return a.threads < b.threads; });
    std::set<int> low_counts, high_counts;
    std::set<std::int64_t> sizes;
    for (const CpuAdamSample& s : sorted) {
      (s.threads <= f.slope_up_to ? low_counts : high_counts).insert(s.threads);
      sizes.insert(static_cast<std::int64_t>(s.params));
    }
    const std::string low = fmt::format("{}", fmt::join(low_counts, ", ")),
                      high = fmt::format("{}", fmt::join(high_counts, ", ")),
                      params = fmt::format("{}", fmt::join(sizes, " / "));
    const CpuAdamSample& all = sorted.back();  // the most threads: every hardware thread
    const std::string raised =
        f.raised.empty() ? ""
                         : fmt::format(" (slower on {} threads than on fewer: the fit took the fewer threads' rate there, "
                                       "the residual is against the measurement)",
                                       fmt::join(f.raised, ", "));
    const std::string ceiling_from =
        together.empty()
            ? fmt::format("from {} threads: the node's memory bandwidth", high)
            : fmt::format("from {} ranks at once on {} threads each (the slowest rank's step x {}; one rank alone on {} "
                          "threads: {}): the node's memory bandwidth as a data-parallel step's optimizer gets it",
                          f.ceiling_ranks, fmt::join(f.ceiling_threads, ", "), f.ceiling_ranks, all.threads,
                          num(all.params_per_s()));
    if (f.node_params_per_s > 0) {
      b.add("efficiency.cpu_adam_params_per_s_per_core", num(f.per_core),
            fmt::format("slope of rate(t) = min(t x per core, node ceiling) fitted on kernels/cpu Adam over {} params "
                        "(median step) at {}{}{} threads: the slope from {} threads; {}{}; calibration.cpu_adam",
                        params, low, high.empty() ? "" : ", ", high, low, residual_text(f.residual), raised));
      b.add("efficiency.cpu_adam_node_params_per_s", num(f.node_params_per_s),
            fmt::format("ceiling of the same fit, {}, shared by every rank's CPU Adam (zsim, where cpu_adam_measured has "
                        "no rates for the node's rank count: a rank runs at min(cores x per core, this / gpus_per_node)); "
                        "{}{}; calibration.cpu_adam",
                        ceiling_from, residual_text(f.residual), raised));
    } else {
      b.add("efficiency.cpu_adam_params_per_s_per_core", num(f.per_core),
            fmt::format("kernels/cpu Adam over {} params on {} threads: {} params/s (one thread count measured: no "
                        "node ceiling fitted); calibration.cpu_adam",
                        params, low, num(all.params_per_s())));
      if (base.efficiency.cpu_adam_node_params_per_s > 0)
        b.keep("efficiency.cpu_adam_node_params_per_s", num(base.efficiency.cpu_adam_node_params_per_s),
               "one thread count measured");
    }
    // The measured rates themselves, which zsim interpolates at a rank's cores for a node of as many ranks (where the
    // fit's bend misses them): one rank alone, and every rank at once; thread counts that are powers of two.
    for (const std::vector<CpuAdamSample>* v : {&sorted, &together})
      for (const CpuAdamSample& s : *v) {
        if (std::ranges::find(zsim::kCpuAdamMeasuredRanks, s.ranks) == zsim::kCpuAdamMeasuredRanks.end() ||
            std::ranges::find(zsim::kCpuAdamMeasuredThreads, s.threads) == zsim::kCpuAdamMeasuredThreads.end())
          continue;  // no key holds it
        const bool alone = s.ranks == 1;
        const std::string who = alone ? "one rank alone" : fmt::format("{} ranks at once", s.ranks);
        b.add(fmt::format("efficiency.cpu_adam_measured.ranks_{}.threads_{}", s.ranks, s.threads), num(s.params_per_s()),
              fmt::format("kernels/cpu Adam over {} params, {} on {} threads{}: {}; zsim's rate for a rank of a node of "
                          "{} GPU(s) at these cores; calibration.cpu_adam",
                          static_cast<std::int64_t>(s.params), who, s.threads, alone ? "" : " each",
                          alone ? "the median step" : "the slowest rank's median step", s.ranks));
      }
    nlohmann::json samples = nlohmann::json::array(), together_samples = nlohmann::json::array();
    for (const CpuAdamSample& s : sorted) samples.push_back({s.threads, s.params, s.seconds * 1e6});
    for (const CpuAdamSample& s : together) together_samples.push_back({s.ranks, s.threads, s.params, s.seconds * 1e6});
    cal["cpu_adam"] = {{"per_core_params_per_s", f.per_core}, {"node_params_per_s", f.node_params_per_s},
                       {"slope_up_to_threads", f.slope_up_to}, {"residual", residual_json(f.residual)},
                       // the most threads' sample, as records before the fit held it
                       {"params", static_cast<std::int64_t>(all.params)}, {"threads", all.threads},
                       {"params_per_s", all.params_per_s()}, {kCpuAdamSamplesKey, samples}};
    if (!together.empty()) {
      cal["cpu_adam"][kCpuAdamTogetherKey] = together_samples;
      cal["cpu_adam"]["ceiling_ranks"] = f.ceiling_ranks;
    }
    if (!f.raised.empty()) cal["cpu_adam"]["fitted_at_fewer_threads_rate"] = f.raised;
  } else {
    b.keep("efficiency.cpu_adam_params_per_s_per_core", num(base.efficiency.cpu_adam_params_per_s_per_core), "not measured");
    if (base.efficiency.cpu_adam_node_params_per_s > 0)
      b.keep("efficiency.cpu_adam_node_params_per_s", num(base.efficiency.cpu_adam_node_params_per_s), "not measured");
  }

  if (m.h2d_pageable.size() >= 2 && m.d2h_pageable.size() >= 2 && m.h2d_pinned.size() >= 2 && m.d2h_pinned.size() >= 2) {
    const LatencyBandwidthFit h = fit_latency_bandwidth(m.h2d_pageable), d = fit_latency_bandwidth(m.d2h_pageable);
    const LatencyBandwidthFit hp = fit_latency_bandwidth(m.h2d_pinned), dp = fit_latency_bandwidth(m.d2h_pinned);
    const double frac = std::clamp((h.GBps + d.GBps) / (hp.GBps + dp.GBps), 1e-3, 1.0);
    b.add("efficiency.pageable_pcie_fraction", num(frac),
          fmt::format("pageable H2D {} / D2H {} GB/s over pinned (H2D {}; D2H {}); calibration.host_copies", num(h.GBps),
                      num(d.GBps), residual_text(h.residual), residual_text(d.residual)));
    cal["host_copies"]["h2d_pageable"] = {{"GBps", h.GBps}, {"latency_us", h.latency_s * 1e6},
                                          {"residual", residual_json(h.residual)}, {"samples", samples_json(m.h2d_pageable)}};
    cal["host_copies"]["d2h_pageable"] = {{"GBps", d.GBps}, {"latency_us", d.latency_s * 1e6},
                                          {"residual", residual_json(d.residual)}, {"samples", samples_json(m.d2h_pageable)}};
  } else {
    b.keep("efficiency.pageable_pcie_fraction", num(base.efficiency.pageable_pcie_fraction), "not measured");
  }

  // The fixed cost zsim charges per kernel launch of a compute op beyond its GEMM model's calls: the memory-bound
  // kernels' fitted fixed cost (a GPU-alone record), else the empty kernel's launch to launch (an older record's,
  // timed host-inclusive: at the host's rate).
  const double launch_s = kernel_latency_s > 0 ? kernel_latency_s : m.kernel_launch_s;
  if (kernel_latency_s > 0)
    b.add("efficiency.launch_us", num(kernel_latency_s * 1e6),
          fmt::format("the memory-bound kernels' fixed cost on the GPU alone (calibration.memory_bound.fit; an empty "
                      "kernel: {} us on the GPU alone, {} us host-inclusive)", num(m.kernel_launch_s * 1e6),
                      num(m.kernel_launch_host_inclusive_s * 1e6)));
  else if (m.kernel_launch_s > 0)
    b.add("efficiency.launch_us", num(m.kernel_launch_s * 1e6),
          "an empty kernel launched back to back on one stream, launch to launch (median of 5 batches); "
          "calibration.launch_overhead_us.empty_kernel");
  else
    b.keep("efficiency.launch_us", num(base.efficiency.launch_us), "no launch measured");

  // The host's time to enqueue each kind of call (calibration.host_issue_us). A GPU-alone record writes it as
  // efficiency.host_issue, so that zsim's issuing thread bounds a step whose host is the slower (docs/timing.md "Host
  // issue"); an older record's GPU figures, timed host-inclusive, already hold the host's rate, and write no block.
  const Measurements::HostIssue& h = m.host_issue;
  if (h.kernel_s > 0) {
    cal["host_issue_us"] = {{"kernel", h.kernel_s * 1e6}, {"gemm", h.gemm_s * 1e6}, {"collective", h.collective_s * 1e6},
                            {"memcpy", h.memcpy_s * 1e6}, {"event", h.event_s * 1e6}};
    if (h.gemm_in_turn_s > 0) cal["host_issue_us"]["gemm_in_turn"] = h.gemm_in_turn_s * 1e6;
    if (h.link_collective_s > 0) cal["host_issue_us"]["link_collective"] = h.link_collective_s * 1e6;
    if (m.timing == "gpu_alone") {
      const std::string src = "the host's time to enqueue one call (calibration.host_issue_us)";
      b.add("efficiency.host_issue.kernel_us", num(h.kernel_s * 1e6), src + ": an empty kernel");
      if (h.gemm_in_turn_s > 0)
        b.add("efficiency.host_issue.gemm_us", num(h.gemm_in_turn_s * 1e6),
              src + ": a cuBLASLt GEMM, the grid's shapes called in turn as a step calls them (gemm_in_turn)");
      else
        b.add("efficiency.host_issue.gemm_us", num(h.gemm_s * 1e6), src + ": a cuBLASLt GEMM, the median over the grid");
      b.add("efficiency.host_issue.collective_us", num(h.collective_s * 1e6), src + ": an NCCL call");
      b.add("efficiency.host_issue.memcpy_us", num(h.memcpy_s * 1e6), src + ": a cudaMemcpyAsync");
      b.add("efficiency.host_issue.event_us", num(h.event_s * 1e6), src + ": a cudaEventRecord");
      if (h.link_collective_s > 0)
        b.add("efficiency.host_issue.link_collective_us", num(h.link_collective_s * 1e6),
              src + ": an NCCL call among the GPUs, the median enqueue over the world group's collectives");
    }
  }

  // Collectives on a one-rank communicator where they move data, as zrun calls them on a one-GPU run (all-gather out
  // of place, averaging reductions in place): one latency and rate over
  // the three kinds, with the residual of each kind in the record. None measured: no key (zsim prices a one-rank
  // collective as a device copy).
  if (m.one_rank.size() >= 2) {
    std::vector<SizeSample> all;
    std::map<std::string, std::vector<SizeSample>> by_kind;
    nlohmann::json samples = nlohmann::json::array();
    for (const CollectiveSample& s : m.one_rank) {
      all.push_back({s.size_bytes, s.seconds});
      by_kind[zsim::to_string(s.kind)].push_back({s.size_bytes, s.seconds});
      samples.push_back({zsim::to_string(s.kind), s.size_bytes, s.seconds * 1e6});
    }
    const LatencyBandwidthFit f = fit_latency_bandwidth(all);
    nlohmann::json per_kind = nlohmann::json::object();
    std::string per_kind_text;
    for (const auto& [kind, v] : by_kind) {
      std::vector<double> predicted, measured;
      for (const SizeSample& s : v) {
        predicted.push_back(f.latency_s + (f.GBps > 0 ? s.bytes / (f.GBps * 1e9) : 0.0));
        measured.push_back(s.seconds);
      }
      const FitResidual r = residual_of(predicted, measured);
      per_kind[kind] = residual_json(r);
      per_kind_text += fmt::format("; {}: rms {} / worst {}", kind, pct(r.rms_rel), pct(r.max_abs_rel));
    }
    const std::string src = fmt::format("NCCL on a one-rank communicator: all-gathers out of place, averaging "
                                        "reduce-scatters and all-reduces in place, fitted to latency + bytes / rate: "
                                        "{}{}; calibration.one_rank_collectives",
                                        residual_text(f.residual), per_kind_text);
    b.add("efficiency.one_rank_collective.latency_us", num(f.latency_s * 1e6), src);
    b.add("efficiency.one_rank_collective.GBps", num(f.GBps), src);
    // One line per kind as well: the out-of-place all-gather (a copy) and the averaging reductions (a PreMulSum
    // kernel) run at different rates, which the line over all kinds splits.
    nlohmann::json own = nlohmann::json::object();
    for (const auto& [kind, v] : by_kind) {
      if (v.size() < 2) continue;
      const LatencyBandwidthFit k = fit_latency_bandwidth(v);
      const std::string ksrc = fmt::format("NCCL {} on a one-rank communicator as zrun calls it, fitted to latency + "
                                           "bytes / rate: {}; calibration.one_rank_collectives.by_kind",
                                           kind, residual_text(k.residual));
      b.add("efficiency.one_rank_collective." + kind + ".latency_us", num(k.latency_s * 1e6), ksrc);
      b.add("efficiency.one_rank_collective." + kind + ".GBps", num(k.GBps), ksrc);
      own[kind] = {{"latency_us", k.latency_s * 1e6}, {"GBps", k.GBps}, {"residual", residual_json(k.residual)}};
    }
    cal["one_rank_collectives"] = {{"latency_us", f.latency_s * 1e6}, {"GBps", f.GBps},
                                   {"residual", residual_json(f.residual)}, {"residual_by_kind", per_kind},
                                   {"by_kind", own}, {"samples [kind, bytes, us]", samples}};
  }
  // The same calls per kind and size as bus bandwidths (efficiency.nvlink_busbw): zsim interpolates them at a
  // collective's size on one node, where the line above misses (NCCL's protocol and channels change with the size).
  if (auto it = m.collectives.find("nvlink"); it != m.collectives.end() && !it->second.empty()) {
    int n = 0;
    for (const CollectiveSample& s : it->second)
      if (s.k == 1) n = std::max(n, s.n);
    std::map<zsim::CollectiveKind, std::map<double, std::vector<double>>> rates;  // kind -> size -> bus bytes per s
    for (const CollectiveSample& s : it->second)
      if (s.k == 1 && s.n == n && s.seconds > 0)
        rates[s.kind][s.size_bytes].push_back(zsim::bus_bytes(s.kind, s.size_bytes, s.n) / s.seconds);
    for (const auto& [what, by_size] : rates) {
      const std::string kind = zsim::to_string(what);
      for (const BusbwAtSize& a : busbw_by_size(what, n, by_size)) {
        b.add(fmt::format("efficiency.nvlink_busbw.{}.{}", kind, a.label), num(a.GBps),
              fmt::format("NCCL {} of {} on {} ranks of one node: nccl-tests' bus bandwidth (bus bytes over the median "
                          "call's time{}{}); calibration.collectives.nvlink",
                          kind, a.label, n, m.collectives_timing == "gpu_alone" ? " on the GPU alone" : "",
                          a.raised ? ", that of a larger size, which ran faster" : ""));
        cal["collectives"]["nvlink"]["busbw_GBps"][kind][a.label] = a.GBps;
      }
    }
  }

  // The same for each group over several nodes (efficiency.group_busbw.ranks_<N>_nodes_<K>): the "ib" class (one rank
  // per node) and the groups with ranks on each node ("mixed:<group>", whose samples the record keeps for a refit).
  {
    std::map<std::pair<int, int>, std::map<zsim::CollectiveKind, std::map<double, std::vector<double>>>> rates;
    for (const auto& [cls, samples] : m.collectives) {
      if (cls != "ib" && cls.rfind("mixed:", 0) != 0) continue;
      nlohmann::json rows = nlohmann::json::array();
      for (const CollectiveSample& s : samples) {
        if (s.k > 1 && s.seconds > 0)
          rates[{s.n, s.k}][s.kind][s.size_bytes].push_back(zsim::bus_bytes(s.kind, s.size_bytes, s.n) / s.seconds);
        rows.push_back({zsim::to_string(s.kind), s.n, s.k, s.size_bytes, s.seconds * 1e6});
      }
      if (cls != "ib")
        cal["collectives"][cls] = {{"calibrated", false},
                                   {"why", "a group over nodes with several ranks on each: efficiency.group_busbw"},
                                   {"samples [kind, n, k, bytes, us]", rows}};
    }
    const std::vector<std::pair<int, int>> shapes = zsim::group_busbw_shapes();
    for (const auto& [shape, kinds] : rates) {
      if (std::find(shapes.begin(), shapes.end(), shape) == shapes.end()) continue;  // no key for it
      const std::string name = zsim::group_busbw_shape(shape.first, shape.second);
      for (const auto& [what, by_size] : kinds) {
        const std::string kind = zsim::to_string(what);
        for (const BusbwAtSize& a : busbw_by_size(what, shape.first, by_size)) {
          b.add(fmt::format("efficiency.group_busbw.{}.{}.{}", name, kind, a.label), num(a.GBps),
                fmt::format("NCCL {} of {} on {} ranks over {} nodes: nccl-tests' bus bandwidth (bus bytes over the "
                            "median call's time{}{}); calibration.collectives",
                            kind, a.label, shape.first, shape.second,
                            m.collectives_timing == "gpu_alone" ? " on the GPU alone" : "",
                            a.raised ? ", that of a larger size, which ran faster" : ""));
          cal["collectives"]["group_busbw_GBps"][name][kind][a.label] = a.GBps;
        }
      }
    }
  }

  // Side-stream kernels beside the compute stream's GEMMs: the fraction of its alone rate each kind keeps, and the
  // fraction of theirs the GEMMs keep beside it. None measured: no key (zsim runs them at their alone rate whatever
  // runs beside them).
  if (!m.beside.empty()) {
    nlohmann::json samples = nlohmann::json::array();
    auto what = [](const std::string& kind) {
      return kind == "memcpy"            ? "a cudaMemcpyAsync D2D"
             : kind == "kernel"          ? "a copy kernel (batched_copy)"
             : kind == "link_collective" ? "an all-gather among the ranks (GEMMs on every rank)"
                                         : "a one-rank ncclAvg all-reduce";
    };
    // The profile's figures are beside 4096^3 GEMMs. A kind timed at 2+ sizes with the GEMM's time recorded: the line
    // beside = wait + slope x alone through its sizes (least squares), the wait as a fraction of the GEMM's time
    // (efficiency.beside_compute_wait) and 1 / slope its rate after it (efficiency.beside_compute); else, as before, the
    // fraction alone / beside at its largest size. Every sample is recorded. Each block's keys together.
    std::map<std::string, double> largest;
    std::map<std::string, std::vector<const BesideSample*>> at_4096;
    // (A copy of many pieces is recorded only.)
    const auto beside_grid_gemm = [](const BesideSample& s) { return s.gemm == 4096 && s.pieces == 1; };
    for (const BesideSample& s : m.beside)
      if (beside_grid_gemm(s)) {
        largest[s.kind] = std::max(largest[s.kind], s.bytes);
        at_4096[s.kind].push_back(&s);
      }
    const auto profiled = [&](const BesideSample& s) {
      return beside_grid_gemm(s) && s.bytes == largest[s.kind];
    };
    struct WaitLine {
      double wait_s = 0, slope = 0, gemm_s = 0, worst_rel = 0;
      int sizes = 0;
    };
    std::map<std::string, WaitLine> lines;
    for (const auto& [kind, v] : at_4096) {
      std::set<double> sizes;
      bool timed = true;
      for (const BesideSample* s : v) {
        sizes.insert(s->bytes);
        timed = timed && s->gemm_s > 0;
      }
      if (sizes.size() < 2 || !timed) continue;
      double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
      for (const BesideSample* s : v) {
        n += 1, sx += s->alone_s, sy += s->beside_s, sxx += s->alone_s * s->alone_s, sxy += s->alone_s * s->beside_s;
      }
      const double det = n * sxx - sx * sx;
      if (!(det > 0)) continue;
      WaitLine l;
      l.slope = (n * sxy - sx * sy) / det;
      l.wait_s = (sy - l.slope * sx) / n;
      if (!(l.wait_s > 0) || !(l.slope > 0)) continue;  // no wait the line can show: the fraction at the largest size
      l.gemm_s = median([&] {
        std::vector<double> g;
        for (const BesideSample* s : v) g.push_back(s->gemm_s);
        return g;
      }());
      for (const BesideSample* s : v)
        l.worst_rel = std::max(l.worst_rel, std::abs(l.wait_s + l.slope * s->alone_s - s->beside_s) / s->beside_s);
      l.sizes = static_cast<int>(sizes.size());
      lines[kind] = l;
    }
    for (const BesideSample& s : m.beside) {
      samples.push_back(
          {s.kind, s.bytes, s.alone_s * 1e6, s.beside_s * 1e6, s.gemm, s.gemm_rate, s.gemm_s * 1e6, s.pieces});
      if (!profiled(s)) continue;
      if (const auto l = lines.find(s.kind); l != lines.end()) {
        const WaitLine& w = l->second;
        b.add("efficiency.beside_compute." + s.kind, num(std::clamp(1 / w.slope, 0.01, 1.0)),
              fmt::format("{} on a side stream beside back-to-back bf16 4096^3 GEMMs, at {} sizes up to {} MiB: "
                          "beside = {} us + {} x alone (least squares, worst {}%): the rate after its wait, 1 / {}; "
                          "calibration.beside_compute",
                          what(s.kind), w.sizes, num(s.bytes / (1 << 20)), num(w.wait_s * 1e6), num(w.slope),
                          num(100 * w.worst_rel), num(w.slope)));
        continue;
      }
      const double kept = std::clamp(s.alone_s / s.beside_s, 0.01, 1.0);
      b.add("efficiency.beside_compute." + s.kind, num(kept),
            fmt::format("{} of {} MiB on a side stream: {} us alone, {} us beside back-to-back bf16 4096^3 GEMMs "
                        "(medians of 5); calibration.beside_compute",
                        what(s.kind), num(s.bytes / (1 << 20)), num(s.alone_s * 1e6), num(s.beside_s * 1e6)));
    }
    for (const auto& [kind, w] : lines)
      b.add("efficiency.beside_compute_wait." + kind, num(std::min(w.wait_s / w.gemm_s, 1.0)),
            fmt::format("{} issued as a bf16 4096^3 GEMM starts waits {} us of its {} us (the line's intercept over "
                        "{} sizes): the SMs come free once the GEMM has dispatched its last blocks; "
                        "calibration.beside_compute",
                        what(kind),
                        num(w.wait_s * 1e6), num(w.gemm_s * 1e6), w.sizes));
    // The GEMMs' loss beside each kind at its largest size with a GEMM rate: over the side op's whole time, or, where
    // the kind has a wait, over its time after the wait (a side kernel waiting for SMs holds none). A rate of 0, GEMMs
    // that made no progress beside the side op, is a failed trial (4 ranks' 256 MiB all-gather on a 4 x H200 host,
    // 2026-11-29): the next size down gives the figure.
    std::map<std::string, double> largest_rated;
    for (const BesideSample& s : m.beside)
      if (beside_grid_gemm(s) && s.gemm_rate > 0)
        largest_rated[s.kind] = std::max(largest_rated[s.kind], s.bytes);
    for (const BesideSample& s : m.beside) {
      if (!beside_grid_gemm(s) || !(s.gemm_rate > 0) || s.bytes != largest_rated[s.kind]) continue;
      const auto l = lines.find(s.kind);
      const double moving_s = l == lines.end() ? s.beside_s : s.beside_s - l->second.wait_s;
      if (!(moving_s > 0)) continue;
      const double rate = 1 - (1 - s.gemm_rate) * s.beside_s / moving_s;
      b.add("efficiency.compute_beside." + s.kind, num(std::clamp(rate, 0.01, 1.0)),
            l == lines.end()
                ? fmt::format("back-to-back bf16 4096^3 GEMMs while {} of {} MiB runs on a side stream: the fraction "
                              "of their alone rate they keep (their time less the alone GEMMs', over the side op's {} "
                              "us, median of 5); calibration.beside_compute",
                              what(s.kind), num(s.bytes / (1 << 20)), num(s.beside_s * 1e6))
                : fmt::format("back-to-back bf16 4096^3 GEMMs while {} of {} MiB runs on a side stream: the fraction "
                              "of their alone rate they keep after its wait (their time less the alone GEMMs', {} of "
                              "the side op's {} us, over the {} us after its {} us wait; median of 5); "
                              "calibration.beside_compute",
                              what(s.kind), num(s.bytes / (1 << 20)), num(1 - s.gemm_rate), num(s.beside_s * 1e6),
                              num(moving_s * 1e6), num(l->second.wait_s * 1e6)));
    }
    cal["beside_compute"] = {{"samples [kind, bytes, alone us, beside us, gemm, gemm rate beside, gemm us, pieces]",
                              samples}};
  }

  // zrun's flash attention kernel: per direction the efficiency of its FLOPs (as the schedule counts them) beside the
  // launches zsim charges it (efficiency.launch_us each), fitted over the 16-bit measurements, bf16 and fp16 together
  // (one key serves both; the record gives the residual per dtype and per head dim). A record without them (written
  // before calibrate measured the kernel) writes no key: zsim keeps the core at its unit's GEMM efficiency.
  if (!m.flash.empty()) {
    const double peak = base.gpu.peak_tflops;
    nlohmann::json samples = nlohmann::json::array();
    for (const FlashSample& f : m.flash)
      samples.push_back({f.dtype, f.direction, f.b, f.heads, f.kv_heads, f.seq, f.head_dim, f.seconds * 1e6});
    for (const char* direction : {"forward", "backward"}) {
      std::vector<FlashSample> v;
      for (const FlashSample& f : m.flash)
        if (f.direction == direction && (f.dtype == "bf16" || f.dtype == "fp16")) v.push_back(f);
      if (v.empty()) continue;
      const FlashFit f = fit_flash_efficiency(v, peak, launch_s);
      const int n = flash_launches(v.front());
      const std::string launches = fmt::format("{} launch{}", n, n == 1 ? "" : "es");
      std::string per_dim;
      nlohmann::json by_dim = nlohmann::json::object(), by_dtype = nlohmann::json::object();
      for (const auto& [d, r] : f.by_head_dim) {
        per_dim += fmt::format("; head dim {}: rms {} / worst {}", d, pct(r.rms_rel), pct(r.max_abs_rel));
        by_dim[std::to_string(d)] = residual_json(r);
      }
      for (const auto& [dt, r] : f.by_dtype) by_dtype[dt] = residual_json(r);
      b.add(std::string("efficiency.flash_attention.") + direction, num(f.efficiency),
            fmt::format("zrun's flash attention {} (bf16 and fp16 calls), t = {} x {} us + FLOPs / ({} TFLOPS x e), "
                        "FLOPs as the schedule counts them: {}{}{}; calibration.flash_attention.{}",
                        direction, launches, num(launch_s * 1e6), num(peak), residual_text(f.residual),
                        per_dim, f.launch_bound > 0 ? fmt::format(" ({} launch-bound, not fitted)", f.launch_bound) : "",
                        direction));
      cal["flash_attention"][direction] = {{"efficiency", f.efficiency}, {"launches", n}, {"launch_bound", f.launch_bound},
                                           {"launch_us", launch_s * 1e6}, {"peak_tflops", peak},
                                           {"residual", residual_json(f.residual)},
                                           {"residual_by_head_dim", by_dim}, {"residual_by_dtype", by_dtype}};
    }
    cal["flash_attention"]["samples"] = samples;
  }

  auto model_entries = [&](const char* block, const GemmFit& f, const std::string& dtype) {
    const std::string src =
        f.batched.samples > 0
            ? fmt::format("{} cuBLASLt grid and eager attention's batched calls, {} (grid: rms {} / worst {} over {}; "
                          "attention: rms {} / worst {} over {}); calibration.gemm.{}",
                          dtype, residual_text(f.residual), pct(f.grid.rms_rel), pct(f.grid.max_abs_rel), f.grid.samples,
                          pct(f.batched.rms_rel), pct(f.batched.max_abs_rel), f.batched.samples, dtype)
            : fmt::format("{} cuBLASLt grid, {}; calibration.gemm.{}", dtype, residual_text(f.residual), dtype);
    b.add(std::string("efficiency.") + block + ".launch_us", num(f.model.launch_us), src);
    b.add(std::string("efficiency.") + block + ".max_efficiency", num(f.model.max_efficiency), src);
    b.add(std::string("efficiency.") + block + ".io_GBps", num(f.model.io_GBps), src);
    const std::string chosen =
        "chosen of 64/128/256 tiles, split-K none/128..1024 and io_overlap 0/0.25..1 by least residual; " + src;
    b.add(std::string("efficiency.") + block + ".io_overlap", num(f.model.io_overlap), chosen);
    b.add(std::string("efficiency.") + block + ".tile_m", integer(f.model.tile_m), chosen);
    b.add(std::string("efficiency.") + block + ".tile_n", integer(f.model.tile_n), chosen);
    b.add(std::string("efficiency.") + block + ".split_k_depth", integer(f.model.split_k_depth), chosen);
    b.add(std::string("efficiency.") + block + ".sms", integer(f.model.sms), "cudaDeviceProp.multiProcessorCount");
    b.add(std::string("efficiency.") + block + ".attention_shapes", f.model.attention_shapes ? "true" : "false",
          f.model.attention_shapes
              ? fmt::format("fitted on {} of eager attention's strided-batched calls too (calibration.gemm.{}.batched_samples): "
                            "zsim prices eager attention's core as those calls", f.batched.samples, dtype)
              : "no attention-shaped batched GEMM in the measurements (a record from before zrun calibrate measured "
                "them): zsim runs eager attention's core at its unit's GEMM efficiency and its scores' traffic as "
                "memory-bound time; run zrun calibrate again to fit them");
  };
  if (sixteen) model_entries("gemm_model", gemm_fits.at(sixteen), sixteen);
  if (gemm_fits.count("fp32")) model_entries("gemm_model_fp32", gemm_fits.at("fp32"), "fp32");

  cal["launch_overhead_us"] = {{"empty_kernel", m.kernel_launch_s * 1e6}, {"gemm_1x1x1", m.gemm_launch_s * 1e6}};
  if (m.kernel_launch_host_inclusive_s > 0)
    cal["launch_overhead_us"]["empty_kernel_host_inclusive"] = m.kernel_launch_host_inclusive_s * 1e6;
  if (!m.collectives_note.empty()) cal["collectives"]["note"] = m.collectives_note;
  if (!m.collectives.empty()) cal["collectives"]["timing"] = m.collectives_timing;

  b.p.header = {
      fmt::format("Calibrated hardware profile: {} ({} GPU(s) measured), written by zrun calibrate{}.", m.gpu_name, m.gpus,
                  m.quick ? " --quick" : ""),
      "Every value says where it comes from: a fit of this machine's measurements (with its residual and the",
      "calibration: entry that holds the measurements) or '" "not calibrated: " + base_name + "' (the data-sheet value kept).",
      "Format: docs/hardware-profiles.md (Calibrated profiles). zsim reads cluster:, never calibration:."};
  return b.p;
}

namespace {

void yaml_value(std::ostringstream& out, const nlohmann::json& j, int indent) {
  const std::string pad(indent, ' ');
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string key = nlohmann::json(it.key()).dump();  // quoted: any key is safe
    if (it->is_object() && !it->empty()) {
      out << pad << key << ":\n";
      yaml_value(out, *it, indent + 2);
    } else {
      out << pad << key << ": " << it->dump() << "\n";  // JSON scalars and flow arrays are YAML
    }
  }
}

std::vector<std::string> split(const std::string& key) {
  std::vector<std::string> parts;
  std::stringstream ss(key);
  std::string p;
  while (std::getline(ss, p, '.')) parts.push_back(p);
  return parts;
}

}  // namespace

std::string profile_yaml(const CalibratedProfile& p) {
  std::ostringstream out;
  for (const std::string& h : p.header) out << "# " << h << "\n";
  out << "cluster:\n";
  std::vector<std::string> open;  // the blocks opened by the previous entry
  for (const ProfileEntry& e : p.cluster) {
    const std::vector<std::string> parts = split(e.key);
    const std::vector<std::string> blocks(parts.begin(), parts.end() - 1);
    std::size_t same = 0;
    while (same < open.size() && same < blocks.size() && open[same] == blocks[same]) ++same;
    for (std::size_t i = same; i < blocks.size(); ++i) out << std::string(2 * (i + 1), ' ') << blocks[i] << ":\n";
    open = blocks;
    out << std::string(2 * (blocks.size() + 1), ' ') << parts.back() << ": " << e.value << "  # " << e.comment << "\n";
  }
  if (!p.calibration.empty()) {
    out << "calibration:\n";
    yaml_value(out, p.calibration, 2);
  }
  return out.str();
}

}  // namespace zrun::calibrate
