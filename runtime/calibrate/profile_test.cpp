// zrun calibrate's profile from synthetic measurements: fitted values land in the YAML with their sources,
// unmeasured ones keep the base profile's values, and the file loads and simulates through cluster.profile.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

#include <gtest/gtest.h>

#include "cost_models/collective_cost.hpp"
#include "runtime/calibrate/measurements.hpp"
#include "sim/engine/simulate.hpp"
#include "sim/plan/plan.hpp"
#include "sim/plan/schedule_builder.hpp"
#include "sim/scenario/scenario_parse.hpp"

namespace zrun::calibrate {
namespace {

namespace fs = std::filesystem;

zsim::GemmModel truth_model() {
  zsim::GemmModel g;
  g.launch_us = 5;
  g.max_efficiency = 0.7;
  g.io_GBps = 2000;
  g.sms = 132;
  return g;
}

Measurements synthetic(bool with_collectives, bool with_attention = false) {
  Measurements m;
  m.gpu_name = "NVIDIA H100 80GB HBM3";
  m.hbm_bytes = 85'000'000'000;
  m.sms = 132;
  m.gpus = with_collectives ? 2 : 1;
  m.host_memory_bytes = 128ll << 30;
  m.host_cores = 16;
  for (const char* dt : {"bf16", "fp32"})
    for (std::int64_t mm : {256, 2048, 8192})
      for (std::int64_t n : {512, 4096, 11008})
        for (std::int64_t k : {512, 4096})
          m.gemm[dt].push_back({mm, n, k, zsim::gemm_model_s(mm, n, k, 1, std::string(dt) == "fp32" ? 4 : 2,
                                                             std::string(dt) == "fp32" ? 67 : 989, truth_model())});
  if (with_attention)  // eager attention's batched calls (gpu_benches.cpp measure_attention_gemms), bf16 and fp32
    for (const char* dt : {"bf16", "fp32"}) {
      const int e = std::string(dt) == "fp32" ? 4 : 2;
      const double peak = std::string(dt) == "fp32" ? 67 : 989;
      for (std::int64_t seq : {512, 2048})
        for (std::int64_t d : {64, 128})
          for (std::int64_t b : {4, 32}) {
            m.gemm[dt].push_back({seq, seq, d, zsim::gemm_model_s(seq, seq, d, b, e, peak, truth_model()), b, "scores"});
            m.gemm[dt].push_back({d, seq, seq, zsim::gemm_model_s(d, seq, seq, b, e, peak, truth_model()), b, "probs_v"});
            m.gemm[dt].push_back({d, seq, seq, zsim::gemm_model_s(d, seq, seq, b, e, peak, truth_model()), b, "dv"});
          }
    }
  m.kernels = {{"rmsnorm.fwd", "norm", 1e9, 1e9 / 2.5e12}, {"swiglu.fwd", "activation", 1e9, 1e9 / 3.0e12},
               {"fused_adam", "adam", 1e9, 1e9 / 2.0e12}};
  m.kernel_launch_s = 3.25e-6;
  for (double b = 65536; b <= (256 << 20); b *= 4) {
    m.h2d_pinned.push_back({b, 2e-6 + b / 50e9});
    m.d2h_pinned.push_back({b, 2e-6 + b / 54e9});
    m.h2d_pageable.push_back({b, 5e-6 + b / 9e9});
    m.d2h_pageable.push_back({b, 5e-6 + b / 15e9});
  }
  // CPU Adam at 1 .. 16 threads: 5e7 params/s per thread up to the node's 6e8.
  for (int t : {1, 2, 4, 8, 16}) m.cpu_adam.push_back({t, 1 << 22, (1 << 22) / std::min(t * 5e7, 6e8)});
  for (double b = 16 << 20; b <= (1 << 30); b *= 4) {
    m.nvme_read.push_back({b, 1e-4 + b / 6e9});
    m.nvme_write.push_back({b, 1e-4 + b / 3e9});
  }
  for (double b = 4096; b <= (1 << 20); b *= 4) {  // one request each: 50 us / 30 us + bytes at 1.2 / 1.8 GB/s
    m.nvme_read_one.push_back({b, 5e-5 + b / 1.2e9});
    m.nvme_write_one.push_back({b, 3e-5 + b / 1.8e9});
  }
  m.nvme_path = "/tmp";
  m.nvme_direct = true;
  // NCCL on a one-rank communicator (measured on any number of GPUs): 50 us + bytes at 600 GB/s.
  for (auto kind : {zsim::CollectiveKind::all_gather, zsim::CollectiveKind::reduce_scatter,
                    zsim::CollectiveKind::all_reduce})
    for (double b = 1024; b <= (1 << 30); b *= 16) m.one_rank.push_back({kind, 1, 1, b, 50e-6 + b / 600e9});
  // Side-stream kernels alone and beside GEMMs.
  m.beside = {{"memcpy", 256.0 * (1 << 20), 200e-6, 800e-6}, {"kernel", 256.0 * (1 << 20), 150e-6, 160e-6},
              {"collective", 256.0 * (1 << 20), 300e-6, 1500e-6}};
  if (with_collectives) {
    const zsim::CollectiveLink link{4e-6, 4e-6, 350e9};
    for (auto kind : {zsim::CollectiveKind::all_reduce, zsim::CollectiveKind::all_gather})
      for (double b = 1024; b <= (1 << 30); b *= 16)
        m.collectives["nvlink"].push_back(
            {kind, 2, 1, b, zsim::collective_s(kind, zsim::CollectiveAlgorithm::ring, b, 2, 1, link)});
  } else {
    m.collectives_note = "one GPU: no collective to measure";
  }
  return m;
}

// zrun's flash attention as calibrate measures it (gpu_benches.cpp measure_flash_attention), timed by kernels of
// efficiency 0.3 forward and 0.25 backward behind the synthetic record's 3.25 us launches: bf16 and fp16, head dim 64
// and 128, two sequences, two head shapes.
Measurements with_flash(Measurements m) {
  for (const char* dt : {"bf16", "fp16"})
    for (const char* direction : {"forward", "backward"})
      for (std::int64_t d : {64, 128})
        for (std::int64_t seq : {1024, 2048})
          for (std::int64_t heads : {12, 32}) {
            FlashSample f{dt, direction, 4, heads, heads, seq, d, 0};
            f.seconds = flash_launches(f) * m.kernel_launch_s +
                        flash_flops(f) / (989e12 * (f.backward() ? 0.25 : 0.3));
            m.flash.push_back(f);
          }
  return m;
}

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("zrun-calibrate-test-" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

std::string write_profile(const TempDir& d, const std::string& name, const CalibratedProfile& p) {
  std::ofstream(d.path / (name + ".yaml")) << profile_yaml(p);
  return d.path.string();
}

// The cluster of the profile built from `m` on the H100 data sheet, written as `name` into d and loaded back.
zsim::ClusterSpec loaded_profile(const TempDir& d, const std::string& name, const Measurements& m) {
  const CalibratedProfile p = build_profile(m, load_profile_cluster("h100-hgx-ib400"), "h100-hgx-ib400");
  return load_profile_cluster(name, write_profile(d, name, p));
}

TEST(CalibratedProfile, LoadsThroughClusterProfileWithTheFittedValues) {
  const zsim::ClusterSpec base = load_profile_cluster("h100-hgx-ib400");
  TempDir d;
  const std::string dir = write_profile(d, "calib-h100", build_profile(synthetic(true), base, "h100-hgx-ib400"));
  const zsim::ClusterSpec c = load_profile_cluster("calib-h100", dir);
  EXPECT_NEAR(c.efficiency.gemm_model.max_efficiency, 0.7, 1e-4);
  EXPECT_NEAR(c.efficiency.gemm_model.launch_us, 5, 1e-3);
  EXPECT_NEAR(c.efficiency.gemm_model_fp32.max_efficiency, 0.7, 1e-4);
  EXPECT_NEAR(c.links.pcie_GBps, 52, 1e-3);                          // mean of 50 and 54
  EXPECT_NEAR(c.efficiency.pageable_pcie_fraction, 24.0 / 104.0, 1e-4);
  EXPECT_NEAR(c.efficiency.hbm, 2.5e12 / 3350e9, 1e-4);              // median of the kinds' figures
  EXPECT_NEAR(c.efficiency.cpu_adam_params_per_s_per_core, 5e7, 1);
  EXPECT_NEAR(c.efficiency.cpu_adam_node_params_per_s, 6e8, 10);
  EXPECT_NEAR(c.nvme.read_GBps, 6, 1e-3);
  EXPECT_NEAR(c.nvme.write_GBps, 3, 1e-3);
  EXPECT_NEAR(c.nvme.read_latency_us, 100, 1e-2);  // the synthetic transfers' 1e-4 s intercept
  EXPECT_NEAR(c.nvme.write_latency_us, 100, 1e-2);
  EXPECT_NEAR(c.nvme.one_request_read_latency_us, 50, 1e-2);  // the one-request transfers' own line
  EXPECT_NEAR(c.nvme.one_request_read_GBps, 1.2, 1e-3);
  EXPECT_NEAR(c.nvme.one_request_write_latency_us, 30, 1e-2);
  EXPECT_NEAR(c.nvme.one_request_write_GBps, 1.8, 1e-3);
  EXPECT_NEAR(c.links.nvlink_GBps, 350, 1e-2);
  EXPECT_NEAR(c.links.nvlink_latency_us, 4, 1e-3);
  EXPECT_EQ(c.host.cores, 16);
  // Each measured size's own figure: bytes over the whole measured time (16 MiB .. 1 GiB).
  ASSERT_EQ(c.nvme.read_GBps_by_size.size(), 4u);
  EXPECT_EQ(c.nvme.read_GBps_by_size.front().first, 16.0 * (1 << 20));
  EXPECT_NEAR(c.nvme.read_GBps_by_size.front().second, (16 << 20) / (1e-4 + (16 << 20) / 6e9) / 1e9, 1e-4);
  ASSERT_EQ(c.nvme.write_GBps_by_size.size(), 4u);
  EXPECT_NEAR(c.nvme.write_GBps_by_size.back().second, (1 << 30) / (1e-4 + (1 << 30) / 3e9) / 1e9, 1e-4);
  EXPECT_EQ(c.gpu.peak_tflops, base.gpu.peak_tflops);  // data sheet kept
}

TEST(CalibratedProfile, OneGpuKeepsTheBaseLinksMarkedNotCalibrated) {
  const zsim::ClusterSpec base = load_profile_cluster("h100-hgx-ib400");
  const CalibratedProfile p = build_profile(synthetic(false), base, "h100-hgx-ib400");
  TempDir d;
  const zsim::ClusterSpec c = load_profile_cluster("calib-one", write_profile(d, "calib-one", p));
  EXPECT_EQ(c.links.nvlink_GBps, base.links.nvlink_GBps);
  EXPECT_EQ(c.links.ib_latency_us, base.links.ib_latency_us);
  for (const ProfileEntry& e : p.cluster)
    if (e.key == "links.nvlink_GBps" || e.key == "links.ib_GBps") {
      EXPECT_NE(e.comment.find("not calibrated"), std::string::npos) << e.key;
      EXPECT_NE(e.comment.find("one GPU"), std::string::npos) << e.key;
    }
  EXPECT_EQ(p.calibration["collectives"]["nvlink"]["calibrated"], false);
}

TEST(CalibratedProfile, WritesEachMeasuredKernelKindsHbmEfficiency) {
  const zsim::ClusterSpec base = load_profile_cluster("h100-hgx-ib400");
  const std::string yaml = profile_yaml(build_profile(synthetic(true), base, "h100-hgx-ib400"));
  EXPECT_NE(yaml.find("    hbm_by_kind:\n"), std::string::npos);
  EXPECT_NE(yaml.find("      norm: " ), std::string::npos);
  EXPECT_NE(yaml.find("      activation: " ), std::string::npos);
}

TEST(CalibratedProfile, AttentionSoftmaxAndCrossEntropyAreSeparateKinds) {
  // The attention's causal softmax (kind softmax) and the loss over the vocabulary (kind cross_entropy) run at very
  // different bandwidths; each gets its own key, which zsim uses for the scores and for the head's loss.
  Measurements m = synthetic(true);
  m.kernels.push_back({"attention.causal_softmax.fwd (s 1024)", "softmax", 1e9, 1e9 / 2.8e12});
  m.kernels.push_back({"cross_entropy.fwd (softmax over vocab)", "cross_entropy", 1e9, 1e9 / 0.6e12});
  const zsim::ClusterSpec base = load_profile_cluster("h100-hgx-ib400");
  TempDir d;
  const zsim::ClusterSpec c = load_profile_cluster("calib-kinds", write_profile(d, "calib-kinds", build_profile(m, base, "h100-hgx-ib400")));
  EXPECT_NEAR(c.efficiency.hbm_by_kind.softmax, 2.8e12 / 3350e9, 1e-6);
  EXPECT_NEAR(c.efficiency.hbm_by_kind.cross_entropy, 0.6e12 / 3350e9, 1e-6);
  EXPECT_NEAR(c.efficiency.hbm, 2.5e12 / 3350e9, 1e-6);  // median of 0.6, 2.0, 2.5, 2.8, 3.0 TB/s
}

TEST(CalibratedProfile, AKindsFigureIsItsKernelsBytesOverTheirTimeAtTheirLargestSize) {
  // The cross-entropy's forward (1 GB at 0.6 TB/s) and backward (2 GB at 2.4 TB/s): each direction is a kind of its
  // own (zsim prices a backward op's bytes at the backward kind), each at its largest size: a smaller size of the same
  // kernel (L2-resident, faster) does not count. Two kernels of one kind: their bytes over their time.
  Measurements m = synthetic(true);
  m.kernels.push_back({"cross_entropy.fwd (softmax over vocab)", "cross_entropy", 1e9, 1e9 / 0.6e12});
  m.kernels.push_back({"cross_entropy.bwd", "cross_entropy_backward", 2e9, 2e9 / 2.4e12});
  m.kernels.push_back({"cross_entropy.bwd", "cross_entropy_backward", 2e6, 2e6 / 3.3e12});
  m.kernels.push_back({"swiglu.bwd_up", "activation_backward", 3e9, 3e9 / 2.0e12});
  m.kernels.push_back({"gelu.bwd", "activation_backward", 3e9, 3e9 / 3.0e12});
  const zsim::ClusterSpec base = load_profile_cluster("h100-hgx-ib400");
  TempDir d;
  const zsim::ClusterSpec c = load_profile_cluster("calib-pair", write_profile(d, "calib-pair", build_profile(m, base, "h100-hgx-ib400")));
  EXPECT_NEAR(c.efficiency.hbm_by_kind.cross_entropy, 0.6e12 / 3350e9, 1e-6);
  EXPECT_NEAR(c.efficiency.hbm_by_kind.cross_entropy_backward, 2.4e12 / 3350e9, 1e-6);
  EXPECT_NEAR(c.efficiency.hbm_by_kind.activation_backward, 6e9 / (1.5e-3 + 1e-3) / 3350e9, 1e-6);
}

TEST(CalibratedProfile, ARecordThatFiledBackwardKernelsUnderTheForwardKindIsReadWithBackwardKinds) {
  // Records written before backward kernels were kinds of their own filed cross_entropy.bwd as cross_entropy: a refit
  // reads it as cross_entropy_backward, so each direction gets its own figure.
  Measurements m = synthetic(true);
  m.kernels.push_back({"cross_entropy.fwd (softmax over vocab)", "cross_entropy", 1e9, 1e9 / 0.6e12});
  m.kernels.push_back({"cross_entropy.bwd", "cross_entropy", 2e9, 2e9 / 2.4e12});
  m.kernels.push_back({"attention.causal_softmax.bwd (s 1024)", "softmax", 3e9, 3e9 / 2.0e12});
  const zsim::ClusterSpec base = load_profile_cluster("h100-hgx-ib400");
  TempDir d;
  write_profile(d, "calib-old-kinds", build_profile(m, base, "h100-hgx-ib400"));
  const Measurements back = measurements_from_profile((d.path / "calib-old-kinds.yaml").string());
  std::map<std::string, std::string> kind;
  for (const KernelSample& k : back.kernels) kind[k.name] = k.kind;
  EXPECT_EQ(kind["cross_entropy.fwd (softmax over vocab)"], "cross_entropy");
  EXPECT_EQ(kind["cross_entropy.bwd"], "cross_entropy_backward");
  EXPECT_EQ(kind["attention.causal_softmax.bwd (s 1024)"], "softmax_backward");
  write_profile(d, "calib-old-refit", build_profile(back, base, "h100-hgx-ib400"));
  const zsim::ClusterSpec c = load_profile_cluster("calib-old-refit", d.path.string());
  EXPECT_NEAR(c.efficiency.hbm_by_kind.cross_entropy, 0.6e12 / 3350e9, 1e-6);
  EXPECT_NEAR(c.efficiency.hbm_by_kind.cross_entropy_backward, 2.4e12 / 3350e9, 1e-6);
  EXPECT_NEAR(c.efficiency.hbm_by_kind.softmax_backward, 2.0e12 / 3350e9, 1e-6);
}

TEST(CalibratedProfile, ARecordThatFiledTheCrossEntropyUnderSoftmaxIsReadAsCrossEntropy) {
  // Records written before the attention softmax was measured: their "softmax" kernel is the vocab cross-entropy.
  Measurements m = synthetic(true);
  m.kernels.push_back({"cross_entropy.fwd (softmax over vocab)", "softmax", 1e9, 1e9 / 0.6e12});
  const zsim::ClusterSpec base = load_profile_cluster("h100-hgx-ib400");
  TempDir d;
  write_profile(d, "calib-old", build_profile(m, base, "h100-hgx-ib400"));
  const Measurements back = measurements_from_profile((d.path / "calib-old.yaml").string());
  bool found = false;
  for (const KernelSample& k : back.kernels)
    if (k.name.rfind("cross_entropy", 0) == 0) {
      EXPECT_EQ(k.kind, "cross_entropy");
      found = true;
    }
  EXPECT_TRUE(found);
  write_profile(d, "calib-refit", build_profile(back, base, "h100-hgx-ib400"));
  const zsim::ClusterSpec c = load_profile_cluster("calib-refit", d.path.string());
  EXPECT_EQ(c.efficiency.hbm_by_kind.softmax, 0);  // no attention softmax measured: the scores run at efficiency.hbm
  EXPECT_NEAR(c.efficiency.hbm_by_kind.cross_entropy, 0.6e12 / 3350e9, 1e-6);
}

// Kernels timed on the GPU alone at several sizes, 4 us + bytes at their rate: the profile charges the 4 us per launch
// (efficiency.launch_us) and each kind its rate, not its bytes over its time at the largest size.
TEST(CalibratedProfile, AGpuAloneRecordChargesTheKernelsFittedFixedCostPerLaunchAndTheirRates) {
  Measurements m = synthetic(false);
  m.kernels.clear();
  for (double b = 1e6; b <= 1e9; b *= 10) {
    m.kernels.push_back({"rmsnorm.fwd", "norm", b, 4e-6 + b / 2.5e12});
    m.kernels.push_back({"swiglu.fwd", "activation", b, 4e-6 + b / 3.0e12});
  }
  TempDir d;
  const zsim::ClusterSpec c = loaded_profile(d, "calib-fixed", m);
  EXPECT_NEAR(c.efficiency.launch_us, 4, 1e-6);
  EXPECT_NEAR(c.efficiency.hbm_by_kind.norm, 2.5e12 / 3350e9, 1e-6);
  EXPECT_NEAR(c.efficiency.hbm_by_kind.activation, 3.0e12 / 3350e9, 1e-6);
  // The same times in an older record (timed host-inclusive): the empty kernel's launch, each kind at its largest size.
  m.timing = "host_inclusive";
  const zsim::ClusterSpec old = loaded_profile(d, "calib-fixed-old", m);
  EXPECT_NEAR(old.efficiency.launch_us, 3.25, 1e-9);
  EXPECT_NEAR(old.efficiency.hbm_by_kind.norm, 1e9 / (4e-6 + 1e9 / 2.5e12) / 3350e9, 1e-6);
}

TEST(CalibratedProfile, WithoutAKernelFitTheLaunchCostIsTheEmptyKernelsLaunchToLaunch) {
  const zsim::ClusterSpec base = load_profile_cluster("h100-hgx-ib400");
  TempDir d;
  const CalibratedProfile p = build_profile(synthetic(true), base, "h100-hgx-ib400");  // one size per kernel
  const zsim::ClusterSpec c = load_profile_cluster("calib-launch", write_profile(d, "calib-launch", p));
  EXPECT_NEAR(c.efficiency.launch_us, 3.25, 1e-9);
  EXPECT_NEAR(p.calibration["launch_overhead_us"]["empty_kernel"].get<double>(), 3.25, 1e-9);
  // Not measured: the base profile's figure, marked not calibrated.
  Measurements none = synthetic(true);
  none.kernel_launch_s = 0;
  const CalibratedProfile q = build_profile(none, base, "h100-hgx-ib400");
  bool kept = false;
  for (const ProfileEntry& e : q.cluster)
    if (e.key == "efficiency.launch_us") {
      EXPECT_NE(e.comment.find("not calibrated"), std::string::npos);
      EXPECT_EQ(std::stod(e.value), base.efficiency.launch_us);
      kept = true;
    }
  EXPECT_TRUE(kept);
  EXPECT_GT(base.efficiency.launch_us, 0);  // the data-sheet profiles carry a default
}

// The host's time per call goes into the record, from which a refit reads it back. A GPU-alone record writes it as
// efficiency.host_issue (zsim's issuing thread); an older record (timed host-inclusive) writes no block.
TEST(CalibratedProfile, TheHostsIssueTimePerCallIsTheHostModelOfAGpuAloneRecordAndSurvivesARefit) {
  TempDir d;
  Measurements m = synthetic(false);
  m.host_issue = {2.5e-6, 6e-6, 4e-6, 3e-6, 1e-6};
  const zsim::ClusterSpec c = loaded_profile(d, "calib-host", m);
  ASSERT_TRUE(c.efficiency.host_issue.present());
  EXPECT_NEAR(c.efficiency.host_issue.kernel_us, 2.5, 1e-9);
  EXPECT_NEAR(c.efficiency.host_issue.gemm_us, 6, 1e-9);
  EXPECT_NEAR(c.efficiency.host_issue.collective_us, 4, 1e-9);
  EXPECT_NEAR(c.efficiency.host_issue.memcpy_us, 3, 1e-9);
  EXPECT_NEAR(c.efficiency.host_issue.event_us, 1, 1e-9);
  const Measurements back = measurements_from_profile((d.path / "calib-host.yaml").string());
  EXPECT_EQ(back.timing, "gpu_alone");
  EXPECT_NEAR(back.host_issue.kernel_s, 2.5e-6, 1e-15);
  EXPECT_NEAR(back.host_issue.gemm_s, 6e-6, 1e-15);
  EXPECT_NEAR(back.host_issue.collective_s, 4e-6, 1e-15);
  EXPECT_NEAR(back.host_issue.memcpy_s, 3e-6, 1e-15);
  EXPECT_NEAR(back.host_issue.event_s, 1e-6, 1e-15);
  m.timing = "host_inclusive";
  EXPECT_FALSE(loaded_profile(d, "calib-host-old", m).efficiency.host_issue.present());
}

// A GEMM call's price is the host's time with the grid's shapes called in turn, as a step calls them, where the record
// has it (since 2026-11-29), not the same shape's calls back to back; a refit reads both back.
TEST(CalibratedProfile, AGemmCallIsPricedAtTheShapesInTurnWhereTheRecordHasThem) {
  TempDir d;
  Measurements m = synthetic(false);
  m.host_issue = {2.5e-6, 6e-6, 4e-6, 3e-6, 1e-6, 8.5e-6};
  EXPECT_NEAR(loaded_profile(d, "calib-turn", m).efficiency.host_issue.gemm_us, 8.5, 1e-9);
  const Measurements back = measurements_from_profile((d.path / "calib-turn.yaml").string());
  EXPECT_NEAR(back.host_issue.gemm_s, 6e-6, 1e-15);
  EXPECT_NEAR(back.host_issue.gemm_in_turn_s, 8.5e-6, 1e-15);
  m.host_issue.gemm_in_turn_s = 0;  // an older record
  EXPECT_NEAR(loaded_profile(d, "calib-one-shape", m).efficiency.host_issue.gemm_us, 6, 1e-9);
}

// The host's enqueue of an NCCL call among the GPUs (2+ GPUs) is its own price, beside the one-rank call's; a refit
// reads it back; a record without it (one GPU, or older) leaves the one-rank price to every collective.
TEST(CalibratedProfile, AnNcclCallAmongTheGpusIsPricedAtItsOwnEnqueue) {
  TempDir d;
  Measurements m = synthetic(false);
  m.host_issue = {2.5e-6, 6e-6, 4e-6, 3e-6, 1e-6, 0, 7.4e-6};
  const zsim::ClusterSpec c = loaded_profile(d, "calib-link", m);
  EXPECT_NEAR(c.efficiency.host_issue.link_collective_us, 7.4, 1e-9);
  EXPECT_NEAR(c.efficiency.host_issue.collective_call_us(2), 7.4, 1e-9);
  EXPECT_NEAR(c.efficiency.host_issue.collective_call_us(1), 4, 1e-9);
  EXPECT_NEAR(measurements_from_profile((d.path / "calib-link.yaml").string()).host_issue.link_collective_s, 7.4e-6,
              1e-15);
  m.host_issue.link_collective_s = 0;
  EXPECT_EQ(loaded_profile(d, "calib-no-link", m).efficiency.host_issue.link_collective_us, 0);
}

// The disk sampled at several moments: the NVMe lines say so, and the record keeps the moments for a refit.
TEST(CalibratedProfile, NvmeMomentsAreNamedOnTheNvmeLinesAndSurviveARefit) {
  TempDir d;
  Measurements m = synthetic(false);
  m.nvme_moments = 2;
  m.nvme_moments_apart_s = 84.4;
  loaded_profile(d, "calib-moments", m);
  std::ifstream in(d.path / "calib-moments.yaml");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("each size the median of its rounds at 2 moments 84 s apart"), std::string::npos);
  const Measurements back = measurements_from_profile((d.path / "calib-moments.yaml").string());
  EXPECT_EQ(back.nvme_moments, 2);
  EXPECT_NEAR(back.nvme_moments_apart_s, 84.4, 1e-9);
}

// A record written before calibrate timed the GPU alone carries no timing key: it is read as host-inclusive.
TEST(CalibratedProfile, ARecordWithoutATimingKeyIsReadAsHostInclusive) {
  TempDir d;
  const std::string file = write_profile(d, "calib-untimed", build_profile(synthetic(false), load_profile_cluster("h100-hgx-ib400"), "h100-hgx-ib400"));
  std::ifstream in(d.path / "calib-untimed.yaml");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string key = "  \"timing\": \"gpu_alone\"\n";
  ASSERT_NE(text.find(key), std::string::npos);
  text.erase(text.find(key), key.size());
  std::ofstream(d.path / "calib-untimed.yaml") << text;
  EXPECT_EQ(measurements_from_profile((d.path / "calib-untimed.yaml").string()).timing, "host_inclusive");
}

// CPU Adam measured at several thread counts: the profile holds the fit's slope and ceiling, each saying what it was
// fitted on and the residual; the record keeps every sample, from which a refit gives the same figures.
TEST(CalibratedProfile, CpuAdamsSlopeAndNodeCeilingAreFittedOnTheThreadCountsAndSurviveARefit) {
  TempDir d;
  const zsim::ClusterSpec base = load_profile_cluster("h100-hgx-ib400");
  const CalibratedProfile p = build_profile(synthetic(false), base, "h100-hgx-ib400");
  std::map<std::string, std::string> comment;
  for (const ProfileEntry& e : p.cluster) comment[e.key] = e.comment;
  const std::string slope = comment.at("efficiency.cpu_adam_params_per_s_per_core");
  const std::string ceiling = comment.at("efficiency.cpu_adam_node_params_per_s");
  EXPECT_NE(slope.find("1, 2, 4, 8, 16 threads"), std::string::npos) << slope;
  EXPECT_NE(slope.find("the slope from 1, 2, 4, 8 threads"), std::string::npos) << slope;
  EXPECT_NE(ceiling.find("from 16 threads"), std::string::npos) << ceiling;
  for (const std::string& c : {slope, ceiling}) {
    EXPECT_NE(c.find("fit residual rms 0.0%"), std::string::npos) << c;
    EXPECT_NE(c.find("calibration.cpu_adam"), std::string::npos) << c;
  }
  const auto& rec = p.calibration["cpu_adam"];
  EXPECT_EQ(rec[kCpuAdamSamplesKey].size(), 5u);
  EXPECT_EQ(rec["threads"], 16);  // the most threads' sample, as older records held it
  EXPECT_NEAR(rec["params_per_s"].get<double>(), 6e8, 1e-3);
  write_profile(d, "calib-adam", p);
  const Measurements back = measurements_from_profile((d.path / "calib-adam.yaml").string());
  ASSERT_EQ(back.cpu_adam.size(), 5u);
  EXPECT_EQ(back.cpu_adam[3].threads, 8);
  EXPECT_EQ(back.cpu_adam[3].params, 1 << 22);
  EXPECT_NEAR(back.cpu_adam[3].seconds, (1 << 22) / 4e8, 1e-12);
  const zsim::ClusterSpec c = load_profile_cluster("calib-adam", d.path.string());
  EXPECT_NEAR(c.efficiency.cpu_adam_params_per_s_per_core, 5e7, 1);
  EXPECT_NEAR(c.efficiency.cpu_adam_node_params_per_s, 6e8, 10);
}

// CPU Adam of two ranks at once (calibrate on 2+ GPUs): the ceiling is theirs, its comment says so, and the record
// keeps their samples apart from one rank's, from which a refit gives the same figures.
TEST(CalibratedProfile, CpuAdamsCeilingOfRanksAtOnceSaysSoAndSurvivesARefit) {
  TempDir d;
  const zsim::ClusterSpec base = load_profile_cluster("h100-hgx-ib400");
  Measurements m = synthetic(false);
  for (int t : {1, 2, 4, 8}) m.cpu_adam.push_back({t, 1 << 22, 2.0 * (1 << 22) / std::min(2 * t * 5e7, 5e8), 2});
  const CalibratedProfile p = build_profile(m, base, "h100-hgx-ib400");
  std::map<std::string, std::string> comment;
  for (const ProfileEntry& e : p.cluster) comment[e.key] = e.comment;
  const std::string ceiling = comment.at("efficiency.cpu_adam_node_params_per_s");
  EXPECT_NE(ceiling.find("from 2 ranks at once on 8 threads each"), std::string::npos) << ceiling;
  EXPECT_EQ(p.calibration["cpu_adam"][kCpuAdamSamplesKey].size(), 5u);
  EXPECT_EQ(p.calibration["cpu_adam"][kCpuAdamTogetherKey].size(), 4u);
  write_profile(d, "calib-adam-two", p);
  const Measurements back = measurements_from_profile((d.path / "calib-adam-two.yaml").string());
  ASSERT_EQ(back.cpu_adam.size(), 9u);
  const CpuAdamSample& last = back.cpu_adam.back();
  EXPECT_EQ(last.ranks, 2);
  EXPECT_EQ(last.threads, 8);
  EXPECT_NEAR(last.seconds, 2.0 * (1 << 22) / 5e8, 1e-12);
  const zsim::ClusterSpec c = load_profile_cluster("calib-adam-two", d.path.string());
  EXPECT_NEAR(c.efficiency.cpu_adam_params_per_s_per_core, 5e7, 1);
  EXPECT_NEAR(c.efficiency.cpu_adam_node_params_per_s, 5e8, 10);  // 2 x 8 threads, beyond the slope's 8
}

// The measured rates themselves go into the profile, one key per rank count and thread count (one rank alone and two
// at once), each the sample's own rate per rank; zsim loads them and a refit from the record writes them again.
TEST(CalibratedProfile, CpuAdamsMeasuredRatesAreWrittenPerRankCountAndThreadsAndSurviveARefit) {
  TempDir d;
  Measurements m = synthetic(false);
  for (int t : {1, 2, 4, 8}) m.cpu_adam.push_back({t, 1 << 22, 2.0 * (1 << 22) / std::min(2 * t * 5e7, 5e8), 2});
  const zsim::ClusterSpec c = loaded_profile(d, "calib-adam-rates", m);
  const auto& measured = c.efficiency.cpu_adam_measured;
  ASSERT_EQ(measured.size(), 2u);
  ASSERT_EQ(measured.at(1).size(), 5u);
  ASSERT_EQ(measured.at(2).size(), 4u);
  EXPECT_EQ(measured.at(1)[4].first, 16);
  EXPECT_NEAR(measured.at(1)[4].second, 6e8, 1e3);            // one rank alone on 16 threads
  EXPECT_EQ(measured.at(2)[3].first, 8);
  EXPECT_NEAR(measured.at(2)[3].second, 5e8 / 2, 1e3);        // each of two ranks at once on 8 threads
  EXPECT_NEAR(measured.at(2)[0].second, 5e7, 1);              // 1 thread each: below the node's ceiling
  const Measurements back = measurements_from_profile((d.path / "calib-adam-rates.yaml").string());
  const zsim::ClusterSpec refit = loaded_profile(d, "calib-adam-rates-refit", back);
  EXPECT_EQ(refit.efficiency.cpu_adam_measured, measured);
}

// A record written before calibrate measured several thread counts (params, threads, params_per_s on every hardware
// thread) still loads: the per-core figure is its rate over its threads, and the profile has no node ceiling.
TEST(CalibratedProfile, AnOlderCpuAdamRecordOfOneThreadCountGivesThePerCoreFigureAndNoCeiling) {
  TempDir d;
  const zsim::ClusterSpec base = load_profile_cluster("h100-hgx-ib400");
  write_profile(d, "calib-adam-old", build_profile(synthetic(false), base, "h100-hgx-ib400"));
  const fs::path file = d.path / "calib-adam-old.yaml";
  std::ifstream in(file);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  // The cpu_adam block as calibrate wrote it before (validate/results/h200/calibrated-h200.yaml).
  const std::size_t at = text.find("  \"cpu_adam\":\n");
  ASSERT_NE(at, std::string::npos);
  std::size_t end = text.find('\n', at) + 1;
  while (end < text.size() && text.compare(end, 4, "    ") == 0) end = text.find('\n', end) + 1;
  text.replace(at, end - at,
               "  \"cpu_adam\":\n    \"params\": 134217728\n    \"threads\": 32\n    \"params_per_s\": 4742000000.0\n");
  std::ofstream(file) << text;
  const Measurements back = measurements_from_profile(file.string());
  ASSERT_EQ(back.cpu_adam.size(), 1u);
  EXPECT_EQ(back.cpu_adam[0].threads, 32);
  EXPECT_NEAR(back.cpu_adam[0].params_per_s(), 4.742e9, 1);
  const CalibratedProfile p = build_profile(back, base, "h100-hgx-ib400");
  for (const ProfileEntry& e : p.cluster) {
    EXPECT_NE(e.key, "efficiency.cpu_adam_node_params_per_s");
    if (e.key == "efficiency.cpu_adam_params_per_s_per_core") {
      EXPECT_EQ(e.value, "1.48188e+08");  // 4.742e9 / 32, the figure the record gave before
      EXPECT_NE(e.comment.find("on 32 threads"), std::string::npos) << e.comment;
    }
  }
  const zsim::ClusterSpec c = load_profile_cluster("calib-adam-refit", write_profile(d, "calib-adam-refit", p));
  EXPECT_NEAR(c.efficiency.cpu_adam_params_per_s_per_core, 4.742e9 / 32, 1e3);  // the profile's 6 digits
  EXPECT_EQ(c.efficiency.cpu_adam_node_params_per_s, 0.0);
}

TEST(CalibratedProfile, AOneRankCollectiveIsItsMeasuredLatencyAndRate) {
  TempDir d;
  const zsim::ClusterSpec c = loaded_profile(d, "calib-one", synthetic(false));
  EXPECT_NEAR(c.efficiency.one_rank_collective.latency_us, 50, 1e-6);
  EXPECT_NEAR(c.efficiency.one_rank_collective.GBps, 600, 1e-6);
  const CalibratedProfile p = build_profile(synthetic(false), load_profile_cluster("h100-hgx-ib400"), "h100-hgx-ib400");
  EXPECT_EQ(p.calibration["one_rank_collectives"]["residual_by_kind"].size(), 3u);
  // A record without them (written before calibrate measured them): no key, the device-copy estimate stays.
  Measurements none = synthetic(false);
  none.one_rank.clear();
  EXPECT_EQ(loaded_profile(d, "calib-none", none).efficiency.one_rank_collective.GBps, 0);
}

// The collectives among the ranks go into the profile also as bus bandwidths per kind and size
// (efficiency.nvlink_busbw.<kind>.<size>), which zsim interpolates where one latency + bandwidth line misses.
TEST(CalibratedProfile, CollectivesAmongTheRanksGiveEachKindsBusBandwidthAtEachMeasuredSize) {
  TempDir d;
  const zsim::ClusterSpec c = loaded_profile(d, "calib-busbw", synthetic(true));
  ASSERT_EQ(c.efficiency.nvlink_busbw.size(), 2u);  // all_reduce and all_gather
  const auto& ar = c.efficiency.nvlink_busbw.at("all_reduce");
  ASSERT_EQ(ar.size(), 6u);  // 1 KiB x 16^i up to 1 GiB
  const double b = 67108864;
  const zsim::CollectiveLink link{4e-6, 4e-6, 350e9};
  const double busbw_GBps = zsim::bus_bytes(zsim::CollectiveKind::all_reduce, b, 2) /
                            zsim::collective_s(zsim::CollectiveKind::all_reduce, zsim::CollectiveAlgorithm::ring, b, 2, 1,
                                               link) / 1e9;
  EXPECT_EQ(ar[4].first, b);
  EXPECT_NEAR(ar[4].second, busbw_GBps, busbw_GBps * 1e-5);  // the profile's 6 digits
  EXPECT_LT(ar[0].second, ar[5].second);                    // latency-bound at 1 KiB
  EXPECT_TRUE(loaded_profile(d, "calib-busbw-none", synthetic(false)).efficiency.nvlink_busbw.empty());
}

// A group over several nodes (4 ranks over 2 nodes: virtual nodes of one host, or real ones) gives its own bus
// bandwidths per kind and size (efficiency.group_busbw.ranks_4_nodes_2), and the record keeps its samples for a refit.
TEST(CalibratedProfile, AGroupOverSeveralNodesGivesItsShapesBusBandwidthsAndSurvivesARefit) {
  TempDir d;
  Measurements m = synthetic(false);
  for (const double bytes : {1048576.0, 67108864.0})
    m.collectives["mixed:world"].push_back({zsim::CollectiveKind::all_gather, 4, 2, bytes, 1e-5 + bytes / 100e9});
  const zsim::ClusterSpec c = loaded_profile(d, "calib-group", m);
  const auto& ag = c.efficiency.group_busbw.at(zsim::group_busbw_shape(4, 2)).at("all_gather");
  ASSERT_EQ(ag.size(), 2u);
  const double expected = zsim::bus_bytes(zsim::CollectiveKind::all_gather, 67108864.0, 4) /
                          (1e-5 + 67108864.0 / 100e9) / 1e9;
  EXPECT_EQ(ag[1].first, 67108864.0);
  EXPECT_NEAR(ag[1].second, expected, expected * 1e-5);
  const Measurements back = measurements_from_profile((d.path / "calib-group.yaml").string());
  ASSERT_EQ(back.collectives.at("mixed:world").size(), 2u);
  EXPECT_EQ(back.collectives.at("mixed:world")[0].n, 4);
  EXPECT_EQ(back.collectives.at("mixed:world")[0].k, 2);
  EXPECT_TRUE(loaded_profile(d, "calib-no-group", synthetic(false)).efficiency.group_busbw.empty());
}

// A size that ran slower than a larger one takes the larger size's time: NCCL cannot move fewer bytes in more time.
TEST(CalibratedProfile, ASmallCollectiveSlowerThanALargerOneGetsTheLargerOnesTime) {
  TempDir d;
  Measurements m = synthetic(true);
  auto& v = m.collectives["nvlink"];
  double t_256k = 0;  // the next size measured above 16 KiB
  for (CollectiveSample& s : v)
    if (s.kind == zsim::CollectiveKind::all_gather && s.size_bytes == 262144) t_256k = s.seconds;
  ASSERT_GT(t_256k, 0);
  for (CollectiveSample& s : v)
    if (s.kind == zsim::CollectiveKind::all_gather && s.size_bytes == 16384) s.seconds = 3 * t_256k;
  const zsim::ClusterSpec c = loaded_profile(d, "calib-busbw-slow", m);
  const auto& ag = c.efficiency.nvlink_busbw.at("all_gather");
  ASSERT_EQ(ag[1].first, 16384);
  const double expected = zsim::bus_bytes(zsim::CollectiveKind::all_gather, 16384, 2) / t_256k / 1e9;
  EXPECT_NEAR(ag[1].second, expected, expected * 1e-5);
}

// The collectives among the ranks are timed on the GPU alone (behind a spin, as the other GPU figures): the bus
// bandwidth lines say so, and the record keeps it for a refit; an older record, timed as the calls were issued, keeps
// no timing key and reads back as such.
TEST(CalibratedProfile, TheCollectivesTimingIsNamedOnTheBusBandwidthLinesAndSurvivesARefit) {
  TempDir d;
  auto busbw_comments_say_gpu_alone = [](const CalibratedProfile& p) {
    int lines = 0, alone = 0;
    for (const ProfileEntry& e : p.cluster)
      if (e.key.rfind("efficiency.nvlink_busbw.", 0) == 0) {
        ++lines;
        alone += e.comment.find("on the GPU alone") != std::string::npos;
      }
    EXPECT_GT(lines, 0);
    return lines > 0 && alone == lines;
  };
  const zsim::ClusterSpec base = load_profile_cluster("h100-hgx-ib400");
  const CalibratedProfile p = build_profile(synthetic(true), base, "h100-hgx-ib400");
  EXPECT_TRUE(busbw_comments_say_gpu_alone(p));
  write_profile(d, "calib-timing", p);
  const fs::path file = d.path / "calib-timing.yaml";
  EXPECT_EQ(measurements_from_profile(file.string()).collectives_timing, "gpu_alone");

  std::ifstream in(file);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  const std::size_t at = text.find("\"timing\": \"gpu_alone\"", text.find("\"collectives\":"));
  ASSERT_NE(at, std::string::npos);
  text.erase(text.rfind('\n', at) + 1, text.find('\n', at) - text.rfind('\n', at));
  std::ofstream(file) << text;
  const Measurements old = measurements_from_profile(file.string());
  EXPECT_EQ(old.collectives_timing, "host_inclusive");
  EXPECT_EQ(old.collectives.at("nvlink").size(), synthetic(true).collectives.at("nvlink").size());
  EXPECT_FALSE(busbw_comments_say_gpu_alone(build_profile(old, base, "h100-hgx-ib400")));
}

// Each kind gets its own line beside the line over all kinds: an all-gather that copies at 2000 GB/s and reductions
// that average at 1000 GB/s are each their own latency and rate, where one line over the three fits neither.
TEST(CalibratedProfile, EachOneRankCollectiveKindIsItsOwnLatencyAndRate) {
  TempDir d;
  Measurements m = synthetic(false);
  m.one_rank.clear();
  for (double b = 1024; b <= (1 << 30); b *= 16) {
    m.one_rank.push_back({zsim::CollectiveKind::all_gather, 1, 1, b, 4e-6 + b / 2000e9});
    m.one_rank.push_back({zsim::CollectiveKind::reduce_scatter, 1, 1, b, 6e-6 + b / 1000e9});
    m.one_rank.push_back({zsim::CollectiveKind::all_reduce, 1, 1, b, 6e-6 + b / 1000e9});
  }
  const zsim::ClusterSpec c = loaded_profile(d, "calib-one-kinds", m);
  EXPECT_NEAR(c.efficiency.one_rank_collective.all_gather.latency_us, 4, 1e-6);
  EXPECT_NEAR(c.efficiency.one_rank_collective.all_gather.GBps, 2000, 1e-3);
  EXPECT_NEAR(c.efficiency.one_rank_collective.reduce_scatter.GBps, 1000, 1e-3);
  EXPECT_NEAR(c.efficiency.one_rank_collective.all_reduce.latency_us, 6, 1e-6);
  EXPECT_GT(c.efficiency.one_rank_collective.GBps, 1000);  // the line over all kinds lies between
  EXPECT_LT(c.efficiency.one_rank_collective.GBps, 2000);
}

TEST(CalibratedProfile, ASideKernelKeepsItsAloneOverBesideTimeOfItsRate) {
  TempDir d;
  const zsim::ClusterSpec c = loaded_profile(d, "calib-beside", synthetic(false));
  EXPECT_NEAR(c.efficiency.beside_compute.memcpy, 0.25, 1e-6);
  EXPECT_NEAR(c.efficiency.beside_compute.kernel, 150.0 / 160.0, 1e-6);
  EXPECT_NEAR(c.efficiency.beside_compute.collective, 0.2, 1e-6);
  Measurements none = synthetic(false);
  none.beside.clear();
  EXPECT_EQ(loaded_profile(d, "calib-nobeside", none).efficiency.beside_compute.memcpy, 0);
}

TEST(CalibratedProfile, ASideKindTimedAtSeveralSizesTakesItsFiguresFromTheLargestAndRecordsEverySize) {
  Measurements m = synthetic(false);
  m.beside = {{"memcpy", 256.0 * (1 << 20), 128e-6, 286e-6, 4096, 0.6},
              {"memcpy", 4.0 * (1 << 20), 3e-6, 137e-6, 4096, 0.99}};  // the wait for the running GEMM: recorded
  TempDir d;
  write_profile(d, "calib-beside-sizes", build_profile(m, load_profile_cluster("h100-hgx-ib400"), "h100-hgx-ib400"));
  const zsim::ClusterSpec c = load_profile_cluster("calib-beside-sizes", d.path.string());
  EXPECT_NEAR(c.efficiency.beside_compute.memcpy, 128.0 / 286.0, 1e-4);
  EXPECT_NEAR(c.efficiency.compute_beside.memcpy, 0.6, 1e-6);
  const Measurements back = measurements_from_profile((d.path / "calib-beside-sizes.yaml").string());
  ASSERT_EQ(back.beside.size(), 2u);
  EXPECT_NEAR(back.beside[1].beside_s, 137e-6, 1e-9);
}

// With the GEMM's time recorded (since 2026-11-29), a kind timed at several sizes is a line through them: its intercept
// the wait for the running GEMM (a fraction of the GEMM's time), 1 / its slope the rate after it.
TEST(CalibratedProfile, ASideKindTimedAtSeveralSizesBesideATimedGemmGivesAWaitAndTheRateAfterIt) {
  Measurements m = synthetic(false);
  // beside = 130 us + 1.25 x alone, the GEMM 173 us (the one-rank all-reduce only at one size: as before).
  m.beside = {{"memcpy", 4.0 * (1 << 20), 4e-6, 135e-6, 4096, 0.99, 173e-6},
              {"memcpy", 64.0 * (1 << 20), 40e-6, 180e-6, 4096, 0.9, 173e-6},
              {"memcpy", 256.0 * (1 << 20), 128e-6, 290e-6, 4096, 0.6, 173e-6},
              {"collective", 256.0 * (1 << 20), 200e-6, 800e-6, 4096, 0.7, 173e-6},
              // A copy in 64 pieces: recorded only, no figure of its own and none moved.
              {"memcpy", 64.0 * (1 << 20), 60e-6, 900e-6, 4096, 0.5, 173e-6, 64}};
  TempDir d;
  write_profile(d, "calib-beside-wait", build_profile(m, load_profile_cluster("h100-hgx-ib400"), "h100-hgx-ib400"));
  const zsim::ClusterSpec c = load_profile_cluster("calib-beside-wait", d.path.string());
  EXPECT_NEAR(c.efficiency.beside_compute_wait.memcpy, 130.0 / 173.0, 1e-4);
  EXPECT_NEAR(c.efficiency.beside_compute.memcpy, 1 / 1.25, 1e-4);
  // The GEMMs lost 0.4 x 290 us beside the largest, all of it in the 160 us after the wait.
  EXPECT_NEAR(c.efficiency.compute_beside.memcpy, 1 - 0.4 * 290 / 160, 1e-4);
  EXPECT_EQ(c.efficiency.beside_compute_wait.collective, 0);
  EXPECT_NEAR(c.efficiency.compute_beside.collective, 0.7, 1e-6);  // no wait: over its whole time, as before
  EXPECT_NEAR(c.efficiency.beside_compute.collective, 0.25, 1e-6);
  const Measurements back = measurements_from_profile((d.path / "calib-beside-wait.yaml").string());
  ASSERT_EQ(back.beside.size(), 5u);
  EXPECT_NEAR(back.beside[0].gemm_s, 173e-6, 1e-12);
  EXPECT_EQ(back.beside[0].pieces, 1);
  EXPECT_EQ(back.beside[4].pieces, 64);
}

// GEMMs that made no progress beside a side op (a rate of 0) is a failed trial: the largest size with a rate gives the
// GEMMs' figure, after the kind's wait as ever.
TEST(CalibratedProfile, TheGemmsFigureComesFromTheLargestSizeWhereTheyMadeProgress) {
  Measurements m = synthetic(false);
  // beside = 130 us + 1.25 x alone, the GEMM 173 us; at 256 MiB the GEMMs' rate was not measured (0).
  m.beside = {{"link_collective", 4.0 * (1 << 20), 4e-6, 135e-6, 4096, 0.99, 173e-6},
              {"link_collective", 64.0 * (1 << 20), 40e-6, 180e-6, 4096, 0.9, 173e-6},
              {"link_collective", 256.0 * (1 << 20), 128e-6, 290e-6, 4096, 0.0, 173e-6}};
  TempDir d;
  write_profile(d, "calib-no-rate", build_profile(m, load_profile_cluster("h100-hgx-ib400"), "h100-hgx-ib400"));
  const zsim::ClusterSpec c = load_profile_cluster("calib-no-rate", d.path.string());
  // 64 MiB: the GEMMs lost 0.1 x 180 us, all of it in the 50 us after the wait.
  EXPECT_NEAR(c.efficiency.compute_beside.link_collective, 1 - 0.1 * 180 / 50, 1e-4);
  EXPECT_NEAR(c.efficiency.beside_compute.link_collective, 1 / 1.25, 1e-4);  // the side op's line: every size
}

TEST(CalibratedProfile, TheGemmsKeepTheRateMeasuredBesideEachSideKindAndARecordWithoutItGivesNone) {
  Measurements m = synthetic(false);
  m.beside = {{"memcpy", 256.0 * (1 << 20), 200e-6, 800e-6, 4096, 0.8},
              {"collective", 256.0 * (1 << 20), 300e-6, 1500e-6, 4096, 0.6},
              {"collective", 256.0 * (1 << 20), 300e-6, 1800e-6, 8192, 0.3}};  // recorded, not the figure
  TempDir d;
  write_profile(d, "calib-gemm-beside", build_profile(m, load_profile_cluster("h100-hgx-ib400"), "h100-hgx-ib400"));
  const zsim::ClusterSpec c = load_profile_cluster("calib-gemm-beside", d.path.string());
  EXPECT_NEAR(c.efficiency.compute_beside.memcpy, 0.8, 1e-6);
  EXPECT_NEAR(c.efficiency.compute_beside.collective, 0.6, 1e-6);
  EXPECT_EQ(c.efficiency.compute_beside.kernel, 0);  // not measured: unaffected
  // The record holds the rates: a refit gives them back.
  const Measurements back = measurements_from_profile((d.path / "calib-gemm-beside.yaml").string());
  ASSERT_EQ(back.beside.size(), 3u);
  EXPECT_NEAR(back.beside[2].gemm_rate, 0.3, 1e-9);
  // synthetic's samples have no rate (as records before it was measured): no key.
  EXPECT_EQ(loaded_profile(d, "calib-no-gemm-rate", synthetic(false)).efficiency.compute_beside.memcpy, 0);
}

// On 2+ GPUs calibrate times an all-gather among the ranks beside GEMMs on every rank: both ways, its own keys, which
// a refit reads back; without it (one GPU) neither key is written.
TEST(CalibratedProfile, ACollectiveAmongTheRanksBesideGemmsGivesTheLinkCollectiveKeysBothWays) {
  Measurements m = synthetic(true);
  m.beside = {{"link_collective", 256.0 * (1 << 20), 500e-6, 625e-6, 4096, 0.55}};
  TempDir d;
  write_profile(d, "calib-link", build_profile(m, load_profile_cluster("h100-hgx-ib400"), "h100-hgx-ib400"));
  const zsim::ClusterSpec c = load_profile_cluster("calib-link", d.path.string());
  EXPECT_NEAR(c.efficiency.beside_compute.link_collective, 0.8, 1e-6);
  EXPECT_NEAR(c.efficiency.compute_beside.link_collective, 0.55, 1e-6);
  EXPECT_EQ(c.efficiency.beside_compute.collective, 0);  // the one-rank class: not measured here
  const Measurements back = measurements_from_profile((d.path / "calib-link.yaml").string());
  ASSERT_EQ(back.beside.size(), 1u);
  EXPECT_EQ(back.beside[0].kind, "link_collective");
  m.beside.clear();
  EXPECT_EQ(loaded_profile(d, "calib-no-link", m).efficiency.beside_compute.link_collective, 0);
}

TEST(CalibratedProfile, EveryValueLineSaysWhereItComesFrom) {
  const std::string yaml =
      profile_yaml(build_profile(synthetic(true), load_profile_cluster("h100-hgx-ib400"), "h100-hgx-ib400"));
  std::istringstream in(yaml);
  std::string line;
  bool in_cluster = false;
  int values = 0;
  while (std::getline(in, line)) {
    if (line == "cluster:") in_cluster = true;
    else if (line == "calibration:") in_cluster = false;
    else if (in_cluster && line.back() != ':') {
      EXPECT_NE(line.find("  # "), std::string::npos) << line;
      ++values;
    }
  }
  EXPECT_GT(values, 25);
  EXPECT_NE(yaml.find("fit residual rms"), std::string::npos);
  EXPECT_NE(yaml.find("calibration:\n"), std::string::npos);
}

// The step zsim predicts on a scenario naming the profile.
double step_s(const std::string& profile, const std::string& dir, const std::vector<std::string>& sets = {}) {
  zsim::LoadOptions o;
  o.profile_dirs = {dir};
  o.overrides = sets;
  const zsim::Scenario s = zsim::parse_scenario(
      "model: {layers: 2, hidden: 1024, ffn_hidden: 2816, heads: 8, kv_heads: 8, vocab: 32000, attention: eager}\n"
      "training: {micro_batch: 2, seq_len: 512, precision: bf16}\n"
      "cluster: {profile: " + profile + ", nodes: 1, gpus_per_node: 1}\n",
      "<test>", o);
  const zsim::Schedule sch = zsim::make_schedule(s, zsim::make_plan(s), 2);
  return zsim::simulate(s.cluster, sch).step_s();
}

TEST(CalibratedProfile, ZsimTimesGemmsWithTheMeasuredModel) {
  TempDir d;
  const std::string dir =
      write_profile(d, "calib-sim", build_profile(synthetic(true), load_profile_cluster("h100-hgx-ib400"), "h100-hgx-ib400"));
  const double calibrated = step_s("calib-sim", dir);
  // A faster GEMM model gives a faster step; the data-sheet constant no longer matters.
  EXPECT_LT(step_s("calib-sim", dir, {"cluster.efficiency.gemm_model.max_efficiency=0.9"}), calibrated);
  EXPECT_EQ(step_s("calib-sim", dir, {"cluster.efficiency.gemm=0.1"}), calibrated);
  // Without the model (max_efficiency 0) the constant is used again.
  EXPECT_NE(step_s("calib-sim", dir, {"cluster.efficiency.gemm_model.max_efficiency=0", "cluster.efficiency.gemm=0.1"}),
            calibrated);
}

TEST(CalibratedProfile, SmallGemmsAreSlowerPerFlopThanTheDataSheetConstantSays) {
  // At this small size the measured model (launches, waves) is well below its 0.7 maximum: the step is
  // longer than with a constant 0.7.
  TempDir d;
  const std::string dir =
      write_profile(d, "calib-small", build_profile(synthetic(true), load_profile_cluster("h100-hgx-ib400"), "h100-hgx-ib400"));
  EXPECT_GT(step_s("calib-small", dir),
            step_s("calib-small", dir, {"cluster.efficiency.gemm_model.max_efficiency=0", "cluster.efficiency.gemm=0.7"}));
}

TEST(CalibratedProfile, TheRecordHoldsEverythingAFitNeeds) {
  // Written, read back from the calibration: record, fitted again: the same profile.
  const zsim::ClusterSpec base = load_profile_cluster("h100-hgx-ib400");
  const CalibratedProfile first = build_profile(synthetic(true), base, "h100-hgx-ib400");
  TempDir d;
  write_profile(d, "calib-record", first);
  const Measurements back = measurements_from_profile((d.path / "calib-record.yaml").string());
  const CalibratedProfile again = build_profile(back, base, "h100-hgx-ib400");
  ASSERT_EQ(again.cluster.size(), first.cluster.size());
  for (std::size_t i = 0; i < first.cluster.size(); ++i) {
    EXPECT_EQ(again.cluster[i].key, first.cluster[i].key);
    EXPECT_EQ(again.cluster[i].value, first.cluster[i].value) << first.cluster[i].key;
  }
}

TEST(CalibratedProfile, AModelFittedOnAttentionsBatchedCallsSaysSoWithItsResidualPerFamily) {
  const zsim::ClusterSpec base = load_profile_cluster("h100-hgx-ib400");
  const CalibratedProfile p = build_profile(synthetic(false, true), base, "h100-hgx-ib400");
  TempDir d;
  const zsim::ClusterSpec c = load_profile_cluster("calib-attn", write_profile(d, "calib-attn", p));
  EXPECT_TRUE(c.efficiency.gemm_model.attention_shapes);
  EXPECT_TRUE(c.efficiency.gemm_model_fp32.attention_shapes);
  EXPECT_NEAR(c.efficiency.gemm_model.max_efficiency, 0.7, 1e-4);
  EXPECT_NEAR(c.efficiency.gemm_model.io_GBps, 2000, 1e-2);
  EXPECT_EQ(p.calibration["gemm"]["bf16"]["batched_samples"].size(), 24u);
  EXPECT_EQ(p.calibration["gemm"]["bf16"]["samples"].size(), 18u);
  EXPECT_EQ(p.calibration["gemm"]["bf16"]["residual_batched"]["samples"], 24);
  EXPECT_EQ(p.calibration["gemm"]["bf16"]["residual_grid"]["samples"], 18);
  for (const ProfileEntry& e : p.cluster)
    if (e.key == "efficiency.gemm_model.max_efficiency") {
      EXPECT_NE(e.comment.find("grid: rms"), std::string::npos) << e.comment;
      EXPECT_NE(e.comment.find("attention: rms"), std::string::npos) << e.comment;
    }
}

TEST(CalibratedProfile, ARecordWithoutAttentionsBatchedCallsKeepsTheOlderCorePricingAndSaysSo) {
  const zsim::ClusterSpec base = load_profile_cluster("h100-hgx-ib400");
  const CalibratedProfile p = build_profile(synthetic(false), base, "h100-hgx-ib400");
  TempDir d;
  const zsim::ClusterSpec c = load_profile_cluster("calib-grid", write_profile(d, "calib-grid", p));
  EXPECT_FALSE(c.efficiency.gemm_model.attention_shapes);
  bool said = false;
  for (const ProfileEntry& e : p.cluster)
    if (e.key == "efficiency.gemm_model.attention_shapes") {
      EXPECT_EQ(e.value, "false");
      said = e.comment.find("run zrun calibrate again") != std::string::npos;
    }
  EXPECT_TRUE(said);
  EXPECT_FALSE(p.calibration["gemm"]["bf16"].contains("batched_samples"));
}

TEST(CalibratedProfile, TheRecordKeepsAttentionsBatchedCallsForARefit) {
  const zsim::ClusterSpec base = load_profile_cluster("h100-hgx-ib400");
  const Measurements m = synthetic(false, true);
  const CalibratedProfile first = build_profile(m, base, "h100-hgx-ib400");
  TempDir d;
  write_profile(d, "calib-attn-record", first);
  const Measurements back = measurements_from_profile((d.path / "calib-attn-record.yaml").string());
  ASSERT_EQ(back.gemm.at("bf16").size(), m.gemm.at("bf16").size());
  int batched = 0;
  for (const GemmSample& g : back.gemm.at("bf16"))
    if (g.batched_attention()) {
      ++batched;
      EXPECT_GT(g.batch, 1);
      EXPECT_TRUE(g.product == "scores" || g.product == "probs_v" || g.product == "dv") << g.product;
    }
  EXPECT_EQ(batched, 24);
  const CalibratedProfile again = build_profile(back, base, "h100-hgx-ib400");
  ASSERT_EQ(again.cluster.size(), first.cluster.size());
  for (std::size_t i = 0; i < first.cluster.size(); ++i)
    EXPECT_EQ(again.cluster[i].value, first.cluster[i].value) << first.cluster[i].key;
}

TEST(CalibratedProfile, FlashAttentionMeasurementsGiveItsEfficiencyPerDirectionWithTheResidualPerHeadDim) {
  const zsim::ClusterSpec base = load_profile_cluster("h100-hgx-ib400");
  const CalibratedProfile p = build_profile(with_flash(synthetic(false)), base, "h100-hgx-ib400");
  TempDir d;
  const zsim::ClusterSpec c = load_profile_cluster("calib-flash", write_profile(d, "calib-flash", p));
  EXPECT_NEAR(c.efficiency.flash_attention.forward, 0.3, 1e-6);
  EXPECT_NEAR(c.efficiency.flash_attention.backward, 0.25, 1e-6);
  int entries = 0;
  for (const ProfileEntry& e : p.cluster)
    if (e.key.rfind("efficiency.flash_attention.", 0) == 0) {
      ++entries;
      EXPECT_NE(e.comment.find("fit residual rms"), std::string::npos) << e.comment;
      EXPECT_NE(e.comment.find("over 16 measurements"), std::string::npos) << e.comment;  // bf16 and fp16 together
      EXPECT_NE(e.comment.find("head dim 128: rms"), std::string::npos) << e.comment;
    }
  EXPECT_EQ(entries, 2);
  const nlohmann::json& rec = p.calibration["flash_attention"];
  EXPECT_EQ(rec["samples"].size(), 32u);
  EXPECT_EQ(rec["backward"]["launches"], 4);
  EXPECT_EQ(rec["forward"]["launches"], 1);
  EXPECT_EQ(rec["backward"]["residual_by_head_dim"]["64"]["samples"], 8);
  EXPECT_EQ(rec["forward"]["residual_by_dtype"]["fp16"]["samples"], 8);
}

TEST(CalibratedProfile, ARecordWithoutFlashAttentionMeasurementsWritesNoFlashKey) {
  // An older record (or one whose run did not measure the kernel): zsim keeps the core at its unit's GEMM efficiency.
  const zsim::ClusterSpec base = load_profile_cluster("h100-hgx-ib400");
  const CalibratedProfile p = build_profile(synthetic(false), base, "h100-hgx-ib400");
  for (const ProfileEntry& e : p.cluster) EXPECT_EQ(e.key.find("flash_attention"), std::string::npos) << e.key;
  EXPECT_FALSE(p.calibration.contains("flash_attention"));
  TempDir d;
  const zsim::ClusterSpec c = load_profile_cluster("calib-no-flash", write_profile(d, "calib-no-flash", p));
  EXPECT_EQ(c.efficiency.flash_attention, zsim::FlashAttentionEfficiency{});
}

TEST(CalibratedProfile, TheRecordKeepsFlashAttentionsMeasurementsForARefit) {
  const zsim::ClusterSpec base = load_profile_cluster("h100-hgx-ib400");
  const Measurements m = with_flash(synthetic(false));
  const CalibratedProfile first = build_profile(m, base, "h100-hgx-ib400");
  TempDir d;
  write_profile(d, "calib-flash-record", first);
  const Measurements back = measurements_from_profile((d.path / "calib-flash-record.yaml").string());
  ASSERT_EQ(back.flash.size(), m.flash.size());
  for (std::size_t i = 0; i < m.flash.size(); ++i) {
    EXPECT_EQ(back.flash[i].dtype, m.flash[i].dtype);
    EXPECT_EQ(back.flash[i].direction, m.flash[i].direction);
    EXPECT_EQ(back.flash[i].heads, m.flash[i].heads);
    EXPECT_EQ(back.flash[i].kv_heads, m.flash[i].kv_heads);
    EXPECT_EQ(back.flash[i].seq, m.flash[i].seq);
    EXPECT_EQ(back.flash[i].head_dim, m.flash[i].head_dim);
    EXPECT_NEAR(back.flash[i].seconds, m.flash[i].seconds, m.flash[i].seconds * 1e-12);
  }
  const CalibratedProfile again = build_profile(back, base, "h100-hgx-ib400");
  ASSERT_EQ(again.cluster.size(), first.cluster.size());
  for (std::size_t i = 0; i < first.cluster.size(); ++i)
    EXPECT_EQ(again.cluster[i].value, first.cluster[i].value) << first.cluster[i].key;
}

TEST(CalibratedProfile, ZsimRunsAFlashModelsCoreAtTheCalibratedEfficiency) {
  // The profile's efficiency.flash_attention reaches zsim: a slower kernel gives a slower step of a flash model, and
  // an eager model does not see it.
  TempDir d;
  const std::string dir = write_profile(
      d, "calib-flash-sim", build_profile(with_flash(synthetic(true)), load_profile_cluster("h100-hgx-ib400"), "h100-hgx-ib400"));
  const double flash = step_s("calib-flash-sim", dir, {"model.attention=flash"});
  EXPECT_GT(step_s("calib-flash-sim", dir, {"model.attention=flash", "cluster.efficiency.flash_attention.forward=0.05"}),
            flash);
  EXPECT_GT(step_s("calib-flash-sim", dir, {"model.attention=flash", "cluster.efficiency.flash_attention.backward=0.05"}),
            flash);
  const double eager = step_s("calib-flash-sim", dir);
  EXPECT_EQ(step_s("calib-flash-sim", dir, {"cluster.efficiency.flash_attention.forward=0.05"}), eager);
}

TEST(CalibratedProfile, AProfileWithoutARecordCannotBeRefitted) {
  EXPECT_THROW(measurements_from_profile("scenarios/hardware/h100-hgx-ib400.yaml"), zsim::InputError);
}

TEST(CalibratedProfile, BaseProfileIsChosenByGpuName) {
  EXPECT_EQ(base_profile_for_gpu("NVIDIA H100 80GB HBM3"), "h100-hgx-ib400");
  EXPECT_EQ(base_profile_for_gpu("NVIDIA H200"), "h200-hgx-ib400");
  EXPECT_EQ(base_profile_for_gpu("Some GPU"), "");
}

}  // namespace
}  // namespace zrun::calibrate
