// On the GPU machine: the communicators of a world of one rank, split per schedule group, carry an
// all-reduce through the wrapper. Skips with a message where there is no GPU (CI).
#include "runtime/comm/communicators.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "kernels/tests/gpu_test_util.hpp"
#include "runtime/comm/check.hpp"

namespace zrun {
namespace {

TEST(CommunicatorsGpu, OneRankWorldAndGroupsAllReduceThroughTheWrapper) {
  ZK_REQUIRE_GPU();
  ZRUN_CUDA_CHECK(cudaSetDevice(0));
  const std::vector<zsim::ProcessGroup> groups = {
      {"world", 1, 1, 1}, {"hpz", 1, 1, 1}, {"intra_node", 1, 1, 1}, {"inter_node", 1, 1, 1}};
  Communicators comms(0, 1, 1, unique_id_from_bytes(new_unique_id_bytes()), groups);
  ASSERT_EQ(comms.group_count(), groups.size());
  cudaStream_t stream;
  ZRUN_CUDA_CHECK(cudaStreamCreate(&stream));
  std::vector<float> host(1000);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = 0.5f * static_cast<float>(i);
  zk::test::DeviceBuffer<float> buf(host);
  for (std::size_t g = 0; g < groups.size(); ++g) comms.all_reduce_sum(buf.get(), host.size(), static_cast<int>(g), stream);
  ZRUN_CUDA_CHECK(cudaStreamSynchronize(stream));
  EXPECT_EQ(buf.download(), host);  // a sum over one rank is the identity
  EXPECT_FALSE(comms.poll_async_error().has_value());
  ZRUN_CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST(CommunicatorsGpu, ABadNcclCallIsAnErrorNamingTheCallFileAndLine) {
  ZK_REQUIRE_GPU();
  try {
    ZRUN_NCCL_CHECK(ncclCommInitRank(nullptr, 0, ncclUniqueId{}, 0));
    FAIL() << "no error";
  } catch (const DeviceError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("ncclCommInitRank"), std::string::npos) << m;
    EXPECT_NE(m.find("communicators_gpu_test.cpp:"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace zrun
