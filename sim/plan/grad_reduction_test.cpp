// ZeRO-1/2 gradient reduction as DeepSpeed's stage_1_and_2.py runs it, for each setting of the keys
// that choose the path. Each test derives the calls for a small model here, from the cited code path
// (not from sim/plan/grad_reduction.cpp), and compares them with the schedule's backward ops: kind,
// group, bytes, reduce root, copy rank, count and order.
#include <gtest/gtest.h>

#include <functional>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "sim/plan/schedule_builder.hpp"
#include "sim/plan/test_scenarios.hpp"

using namespace zsim;

namespace {

constexpr Bytes kBf16 = 2;

struct Keys {
  bool reduce_scatter = true;
  bool multi_rank = true;       // use_multi_rank_bucket_allreduce
  bool contiguous = true;       // contiguous_gradients
  bool round_robin = false;     // round_robin_gradients
  Elements bucket = 0;          // reduce_bucket_size
};

// The model's gradients in model order (module order, weight then bias): DeepSpeed's bit16_groups.
std::vector<Elements> model_order_numels(const Plan& p) {
  std::vector<Elements> out;
  for (const auto& u : p.units)
    for (const auto& t : u.tensors) out.push_back(t.numel());
  return out;
}

std::string all_reduce(Elements n) { return "all_reduce world " + std::to_string(kBf16 * n); }
std::string reduce(Elements n, int root) { return "reduce world " + std::to_string(kBf16 * n) + " root " + std::to_string(root); }
std::string d2d(Elements n, int rank) { return "d2d " + std::to_string(kBf16 * n) + " rank " + std::to_string(rank); }

// What DeepSpeed calls, as strings, for gradients reduced in the order `arrival` (tensor ordinals).
// Stage 2 (`partition_gradients`) then copies each gradient's part in a rank's partition out of the bucket
// (reduce_ipg_grads -> copy_grads_in_partition, with contiguous_gradients), run by that rank. Without
// contiguous_gradients DeepSpeed keeps the owned param.grad tensors and the step flattens them
// (independent_gradient_partition_epilogue -> get_flat_partition): the schedule moves the same parts with the same
// copies.
std::vector<std::string> deepspeed_calls(const std::vector<Elements>& numel, const std::vector<int>& arrival, int N,
                                         const Keys& k, bool stage2 = false) {
  // __init__: flat buffer in model order, or dealt round robin (_round_robin_reorder: tensor i to list
  // i % N, lists concatenated); padded to a multiple of nccl_start_alignment_factor (2) x N.
  std::vector<int> flat_order(numel.size());
  for (size_t i = 0; i < numel.size(); ++i) flat_order[i] = static_cast<int>(i);
  if (k.round_robin)
    std::stable_sort(flat_order.begin(), flat_order.end(), [N](int a, int b) { return a % N < b % N; });
  std::map<int, Elements> offset;
  Elements total = 0;
  for (int t : flat_order) {
    offset[t] = total;
    total += numel[t];
  }
  const Elements padded = (total + 2 * N - 1) / (2 * N) * (2 * N);
  const Elements P = padded / N;

  // reduce_independent_p_g_buckets_and_remove_grads: reduce the bucket before a gradient that overflows it.
  std::vector<std::vector<int>> buckets{{}};
  Elements in_bucket = 0;
  for (int t : arrival) {
    if (!buckets.back().empty() && in_bucket + numel[t] > k.bucket) {
      buckets.push_back({});
      in_bucket = 0;
    }
    buckets.back().push_back(t);
    in_bucket += numel[t];
  }

  std::vector<std::string> calls;
  // allreduce_bucket + the copy back: a lone tensor is a view (no cat, no copy).
  auto send = [&](const std::vector<std::pair<int, Elements>>& parts, int root) {
    Elements n = 0;
    for (auto [owner, e] : parts) n += e;
    if (parts.size() > 1) calls.push_back(d2d(n, -1));
    calls.push_back(root < 0 ? all_reduce(n) : reduce(n, root));
    if (parts.size() > 1)
      for (auto [owner, e] : parts) calls.push_back(d2d(e, owner));
  };
  // allreduce_and_scatter / allreduce_no_retain: send once a chunk holds more than reduce_bucket_size.
  auto send_chunked = [&](const std::vector<std::pair<int, Elements>>& parts, int root) {
    std::vector<std::pair<int, Elements>> chunk;
    Elements n = 0;
    for (const auto& part : parts) {
      chunk.push_back(part);
      n += part.second;
      if (n > k.bucket) {
        send(chunk, root);
        chunk.clear();
        n = 0;
      }
    }
    if (!chunk.empty()) send(chunk, root);
  };
  auto copy_grads_in_partition = [&](const std::vector<int>& b) {
    if (!stage2) return;
    for (int t : b)
      for (Elements e = offset[t]; e < offset[t] + numel[t];) {
        const int owner = static_cast<int>(e / P);
        const Elements len = std::min(offset[t] + numel[t], (owner + 1) * P) - e;
        calls.push_back(d2d(len, owner));
        e += len;
      }
  };
  for (const auto& b : buckets) {
    Elements n = 0;
    for (int t : b) n += numel[t];
    struct After {
      std::function<void()> f;
      ~After() { f(); }
    } after{[&] { copy_grads_in_partition(b); }};
    if (!k.contiguous) {  // buffered_reduce_fallback: all grads in one all-reduce, every rank copies back
      std::vector<std::pair<int, Elements>> grads;
      for (int t : b) grads.push_back({-1, numel[t]});
      send_chunked(grads, -1);
      continue;
    }
    if (!k.reduce_scatter) {  // gradient_reduction_w_predivide: in place
      calls.push_back(all_reduce(n));
      continue;
    }
    // average_tensor: (owner, numel) per slice, a slice per partition a gradient touches, runs merged.
    std::vector<std::pair<int, Elements>> slices;
    for (int t : b)
      for (Elements e = offset[t]; e < offset[t] + numel[t];) {
        const int owner = static_cast<int>(e / P);
        const Elements len = std::min(offset[t] + numel[t], (owner + 1) * P) - e;
        if (!slices.empty() && slices.back().first == owner) slices.back().second += len;
        else slices.push_back({owner, len});
        e += len;
      }
    if (k.multi_rank) {
      send_chunked(slices, -1);
    } else {
      std::vector<int> owners;
      for (auto [o, e] : slices)
        if (std::find(owners.begin(), owners.end(), o) == owners.end()) owners.push_back(o);
      for (int dst : owners) {
        std::vector<std::pair<int, Elements>> mine;
        for (auto s : slices)
          if (s.first == dst) mine.push_back(s);
        send_chunked(mine, dst);
      }
    }
  }
  return calls;
}

std::vector<int> backward_order(size_t n) {
  std::vector<int> out;
  for (int i = static_cast<int>(n) - 1; i >= 0; --i) out.push_back(i);
  return out;
}

// The schedule's gradient-reduction calls of micro-step 0: collectives and device copies, in order.
std::vector<std::string> schedule_calls(const Schedule& s) {
  std::vector<std::string> out;
  for (const Op& op : s.ops) {
    if (op.phase != Phase::backward || op.micro_step != 0) continue;
    if (op.kind == OpKind::collective) {
      const auto& c = op.collective;
      std::string line = std::string(to_string(c.what)) + " " + s.groups[c.group].name + " " + std::to_string(c.bytes);
      if (c.what == CollectiveKind::reduce) line += " root " + std::to_string(c.root);
      out.push_back(line);
    } else if (op.kind == OpKind::copy && op.copy.what == CopyKind::d2d) {
      out.push_back(d2d(op.copy.bytes / kBf16, op.copy.rank));
    }
  }
  return out;
}

// A two-layer model on 8 ranks with buckets of about a third of a partition: buckets span one or two
// owners, and the embedding (524,288 elements) is larger than a bucket.
Scenario small(int stage, const Keys& k) {
  Scenario s = test::scenario(test::small_llama(2), stage, 1, 8);
  s.zero.overlap_comm = true;
  s.zero.reduce_bucket_size = k.bucket;
  s.zero.reduce_scatter = k.reduce_scatter;
  s.zero.use_multi_rank_bucket_allreduce = k.multi_rank;
  s.zero.contiguous_gradients = k.contiguous;
  s.zero.round_robin_gradients = k.round_robin;
  return s;
}

void expect_deepspeed_calls(int stage, const Keys& k) {
  const Scenario s = small(stage, k);
  const Plan p = make_plan(s);
  const auto numel = model_order_numels(p);
  const auto expected = deepspeed_calls(numel, backward_order(numel.size()), p.dp, k, stage == 2);
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(schedule_calls(make_schedule(s, p)), expected);
}

constexpr Elements kBucket = 300'000;

}  // namespace

