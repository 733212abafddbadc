// Offload pieces of a measured step and its exposed offload time, on a hand-made step whose answer is worked out
// in the test.
#include "runtime/exec/offload_figures.hpp"

#include <gtest/gtest.h>

namespace zrun {
namespace {

using zsim::CopyKind;
using zsim::Op;
using zsim::OpKind;

struct Step {
  zsim::Schedule s;
  std::vector<zsim::OpId> ids;
  std::vector<OpInterval> times;
  void add(Op op, double a, double b) {
    op.id = static_cast<zsim::OpId>(s.ops.size());
    ids.push_back(op.id);
    s.ops.push_back(op);
    times.push_back({a, b});
  }
  static Op copy(CopyKind k, zsim::Bytes bytes, int rank = -1) {
    Op op;
    op.kind = OpKind::copy;
    op.copy.what = k;
    op.copy.bytes = bytes;
    op.copy.rank = rank;
    return op;
  }
  static Op compute(zsim::ComputeKind k, zsim::Device d, zsim::Elements elements = 0) {
    Op op;
    op.kind = OpKind::compute;
    op.compute.what = k;
    op.compute.device = d;
    op.compute.elements = elements;
    return op;
  }
};

TEST(OffloadFigures, CopiesCountTheirBytesAndTimeAndOnlyTheRanksOwnCopies) {
  Step st;
  st.add(Step::copy(CopyKind::d2h, 100), 0.5, 2.0);
  st.add(Step::copy(CopyKind::d2h, 50, 1), 0.0, 10.0);  // rank 1's copy: rank 0 skips it
  st.add(Step::copy(CopyKind::h2d, 30), 3.0, 3.5);
  st.add(Step::copy(CopyKind::nvme_read, 4096), 1.5, 2.5);
  st.add(Step::copy(CopyKind::nvme_write, 4096), 0, 0);  // did not run
  st.add(Step::compute(zsim::ComputeKind::optimizer, zsim::Device::cpu, 10), 2.0, 3.0);
  const OffloadFigures f = offload_figures(st.s, st.ids, st.times, 0);
  EXPECT_EQ(f.d2h.ops, 1);
  EXPECT_EQ(f.d2h.bytes, 100);
  EXPECT_DOUBLE_EQ(f.d2h.seconds, 1.5);
  EXPECT_EQ(f.h2d.bytes, 30);
  EXPECT_EQ(f.nvme_read.ops, 1);
  EXPECT_EQ(f.nvme_write.ops, 0);
  EXPECT_EQ(f.cpu_optimizer.elements, 10);
  EXPECT_DOUBLE_EQ(f.cpu_optimizer.per_s(), 10.0);
}

// Offload copies run over [0.5, 2.5] and [3, 3.5]; compute over [0, 1], the CPU optimizer over [2, 3]: exposed are
// [1, 2] and [3, 3.5].
TEST(OffloadFigures, ExposedOffloadIsCopyTimeThatNoComputeOptimizerOrCollectiveCovers) {
  Step st;
  st.add(Step::compute(zsim::ComputeKind::forward, zsim::Device::gpu), 0.0, 1.0);
  st.add(Step::copy(CopyKind::d2h, 100), 0.5, 2.0);
  st.add(Step::copy(CopyKind::nvme_read, 4096), 1.5, 2.5);
  st.add(Step::compute(zsim::ComputeKind::optimizer, zsim::Device::cpu, 10), 2.0, 3.0);
  st.add(Step::copy(CopyKind::h2d, 30), 3.0, 3.5);
  EXPECT_DOUBLE_EQ(offload_figures(st.s, st.ids, st.times, 0).exposed_s, 1.5);
}

TEST(OffloadFigures, AStepWithoutOffloadHasNone) {
  Step st;
  st.add(Step::compute(zsim::ComputeKind::forward, zsim::Device::gpu), 0.0, 1.0);
  st.add(Step::copy(CopyKind::d2d, 100), 1.0, 2.0);
  const OffloadFigures f = offload_figures(st.s, st.ids, st.times, 0);
  EXPECT_FALSE(f.any());
  EXPECT_EQ(f.exposed_s, 0);
}

}  // namespace
}  // namespace zrun
