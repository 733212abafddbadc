// The calls DeepSpeed's ZeRO-1/2 optimizer (deepspeed/runtime/zero/stage_1_and_2.py,
// DeepSpeedZeroOptimizer) makes to reduce one gradient bucket, for each setting of reduce_scatter,
// use_multi_rank_bucket_allreduce, contiguous_gradients and round_robin_gradients. Pure: the schedule
// builder turns each call into ops (flatten copy, collective, copy-outs); tests compare against it.
#pragma once
#include <vector>

#include "sim/common/units.hpp"
#include "sim/plan/plan.hpp"
#include "sim/schedule/schedule.hpp"

namespace zsim {

// Where each gradient lives in DeepSpeed's flat 16-bit buffer and which rank owns which range.
// DeepSpeed flattens the tensors in model order (round_robin_gradients: tensor i goes to list i mod N,
// the lists concatenated: _round_robin_reorder), pads the total to a multiple of 2N
// (nccl_start_alignment_factor x dp) and gives rank r elements [r P, (r+1) P), P = padded total / N.
struct FlatGradLayout {
  std::vector<Elements> offset;  // per tensor in model order (units forward, tensors in order)
  std::vector<Elements> numel;   // per tensor in model order
  Elements partition = 0;        // P
  int ranks = 1;
};
FlatGradLayout flat_grad_layout(const Plan& p, bool round_robin);

// Elements [first, first + elements) of the gradient of tensor `tensor` (an ordinal, model order).
struct GradPiece {
  int tensor = 0;
  Elements first = 0;
  Elements elements = 0;
  bool operator==(const GradPiece&) const = default;
};

// A run of consecutive bucket elements that one rank owns (average_tensor's rank_and_offsets entry), or one
// gradient (buffered_reduce_fallback, owner -1); `pieces` say which gradient elements it holds, in order.
struct GradSlice {
  int owner = 0;
  Elements elements = 0;
  std::vector<GradPiece> pieces;
};

// One collective call with what surrounds it in allreduce_bucket / allreduce_and_copy*.
struct ReductionCall {
  CollectiveKind kind = CollectiveKind::all_reduce;  // all_reduce or reduce
  int root = -1;                 // reduce: the owner that receives the sum
  Elements elements = 0;         // the collective's buffer
  bool flatten = false;          // the inputs are torch.cat-ed into a new flat buffer first (more than one)
  std::vector<GradSlice> copy_out;  // copied back from the flat buffer after the collective; owner -1: all ranks
  std::vector<GradPiece> pieces;    // the gradient elements the call reduces, in the order of its buffer
};

struct ReductionSettings {
  bool reduce_scatter = true;
  bool multi_rank_bucket_allreduce = true;
  bool contiguous_gradients = true;  // forced on by CPU offload, as DeepSpeed does
  Elements reduce_bucket_size = 500'000'000;
};

// The ordinal (model order) of each tensor of the plan's buckets: bucket i's tensors, in its order.
std::vector<std::vector<int>> bucket_tensor_ordinals(const Plan& p);

// Buckets as reduce_independent_p_g_buckets_and_remove_grads fills them when gradients arrive in the
// order `tensors` (ordinals): a bucket is reduced before a tensor that would overflow reduce_bucket_size.
std::vector<std::vector<int>> fill_buckets(const std::vector<int>& tensors, const FlatGradLayout& layout,
                                           Elements reduce_bucket_size);

// DeepSpeed's calls for one bucket holding `tensors` (ordinals, in the order they entered it):
// reduce_ipg_grads -> average_tensor (contiguous_gradients) or buffered_reduce_fallback (not).
std::vector<ReductionCall> bucket_reduction_calls(const std::vector<int>& tensors, const FlatGradLayout& layout,
                                                  const ReductionSettings& s);

}  // namespace zsim
