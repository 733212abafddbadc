#include "sim/plan/deepspeed_step_kernels.hpp"

#include <gtest/gtest.h>

namespace zsim {
namespace {

TEST(DeepSpeedStepKernels, StagesOneAndTwoAddNormFlattenCastUnscaleAndWriteBack) {
  // bf16: the float64 copy and its norm 10 + 8, torch.cat 4, .to(fp32) 6, mul_ 8, the 16-bit copy 6.
  EXPECT_EQ(deepspeed_step_extra_bytes_per_param({1, false, false}, 2), 42);
  EXPECT_EQ(deepspeed_step_extra_bytes_per_param({2, false, false}, 2), 42);
}

TEST(DeepSpeedStepKernels, StagesOneAndTwoScaleWithTheTrainingDtype) {
  // fp32 training: 5 x 4 + 32.
  EXPECT_EQ(deepspeed_step_extra_bytes_per_param({2, false, false}, 4), 52);
}

TEST(DeepSpeedStepKernels, Bf16OptimizerAddsNormWriteBackAndClear) {
  EXPECT_EQ(deepspeed_step_extra_bytes_per_param({0, true, false}, 2), 14);
}

TEST(DeepSpeedStepKernels, StageThreeAddsNormUnscaleAndWriteBack) {
  // bf16: the float64 copy and its norm 10 + 8, mul_ 8, the 16-bit copy 6 (its flatten and cast are copies apart).
  EXPECT_EQ(deepspeed_step_extra_bytes_per_param({3, false, false, false}, 2), 32);
}

TEST(DeepSpeedStepKernels, StageThreeWithParametersOnTheCpuWritesNoSixteenBitPartitionOnTheGpu) {
  EXPECT_EQ(deepspeed_step_extra_bytes_per_param({3, false, false, true}, 2), 26);
}

TEST(DeepSpeedStepKernels, NothingBeyondAdamOnTheCpuOrWithoutBf16Optimizer) {
  EXPECT_EQ(deepspeed_step_extra_bytes_per_param({2, false, true}, 2), 0);
  EXPECT_EQ(deepspeed_step_extra_bytes_per_param({3, false, true}, 2), 0);
  EXPECT_EQ(deepspeed_step_extra_bytes_per_param({0, false, false}, 2), 0);
}

}  // namespace
}  // namespace zsim
