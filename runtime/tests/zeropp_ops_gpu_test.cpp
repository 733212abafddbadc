// ZeRO++'s compute ops as zrun runs them (runtime/exec/zeropp_ops.cpp), on one GPU standing in for two ranks of two
// nodes (skips without a GPU). The ops, with their uses, are the tiny model's first qgZ bucket from zsim's schedule
// for 2 nodes x 1 GPU; each rank gets its own copy of every buffer the ops use, and the all-to-alls are emulated by
// copies between them (as the schedule's groups say). The reduced partitions equal the fp32 average of both ranks'
// gradients within int4 error, and LoCo's error feedback takes the error summed over 50 steps down at least 3x.
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "runtime/exec/zeropp_ops.hpp"
#include "sim/plan/plan.hpp"
#include "sim/plan/schedule_builder.hpp"
#include "sim/scenario/scenario_parse.hpp"

namespace zrun {
namespace {

using zsim::BufferUse;
using zsim::Op;
using zsim::Role;

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

#define CHECK_CUDA(x) ASSERT_EQ((x), cudaSuccess) << #x

// The first qgZ bucket's ops in program order: quantize, intra all-to-all, dequant-reduce, inter all-to-all, final
// dequant-reduce.
struct QgzBucket {
  zsim::Schedule sch;
  std::vector<const Op*> ops;
};

QgzBucket first_qgz_bucket(bool loco) {
  std::vector<std::string> o{"cluster.nodes=2", "cluster.gpus_per_node=1", "deepspeed.zero_optimization.stage=3",
                             "deepspeed.zero_optimization.zero_quantized_gradients=true"};
  if (loco) o.push_back("deepspeed.zero_optimization.zeropp_loco_param.err_beta=0.8");
  const zsim::Scenario s =
      zsim::load_scenario(std::string(ZSIM_SOURCE_DIR) + "/runtime/scenarios/tiny-zero3-1xh100.yaml", o);
  QgzBucket b;
  const zsim::Plan p = zsim::make_plan(s);
  b.sch = zsim::make_schedule(s, p, 1);
  for (const Op& op : b.sch.ops) {
    const bool quant = op.kind == zsim::OpKind::compute && op.compute.dtype == zsim::DType::int4 &&
                       (op.compute.what == zsim::ComputeKind::quantize || op.compute.what == zsim::ComputeKind::dequant_reduce);
    const bool a2a = op.kind == zsim::OpKind::collective && op.collective.what == zsim::CollectiveKind::all_to_all;
    if ((quant || a2a) && !op.uses.empty()) b.ops.push_back(&op);
    if (b.ops.size() == 5) break;
  }
  return b;
}

class TwoRanks {
 public:
  explicit TwoRanks(const QgzBucket& b) : b_(b) {
    for (const Op* op : b.ops)
      for (const BufferUse& u : op->uses)
        if (!buf_.count(u.alloc))
          for (int r = 0; r < 2; ++r) {
            void* p = nullptr;
            cudaMalloc(&p, b.sch.ops[u.alloc].mem.bytes);
            cudaMemset(p, 0, b.sch.ops[u.alloc].mem.bytes);
            buf_[u.alloc][r] = static_cast<std::byte*>(p);
          }
  }
  ~TwoRanks() {
    for (auto& [id, p] : buf_)
      for (std::byte* q : p) cudaFree(q);
  }
  std::byte* at(const BufferUse& u, int r) { return buf_.at(u.alloc)[r] + u.offset; }

  // One step: each rank's gradients (by input use of the quantize, host floats), then every op; returns per rank and
  // tensor the reduced partition as floats.
  std::vector<std::vector<std::vector<float>>> step(const std::vector<std::vector<std::vector<float>>>& grads,
                                                    ZeroppContext c) {
    const Op& q = *b_.ops[0];
    for (int r = 0; r < 2; ++r) {
      size_t t = 0;
      for (const BufferUse& u : q.uses)
        if (u.role == Role::input) {
          std::vector<__nv_bfloat16> h(grads[r][t].size());
          for (size_t i = 0; i < h.size(); ++i) h[i] = __float2bfloat16(grads[r][t][i]);
          cudaMemcpy(at(u, r), h.data(), h.size() * 2, cudaMemcpyHostToDevice);
          ++t;
        }
    }
    for (const Op* op : b_.ops) {
      if (op->kind == zsim::OpKind::collective) {
        all_to_all(*op);
        continue;
      }
      for (int r = 0; r < 2; ++r)
        run_zeropp_op(*op, c, [&](const BufferUse& u) { return at(u, r); },
                      [&](zsim::Bytes n) {
                        void* p = nullptr;
                        cudaMalloc(&p, n);
                        scratch_.push_back(p);
                        return static_cast<std::byte*>(p);
                      },
                      nullptr);
    }
    cudaDeviceSynchronize();
    for (void* p : scratch_) cudaFree(p);
    scratch_.clear();
    std::vector<std::vector<std::vector<float>>> out(2);
    for (int r = 0; r < 2; ++r)
      for (const BufferUse& u : b_.ops[4]->uses)
        if (u.role == Role::output) {
          std::vector<__nv_bfloat16> h(u.bytes / 2);
          cudaMemcpy(h.data(), at(u, r), u.bytes, cudaMemcpyDeviceToHost);
          std::vector<float> f(h.size());
          for (size_t i = 0; i < h.size(); ++i) f[i] = __bfloat162float(h[i]);
          out[r].push_back(f);
        }
    return out;
  }

