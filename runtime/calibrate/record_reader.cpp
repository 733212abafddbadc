#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <stdexcept>
#include <utility>

#include "runtime/calibrate/measurements.hpp"
#include "sim/common/error.hpp"

namespace zrun::calibrate {

namespace {

nlohmann::json to_json(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      nlohmann::json j = nlohmann::json::object();
      for (auto it = n.begin(); it != n.end(); ++it) j[it->first.as<std::string>()] = to_json(it->second);
      return j;
    }
    case YAML::NodeType::Sequence: {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& e : n) j.push_back(to_json(e));
      return j;
    }
    case YAML::NodeType::Scalar: {
      const std::string& s = n.Scalar();
      if (n.Tag() == "!") return s;  // quoted: a string
      if (s == "true" || s == "false") return s == "true";
      char* end = nullptr;
      const double v = std::strtod(s.c_str(), &end);
      if (!s.empty() && end && *end == '\0') return v;
      return s;
    }
    default: return nullptr;
  }
}

std::vector<SizeSample> size_samples(const nlohmann::json& j) {
  std::vector<SizeSample> out;
  if (j.is_object() && j.contains("samples"))
    for (const auto& s : j["samples"]) out.push_back({s[0].get<double>(), s[1].get<double>() * 1e-6});
  return out;
}

zsim::CollectiveKind kind_named(const std::string& name) {
  for (auto k : {zsim::CollectiveKind::all_reduce, zsim::CollectiveKind::all_gather, zsim::CollectiveKind::reduce_scatter,
                 zsim::CollectiveKind::broadcast, zsim::CollectiveKind::reduce, zsim::CollectiveKind::all_to_all})
    if (name == zsim::to_string(k)) return k;
  throw std::invalid_argument("unknown collective kind '" + name + "'");
}

}  // namespace

