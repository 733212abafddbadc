// qgZ int4 kernels (skipped without a GPU): swizzled quantization layout and error, int4 round trip,
// dequant-reduce-requant, and a whole two-level qgZ reduce-scatter emulated on one GPU.
#include <gtest/gtest.h>
#include <cmath>
#include <cstring>
#include <random>
#include "kernels/int4_pack.hpp"
#include "kernels/qgz_quant.hpp"
#include "kernels/tests/gpu_test_util.hpp"
#include "kernels/tests/reference.hpp"

namespace zk {
namespace {

using test::DeviceBuffer;

// Host view of one rank's swizzled output: value of element e of partition p.
double swizzled_value(const std::vector<uint8_t>& q, const std::vector<float>& steps, const QgzShape& s, int64_t p,
                      int64_t e) {
  const int64_t slot = qgz_swizzled_slot(p, s.nodes, s.devices_per_node);
  const int64_t P = s.partition_elems();
  return unpack_int4(q.data() + slot * (P / 2), e) * static_cast<double>(steps[slot * s.blocks_per_partition() + e / s.block_elems]);
}

void check_swizzled(const QgzShape& s, Half16 fmt, uint64_t seed) {
  SCOPED_TRACE("n=" + std::to_string(s.n) + " nodes=" + std::to_string(s.nodes) + " dpn=" +
               std::to_string(s.devices_per_node) + " block=" + std::to_string(s.block_elems));
  const bool bf16 = fmt == Half16::bf16;
  std::mt19937_64 rng(seed);
  const auto h = ref::random_half16(rng, s.n, bf16);
  const auto x = ref::to_double(h, bf16);
  const int64_t P = s.partition_elems(), nb = s.blocks_per_partition();
  DeviceBuffer<uint16_t> in(h);
  DeviceBuffer<uint8_t> q(s.world() * P / 2);
  DeviceBuffer<float> steps(s.world() * nb);
  qgz_swizzled_quantize(in.get(), fmt, s, q.get(), steps.get(), nullptr);
  const auto qh = q.download();
  const auto sh = steps.download();
  for (int64_t p = 0; p < s.world(); ++p)
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t slot = qgz_swizzled_slot(p, s.nodes, s.devices_per_node);
      const int64_t len = std::min(s.block_elems, P - b * s.block_elems);
      const double want = ref::block_step(x.data() + p * P + b * s.block_elems, len, kInt4Max);
      ASSERT_NEAR(sh[slot * nb + b], want, 1e-6 * want) << "partition " << p << " block " << b;
      for (int64_t e = b * s.block_elems; e < b * s.block_elems + len; ++e) {
        const double step = sh[slot * nb + b];
        ASSERT_LE(std::fabs(swizzled_value(qh, sh, s, p, e) - x[p * P + e]), 0.5 * step * (1 + 1e-5) + 1e-30)
            << "partition " << p << " element " << e;
      }
    }
}

TEST(QgzGpu, SwizzledQuantizeLaysPartitionsOutBySlotWithinHalfStep) {
  ZK_REQUIRE_GPU();
  uint64_t seed = 1;
  check_swizzled({16, 1, 1, 2048}, Half16::bf16, seed++);              // tiny, one partition
  check_swizzled({2, 1, 1, 2}, Half16::fp16, seed++);                  // smallest legal tensor
  check_swizzled({8 * 2 * 1001, 2, 4, 2048}, Half16::bf16, seed++);   // P = 2002, not a multiple of 8
  check_swizzled({8 * 5000, 2, 4, 2048}, Half16::fp16, seed++);       // P not a multiple of the block
  check_swizzled({16 * 4096, 2, 8, 1000}, Half16::bf16, seed++);      // block not a power of two
  check_swizzled({(1 << 22), 4, 8, 2048}, Half16::bf16, seed++);      // large
}

TEST(QgzGpu, Int4ValuesRoundTripExactlyThroughDeviceUnpack) {
  ZK_REQUIRE_GPU();
  // Every int4 value in every nibble position, packed on the host, unpacked by the dequant-reduce kernel
  // with k = 1 and a step of 1: the output equals the integer exactly.
  std::vector<uint8_t> bytes;
  std::vector<float> expect;
  for (int lo = -7; lo <= 7; ++lo)
    for (int hi = -7; hi <= 7; ++hi) {
      bytes.push_back(pack_int4_pair(lo, hi));
      expect.push_back(static_cast<float>(lo));
      expect.push_back(static_cast<float>(hi));
    }
  const int64_t P = static_cast<int64_t>(expect.size());  // 450
  DeviceBuffer<uint8_t> q(bytes);
  DeviceBuffer<float> steps(std::vector<float>(1, 1.0f));
  DeviceBuffer<float> out(P);
  qgz_dequant_reduce(q.get(), steps.get(), 1, P, 450, 1.0f, out.get(), OutFormat::f32, nullptr);
  EXPECT_EQ(out.download(), expect);
}

// Random int4 chunks with random steps: k chunks of m partitions of P.
struct Chunks { std::vector<uint8_t> q; std::vector<float> steps; };
Chunks random_chunks(std::mt19937_64& rng, int k, int m, int64_t P, int64_t block) {
  const int64_t nb = (P + block - 1) / block;
  std::uniform_int_distribution<int> v(-7, 7);
  std::uniform_real_distribution<float> st(0.01f, 1.0f);
  Chunks c;
  c.q.resize(static_cast<size_t>(k) * m * P / 2);
  for (auto& b : c.q) b = pack_int4_pair(v(rng), v(rng));
  c.steps.resize(static_cast<size_t>(k) * m * nb);
  for (auto& s : c.steps) s = st(rng);
  return c;
}

// Exact sum over k chunks of element e of partition j.
double chunk_sum(const Chunks& c, int k, int m, int64_t P, int64_t block, int64_t j, int64_t e) {
  const int64_t nb = (P + block - 1) / block;
  double acc = 0;
  for (int t = 0; t < k; ++t)
    acc += unpack_int4(c.q.data() + (static_cast<int64_t>(t) * m + j) * (P / 2), e) *
           static_cast<double>(c.steps[(static_cast<int64_t>(t) * m + j) * nb + e / block]);
  return acc;
}

void check_reduce_requant(int k, int m, int64_t P, int64_t block, uint64_t seed) {
  SCOPED_TRACE("k=" + std::to_string(k) + " m=" + std::to_string(m) + " P=" + std::to_string(P) + " block=" + std::to_string(block));
  std::mt19937_64 rng(seed);
  const auto c = random_chunks(rng, k, m, P, block);
  const int64_t nb = (P + block - 1) / block;
  DeviceBuffer<uint8_t> qin(c.q);
  DeviceBuffer<float> sin(c.steps);
  DeviceBuffer<uint8_t> qout(m * P / 2);
  DeviceBuffer<float> sout(m * nb);
  qgz_dequant_reduce_requant(qin.get(), sin.get(), k, m, P, block, qout.get(), sout.get(), nullptr);
  const auto qo = qout.download();
  const auto so = sout.download();
  for (int64_t j = 0; j < m; ++j)
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t len = std::min(block, P - b * block);
      std::vector<double> sums(len);
      for (int64_t e = 0; e < len; ++e) sums[e] = chunk_sum(c, k, m, P, block, j, b * block + e);
      const double want = ref::block_step(sums.data(), len, kInt4Max);
      const double step = so[j * nb + b];
      ASSERT_NEAR(step, want, 1e-5 * want + 1e-30) << "partition " << j << " block " << b;
      for (int64_t e = 0; e < len; ++e) {
        const double got = unpack_int4(qo.data() + j * (P / 2), b * block + e) * step;
        ASSERT_LE(std::fabs(got - sums[e]), 0.5 * step * (1 + 1e-4) + 1e-30) << "partition " << j << " elem " << e;
      }
    }
}

