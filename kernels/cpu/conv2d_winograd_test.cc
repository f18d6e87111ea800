// Winograd F(2x2,3x3) and F(4x4,3x3) conv2d against the reference: sizes that are and are not multiples of the
// tile, several chunks, padding 0/1/asymmetric, every epilogue, FP16/BF16, and the problems it must decline.
#include "kernels/cpu/conv2d_winograd.h"

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

// The transforms add rounding on top of the GEMM's: with C*9 <= ~600 products of values in [-1, 1], F(2x2) stays
// within 1e-4 and F(4x4) (entries up to 8 in A^T, 1/24 in G) within 1e-3 of the double-precision reference.
template <typename AlgorithmT>
void CheckAllShapes(const Tolerance& tolerance) {
  const AlgorithmT algorithm;
  uint32_t seed = 700;
  std::vector<Conv2dProblem> shapes = {Conv(1, 8, 8, 8, 16, 3, 3, 1, 1), Conv(2, 5, 11, 13, 7, 3, 3, 1, 1),
                                       Conv(1, 16, 9, 10, 8, 3, 3, 1, 0), Conv(1, 64, 14, 14, 32, 3, 3, 1, 1),
                                       Conv(3, 3, 5, 3, 4, 3, 3, 1, 1)};
  Conv2dProblem asymmetric = Conv(1, 6, 10, 9, 6, 3, 3, 1, 0);
  asymmetric.pad_top = 2, asymmetric.pad_left = 1;
  shapes.push_back(asymmetric);
  for (Conv2dProblem p : shapes) {
    for (const Epilogue& e : EpiloguesToTest()) {
      p.epilogue = e;
      EXPECT_THAT(CheckConv2dAgainstReference(algorithm, p, tolerance, seed++), IsOk());
    }
    p.dtype = DataType::kFloat16;
    EXPECT_THAT(CheckConv2dAgainstReference(algorithm, p, Tolerance{3e-3, 3e-3}, seed++), IsOk());
    p.dtype = DataType::kBFloat16;
    EXPECT_THAT(CheckConv2dAgainstReference(algorithm, p, Tolerance{1e-2, 1e-2}, seed++), IsOk());
  }
}

TEST(Conv2dWinogradTest, F2x2MatchesReference) { CheckAllShapes<Conv2dWinogradF2x2>(Tolerance{1e-4, 1e-4}); }
TEST(Conv2dWinogradTest, F4x4MatchesReference) { CheckAllShapes<Conv2dWinogradF4x4>(Tolerance{1e-3, 1e-3}); }

TEST(Conv2dWinogradTest, ManyChunksMatchReference) {
  // A 4096-float budget holds 16 tiles of 8+8 channels: 2 images of 10x10 F(2x2) tiles need 13 chunks, the last
  // one partial.
  const Conv2dWinogradF2x2 f2(/*chunk_floats=*/4096);
  const Conv2dWinogradF4x4 f4(/*chunk_floats=*/4096);
  Conv2dProblem p = Conv(2, 8, 20, 19, 8, 3, 3, 1, 1);
  p.epilogue = EpiloguesToTest()[2];
  EXPECT_EQ(f2.WorkspaceBytes(p), sizeof(float) * 16 * 16 * 16);
  EXPECT_THAT(CheckConv2dAgainstReference(f2, p, Tolerance{1e-4, 1e-4}, 3), IsOk());
  EXPECT_THAT(CheckConv2dAgainstReference(f4, p, Tolerance{1e-3, 1e-3}, 4), IsOk());
}

TEST(Conv2dWinogradTest, DeclinesOtherShapes) {
  for (const Conv2dProblem& p : {Conv(1, 8, 8, 8, 8, 3, 3, 2, 1), Conv(1, 8, 8, 8, 8, 5, 5, 1, 2),
                                 Conv(1, 8, 8, 8, 8, 3, 3, 1, 2, 2), Conv(1, 8, 8, 8, 8, 3, 3, 1, 1, 1, 2),
                                 Conv(1, 8, 8, 8, 8, 3, 3, 1, 1, 1, 1, Layout::kNHWC)}) {
    EXPECT_THAT(Conv2dWinogradF4x4().CanImplement(p), StatusIs(absl::StatusCode::kUnimplemented, ::testing::_));
  }
}

}  // namespace
}  // namespace convoy::cpu