Measurements measurements_from_profile(const std::string& file) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(file);
  } catch (const YAML::Exception& e) {
    throw zsim::InputError(zsim::SourceLocation{file, 0, 0, ""}, std::string("cannot read the profile: ") + e.what());
  }
  if (!root["calibration"] || !root["cluster"])
    throw zsim::InputError(zsim::SourceLocation{file, 0, 0, "calibration"},
                           "no calibration: record (is this a profile zrun calibrate wrote?)");
  const nlohmann::json c = to_json(root["calibration"]);
  const nlohmann::json cl = to_json(root["cluster"]);
  Measurements m;
  try {
    m.gpu_name = c.value("gpu", "");
    m.sms = static_cast<int>(c.value("sms", 0.0));
    m.quick = c.value("quick", false);
    m.timing = c.value("timing", "host_inclusive");  // records before 2026-11-27 carry no key
    m.gpus = static_cast<int>(c.value("gpus", cl.value("gpus_per_node", 1.0)));
    m.hbm_bytes = static_cast<std::int64_t>(c.value("hbm_bytes", cl["gpu"].value("hbm_bytes", 0.0)));
    m.host_memory_bytes = static_cast<std::int64_t>(c.value("host_memory_bytes", cl["host"].value("memory_bytes", 0.0)));
    m.host_cores = static_cast<int>(c.value("host_cores", cl["host"].value("cores", 0.0)));
    if (c.contains("gemm"))
      for (const auto& [dt, g] : c["gemm"].items()) {
        for (const auto& s : g["samples"])
          m.gemm[dt].push_back({static_cast<std::int64_t>(s[0].get<double>()), static_cast<std::int64_t>(s[1].get<double>()),
                                static_cast<std::int64_t>(s[2].get<double>()), s[3].get<double>() * 1e-6});
        // Eager attention's batched calls (records written since calibrate measures them): [product, m, n, k, batch, us].
        if (g.contains("batched_samples"))
          for (const auto& s : g["batched_samples"])
            m.gemm[dt].push_back({static_cast<std::int64_t>(s[1].get<double>()),
                                  static_cast<std::int64_t>(s[2].get<double>()),
                                  static_cast<std::int64_t>(s[3].get<double>()), s[5].get<double>() * 1e-6,
                                  static_cast<std::int64_t>(s[4].get<double>()), s[0].get<std::string>()});
      }
    if (c.contains("memory_bound"))
      for (const auto& k : c["memory_bound"]["kernels"]) {
        KernelSample s{k["name"].get<std::string>(), k["kind"].get<std::string>(), k["bytes"].get<double>(),
                       k["us"].get<double>() * 1e-6, k.value("host_inclusive_us", 0.0) * 1e-6, k.value("launches", 1)};
        // Records written before attention's causal softmax was measured filed the vocabulary cross-entropy
        // under kind "softmax"; that kind is now the attention softmax's, so such a record has no softmax figure.
        if (s.kind == "softmax" && s.name.rfind("cross_entropy", 0) == 0) s.kind = "cross_entropy";
        // Records written before backward kernels were kinds of their own filed each under its forward's kind.
        const bool backward_kernel = s.name.find(".bwd") != std::string::npos;
        if (backward_kernel && s.kind.find("_backward") == std::string::npos) s.kind += "_backward";
        m.kernels.push_back(std::move(s));
      }
    // zrun's flash attention (records written since calibrate measures it): [dtype, direction, b, heads, kv_heads,
    // seq, head_dim, us].
    if (c.contains("flash_attention") && c["flash_attention"].contains("samples"))
      for (const auto& s : c["flash_attention"]["samples"])
        m.flash.push_back({s[0].get<std::string>(), s[1].get<std::string>(), static_cast<std::int64_t>(s[2].get<double>()),
                           static_cast<std::int64_t>(s[3].get<double>()), static_cast<std::int64_t>(s[4].get<double>()),
                           static_cast<std::int64_t>(s[5].get<double>()), static_cast<std::int64_t>(s[6].get<double>()),
                           s[7].get<double>() * 1e-6});
    if (c.contains("host_copies")) {
      const auto& h = c["host_copies"];
      if (h.contains("h2d_pinned")) m.h2d_pinned = size_samples(h["h2d_pinned"]);
      if (h.contains("d2h_pinned")) m.d2h_pinned = size_samples(h["d2h_pinned"]);
      if (h.contains("h2d_pageable")) m.h2d_pageable = size_samples(h["h2d_pageable"]);
      if (h.contains("d2h_pageable")) m.d2h_pageable = size_samples(h["d2h_pageable"]);
    }
    // CPU Adam at several thread counts (records written since calibrate fits the node's ceiling):
    // [threads, params, us]; an older record's one measurement on every hardware thread: params, threads, params_per_s.
    if (c.contains("cpu_adam")) {
      const auto& a = c["cpu_adam"];
      if (a.contains(kCpuAdamSamplesKey))
        for (const auto& s : a[kCpuAdamSamplesKey])
          m.cpu_adam.push_back({static_cast<int>(s[0].get<double>()), s[1].get<double>(), s[2].get<double>() * 1e-6});
      else
        m.cpu_adam.push_back({static_cast<int>(a["threads"].get<double>()), a["params"].get<double>(),
                              a["params"].get<double>() / a["params_per_s"].get<double>()});
      if (a.contains(kCpuAdamTogetherKey))
        for (const auto& s : a[kCpuAdamTogetherKey])
          m.cpu_adam.push_back({static_cast<int>(s[1].get<double>()), s[2].get<double>(), s[3].get<double>() * 1e-6,
                                static_cast<int>(s[0].get<double>())});
    }
    if (c.contains("nvme")) {
      if (c["nvme"].contains("read")) m.nvme_read = size_samples(c["nvme"]["read"]);
      if (c["nvme"].contains("write")) m.nvme_write = size_samples(c["nvme"]["write"]);
      if (c["nvme"].contains("read_one_request")) m.nvme_read_one = size_samples(c["nvme"]["read_one_request"]);
      if (c["nvme"].contains("write_one_request")) m.nvme_write_one = size_samples(c["nvme"]["write_one_request"]);
      m.nvme_path = c["nvme"].value("path", "");
      m.nvme_direct = c["nvme"].value("direct", false);
      m.nvme_moments = c["nvme"].value("moments", 0);
      m.nvme_moments_apart_s = c["nvme"].value("moments_apart_s", 0.0);
    }
    if (c.contains("host_issue_us")) {
      const auto& h = c["host_issue_us"];
      m.host_issue = {h.value("kernel", 0.0) * 1e-6, h.value("gemm", 0.0) * 1e-6, h.value("collective", 0.0) * 1e-6,
                      h.value("memcpy", 0.0) * 1e-6, h.value("event", 0.0) * 1e-6, h.value("gemm_in_turn", 0.0) * 1e-6,
                      h.value("link_collective", 0.0) * 1e-6};
    }
    if (c.contains("launch_overhead_us")) {
      m.kernel_launch_s = c["launch_overhead_us"].value("empty_kernel", 0.0) * 1e-6;
      m.gemm_launch_s = c["launch_overhead_us"].value("gemm_1x1x1", 0.0) * 1e-6;
      m.kernel_launch_host_inclusive_s = c["launch_overhead_us"].value("empty_kernel_host_inclusive", 0.0) * 1e-6;
    }
    // Since the GEMMs' rate beside each kind is measured: a sixth field (records before: five); since the load GEMM's
    // time is recorded (2026-11-29), a seventh; since a copy of many pieces is timed too, an eighth.
    if (c.contains("beside_compute"))
      for (const char* key : {"samples [kind, bytes, alone us, beside us, gemm]",
                              "samples [kind, bytes, alone us, beside us, gemm, gemm rate beside]",
                              "samples [kind, bytes, alone us, beside us, gemm, gemm rate beside, gemm us]",
                              "samples [kind, bytes, alone us, beside us, gemm, gemm rate beside, gemm us, pieces]"})
        if (c["beside_compute"].contains(key))
          for (const auto& s : c["beside_compute"][key])
            m.beside.push_back({s[0].get<std::string>(), s[1].get<double>(), s[2].get<double>() * 1e-6,
                                s[3].get<double>() * 1e-6, static_cast<std::int64_t>(s[4].get<double>()),
                                s.size() > 5 ? s[5].get<double>() : 0.0, s.size() > 6 ? s[6].get<double>() * 1e-6 : 0.0,
                                s.size() > 7 ? static_cast<int>(s[7].get<double>()) : 1});
    if (c.contains("one_rank_collectives"))
      for (const auto& s : c["one_rank_collectives"]["samples [kind, bytes, us]"])
        m.one_rank.push_back({kind_named(s[0].get<std::string>()), 1, 1, s[1].get<double>(), s[2].get<double>() * 1e-6});
    if (c.contains("collectives")) {
      m.collectives_timing = c["collectives"].value("timing", "host_inclusive");  // records before 2026-11-29: no key
      for (const auto& [cls, v] : c["collectives"].items()) {
        if (cls == "timing") continue;
        if (cls == "note") {
          m.collectives_note = v.get<std::string>();
          continue;
        }
        for (const auto& [key, samples] : v.items())
          if (key.rfind("samples", 0) == 0)
            for (const auto& s : samples)
              m.collectives[cls].push_back({kind_named(s[0].get<std::string>()), static_cast<int>(s[1].get<double>()),
                                            static_cast<int>(s[2].get<double>()), s[3].get<double>(),
                                            s[4].get<double>() * 1e-6});
      }
    }
  } catch (const nlohmann::json::exception& e) {
    throw zsim::InputError(zsim::SourceLocation{file, 0, 0, "calibration"}, std::string("malformed record: ") + e.what());
  } catch (const std::invalid_argument& e) {
    throw zsim::InputError(zsim::SourceLocation{file, 0, 0, "calibration"}, e.what());
  }
  return m;
}

}  // namespace zrun::calibrate
