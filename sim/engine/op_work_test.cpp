// How a GPU compute op's FLOPs and HBM bytes combine into its time.
#include <cmath>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "cost_models/collective_cost.hpp"
#include "cost_models/compute_cost.hpp"
#include "cost_models/gemm_model.hpp"
#include "cost_models/transfer_cost.hpp"
#include "sim/engine/op_work.hpp"
#include "sim/engine/simulate.hpp"
#include "sim/engine/test_schedules.hpp"
#include "sim/topology/topology.hpp"

namespace zsim {
namespace {

using testing::ScheduleBuilder;
using testing::test_cluster;

double one_op_step_s(ComputeKind what, Flops flops, Bytes hbm_bytes) {
  const ClusterSpec c = test_cluster(1, 1);
  ScheduleBuilder b(c);
  const OpId id = b.compute("op", what == ComputeKind::optimizer ? Phase::step : Phase::forward, flops, {}, "compute", what);
  b.s.ops[id].compute.hbm_bytes = hbm_bytes;
  return simulate(c, b.s).step_s();
}

TEST(OpWork, ForwardGemmsAndMemoryBoundKernelsAddUp) {
  const ClusterSpec c = test_cluster(1, 1);
  const Flops flops = 1e12;
  const Bytes bytes = 3'000'000'000;
  const double expected = gemm_s(flops, c.gpu.peak_tflops, c.efficiency.gemm) +
                          memory_bound_s(bytes, c.gpu.hbm_GBps, c.efficiency.hbm);
  EXPECT_NEAR(one_op_step_s(ComputeKind::forward, flops, bytes), expected, expected * 1e-12);
  EXPECT_NEAR(one_op_step_s(ComputeKind::backward, flops, bytes), expected, expected * 1e-12);
}

TEST(OpWork, AnOptimizerStepIsOneKernelBoundByTheSlowerOfFlopsAndBytes) {
  const ClusterSpec c = test_cluster(1, 1);
  const Flops flops = 1e9;
  const Bytes bytes = 3'000'000'000;
  const double expected = memory_bound_s(bytes, c.gpu.hbm_GBps, c.efficiency.hbm);
  EXPECT_NEAR(one_op_step_s(ComputeKind::optimizer, flops, bytes), expected, expected * 1e-12);
}

TEST(OpWork, WithoutPerKindKeysEveryMemoryBoundKindRunsAtEfficiencyHbm) {
  ClusterSpec c = test_cluster(1, 1);
  const Bytes bytes = 3'000'000'000;
  auto step = [&](const ClusterSpec& cl, ComputeKind what) {
    ScheduleBuilder b(cl);
    const OpId id = b.compute("op", what == ComputeKind::optimizer ? Phase::step : Phase::forward, 0, {}, "compute", what);
    b.s.ops[id].compute.hbm_bytes = bytes;
    return simulate(cl, b.s).step_s();
  };
  const double at_hbm = memory_bound_s(bytes, c.gpu.hbm_GBps, c.efficiency.hbm);
  EXPECT_DOUBLE_EQ(step(c, ComputeKind::optimizer), at_hbm);
  EXPECT_DOUBLE_EQ(step(c, ComputeKind::quantize), at_hbm);
  c.efficiency.hbm_by_kind.adam = 0.4;
  EXPECT_DOUBLE_EQ(step(c, ComputeKind::optimizer), memory_bound_s(bytes, c.gpu.hbm_GBps, 0.4));
  EXPECT_DOUBLE_EQ(step(c, ComputeKind::quantize), at_hbm);  // its own kind not given: efficiency.hbm
  c.efficiency.hbm_by_kind.quantize = 0.2;
  EXPECT_DOUBLE_EQ(step(c, ComputeKind::quantize), memory_bound_s(bytes, c.gpu.hbm_GBps, 0.2));
}

// NCCL with one rank (enqueue.cc -> ncclLaunchOneRank) copies an out-of-place buffer or runs its averaging kernel
// over it: every collective of a one-rank group reads and writes its bytes once, as a device copy.
TEST(OpWork, AOneRankCollectiveCostsADeviceCopyOfItsBytes) {
  ClusterSpec c = test_cluster(1, 1);
  c.efficiency.hbm_by_kind.copy = 0.5;
  const double expected = device_copy_s(1'000'000'000, c.gpu.hbm_GBps, 0.5);
  for (const CollectiveKind what : {CollectiveKind::all_reduce, CollectiveKind::all_gather,
                                    CollectiveKind::reduce_scatter}) {
    ScheduleBuilder b(c);
    const int one = b.group("one", 1, 1);
    b.collective("c", Phase::backward, what, one, 1'000'000'000);
    EXPECT_NEAR(simulate(c, b.s).step_s(), expected, expected * 1e-12);
  }
}

// An all-gather in place on one rank (its input the start of its output: the stage-3 fetch's all_gather_into_tensor)
// moves nothing in NCCL's one-rank path; out of place it copies.
TEST(OpWork, AOneRankAllGatherInPlaceCostsNothing) {
  ClusterSpec c = test_cluster(1, 1);
  const Bytes n = 1'000'000'000;
  ScheduleBuilder b(c);
  const int one = b.group("one", 1, 1);
  const OpId g = b.collective("g", Phase::forward, CollectiveKind::all_gather, one, n);
  b.s.ops[g].uses = {{-1, 0, n, Role::input, Access::read}, {-1, 0, n, Role::output, Access::write}};
  EXPECT_EQ(op_work(b.s.ops[g], b.s, c, {}, {}).fixed_s, 0);
  b.s.ops[g].uses[1].offset = n;  // out of place
  const double copy = device_copy_s(n, c.gpu.hbm_GBps, c.efficiency.hbm_for(HbmKind::copy));
  EXPECT_NEAR(op_work(b.s.ops[g], b.s, c, {}, {}).fixed_s, copy, copy * 1e-12);
}

// Measured on a one-rank communicator (efficiency.one_rank_collective): its latency plus the bytes at its rate, in place
// of the device-copy estimate.
TEST(OpWork, AMeasuredOneRankCollectiveCostsItsLatencyAndItsBytesAtItsRate) {
  ClusterSpec c = test_cluster(1, 1);
  c.efficiency.one_rank_collective = {60, 500};
  const double expected = 60e-6 + 1e9 / 500e9;
  for (const CollectiveKind what : {CollectiveKind::all_reduce, CollectiveKind::all_gather}) {
    ScheduleBuilder b(c);
    const int one = b.group("one", 1, 1);
    b.collective("c", Phase::backward, what, one, 1'000'000'000);
    EXPECT_NEAR(simulate(c, b.s).step_s(), expected, expected * 1e-12);
  }
}

// A kind with its own measured line (efficiency.one_rank_collective.<kind>) costs that line; the others the line over
// all kinds.
TEST(OpWork, AOneRankCollectiveOfAKindWithItsOwnLineCostsThatLine) {
  ClusterSpec c = test_cluster(1, 1);
  c.efficiency.one_rank_collective = {60, 500};
  c.efficiency.one_rank_collective.all_reduce = {10, 1000};
  for (const auto& [what, expected] : {std::pair{CollectiveKind::all_reduce, 10e-6 + 1e9 / 1000e9},
                                       {CollectiveKind::reduce_scatter, 60e-6 + 1e9 / 500e9}}) {
    ScheduleBuilder b(c);
    const int one = b.group("one", 1, 1);
    b.collective("c", Phase::backward, what, one, 1'000'000'000);
    EXPECT_NEAR(simulate(c, b.s).step_s(), expected, expected * 1e-12);
  }
}

// With measured bus bandwidths (efficiency.nvlink_busbw) a collective among the ranks of one node moves its bus bytes at
// its kind's figure interpolated at its size, in place of the NVLink latency + bandwidth line; a kind without figures
// keeps the line.
TEST(OpWork, ACollectiveOnOneNodeWithMeasuredBusBandwidthsMovesItsBusBytesAtItsKindsRateAtItsSize) {
  ClusterSpec c = test_cluster(1, 2);
  c.efficiency.nvlink_busbw["reduce_scatter"] = {{16777216.0, 100}, {268435456.0, 200}};
  const Bytes size = 67108864;  // halfway in log size: the geometric mean of 100 and 200 GB/s
  const double rate = std::sqrt(100e9 * 200e9);
  ScheduleBuilder b(c);
  const int world = b.group("world", 2, 2);
  b.collective("rs", Phase::backward, CollectiveKind::reduce_scatter, world, size);
  const double expected = bus_bytes(CollectiveKind::reduce_scatter, size, 2) / rate;
  EXPECT_NEAR(simulate(c, b.s).step_s(), expected, expected * 1e-9);

  ScheduleBuilder line(c);
  line.collective("ag", Phase::backward, CollectiveKind::all_gather, line.group("world", 2, 2), size);
  const double with_table = simulate(c, line.s).step_s();
  c.efficiency.nvlink_busbw.clear();
  EXPECT_EQ(with_table, simulate(c, line.s).step_s());
  EXPECT_NE(with_table, expected);
}

// A collective on a group over several nodes whose shape has measured bus bandwidths (efficiency.group_busbw: N ranks
// over K nodes) moves its bus bytes at its kind's figure at its size, in place of the network's latency + bandwidth
// line; another shape, or the kind without figures, keeps the line.
TEST(OpWork, ACollectiveOverNodesWithItsGroupShapesMeasuredBusBandwidthMovesItsBusBytesAtThatRate) {
  ClusterSpec c = test_cluster(2, 2);
  c.efficiency.group_busbw[group_busbw_shape(4, 2)]["all_gather"] = {{16777216.0, 100}, {268435456.0, 200}};
  const Bytes size = 67108864;
  const double rate = std::sqrt(100e9 * 200e9);
  ScheduleBuilder b(c);
  b.collective("ag", Phase::backward, CollectiveKind::all_gather, b.group("world", 4, 2), size);
  const double expected = bus_bytes(CollectiveKind::all_gather, size, 4) / rate;
  EXPECT_NEAR(simulate(c, b.s).step_s(), expected, expected * 1e-9);

  ScheduleBuilder inter(c);  // 2 ranks, one per node: another shape
  inter.collective("ag", Phase::backward, CollectiveKind::all_gather, inter.group("inter_node", 2, 1, 2), size);
  const double other_shape = simulate(c, inter.s).step_s();
  ScheduleBuilder rs(c);
  rs.collective("rs", Phase::backward, CollectiveKind::reduce_scatter, rs.group("world", 4, 2), size);
  const double other_kind = simulate(c, rs.s).step_s();
  c.efficiency.group_busbw.clear();
  EXPECT_EQ(other_shape, simulate(c, inter.s).step_s());
  EXPECT_EQ(other_kind, simulate(c, rs.s).step_s());
  EXPECT_NE(simulate(c, b.s).step_s(), expected);
}

// A d2d copy (a flatten, a copy-out, a dtype cast) is one kernel: its launch, then its bytes read and written at
// the copy kind's efficiency.
TEST(OpWork, ADeviceCopyIsOneKernelLaunchAndItsBytesAtTheCopyKindsEfficiency) {
  ClusterSpec c = test_cluster(1, 1);
  c.efficiency.hbm_by_kind.copy = 0.5;
  c.efficiency.launch_us = 5;
  ScheduleBuilder b(c);
  b.copy("d2d", Phase::backward, CopyKind::d2d, 1'000'000'000);
  const double expected = 2 * memory_bound_s(1'000'000'000, c.gpu.hbm_GBps, 0.5) + 5e-6;
  EXPECT_NEAR(simulate(c, b.s).step_s(), expected, expected * 1e-12);
}

// An NVMe transfer (one nvme_read / nvme_write op: zrun's one file transfer, DeepSpeed's one aio request per
// parameter) pays the profile's per-transfer latency, then its bytes at the node's rate.
TEST(OpWork, AnNvmeTransferPaysItsLatencyThenItsBytesAtTheRate) {
  ClusterSpec c = test_cluster(1, 1);
  c.nvme.read_latency_us = 500;
  c.nvme.write_latency_us = 200;
  for (const CopyKind what : {CopyKind::nvme_read, CopyKind::nvme_write}) {
    ScheduleBuilder b(c);
    b.copy("io", Phase::step, what, 1'200'000'000);
    const bool read = what == CopyKind::nvme_read;
    const double expected = (read ? 500e-6 : 200e-6) + 1.2e9 / ((read ? c.nvme.read_GBps : c.nvme.write_GBps) * 1e9);
    EXPECT_NEAR(simulate(c, b.s).step_s(), expected, expected * 1e-9);
  }
}

// Where the cluster gives one request's line (calibrate fits it on 4 KiB .. 1 MiB transfers), a transfer of at most
// one request (1 MiB) pays that line's latency and rate; a larger one the line of requests in flight together.
TEST(OpWork, AnNvmeTransferOfOneRequestPaysTheOneRequestLine) {
  ClusterSpec c = test_cluster(1, 1);
  c.nvme.read_latency_us = 400;
  c.nvme.write_latency_us = 250;
  c.nvme.one_request_read_latency_us = 50;
  c.nvme.one_request_read_GBps = 1.2;
  c.nvme.one_request_write_latency_us = 30;
  c.nvme.one_request_write_GBps = 1.8;
  for (const CopyKind what : {CopyKind::nvme_read, CopyKind::nvme_write}) {
    const bool read = what == CopyKind::nvme_read;
    for (const Bytes bytes : {Bytes{4096}, kNvmeRequestBytes, kNvmeRequestBytes + 4096, Bytes{64} << 20}) {
      ScheduleBuilder b(c);
      b.copy("io", Phase::step, what, bytes);
      const bool one = bytes <= kNvmeRequestBytes;
      const double latency_us = one ? (read ? 50 : 30) : (read ? 400 : 250);
      const double GBps = one ? (read ? 1.2 : 1.8) : (read ? c.nvme.read_GBps : c.nvme.write_GBps);
      const double expected = latency_us * 1e-6 + static_cast<double>(bytes) / (GBps * 1e9);
      EXPECT_NEAR(simulate(c, b.s).step_s(), expected, expected * 1e-9) << (read ? "read " : "write ") << bytes;
    }
  }
}

// Where the cluster gives figures per size (nvme.read_GBps_by_size, write_GBps_by_size: calibrate's transfers, latency
// included), a transfer of more than one request moves at the figure interpolated at its size (log-log, the nearest
// figure beyond them) and pays no latency of its own; one request still pays the line.
TEST(OpWork, AnNvmeTransferMovesAtTheMeasuredFigureAtItsSize) {
  ClusterSpec c = test_cluster(1, 1);
  c.nvme.read_latency_us = 400;
  c.nvme.write_latency_us = 250;
  c.nvme.read_GBps_by_size = {{16.0 * (1 << 20), 1.0}, {256.0 * (1 << 20), 2.0}, {1024.0 * (1 << 20), 1.5}};
  c.nvme.write_GBps_by_size = {{16.0 * (1 << 20), 3.0}};
  const Bytes MiB = Bytes{1} << 20;
  const std::vector<std::tuple<CopyKind, Bytes, double>> cases{
      {CopyKind::nvme_read, 16 * MiB, 1.0},
      {CopyKind::nvme_read, 64 * MiB, std::sqrt(2.0)},  // halfway in log size between 16 and 256 MiB
      {CopyKind::nvme_read, 2048 * MiB, 1.5},           // beyond the largest: its figure
      {CopyKind::nvme_read, 2 * MiB, 1.0},              // below the smallest: its figure
      {CopyKind::nvme_write, 512 * MiB, 3.0},
  };
  for (const auto& [what, bytes, GBps] : cases) {
    ScheduleBuilder b(c);
    b.copy("io", Phase::step, what, bytes);
    const double expected = static_cast<double>(bytes) / (GBps * 1e9);
    EXPECT_NEAR(simulate(c, b.s).step_s(), expected, expected * 1e-9) << bytes;
  }
  ScheduleBuilder one(c);
  one.copy("io", Phase::step, CopyKind::nvme_read, MiB);
  const double line = 400e-6 + static_cast<double>(MiB) / (c.nvme.read_GBps * 1e9);
  EXPECT_NEAR(simulate(c, one.s).step_s(), line, line * 1e-9);
}

// The figures per size are one process alone on the disk: the node's ranks share it as they share the line's rate
// (each rank's program moves at its share, the figure over the GPUs of its node).
TEST(OpWork, AnNvmeTransferAtAMeasuredFigureSharesTheDiskWithTheNodesRanks) {
  ClusterSpec c = test_cluster(1, 2);
  c.nvme.read_GBps_by_size = {{16.0 * (1 << 20), 1.0}, {1024.0 * (1 << 20), 2.0}};
  ScheduleBuilder b(c);
  b.copy("io", Phase::step, CopyKind::nvme_read, Bytes{1} << 30);
  const double expected = static_cast<double>(Bytes{1} << 30) / (2.0e9 / 2);
  EXPECT_NEAR(simulate(c, b.s).step_s(), expected, expected * 1e-9);
}

// ZeRO++'s kernels (quantize, dequantize, dequant-reduce) run on a communication stream beside the compute stream's
// GEMMs: side kernels of calibrate's copy-kernel class, each of their launches at efficiency.launch_us; GPU Adam (on
// the compute stream after the backward) is not a side kernel.
TEST(OpWork, ZeroppKernelsAreSideKernelsPayingEachLaunch) {
  ClusterSpec c = test_cluster(1, 1);
  c.efficiency.launch_us = 3;
  c.efficiency.hbm_by_kind.quantize = 0.5;
  for (const ComputeKind what : {ComputeKind::quantize, ComputeKind::dequantize, ComputeKind::dequant_reduce}) {
    ScheduleBuilder b(c);
    const OpId q = b.compute("q", Phase::backward, 0, {}, "comm", what);
    b.s.ops[q].compute.hbm_bytes = 1'000'000;
    b.s.ops[q].compute.kernel_launches = 4;
    const OpWork w = op_work(b.s.ops[q], b.s, c, {}, {});
    EXPECT_EQ(w.side, SideKind::kernel);
    const double expected = memory_bound_s(1'000'000, c.gpu.hbm_GBps, 0.5) + 4 * 3e-6;
    EXPECT_NEAR(w.fixed_s, expected, expected * 1e-12);
  }
  ScheduleBuilder b(c);
  const OpId adam = b.compute("adam", Phase::step, 0, {}, "compute", ComputeKind::optimizer);
  EXPECT_EQ(op_work(b.s.ops[adam], b.s, c, {}, {}).side, SideKind::none);
}

// A d2d copy of many kernels (DeepSpeed's per-parameter copy_ loop, a torch.cat of more than 128 inputs) pays a launch
// for each of them; its bytes cost what they cost in one.
TEST(OpWork, ADeviceCopyPaysALaunchForEachOfItsKernels) {
  ClusterSpec c = test_cluster(1, 1);
  c.efficiency.hbm_by_kind.copy = 0.5;
  c.efficiency.launch_us = 5;
  ScheduleBuilder b(c);
  const OpId k = b.copy("partition", Phase::backward, CopyKind::d2d, 1'000'000);
  b.s.ops[k].copy.kernel_launches = 75;
  const double expected = 2 * memory_bound_s(1'000'000, c.gpu.hbm_GBps, 0.5) + 75 * 5e-6;
  EXPECT_NEAR(op_work(b.s.ops[k], b.s, c, {}, {}).fixed_s, expected, expected * 1e-12);
}

// A d2d copy that adds into its output (DeepSpeed's add_) reads the destination too: 3 x its bytes; a cast reads
// its source in the source dtype's size (16-bit -> fp32: half the bytes it writes).
TEST(OpWork, AnAddingCopyReadsItsDestinationAndACastItsSourceInItsOwnSize) {
  ClusterSpec c = test_cluster(1, 1);
  c.efficiency.hbm_by_kind.copy = 0.5;
  const Bytes n = 1'000'000'000;
  const double plain = memory_bound_s(2 * n, c.gpu.hbm_GBps, 0.5);
  ScheduleBuilder add(c);
  const OpId a = add.copy("add", Phase::backward, CopyKind::d2d, n, true);
  add.s.ops[a].uses = {{-1, 0, n, Role::input, Access::read}, {-1, n, n, Role::output, Access::read_write}};
  EXPECT_NEAR(op_work(add.s.ops[a], add.s, c, {}, {}).fixed_s, 1.5 * plain, plain * 1e-12);
  ScheduleBuilder cast(c);
  const OpId k = cast.copy("cast", Phase::backward, CopyKind::d2d, n, true);
  cast.s.ops[k].copy.cast = true;
  cast.s.ops[k].copy.cast_from = DType::bf16;
  cast.s.ops[k].copy.cast_to = DType::fp32;
  EXPECT_NEAR(op_work(cast.s.ops[k], cast.s, c, {}, {}).fixed_s, 0.75 * plain, plain * 1e-12);
}

// A schedule model of a few units, as zsim plan writes it: micro-batch 2 x 1024 tokens, hidden 512, vocab 1000.
ScheduleModel small_model() {
  ScheduleModel m;
  m.layers = 1, m.hidden = 512, m.ffn_hidden = 1024, m.heads = 8, m.kv_heads = 8, m.vocab = 1000;
  m.micro_batch = 2, m.seq_len = 1024;
  m.units = {{"L0.attn.norm", 0, {{"attn.norm", 512, 0}}},
             {"L0.attn.q", 0, {{"attn.q", 512, 512}}},
             {"L0.attn.o", 0, {{"attn.o", 512, 512}}},
             {"head", -1, {{"head.out", 512, 1000}}},
             {"L0.mlp.up", 0, {{"mlp.up", 512, 1024}}, "activation"}};
  return m;
}

// One op of unit `unit` alone in a step (a forward unless `what` says otherwise).
double unit_op_s(const ClusterSpec& c, int unit, Flops flops, Bytes hbm_bytes, int launches,
                 ComputeKind what = ComputeKind::forward) {
  ScheduleBuilder b(c);
  b.s.model = small_model();
  const bool backward = what == ComputeKind::backward;
  const OpId id = b.compute(backward ? "bwd" : "fwd", backward ? Phase::backward : Phase::forward, flops, {}, "compute", what);
  b.s.ops[id].unit = unit;
  b.s.ops[id].compute.hbm_bytes = hbm_bytes;
  b.s.ops[id].compute.kernel_launches = launches;
  return simulate(c, b.s).step_s();
}

// The head of `vocab` columns (unit 3 of small_model) alone in a step under `framework`, forward or backward: its
// GEMMs' FLOPs (forward tokens x vocab x hidden; backward twice that).
double head_op_s(const ClusterSpec& c, std::int64_t vocab, const std::string& framework, ComputeKind what) {
  ScheduleBuilder b(c);
  b.s.model = small_model();
  b.s.model.vocab = vocab;
  b.s.model.units[3].tensors[0].cols = vocab;
  b.s.meta.framework = framework;
  const bool backward = what == ComputeKind::backward;
  const Flops flops = (backward ? 2 : 1) * 2.0 * 2048 * 512 * static_cast<double>(vocab);
  const OpId id = b.compute(backward ? "bwd" : "fwd", backward ? Phase::backward : Phase::forward, flops, {}, "compute", what);
  b.s.ops[id].unit = 3;
  return simulate(c, b.s).step_s();
}

ClusterSpec with_misaligned_gemm_figures() {
  ClusterSpec c = test_cluster(1, 1);
  c.efficiency.torch_misaligned_gemm.forward = 0.1;
  c.efficiency.torch_misaligned_gemm.backward = 0.15;
  return c;
}

TEST(OpWork, UnderDeepSpeedAHeadOfAMisalignedVocabularyRunsAtTheMeasuredFractionPerDirection) {
  const ClusterSpec c = with_misaligned_gemm_figures();
  const double forward = gemm_s(2.0 * 2048 * 512 * 1001, c.gpu.peak_tflops, 0.1);
  const double backward = gemm_s(2 * 2.0 * 2048 * 512 * 1001, c.gpu.peak_tflops, 0.15);
  EXPECT_NEAR(head_op_s(c, 1001, "deepspeed", ComputeKind::forward), forward, forward * 1e-12);
  EXPECT_NEAR(head_op_s(c, 1001, "deepspeed", ComputeKind::recompute), forward, forward * 1e-12);
  EXPECT_NEAR(head_op_s(c, 1001, "deepspeed", ComputeKind::backward), backward, backward * 1e-12);
}

TEST(OpWork, AnAlignedVocabularyOrZrunOrNoFiguresKeepTheGemmEfficiency) {
  const ClusterSpec c = with_misaligned_gemm_figures();
  const double aligned = gemm_s(2.0 * 2048 * 512 * 1000, c.gpu.peak_tflops, c.efficiency.gemm);
  EXPECT_NEAR(head_op_s(c, 1000, "deepspeed", ComputeKind::forward), aligned, aligned * 1e-12);
  const double odd = gemm_s(2.0 * 2048 * 512 * 1001, c.gpu.peak_tflops, c.efficiency.gemm);
  EXPECT_NEAR(head_op_s(c, 1001, "", ComputeKind::forward), odd, odd * 1e-12);  // zrun: its cuBLASLt calls
  EXPECT_NEAR(head_op_s(test_cluster(1, 1), 1001, "deepspeed", ComputeKind::forward), odd, odd * 1e-12);
}

TEST(OpWork, EveryKernelLaunchCostsLaunchUsWithoutAGemmModel) {
  ClusterSpec c = test_cluster(1, 1);
  const Flops flops = 1e10;
  const double gemm = gemm_s(flops, c.gpu.peak_tflops, c.efficiency.gemm);
  EXPECT_NEAR(unit_op_s(c, 1, flops, 0, 3), gemm, gemm * 1e-12);  // launch_us 0: launches cost nothing
  c.efficiency.launch_us = 4;
  EXPECT_NEAR(unit_op_s(c, 1, flops, 0, 3), gemm + 3 * 4e-6, gemm * 1e-12);  // the GEMM's own launch too
  EXPECT_NEAR(unit_op_s(c, 1, flops, 0, 0), gemm, gemm * 1e-12);             // none given: none charged
  const double norm = memory_bound_s(1'000'000, c.gpu.hbm_GBps, c.efficiency.hbm);
  EXPECT_NEAR(unit_op_s(c, 0, 0, 1'000'000, 1), norm + 4e-6, norm * 1e-12);  // a norm: one kernel
}

// For the wait of a side kernel beside it (efficiency.beside_compute_wait): a backward op's long kernels are its unit's
// GEMM calls, the input gradient's and the weight gradient's, each at the GEMM model's time of one call.
TEST(OpWork, AComputeOpsLongKernelsAreItsUnitsGemmCallsAtTheModelsTime) {
  ClusterSpec c = test_cluster(1, 1);
  c.efficiency.gemm_model.max_efficiency = 0.8;
  ScheduleBuilder b(c);
  b.s.model = small_model();
  // mlp.up backward (512 -> 1024): dX = 2048 tokens x 512 x 1024 and dW = 512 x 1024 x 2048 tokens.
  const OpId id = b.compute("bwd", Phase::backward, 2 * 2.0 * 2048 * 512 * 1024, {}, "compute", ComputeKind::backward);
  b.s.ops[id].unit = 4;
  b.s.ops[id].compute.hbm_bytes = 50'000'000;  // the activation's backward: time, but no long kernel
  const OpWork w = op_work(b.s.ops[id], b.s, c, rank_links(Topology(c)), SimOptions{});
  const double dx = gemm_model_s(2048, 512, 1024, 1, 2, c.gpu.peak_tflops, c.efficiency.gemm_model);
  const double dw = gemm_model_s(512, 1024, 2048, 1, 2, c.gpu.peak_tflops, c.efficiency.gemm_model);
  EXPECT_GT(w.fixed_s, dx + dw);
  EXPECT_NEAR(w.kernel_mean_s, (dx + dw) / 2, dx * 1e-12);
  EXPECT_NEAR(w.kernel_residual_s, (dx * dx + dw * dw) / (2 * w.fixed_s), dx * 1e-12);
  // Ops that are no forward, backward or recompute have none.
  const OpId opt = b.compute("opt", Phase::step, 1e9, {}, "compute", ComputeKind::optimizer);
  EXPECT_EQ(op_work(b.s.ops[opt], b.s, c, rank_links(Topology(c)), SimOptions{}).kernel_mean_s, 0);
}

TEST(OpWork, TheGemmCallsTheGemmModelPricesAreNotChargedALaunchAgain) {
  ClusterSpec c = test_cluster(1, 1);
  c.efficiency.gemm_model.launch_us = 7;
  c.efficiency.gemm_model.max_efficiency = 0.8;
  c.efficiency.launch_us = 3;
  // attn.q's forward: one GEMM (2048 tokens x 512 x 512), priced by the model with its own 7 us launch.
  const Flops flops = 2.0 * 2048 * 512 * 512;
  const double model = gemm_model_s(2048, 512, 512, 1, 2, c.gpu.peak_tflops, c.efficiency.gemm_model);
  EXPECT_NEAR(unit_op_s(c, 1, flops, 0, 1), model, model * 1e-9);
  // attn.o with the eager core: its GEMM (priced by the model) and 9 more launches (core GEMM calls, softmax).
  EXPECT_NEAR(unit_op_s(c, 2, flops, 0, 10), model + 9 * 3e-6, model * 1e-9);
  // Without a model every launch, the GEMM's too, is charged launch_us.
  c.efficiency.gemm_model.max_efficiency = 0;
  const double constant = gemm_s(flops, c.gpu.peak_tflops, c.efficiency.gemm);
  EXPECT_NEAR(unit_op_s(c, 2, flops, 0, 10), constant + 10 * 3e-6, constant * 1e-9);
}

TEST(OpWork, AnActivationUnitsBytesRunAtTheActivationKind) {
  ClusterSpec c = test_cluster(1, 1);
  const Bytes bytes = 2'000'000'000;
  EXPECT_DOUBLE_EQ(unit_op_s(c, 4, 0, bytes, 0), memory_bound_s(bytes, c.gpu.hbm_GBps, c.efficiency.hbm));
  c.efficiency.hbm_by_kind.activation = 0.3;
  c.efficiency.hbm_by_kind.softmax = 0.6;
  EXPECT_DOUBLE_EQ(unit_op_s(c, 4, 0, bytes, 0), memory_bound_s(bytes, c.gpu.hbm_GBps, 0.3));
}

// A recompute runs its layer's forward: the norms' bytes (2 x tokens x hidden x e each) at `norm`, the MLP
// activation's forward (SwiGLU: 3 x tokens x ffn x e) at `activation`, the rest (eager scores) at `softmax`.
TEST(OpWork, ARecomputeSplitsItsBytesIntoNormsActivationAndScores) {
  ClusterSpec c = test_cluster(1, 1);
  c.efficiency.hbm_by_kind.norm = 0.5;
  c.efficiency.hbm_by_kind.activation = 0.3;
  c.efficiency.hbm_by_kind.softmax = 0.6;
  ScheduleBuilder b(c);
  b.s.model = small_model();
  const Bytes norms = 2 * 2048 * 512 * 2, activation = 3 * 2048 * 1024 * 2, scores = 100'000'000;
  const OpId id = b.compute("recompute", Phase::backward, 0, {}, "compute", ComputeKind::recompute);
  b.s.ops[id].layer = 0;
  b.s.ops[id].compute.hbm_bytes = norms + activation + scores;
  const double expected = memory_bound_s(norms, c.gpu.hbm_GBps, 0.5) + memory_bound_s(activation, c.gpu.hbm_GBps, 0.3) +
                          memory_bound_s(scores, c.gpu.hbm_GBps, 0.6);
  EXPECT_NEAR(simulate(c, b.s).step_s(), expected, expected * 1e-12);
}

TEST(OpWork, ScoresRunAtTheSoftmaxKindAndTheHeadsLossAtTheCrossEntropyKind) {
  ClusterSpec c = test_cluster(1, 1);
  const Bytes bytes = 2'000'000'000;
  const double at_hbm = memory_bound_s(bytes, c.gpu.hbm_GBps, c.efficiency.hbm);
  EXPECT_DOUBLE_EQ(unit_op_s(c, 2, 0, bytes, 0), at_hbm);  // no per-kind keys: efficiency.hbm
  EXPECT_DOUBLE_EQ(unit_op_s(c, 3, 0, bytes, 0), at_hbm);
  c.efficiency.hbm_by_kind.cross_entropy = 0.2;
  EXPECT_DOUBLE_EQ(unit_op_s(c, 2, 0, bytes, 0), at_hbm);  // the scores are not the loss
  EXPECT_DOUBLE_EQ(unit_op_s(c, 3, 0, bytes, 0), memory_bound_s(bytes, c.gpu.hbm_GBps, 0.2));
  c.efficiency.hbm_by_kind.softmax = 0.6;
  EXPECT_DOUBLE_EQ(unit_op_s(c, 2, 0, bytes, 0), memory_bound_s(bytes, c.gpu.hbm_GBps, 0.6));
  EXPECT_DOUBLE_EQ(unit_op_s(c, 3, 0, bytes, 0), memory_bound_s(bytes, c.gpu.hbm_GBps, 0.2));
}

// A backward op's bytes run at the backward kernels' kind where the profile measured it (the loss's backward rewrites
// the logits its forward reads; the softmax's backward reads two matrices), else at the forward kind's.
TEST(OpWork, ABackwardOpsBytesRunAtTheBackwardKindElseTheForwardKinds) {
  ClusterSpec c = test_cluster(1, 1);
  const Bytes bytes = 2'000'000'000;
  auto at = [&](double e) { return memory_bound_s(bytes, c.gpu.hbm_GBps, e); };
  c.efficiency.hbm_by_kind.cross_entropy = 0.2;
  c.efficiency.hbm_by_kind.softmax = 0.6;
  EXPECT_DOUBLE_EQ(unit_op_s(c, 3, 0, bytes, 0, ComputeKind::backward), at(0.2));  // no backward figure: the forward's
  c.efficiency.hbm_by_kind.cross_entropy_backward = 0.5;
  c.efficiency.hbm_by_kind.softmax_backward = 0.7;
  EXPECT_DOUBLE_EQ(unit_op_s(c, 3, 0, bytes, 0, ComputeKind::backward), at(0.5));
  EXPECT_DOUBLE_EQ(unit_op_s(c, 3, 0, bytes, 0, ComputeKind::forward), at(0.2));
  EXPECT_DOUBLE_EQ(unit_op_s(c, 2, 0, bytes, 0, ComputeKind::backward), at(0.7));
  EXPECT_DOUBLE_EQ(unit_op_s(c, 2, 0, bytes, 0, ComputeKind::forward), at(0.6));
  // Neither kind given: efficiency.hbm, both ways.
  c.efficiency.hbm_by_kind.norm = 0;
  EXPECT_DOUBLE_EQ(unit_op_s(c, 0, 0, bytes, 0, ComputeKind::backward), at(c.efficiency.hbm));
  c.efficiency.hbm_by_kind.norm_backward = 0.3;
  EXPECT_DOUBLE_EQ(unit_op_s(c, 0, 0, bytes, 0, ComputeKind::backward), at(0.3));
  EXPECT_DOUBLE_EQ(unit_op_s(c, 0, 0, bytes, 0, ComputeKind::forward), at(c.efficiency.hbm));
}

// Eager attention's core on attn.o of small_model (micro-batch 2 x 1024 tokens, hidden 512): heads of head dim d,
// as zsim plan lists its calls (sim/plan/attention_flops.hpp): 2 sequences x 1 query head per kv group, batch of
// 512 / d kv heads; scores (s, s, d) and P V (d, s, s) forward.
std::vector<GemmCalls> core_forward(std::int64_t d) {
  const std::int64_t heads = 512 / d;
  return {{1024, 1024, d, heads, 2}, {d, 1024, 1024, heads, 2}};
}
double calls_model_s(const std::vector<GemmCalls>& calls, const GemmModel& g, double peak) {
  double t = 0;
  for (const GemmCalls& c : calls) t += c.calls * gemm_model_s(c.m, c.n, c.k, c.batch, 2, peak, g);
  return t;
}
double calls_flops(const std::vector<GemmCalls>& calls) {
  double f = 0;
  for (const GemmCalls& c : calls) f += 2.0 * c.m * c.n * c.k * c.batch * c.calls;
  return f;
}
// A calibrated cluster whose GEMM model was (attention_shapes) or was not fitted on attention's batched calls.
ClusterSpec calibrated(bool attention_shapes) {
  ClusterSpec c = test_cluster(1, 1);
  c.efficiency.gemm_model.launch_us = 7;
  c.efficiency.gemm_model.max_efficiency = 0.8;
  c.efficiency.gemm_model.io_GBps = 2500;
  c.efficiency.gemm_model.io_overlap = 0.5;
  c.efficiency.gemm_model.attention_shapes = attention_shapes;
  c.efficiency.launch_us = 3;
  c.efficiency.hbm_by_kind.softmax = 0.4;
  return c;
}
// attn.o's forward alone in a step, its unit listing the core's calls for head dim d: the o projection's GEMM and
// the core's FLOPs, the scores' 4eN bytes of which the GEMMs move 2eN, 1 + 4 + 1 launches (GEMM, core calls, softmax).
struct AttnOForward {
  Flops flops;
  Bytes scores_n, hbm, gemm_hbm;
  double step_s;
};
AttnOForward attn_o_forward(const ClusterSpec& c, std::int64_t d) {
  ScheduleBuilder b(c);
  b.s.model = small_model();
  b.s.model.heads = b.s.model.kv_heads = 512 / d;
  b.s.model.units[2].forward_gemms = core_forward(d);
  AttnOForward r;
  r.flops = 2.0 * 2048 * 512 * 512 + calls_flops(core_forward(d));
  r.scores_n = (512 / d) * 1024 * 1024 * 2;
  r.hbm = 4 * 2 * r.scores_n;
  r.gemm_hbm = 2 * 2 * r.scores_n;
  const OpId id = b.compute("fwd.L0.attn.o", Phase::forward, r.flops);
  b.s.ops[id].unit = 2;
  b.s.ops[id].compute.hbm_bytes = r.hbm;
  b.s.ops[id].compute.gemm_hbm_bytes = r.gemm_hbm;
  b.s.ops[id].compute.kernel_launches = 6;
  r.step_s = simulate(c, b.s).step_s();
  return r;
}

TEST(OpWork, AModelFittedOnAttentionShapesPricesEagerAttentionsCoreAsItsBatchedCalls) {
  const ClusterSpec c = calibrated(true);
  const GemmModel& g = c.efficiency.gemm_model;
  const AttnOForward r = attn_o_forward(c, 64);
  // The projection's GEMM and the 4 core calls through the model (their launches included), the softmax's own 2eN
  // at the softmax kind, and one more launch (the softmax kernel).
  const double expected = gemm_model_s(2048, 512, 512, 1, 2, c.gpu.peak_tflops, g) +
                          calls_model_s(core_forward(64), g, c.gpu.peak_tflops) +
                          memory_bound_s(r.hbm - r.gemm_hbm, c.gpu.hbm_GBps, 0.4) + 1 * 3e-6;
  EXPECT_NEAR(r.step_s, expected, expected * 1e-9);
}

TEST(OpWork, TheCoresTimeFollowsTheGemmModelAsTheHeadDimChanges) {
  // The same FLOPs in 8 heads of 64 or 4 heads of 128: the model's figures for the two sets of calls, not the FLOPs,
  // set the difference (the scores of 64-dim heads are twice the traffic).
  const ClusterSpec c = calibrated(true);
  const GemmModel& g = c.efficiency.gemm_model;
  const AttnOForward d64 = attn_o_forward(c, 64), d128 = attn_o_forward(c, 128);
  ASSERT_DOUBLE_EQ(d64.flops, d128.flops);
  const double softmax64 = memory_bound_s(d64.hbm - d64.gemm_hbm, c.gpu.hbm_GBps, 0.4);
  const double softmax128 = memory_bound_s(d128.hbm - d128.gemm_hbm, c.gpu.hbm_GBps, 0.4);
  const double model_difference =
      calls_model_s(core_forward(64), g, c.gpu.peak_tflops) - calls_model_s(core_forward(128), g, c.gpu.peak_tflops);
  EXPECT_GT(model_difference, 0);
  EXPECT_NEAR((d64.step_s - softmax64) - (d128.step_s - softmax128), model_difference, d64.step_s * 1e-9);
}

TEST(OpWork, AModelNotFittedOnAttentionShapesKeepsTheCoreAtItsUnitsEfficiency) {
  // A profile calibrated before the attention shapes were measured: the core's FLOPs at the projection's modelled
  // efficiency, all 4eN of the scores at the softmax kind, every launch but the projection's GEMM at launch_us.
  const ClusterSpec c = calibrated(false);
  const AttnOForward r = attn_o_forward(c, 64);
  const double projection = gemm_model_s(2048, 512, 512, 1, 2, c.gpu.peak_tflops, c.efficiency.gemm_model);
  const double e = 2.0 * 2048 * 512 * 512 / (c.gpu.peak_tflops * 1e12 * projection);
  const double expected = gemm_s(r.flops, c.gpu.peak_tflops, e) + memory_bound_s(r.hbm, c.gpu.hbm_GBps, 0.4) + 5 * 3e-6;
  EXPECT_NEAR(r.step_s, expected, expected * 1e-9);
}

TEST(OpWork, ADataSheetProfileChargesTheCoreAsBefore) {
  // No GEMM model: the FLOPs at efficiency.gemm, the scores' 4eN memory-bound, every launch at launch_us; the unit's
  // core calls and gemm_hbm_bytes change nothing.
  ClusterSpec c = calibrated(true);
  c.efficiency.gemm_model = GemmModel{};
  const AttnOForward r = attn_o_forward(c, 64);
  const double expected = gemm_s(r.flops, c.gpu.peak_tflops, c.efficiency.gemm) +
                          memory_bound_s(r.hbm, c.gpu.hbm_GBps, 0.4) + 6 * 3e-6;
  EXPECT_NEAR(r.step_s, expected, expected * 1e-12);
}

TEST(OpWork, ARecomputePricesItsLayersCoreCallsAndOnlyTheSoftmaxsShareOfTheScores) {
  const ClusterSpec c = calibrated(true);
  const GemmModel& g = c.efficiency.gemm_model;
  ScheduleBuilder b(c);
  b.s.model = small_model();
  b.s.model.units[2].forward_gemms = core_forward(64);
  const Bytes norms = 2 * 2048 * 512 * 2, activation = 3 * 2048 * 1024 * 2, n = 8 * 1024 * 1024 * 2;
  const OpId id = b.compute("recompute.L0", Phase::backward, 0, {}, "compute", ComputeKind::recompute);
  b.s.ops[id].layer = 0;
  // The layer's GEMMs: q, o, up (tokens x out x in) and the core's forward calls.
  b.s.ops[id].compute.flops = 2.0 * 2048 * (512 * 512 * 2 + 512 * 1024) + calls_flops(core_forward(64));
  b.s.ops[id].compute.hbm_bytes = norms + activation + 4 * 2 * n;
  b.s.ops[id].compute.gemm_hbm_bytes = 2 * 2 * n;
  const double gemms = 2 * gemm_model_s(2048, 512, 512, 1, 2, c.gpu.peak_tflops, g) +
                       gemm_model_s(2048, 1024, 512, 1, 2, c.gpu.peak_tflops, g) +
                       calls_model_s(core_forward(64), g, c.gpu.peak_tflops);
  const double expected = gemms + memory_bound_s(norms, c.gpu.hbm_GBps, c.efficiency.hbm) +
                          memory_bound_s(activation, c.gpu.hbm_GBps, c.efficiency.hbm) +
                          memory_bound_s(2 * 2 * n, c.gpu.hbm_GBps, 0.4);
  EXPECT_NEAR(simulate(c, b.s).step_s(), expected, expected * 1e-9);
}

// attn.o of small_model with flash attention: the o projection's GEMM and the fused kernel's FLOPs, 2 launches.
double flash_attn_o_s(const ClusterSpec& c, ComputeKind what, Flops fused, const SimOptions& o = {}) {
  ScheduleBuilder b(c);
  b.s.model = small_model();
  const OpId id = b.compute("attn.o", what == ComputeKind::forward ? Phase::forward : Phase::backward,
                            (what == ComputeKind::backward ? 4.0 : 2.0) * 2048 * 512 * 512 + fused, {}, "compute", what);
  b.s.ops[id].unit = what == ComputeKind::recompute ? -1 : 2;
  b.s.ops[id].layer = 0;
  b.s.ops[id].compute.fused_attention_flops = fused;
  b.s.ops[id].compute.kernel_launches = 2;
  return op_work(b.s.ops[id], b.s, c, {}, o).fixed_s;
}

TEST(OpWork, FlashAttentionsFusedFlopsRunAtTheirOwnEfficiencyWhereTheProfileGivesIt) {
  ClusterSpec c = test_cluster(1, 1);
  c.efficiency.launch_us = 3;
  const Flops fused = 2.0 * 2 * 1024 * 1024 * 512;  // causal flash forward, 2 b s^2 h
  const double peak = c.gpu.peak_tflops * 1e12, gemm = c.efficiency.gemm;
  const double before = flash_attn_o_s(c, ComputeKind::forward, fused);
  EXPECT_NEAR(before, (2.0 * 2048 * 512 * 512 + fused) / (peak * gemm) + 2 * 3e-6, before * 1e-12);  // no key: as today
  c.efficiency.flash_attention = {0.25, 0.2};
  EXPECT_NEAR(flash_attn_o_s(c, ComputeKind::forward, fused) - before, fused / (peak * 0.25) - fused / (peak * gemm),
              before * 1e-12);
  // A recompute runs the forward kernel; the backward its own efficiency.
  EXPECT_NEAR(flash_attn_o_s(c, ComputeKind::recompute, fused) - before, fused / (peak * 0.25) - fused / (peak * gemm),
              before * 1e-12);
  const double bwd = 2.5 * fused;
  c.efficiency.flash_attention = {};
  const double bwd_before = flash_attn_o_s(c, ComputeKind::backward, bwd);
  c.efficiency.flash_attention = {0.25, 0.2};
  EXPECT_NEAR(flash_attn_o_s(c, ComputeKind::backward, bwd) - bwd_before, bwd / (peak * 0.2) - bwd / (peak * gemm),
              bwd_before * 1e-12);
  // Only the given direction: a profile with a forward figure alone leaves the backward as it was.
  c.efficiency.flash_attention = {0.25, 0};
  EXPECT_EQ(flash_attn_o_s(c, ComputeKind::backward, bwd), bwd_before);
  // An op with no fused FLOPs (eager attention, any other unit) is not touched.
  c.efficiency.flash_attention = {};
  const double eager = flash_attn_o_s(c, ComputeKind::forward, 0);
  c.efficiency.flash_attention = {0.25, 0.2};
  EXPECT_EQ(flash_attn_o_s(c, ComputeKind::forward, 0), eager);
}

TEST(OpWork, FlashAttentionsEfficiencyAppliesBesideAGemmModelAndNotToFp32Runs) {
  ClusterSpec c = test_cluster(1, 1);
  c.efficiency.gemm_model.launch_us = 7;
  c.efficiency.gemm_model.max_efficiency = 0.8;
  const Flops fused = 2.0 * 2 * 1024 * 1024 * 512;
  const double peak = c.gpu.peak_tflops * 1e12;
  // With a GEMM model the projection runs as the model says and the core (today) at the projection's efficiency.
  const double projection = gemm_model_s(2048, 512, 512, 1, 2, c.gpu.peak_tflops, c.efficiency.gemm_model);
  const double e = 2.0 * 2048 * 512 * 512 / (peak * projection);
  const double before = flash_attn_o_s(c, ComputeKind::forward, fused);
  EXPECT_NEAR(before, projection + fused / (peak * e), before * 1e-9);
  c.efficiency.flash_attention = {0.3, 0.3};
  EXPECT_NEAR(flash_attn_o_s(c, ComputeKind::forward, fused), projection + fused / (peak * 0.3), before * 1e-9);
  // fp32: zrun has no flash kernel there and the figure is a 16-bit measurement: the core keeps the GEMM efficiency.
  SimOptions fp32;
  fp32.precision = Precision::fp32;
  const ClusterSpec plain = test_cluster(1, 1);
  ClusterSpec with = plain;
  with.efficiency.flash_attention = {0.3, 0.3};
  EXPECT_EQ(flash_attn_o_s(with, ComputeKind::forward, fused, fp32), flash_attn_o_s(plain, ComputeKind::forward, fused, fp32));
  EXPECT_NE(flash_attn_o_s(with, ComputeKind::forward, fused), flash_attn_o_s(plain, ComputeKind::forward, fused));
}

}  // namespace
}  // namespace zsim