// Default (use_multi_rank_bucket_allreduce: true): average_tensor -> allreduce_and_scatter ->
// allreduce_and_copy_with_multiple_ranks: the bucket's slices are cat-ed, all-reduced on the world, and
// each rank copies out the slices it owns.
TEST(ZeroGradReduction, DefaultAllReducesEachBucketAndOwnersCopyOutTheirSlices) {
  for (int stage : {1, 2}) expect_deepspeed_calls(stage, {true, true, true, false, kBucket});
}

// use_multi_rank_bucket_allreduce: false: a bucket per destination rank, allreduce_no_retain(rank=dst)
// -> allreduce_and_copy -> dist.reduce to that rank, which copies its slices back.
TEST(ZeroGradReduction, WithoutMultiRankBucketAllreduceEachOwnerGetsAReduce) {
  for (int stage : {1, 2}) expect_deepspeed_calls(stage, {true, false, true, false, kBucket});
}

// reduce_scatter: false: average_tensor -> gradient_reduction_w_predivide, the bucket all-reduced in place.
TEST(ZeroGradReduction, WithoutReduceScatterTheBucketIsAllReducedInPlace) {
  for (int stage : {1, 2}) expect_deepspeed_calls(stage, {false, true, true, false, kBucket});
}

// contiguous_gradients: false: reduce_ipg_grads -> buffered_reduce_fallback: all-reduce of the cat-ed
// gradients and a copy back of each on every rank, whatever reduce_scatter says.
TEST(ZeroGradReduction, WithoutContiguousGradientsEveryRankAllReducesAndCopiesBackEachGradient) {
  for (bool rs : {true, false}) expect_deepspeed_calls(2, {rs, true, false, false, kBucket});
}

