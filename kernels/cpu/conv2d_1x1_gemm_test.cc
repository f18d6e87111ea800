// 1x1 direct-GEMM conv2d against the reference: both layouts, groups, every epilogue, FP16/BF16, batches whose
// NHWC rows span images, and the problems it must decline.
#include "kernels/cpu/conv2d_1x1_gemm.h"

#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "kernels/cpu/conv2d_test_harness.h"

namespace convoy::cpu {
namespace {

using ::convoy::cpu::testing::CheckConv2dAgainstReference;
using ::convoy::cpu::testing::Conv;
using ::convoy::cpu::testing::EpiloguesToTest;
using ::convoy::testing::IsOk;
using ::convoy::testing::StatusIs;
using ::convoy::testing::Tolerance;

constexpr Tolerance kFp32{1e-4, 1e-4};

template <typename AlgorithmT>
void CheckAllShapes(Layout layout) {
  const AlgorithmT algorithm;
  uint32_t seed = 300;
  for (Conv2dProblem p : {Conv(1, 16, 7, 7, 24, 1, 1, 1, 0, 1, 1, layout), Conv(3, 33, 5, 9, 17, 1, 1, 1, 0, 1, 1, layout),
                          Conv(2, 24, 6, 6, 36, 1, 1, 1, 0, 1, 3, layout), Conv(1, 64, 30, 30, 8, 1, 1, 1, 0, 1, 1, layout),
                          Conv(2, 3, 80, 70, 5, 1, 1, 1, 0, 2, 1, layout)}) {
    for (const Epilogue& e : EpiloguesToTest()) {
      p.epilogue = e;
      EXPECT_THAT(CheckConv2dAgainstReference(algorithm, p, kFp32, seed++), IsOk());
      p.dtype = DataType::kFloat16;
      EXPECT_THAT(CheckConv2dAgainstReference(algorithm, p, Tolerance{2e-3, 2e-3}, seed++), IsOk());
      p.dtype = DataType::kBFloat16;
      EXPECT_THAT(CheckConv2dAgainstReference(algorithm, p, Tolerance{1e-2, 1e-2}, seed++), IsOk());
      p.dtype = DataType::kFloat32;
    }
  }
}

TEST(Conv2d1x1GemmTest, NchwMatchesReference) { CheckAllShapes<Conv2d1x1GemmNchw>(Layout::kNCHW); }
TEST(Conv2d1x1GemmTest, NhwcMatchesReference) { CheckAllShapes<Conv2d1x1GemmNhwc>(Layout::kNHWC); }

TEST(Conv2d1x1GemmTest, DeclinesFiltersStridesAndPadding) {
  for (const Conv2dProblem& p : {Conv(1, 4, 5, 5, 4, 3, 3, 1, 1), Conv(1, 4, 6, 6, 4, 1, 1, 2, 0),
                                 Conv(1, 4, 5, 5, 4, 1, 1, 1, 1)}) {
    EXPECT_THAT(Conv2d1x1GemmNchw().CanImplement(p),
                StatusIs(absl::StatusCode::kUnimplemented, ::testing::HasSubstr("1x1")));
  }
}

TEST(Conv2d1x1GemmTest, Fp32NeedsNoWorkspaceAndNoPackedFilter) {
  const Conv2dProblem p = Conv(1, 64, 14, 14, 64, 1, 1, 1, 0);
  EXPECT_EQ(Conv2d1x1GemmNchw().WorkspaceBytes(p), 0u);
  EXPECT_EQ(Conv2d1x1GemmNchw().PackedFilterBytes(p), 0u);
}

}  // namespace
}  // namespace convoy::cpu