TEST(QgzGpu, DequantReduceRequantSumsChunksWithinHalfOutputStep) {
  ZK_REQUIRE_GPU();
  check_reduce_requant(1, 1, 2, 2, 1);
  check_reduce_requant(4, 2, 2002, 2048, 2);
  check_reduce_requant(8, 2, 5000, 2048, 3);
  check_reduce_requant(8, 4, 4096, 1000, 4);
  check_reduce_requant(16, 1, 1 << 20, 2048, 5);
}

// P and block multiples of 32 take the 16-byte path: k = 2, 4, 8 compiled in (every chunk's load issued
// first), other k at run time; a 16384-element block is wider than one pass of 256 threads.
TEST(QgzGpu, DequantReduceRequantVectorPathForEachChunkCount) {
  ZK_REQUIRE_GPU();
  check_reduce_requant(2, 3, 4096, 512, 21);
  check_reduce_requant(4, 2, 8192, 4096, 22);
  check_reduce_requant(8, 2, 1 << 16, 2048, 23);
  check_reduce_requant(8, 1, 3 * 16384, 16384, 24);
  check_reduce_requant(3, 2, 4096 + 32, 2048, 25);  // last block of 32 elements
}

TEST(QgzGpu, FinalDequantReduceVectorPathForEachChunkCount) {
  ZK_REQUIRE_GPU();
  for (int k : {2, 3, 8}) {
    SCOPED_TRACE("k=" + std::to_string(k));
    const int64_t P = (1 << 16) + 32, block = 2048;
    std::mt19937_64 rng(100 + k);
    const auto c = random_chunks(rng, k, 1, P, block);
    DeviceBuffer<uint8_t> qin(c.q);
    DeviceBuffer<float> sin(c.steps);
    DeviceBuffer<float> out32(P);
    DeviceBuffer<uint16_t> out16(P);
    qgz_dequant_reduce(qin.get(), sin.get(), k, P, block, 0.25f, out32.get(), OutFormat::f32, nullptr);
    qgz_dequant_reduce(qin.get(), sin.get(), k, P, block, 0.25f, out16.get(), OutFormat::fp16, nullptr);
    const auto o32 = out32.download();
    const auto o16 = out16.download();
    for (int64_t e = 0; e < P; ++e) {
      const double want = 0.25 * chunk_sum(c, k, 1, P, block, 0, e);
      ASSERT_NEAR(o32[e], want, 1e-6 * (std::fabs(want) + 1)) << "e=" << e;
      ASSERT_NEAR(fp16_to_float(o16[e]), want, std::fabs(want) / 2048 + 1e-6) << "e=" << e;
    }
  }
}