 private:
  // Group members are consecutive blocks of `stride` (docs/schedule-format.md); with 2 ranks either one group of 2
  // or two groups of 1.
  void all_to_all(const Op& op) {
    const zsim::ProcessGroup& g = b_.sch.groups[op.collective.group];
    for (size_t i = 0; i + 1 < op.uses.size(); i += 2) {
      const BufferUse &in = op.uses[i], &out = op.uses[i + 1];
      const zsim::Bytes block = in.bytes / g.size;
      for (int r = 0; r < 2; ++r)
        for (int q = 0; q < g.size; ++q) {
          const int me = g.size == 1 ? 0 : r, peer = g.size == 1 ? r : q;
          cudaMemcpy(at(out, r) + q * block, at(in, peer) + me * block, block, cudaMemcpyDeviceToDevice);
        }
    }
  }

  const QgzBucket& b_;
  std::map<zsim::OpId, std::array<std::byte*, 2>> buf_;
  std::vector<void*> scratch_;
};

// Per rank and tensor, random gradients of the sizes the quantize's inputs have.
std::vector<std::vector<std::vector<float>>> random_grads(const Op& q, std::mt19937& rng) {
  std::normal_distribution<float> d(0.0f, 1e-2f);
  std::vector<std::vector<std::vector<float>>> g(2);
  for (int r = 0; r < 2; ++r)
    for (const BufferUse& u : q.uses)
      if (u.role == Role::input) {
        std::vector<float> v(u.bytes / 2);
        for (float& x : v) x = __bfloat162float(__float2bfloat16(d(rng)));
        g[r].push_back(v);
      }
  return g;
}

ZeroppContext context(std::int64_t step) {
  ZeroppContext c;
  c.train_dtype = zsim::DType::bf16;
  c.nodes = 2;
  c.gpus_per_node = 1;
  c.step = step;
  return c;
}

TEST(ZeroppOpsGpu, QgzReducesTwoNodesGradientsToTheirAverageWithinInt4Error) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device: ZeRO++'s ops run on the GPU machine";
  const QgzBucket b = first_qgz_bucket(false);
  ASSERT_EQ(b.ops.size(), 5u);
  TwoRanks w(b);
  std::mt19937 rng(7);
  const auto g = random_grads(*b.ops[0], rng);
  const auto out = w.step(g, context(0));
  double err2 = 0, ref2 = 0;
  for (int r = 0; r < 2; ++r)
    for (size_t t = 0; t < out[r].size(); ++t) {
      const size_t P = out[r][t].size();
      ASSERT_EQ(P * 2, g[r][t].size());
      for (size_t i = 0; i < P; ++i) {
        const double want = 0.5 * (g[0][t][r * P + i] + g[1][t][r * P + i]);
        err2 += (out[r][t][i] - want) * (out[r][t][i] - want);
        ref2 += want * want;
      }
    }
  const double rel = std::sqrt(err2 / ref2);
  std::printf("qgZ on 2 nodes x 1: relative L2 error of the reduced partitions %.4f\n", rel);
  EXPECT_GT(rel, 1e-3);  // int4 quantization happened
  EXPECT_LT(rel, 0.2);   // and is int4's error, not a wrong partition (that would be ~1)
}

double accumulated_error(bool loco) {
  const QgzBucket b = first_qgz_bucket(loco);
  TwoRanks w(b);
  std::mt19937 rng(11);
  std::vector<std::vector<double>> err_sum, ref_sum;  // per (rank, tensor) flattened
  for (int step = 0; step < 50; ++step) {
    const auto g = random_grads(*b.ops[0], rng);
    const auto out = w.step(g, context(step));
    size_t k = 0;
    for (int r = 0; r < 2; ++r)
      for (size_t t = 0; t < out[r].size(); ++t, ++k) {
        const size_t P = out[r][t].size();
        if (err_sum.size() <= k) err_sum.emplace_back(P, 0.0), ref_sum.emplace_back(P, 0.0);
        for (size_t i = 0; i < P; ++i) {
          const double want = 0.5 * (g[0][t][r * P + i] + g[1][t][r * P + i]);
          err_sum[k][i] += out[r][t][i] - want;
          ref_sum[k][i] += want;
        }
      }
  }
  double e2 = 0, r2 = 0;
  for (size_t k = 0; k < err_sum.size(); ++k)
    for (size_t i = 0; i < err_sum[k].size(); ++i) e2 += err_sum[k][i] * err_sum[k][i], r2 += ref_sum[k][i] * ref_sum[k][i];
  return std::sqrt(e2 / r2);
}

TEST(ZeroppOpsGpu, LocoTakesTheErrorSummedOver50StepsDownThreefold) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device: ZeRO++'s ops run on the GPU machine";
  const double plain = accumulated_error(false), loco = accumulated_error(true);
  std::printf("error of the reduced gradients summed over 50 steps: qgZ %.4f, with LoCo %.4f (%.1fx)\n", plain, loco,
              plain / loco);
  EXPECT_LE(3 * loco, plain);
}

}  // namespace
}  // namespace zrun
