// OpenBLAS GEMM against the reference: classifier shapes (batch 1 and 8), shapes that split rows and columns into
// uneven tiles, every epilogue, FP16/BF16, one and three threads.
#include "kernels/cpu/gemm_openblas.h"

#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "kernels/cpu/conv2d_test_harness.h"

namespace convoy::cpu {
namespace {

using ::convoy::cpu::testing::CheckGemmAgainstReference;
using ::convoy::cpu::testing::EpiloguesToTest;
using ::convoy::testing::IsOk;
using ::convoy::testing::Tolerance;

GemmProblem Gemm(int m, int n, int k) {
  GemmProblem p;
  p.m = m, p.n = n, p.k = k;
  return p;
}

TEST(GemmOpenBlasTest, MatchesReference) {
  const GemmOpenBlas algorithm;
  uint32_t seed = 900;
  for (GemmProblem p : {Gemm(1, 1000, 512), Gemm(8, 1000, 256), Gemm(130, 77, 33), Gemm(3, 5, 7), Gemm(65, 200, 64)}) {
    for (const Epilogue& e : EpiloguesToTest()) {
      p.epilogue = e;
      EXPECT_THAT(CheckGemmAgainstReference(algorithm, p, Tolerance{1e-4, 1e-4}, seed++), IsOk());
    }
    p.dtype = DataType::kFloat16;
    EXPECT_THAT(CheckGemmAgainstReference(algorithm, p, Tolerance{2e-3, 2e-3}, seed++), IsOk());
    p.dtype = DataType::kBFloat16;
    EXPECT_THAT(CheckGemmAgainstReference(algorithm, p, Tolerance{1e-2, 1e-2}, seed++), IsOk());
  }
}

TEST(GemmOpenBlasTest, ThreadCountDoesNotChangeTheResult) {
  GemmProblem p = Gemm(70, 300, 100);
  p.epilogue = EpiloguesToTest()[2];
  for (int threads : {1, 3}) {
    EXPECT_THAT(CheckGemmAgainstReference(GemmOpenBlas(), p, Tolerance{1e-4, 1e-4}, 4, threads), IsOk());
  }
}

}  // namespace
}  // namespace convoy::cpu