TEST(QgzGpu, FinalDequantReduceScalesTheSumIntoEachOutputFormat) {
  ZK_REQUIRE_GPU();
  for (int64_t P : {int64_t{2}, int64_t{1002}, int64_t{1 << 20}}) {
    const int k = 4;
    const int64_t block = 2048;
    std::mt19937_64 rng(P);
    const auto c = random_chunks(rng, k, 1, P, block);
    DeviceBuffer<uint8_t> qin(c.q);
    DeviceBuffer<float> sin(c.steps);
    DeviceBuffer<float> out32(P);
    DeviceBuffer<uint16_t> out16(P);
    qgz_dequant_reduce(qin.get(), sin.get(), k, P, block, 0.125f, out32.get(), OutFormat::f32, nullptr);
    qgz_dequant_reduce(qin.get(), sin.get(), k, P, block, 0.125f, out16.get(), OutFormat::bf16, nullptr);
    const auto o32 = out32.download();
    const auto o16 = out16.download();
    for (int64_t e = 0; e < P; ++e) {
      const double want = 0.125 * chunk_sum(c, k, 1, P, block, 0, e);
      ASSERT_NEAR(o32[e], want, 1e-6 * (std::fabs(want) + 1)) << "P=" << P << " e=" << e;
      ASSERT_NEAR(bf16_to_float(o16[e]), want, std::fabs(want) / 256 + 1e-6) << "P=" << P << " e=" << e;
    }
  }
}

