// Checks the reference pool2d on ramps, where each window's max and mean have closed forms, and the divisor rules.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "kernels/cpu/reference/reference_ops.h"
#include "kernels/testing/test_tensors.h"

namespace convoy::reference {
namespace {

using ::convoy::testing::IsOk;

// x[n, c, y, x] = 100 c + 10 y + x (exact in FP32), laid out per `p`.
std::vector<float> Ramp(const Pool2dProblem& p) {
  const TensorDesc d = p.input_desc();
  std::vector<float> x(d.num_elements());
  for (int n = 0; n < p.n; ++n)
    for (int c = 0; c < p.c; ++c)
      for (int i = 0; i < p.h; ++i)
        for (int j = 0; j < p.w; ++j) x[d.Offset4(n, c, i, j)] = 100.0f * c + 10.0f * i + j;
  return x;
}

std::vector<float> RunPool(const Pool2dProblem& p, const std::vector<float>& x) {
  std::vector<float> y(p.output_desc().num_elements());
  testing::PoisonWithNaN(y.data(), DataType::kFloat32, y.size());
  EXPECT_THAT(Pool2d(p, Pool2dArgs{x.data(), y.data()}), IsOk());
  return y;
}

TEST(ReferencePool2dTest, MaxOfARampIsTheWindowsBottomRightCorner) {
  for (Layout layout : {Layout::kNCHW, Layout::kNHWC}) {
    Pool2dProblem p;
    p.n = 2, p.c = 3, p.h = 7, p.w = 8, p.r = p.s = 3, p.stride_h = p.stride_w = 2, p.layout = layout;
    p.pad_top = p.pad_left = 1, p.ceil_mode = true;
    const std::vector<float> y = RunPool(p, Ramp(p));
    const TensorDesc d = p.output_desc();
    for (int c = 0; c < p.c; ++c)
      for (int i = 0; i < p.p(); ++i)
        for (int j = 0; j < p.q(); ++j) {
          const int last_y = std::min(i * 2 - 1 + 2, p.h - 1), last_x = std::min(j * 2 - 1 + 2, p.w - 1);
          EXPECT_EQ(y[d.Offset4(1, c, i, j)], 100.0f * c + 10.0f * last_y + last_x) << i << "," << j;
        }
  }
}

TEST(ReferencePool2dTest, AverageOfARampIsTheWindowCenterUnlessPaddingCounts) {
  Pool2dProblem p;
  p.c = 2, p.h = 6, p.w = 6, p.r = p.s = 3, p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = 1;
  p.mode = PoolMode::kAverage;
  const std::vector<float> x = Ramp(p);
  const std::vector<float> y = RunPool(p, x);
  p.count_include_pad = true;
  const std::vector<float> y_padded = RunPool(p, x);
  const TensorDesc d = p.output_desc();
  for (int i = 0; i < p.p(); ++i)
    for (int j = 0; j < p.q(); ++j) {
      const int y0 = std::max(i - 1, 0), y1 = std::min(i + 1, p.h - 1), x0 = std::max(j - 1, 0), x1 = std::min(j + 1, p.w - 1);
      const double mean = 100.0 + 10.0 * (y0 + y1) / 2 + (x0 + x1) / 2.0;  // a ramp's mean is its center
      EXPECT_NEAR(y[d.Offset4(0, 1, i, j)], mean, 1e-4) << i << "," << j;
      const double valid = double(y1 - y0 + 1) * (x1 - x0 + 1);
      EXPECT_NEAR(y_padded[d.Offset4(0, 1, i, j)], mean * valid / 9.0, 1e-4) << i << "," << j;
    }
}

// Dilated windows read every dilation-th element: on a ramp the max is the last tap inside the input, and with
// count_include_pad the average divides by the taps inside the padded input (PyTorch's rule, dilated).
TEST(ReferencePool2dTest, DilatedWindowsReadEveryDilationthElement) {
  Pool2dProblem p;
  p.c = 2, p.h = 9, p.w = 10, p.r = 3, p.s = 2, p.dilation_h = 3, p.dilation_w = 4, p.stride_h = 2;
  p.pad_top = 2, p.pad_bottom = 1, p.pad_left = 1, p.ceil_mode = true;
  const std::vector<float> x = Ramp(p);
  const std::vector<float> max = RunPool(p, x);
  p.mode = PoolMode::kAverage, p.count_include_pad = true;
  const std::vector<float> mean_padded = RunPool(p, x);
  const TensorDesc d = p.output_desc();
  ASSERT_EQ(p.p(), 4);  // (9 + 3 - 7) / 2 rounded up, plus 1
  ASSERT_EQ(p.q(), 7);  // 10 + 1 - 5, plus 1
  for (int i = 0; i < p.p(); ++i)
    for (int j = 0; j < p.q(); ++j) {
      std::vector<int> rows, cols;  // taps inside the input
      int padded_rows = 0, padded_cols = 0;
      for (int t = 0; t < 3; ++t) {
        const int y = 2 * i - 2 + 3 * t;
        if (y >= 0 && y < 9) rows.push_back(y);
        if (y < 10) ++padded_rows;
      }
      for (int t = 0; t < 2; ++t) {
        const int x = j - 1 + 4 * t;
        if (x >= 0 && x < 10) cols.push_back(x);
        if (x < 10) ++padded_cols;
      }
      ASSERT_FALSE(rows.empty() || cols.empty());
      EXPECT_EQ(max[d.Offset4(0, 1, i, j)], 100.0f + 10.0f * rows.back() + cols.back()) << i << "," << j;
      double sum = 0;
      for (int y : rows)
        for (int x : cols) sum += 100.0 + 10.0 * y + x;
      EXPECT_NEAR(mean_padded[d.Offset4(0, 1, i, j)], sum / (padded_rows * padded_cols), 1e-4) << i << "," << j;
    }
}

TEST(ReferencePool2dTest, GlobalModesReduceTheWholePlane) {
  Pool2dProblem p;
  p.n = 2, p.c = 3, p.h = 5, p.w = 4, p.mode = PoolMode::kGlobalAverage, p.layout = Layout::kNHWC;
  const std::vector<float> x = Ramp(p);
  const std::vector<float> avg = RunPool(p, x);
  p.mode = PoolMode::kGlobalMax;
  const std::vector<float> max = RunPool(p, x);
  ASSERT_EQ(avg.size(), 6u);
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 3; ++c) {
      EXPECT_NEAR(avg[n * 3 + c], 100.0 * c + 10.0 * 2 + 1.5, 1e-4);
      EXPECT_EQ(max[n * 3 + c], 100.0f * c + 10.0f * 4 + 3);
    }
}

}  // namespace
}  // namespace convoy::reference
