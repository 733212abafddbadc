// On the GPU machine: the executor's elementwise kernels (add in place, dtype casts) give exact results on exactly
// representable values at every length and alignment: the 16-byte packed path, the unaligned one-by-one path and the
// tail. Skips with a message where there is no GPU (CI).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/tests/gpu_test_util.hpp"
#include "runtime/comm/check.hpp"
#include "runtime/exec/elementwise.hpp"

namespace zrun {
namespace {

std::size_t size_of(ElemType t) { return t == ElemType::fp32 ? 4 : 2; }

// Small integers: exact in fp32, bf16 and fp16, and so are their sums below 256.
float value(std::int64_t i, int salt) { return static_cast<float>((i * (salt + 3) + salt) % 17); }

// Values of `t` at a device pointer, to and from host floats through the fp32 casts (exact on these values).
struct DeviceArray {
  void* base = nullptr;
  explicit DeviceArray(std::size_t bytes) { ZRUN_CUDA_CHECK(cudaMalloc(&base, bytes + 64)); }
  ~DeviceArray() { cudaFree(base); }
};

std::vector<float> to_host(ElemType t, const void* p, std::int64_t n) {
  DeviceArray f32(4 * n);
  convert(t, ElemType::fp32, f32.base, p, n, nullptr);
  std::vector<float> out(n);
  ZRUN_CUDA_CHECK(cudaMemcpy(out.data(), f32.base, 4 * n, cudaMemcpyDeviceToHost));
  return out;
}

void from_host(ElemType t, void* p, const std::vector<float>& v) {
  DeviceArray f32(4 * v.size());
  ZRUN_CUDA_CHECK(cudaMemcpy(f32.base, v.data(), 4 * v.size(), cudaMemcpyHostToDevice));
  convert(ElemType::fp32, t, p, f32.base, static_cast<std::int64_t>(v.size()), nullptr);
}

TEST(ElementwiseGpu, AddInPlaceIsExactAtEveryLengthAndAlignment) {
  ZK_REQUIRE_GPU();
  for (ElemType t : {ElemType::bf16, ElemType::fp16, ElemType::fp32})
    for (std::int64_t n : {1, 7, 8, 9, 1000003})
      for (int shift : {0, 1}) {  // elements off a 16-byte boundary, for dst and src alike
        const std::size_t e = size_of(t);
        DeviceArray a(e * (n + 1)), b(e * (n + 1));
        void* dst = static_cast<char*>(a.base) + shift * e;
        void* src = static_cast<char*>(b.base) + shift * e;
        std::vector<float> x(n), y(n);
        for (std::int64_t i = 0; i < n; ++i) x[i] = value(i, 1), y[i] = value(i, 2);
        from_host(t, dst, x);
        from_host(t, src, y);
        add_inplace(t, dst, src, n, nullptr);
        const std::vector<float> got = to_host(t, dst, n);
        for (std::int64_t i = 0; i < n; ++i)
          ASSERT_EQ(got[i], x[i] + y[i]) << "n " << n << " shift " << shift << " element " << i;
      }
  ZRUN_CUDA_CHECK(cudaDeviceSynchronize());
}

TEST(ElementwiseGpu, CastsBetweenEveryPairOfTypesAreExactOnRepresentableValues) {
  ZK_REQUIRE_GPU();
  const std::vector<ElemType> all{ElemType::fp32, ElemType::bf16, ElemType::fp16};
  for (ElemType from : all)
    for (ElemType to : all)
      for (std::int64_t n : {3, 8, 1000003})
        for (int shift : {0, 1}) {
          DeviceArray a(size_of(from) * (n + 1)), b(size_of(to) * (n + 1));
          void* src = static_cast<char*>(a.base) + shift * size_of(from);
          void* dst = static_cast<char*>(b.base) + shift * size_of(to);
          std::vector<float> x(n);
          for (std::int64_t i = 0; i < n; ++i) x[i] = value(i, 5);
          from_host(from, src, x);
          convert(from, to, dst, src, n, nullptr);
          const std::vector<float> got = to_host(to, dst, n);
          for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], x[i]) << "n " << n << " shift " << shift << " i " << i;
        }
}

}  // namespace
}  // namespace zrun