// Whole qgZ reduce-scatter of `world` ranks' gradients, all-to-alls emulated by copies on one GPU.
TEST(QgzGpu, TwoLevelPipelineGivesEachRankTheMeanOfItsPartition) {
  ZK_REQUIRE_GPU();
  const int nodes = 2, dpn = 4, world = nodes * dpn;
  const QgzShape s{int64_t{world} * 2 * 3000, nodes, dpn, 2048};
  const int64_t P = s.partition_elems(), nb = s.blocks_per_partition(), pb = P / 2;
  std::mt19937_64 rng(99);
  std::vector<std::vector<double>> grads(world);
  std::vector<std::vector<uint8_t>> q1(world);
  std::vector<std::vector<float>> s1(world);
  for (int r = 0; r < world; ++r) {  // stage 1 on every rank: swizzled quantize
    const auto h = ref::random_half16(rng, s.n, true);
    grads[r] = ref::to_double(h, true);
    DeviceBuffer<uint16_t> in(h);
    DeviceBuffer<uint8_t> q(world * pb);
    DeviceBuffer<float> st(world * nb);
    qgz_swizzled_quantize(in.get(), Half16::bf16, s, q.get(), st.get(), nullptr);
    q1[r] = q.download();
    s1[r] = st.download();
  }
  // Intra-node all-to-all: rank (a,d) gets from each local peer (a,d') that peer's chunk d (slots d*nodes..).
  std::vector<std::vector<uint8_t>> q2(world);
  std::vector<std::vector<float>> s2(world);
  for (int a = 0; a < nodes; ++a)
    for (int d = 0; d < dpn; ++d) {
      std::vector<uint8_t> rq;
      std::vector<float> rs;
      for (int dp = 0; dp < dpn; ++dp) {
        const int peer = a * dpn + dp;
        rq.insert(rq.end(), q1[peer].begin() + d * nodes * pb, q1[peer].begin() + (d + 1) * nodes * pb);
        rs.insert(rs.end(), s1[peer].begin() + d * nodes * nb, s1[peer].begin() + (d + 1) * nodes * nb);
      }
      DeviceBuffer<uint8_t> qin(rq);
      DeviceBuffer<float> sin(rs);
      DeviceBuffer<uint8_t> qout(nodes * pb);
      DeviceBuffer<float> sout(nodes * nb);
      qgz_dequant_reduce_requant(qin.get(), sin.get(), dpn, nodes, P, s.block_elems, qout.get(), sout.get(), nullptr);
      q2[a * dpn + d] = qout.download();
      s2[a * dpn + d] = sout.download();
    }
  // Inter-node all-to-all: rank (a,d) gets partition a from every (a',d); then the final dequant-reduce.
  for (int a = 0; a < nodes; ++a)
    for (int d = 0; d < dpn; ++d) {
      const int r = a * dpn + d;
      std::vector<uint8_t> rq;
      std::vector<float> rs;
      std::vector<double> bound(P, 0.0);
      for (int ap = 0; ap < nodes; ++ap) {
        const int src = ap * dpn + d;
        rq.insert(rq.end(), q2[src].begin() + a * pb, q2[src].begin() + (a + 1) * pb);
        rs.insert(rs.end(), s2[src].begin() + a * nb, s2[src].begin() + (a + 1) * nb);
        for (int64_t e = 0; e < P; ++e) bound[e] += 0.5 * s2[src][a * nb + e / s.block_elems];
      }
      DeviceBuffer<uint8_t> qin(rq);
      DeviceBuffer<float> sin(rs);
      DeviceBuffer<float> out(P);
      qgz_dequant_reduce(qin.get(), sin.get(), nodes, P, s.block_elems, 1.0f / world, out.get(), OutFormat::f32, nullptr);
      const auto o = out.download();
      for (int64_t e = 0; e < P; ++e) {
        double mean = 0.0, b = bound[e];
        for (int src = 0; src < world; ++src) {
          mean += grads[src][r * P + e];
          const int64_t slot = qgz_swizzled_slot(r, nodes, dpn);
          b += 0.5 * s1[src][slot * nb + e / s.block_elems];
        }
        mean /= world;
        ASSERT_LE(std::fabs(o[e] - mean), b / world * (1 + 1e-4) + 1e-6) << "rank " << r << " element " << e;
      }
    }
}