// round_robin_gradients: the flat buffer deals tensors to ranks in turn, so consecutive gradients in a
// bucket belong to different ranks: more slices, more copies, and more reduces without the multi-rank key.
TEST(ZeroGradReduction, RoundRobinGradientsSpreadEachBucketOverManyOwners) {
  for (bool multi : {true, false}) expect_deepspeed_calls(2, {true, multi, true, true, kBucket});
  const Keys rr{true, false, true, true, kBucket}, plain{true, false, true, false, kBucket};
  auto reduces = [](const Keys& k) {
    const auto calls = schedule_calls(make_schedule(small(2, k), make_plan(small(2, k))));
    return std::count_if(calls.begin(), calls.end(), [](const std::string& c) { return c.rfind("reduce ", 0) == 0; });
  };
  EXPECT_GT(reduces(rr), reduces(plain));
}

// A gradient larger than reduce_bucket_size is reduced alone (extra_large_param_to_reduce), its slices
// chunked by allreduce_and_scatter: a chunk is sent once it exceeds the bucket size.
TEST(ZeroGradReduction, AGradientLargerThanTheBucketIsSentInChunksOfSlices) {
  const Keys k{true, true, true, false, 100'000};
  expect_deepspeed_calls(2, k);
  const Schedule sch = make_schedule(small(2, k), make_plan(small(2, k)));
  int larger = 0;  // all-reduces of more than the bucket: the large gradients, each on its own
  for (const Op& op : sch.ops)
    larger += op.kind == OpKind::collective && op.phase == Phase::backward && op.collective.bytes > kBf16 * k.bucket;
  EXPECT_GT(larger, 0);
}

// Stage 1 without overlap_comm: reduce_gradients walks the parameters in model order after the backward,
// so the buckets fill from the embedding on.
TEST(ZeroGradReduction, Stage1WithoutOverlapFillsBucketsInModelOrder) {
  const Keys k{true, true, true, false, kBucket};
  Scenario s = small(1, k);
  s.zero.overlap_comm = false;
  const Plan p = make_plan(s);
  const auto numel = model_order_numels(p);
  std::vector<int> forward(numel.size());
  for (size_t i = 0; i < numel.size(); ++i) forward[i] = static_cast<int>(i);
  EXPECT_EQ(schedule_calls(make_schedule(s, p)), deepspeed_calls(numel, forward, p.dp, k));
}

// Every combination of the reduction keys with overlap, accumulation and optimizer offload builds a
// schedule that passes the structural checks (flat buffers freed, roots and copy ranks in range).
TEST(ZeroGradReduction, EveryCombinationOfTheKeysPassesCheckSchedule) {
  for (int stage : {1, 2})
    for (bool overlap : {false, true})
      for (OffloadDevice off : {OffloadDevice::none, OffloadDevice::cpu})
        for (int bits = 0; bits < 16; ++bits) {
          Scenario s = small(stage, {(bits & 1) != 0, (bits & 2) != 0, (bits & 4) != 0, (bits & 8) != 0, kBucket});
          s.zero.overlap_comm = overlap;
          s.zero.offload_optimizer.device = off;
          s.training.grad_accum = 2;
          EXPECT_NO_THROW(check_schedule(make_schedule(s, make_plan(s), 2))) << stage << overlap << bits;
        }
}