// A peer-major bucket: each chunk of a tensor at a stride of its own (the bucket's bytes per peer). Every kernel, given
// the strides, writes and reads exactly the bytes it writes and reads back to back, and leaves the gaps alone.
TEST(QgzGpu, ChunkStridesPlaceEachChunkWhereTheBackToBackLayoutHasIt) {
  ZK_REQUIRE_GPU();
  const int nodes = 2, dpn = 2, world = nodes * dpn;
  for (const bool loco : {false, true})
    for (const int64_t block : {int64_t{512}, int64_t{2048}}) {  // the warp kernel and the block kernel
      SCOPED_TRACE(std::string(loco ? "LoCo" : "plain") + " block " + std::to_string(block));
      const QgzShape s{int64_t{world} * 2 * 4096, nodes, dpn, block};
      const int64_t P = s.partition_elems(), nb = s.blocks_per_partition(), pb = P / 2;
      std::mt19937_64 rng(7);
      const auto h = ref::random_half16(rng, s.n, true);
      DeviceBuffer<uint16_t> in(h);
      // Quantize: dpn chunks of nodes partitions, back to back and at a stride of 3 chunks' bytes (+ 16).
      const int64_t qc = nodes * pb, sc = nodes * nb, q_stride = 3 * qc + 16, s_stride = 3 * sc + 4;
      DeviceBuffer<uint8_t> q(dpn * qc), qs(dpn * q_stride);
      DeviceBuffer<float> st(dpn * sc), sts(dpn * s_stride);
      const std::vector<uint8_t> q_fill(dpn * q_stride, 0xAB);
      const std::vector<float> s_fill(dpn * s_stride, -1.0f);
      qs.upload(q_fill);
      sts.upload(s_fill);
      const std::vector<uint16_t> zero(s.n, 0);
      DeviceBuffer<uint16_t> e1(zero), e2(zero);
      if (loco) {
        qgz_swizzled_quantize_loco(in.get(), Half16::bf16, e1.get(), LocoParams{0.8f, 0, 1}, s, q.get(), st.get(), nullptr);
        qgz_swizzled_quantize_loco(in.get(), Half16::bf16, e2.get(), LocoParams{0.8f, 0, 1}, s, qs.get(), sts.get(),
                                   nullptr, QgzChunks{q_stride, s_stride});
      } else {
        qgz_swizzled_quantize(in.get(), Half16::bf16, s, q.get(), st.get(), nullptr);
        qgz_swizzled_quantize(in.get(), Half16::bf16, s, qs.get(), sts.get(), nullptr, QgzChunks{q_stride, s_stride});
      }
      const auto qh = q.download(), qsh = qs.download();
      const auto sh = st.download(), ssh = sts.download();
      for (int64_t c = 0; c < dpn; ++c) {
        for (int64_t i = 0; i < q_stride; ++i)
          ASSERT_EQ(qsh[c * q_stride + i], i < qc ? qh[c * qc + i] : 0xAB) << "chunk " << c << " byte " << i;
        for (int64_t i = 0; i < s_stride; ++i)
          ASSERT_EQ(ssh[c * s_stride + i], i < sc ? sh[c * sc + i] : -1.0f) << "chunk " << c << " step " << i;
      }
      EXPECT_EQ(e1.download(), e2.download());
      // Reduce-requant: the dpn chunks at their stride in, nodes partitions out at a stride of 2 partitions' bytes.
      const int64_t oq = 2 * pb + 32, os = 2 * nb + 8;
      DeviceBuffer<uint8_t> o(nodes * pb), os_q(nodes * oq);
      DeviceBuffer<float> ost(nodes * nb), os_s(nodes * os);
      DeviceBuffer<uint16_t> r1(std::vector<uint16_t>(nodes * P, 0)), r2(std::vector<uint16_t>(nodes * P, 0));
      if (loco) {
        qgz_dequant_reduce_requant_loco(q.get(), st.get(), dpn, nodes, P, block, r1.get(), Half16::bf16,
                                        LocoParams{0.5f, 0, 3}, o.get(), ost.get(), nullptr);
        qgz_dequant_reduce_requant_loco(qs.get(), sts.get(), dpn, nodes, P, block, r2.get(), Half16::bf16,
                                        LocoParams{0.5f, 0, 3}, os_q.get(), os_s.get(), nullptr,
                                        QgzChunks{q_stride, s_stride}, QgzChunks{oq, os});
      } else {
        qgz_dequant_reduce_requant(q.get(), st.get(), dpn, nodes, P, block, o.get(), ost.get(), nullptr);
        qgz_dequant_reduce_requant(qs.get(), sts.get(), dpn, nodes, P, block, os_q.get(), os_s.get(), nullptr,
                                   QgzChunks{q_stride, s_stride}, QgzChunks{oq, os});
      }
      const auto oh = o.download(), osh = os_q.download();
      const auto oth = ost.download(), osth = os_s.download();
      for (int64_t j = 0; j < nodes; ++j) {
        for (int64_t i = 0; i < pb; ++i) ASSERT_EQ(osh[j * oq + i], oh[j * pb + i]) << "partition " << j;
        for (int64_t i = 0; i < nb; ++i) ASSERT_EQ(osth[j * os + i], oth[j * nb + i]) << "partition " << j;
      }
      EXPECT_EQ(r1.download(), r2.download());
      // Final dequant-reduce over the nodes partitions at their stride.
      DeviceBuffer<float> f1(P), f2(P);
      qgz_dequant_reduce(o.get(), ost.get(), nodes, P, block, 0.25f, f1.get(), OutFormat::f32, nullptr);
      qgz_dequant_reduce(os_q.get(), os_s.get(), nodes, P, block, 0.25f, f2.get(), OutFormat::f32, nullptr,
                         QgzChunks{oq, os});
      EXPECT_EQ(f1.download(), f2.download());
    }
}

TEST(QgzGpu, RejectsShapesDeepSpeedRejects) {
  ZK_REQUIRE_GPU();
  DeviceBuffer<uint16_t> in(24);
  DeviceBuffer<uint8_t> q(12);
  DeviceBuffer<float> st(8);
  EXPECT_THROW(qgz_swizzled_quantize(in.get(), Half16::bf16, QgzShape{24, 2, 4, 2}, q.get(), st.get(), nullptr),
               std::invalid_argument);  // 24 % (2*8) != 0
  EXPECT_THROW(qgz_swizzled_quantize(in.get(), Half16::bf16, QgzShape{16, 1, 1, 3}, q.get(), st.get(), nullptr),
               std::invalid_argument);  // odd block
}

}  // namespace
}  // namespace zk
