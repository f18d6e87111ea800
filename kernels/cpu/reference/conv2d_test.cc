// Checks the reference conv2d against cases with independent, cheaply derived answers: a delta filter shifts the
// input, a 1x1 conv is a naive GEMM, depthwise is a loop of single-channel convs, NHWC is NCHW transposed, dilation
// equals a larger filter with zeros, and the epilogue composes as documented.
#include <cmath>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "kernels/cpu/reference/reference_ops.h"
#include "kernels/testing/test_tensors.h"

namespace convoy::reference {
namespace {

using ::convoy::testing::CompareFloats;
using ::convoy::testing::IsOk;
using ::convoy::testing::RandomFloats;
using ::convoy::testing::StatusIs;
using ::convoy::testing::Tolerance;
using ::testing::HasSubstr;

constexpr Tolerance kFp32{1e-5, 1e-5};

// Output as floats (in the problem's layout) of the reference conv with the given buffers; y is poisoned first.
std::vector<float> RunConv(const Conv2dProblem& p, const std::vector<float>& x, const std::vector<float>& w,
                           const std::vector<float>* residual = nullptr, const float* bias = nullptr,
                           const float* scale = nullptr) {
  std::vector<float> y(static_cast<size_t>(p.output_desc().num_elements()));
  testing::PoisonWithNaN(y.data(), DataType::kFloat32, static_cast<int64_t>(y.size()));
  Conv2dArgs args{x.data(), w.data(), bias, scale, residual ? residual->data() : nullptr, y.data()};
  EXPECT_THAT(Conv2d(p, args), IsOk());
  return y;
}

TEST(ReferenceConv2dTest, DeltaFilterShiftsTheInput) {
  for (Layout layout : {Layout::kNCHW, Layout::kNHWC}) {
    Conv2dProblem p;
    p.n = 2, p.c = 3, p.k = 3, p.h = 7, p.w = 6, p.r = 3, p.s = 3, p.layout = layout;
    p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = 1;
    const int tap_r = 2, tap_s = 0;  // the filter picks x[y + 1, x - 1] for output (y, x)
    const std::vector<float> x = RandomFloats(p.input_desc().num_elements(), 11);
    std::vector<float> w(p.filter_elements(), 0.0f);
    for (int k = 0; k < p.k; ++k) {
      const int64_t offset = layout == Layout::kNCHW ? ((k * p.c + k) * p.r + tap_r) * p.s + tap_s
                                                     : ((k * p.r + tap_r) * p.s + tap_s) * p.c + k;
      w[offset] = 1.0f;
    }
    const std::vector<float> y = RunConv(p, x, w);
    const TensorDesc xd = p.input_desc(), yd = p.output_desc();
    for (int n = 0; n < p.n; ++n)
      for (int k = 0; k < p.k; ++k)
        for (int oy = 0; oy < p.p(); ++oy)
          for (int ox = 0; ox < p.q(); ++ox) {
            const int iy = oy + 1, ix = ox - 1;
            const float expected = (iy < p.h && ix >= 0) ? x[xd.Offset4(n, k, iy, ix)] : 0.0f;
            ASSERT_EQ(y[yd.Offset4(n, k, oy, ox)], expected) << LayoutName(layout) << " at " << n << "," << k << ","
                                                             << oy << "," << ox;
          }
  }
}

TEST(ReferenceConv2dTest, PointwiseConvEqualsNaiveGemm) {
  Conv2dProblem p;
  p.n = 2, p.c = 5, p.k = 4, p.h = 3, p.w = 5;
  const std::vector<float> x = RandomFloats(p.input_desc().num_elements(), 21);
  const std::vector<float> w = RandomFloats(p.filter_elements(), 22);
  const std::vector<float> y = RunConv(p, x, w);
  std::vector<float> expected(y.size());
  const int hw = p.h * p.w;
  for (int n = 0; n < p.n; ++n)
    for (int k = 0; k < p.k; ++k)
      for (int i = 0; i < hw; ++i) {
        double sum = 0;
        for (int c = 0; c < p.c; ++c) sum += double{w[k * p.c + c]} * x[(n * p.c + c) * hw + i];
        expected[(n * p.k + k) * hw + i] = static_cast<float>(sum);
      }
  EXPECT_THAT(CompareFloats(y, expected, kFp32), IsOk());
}

TEST(ReferenceConv2dTest, DepthwiseEqualsOneSingleChannelConvPerChannel) {
  Conv2dProblem p;
  p.n = 1, p.c = 4, p.k = 4, p.groups = 4, p.h = 9, p.w = 8, p.r = 3, p.s = 3, p.stride_h = 2, p.stride_w = 2;
  p.pad_top = 1, p.pad_bottom = 0, p.pad_left = 1, p.pad_right = 1;
  const std::vector<float> x = RandomFloats(p.input_desc().num_elements(), 31);
  const std::vector<float> w = RandomFloats(p.filter_elements(), 32);
  const std::vector<float> y = RunConv(p, x, w);
  Conv2dProblem single = p;
  single.c = single.k = single.groups = 1;
  const int in_plane = p.h * p.w, out_plane = p.p() * p.q(), taps = p.r * p.s;
  for (int c = 0; c < p.c; ++c) {
    std::vector<float> xc(x.begin() + c * in_plane, x.begin() + (c + 1) * in_plane);
    std::vector<float> wc(w.begin() + c * taps, w.begin() + (c + 1) * taps);
    const std::vector<float> yc = RunConv(single, xc, wc);
    std::vector<float> got(y.begin() + c * out_plane, y.begin() + (c + 1) * out_plane);
    EXPECT_THAT(CompareFloats(got, yc, kFp32), IsOk()) << "channel " << c;
  }
}

TEST(ReferenceConv2dTest, NhwcEqualsTransposedNchw) {
  Conv2dProblem p;
  p.n = 2, p.c = 6, p.k = 4, p.groups = 2, p.h = 5, p.w = 7, p.r = 3, p.s = 2, p.stride_w = 2, p.pad_left = 1;
  const std::vector<float> x = RandomFloats(p.input_desc().num_elements(), 41);
  const std::vector<float> w = RandomFloats(p.filter_elements(), 42);
  const std::vector<float> y_nchw = RunConv(p, x, w);
  Conv2dProblem q = p;
  q.layout = Layout::kNHWC;
  const TensorDesc x_nchw = p.input_desc(), x_nhwc = q.input_desc();
  std::vector<float> xt(x.size()), wt(w.size());
  for (int n = 0; n < p.n; ++n)
    for (int c = 0; c < p.c; ++c)
      for (int i = 0; i < p.h; ++i)
        for (int j = 0; j < p.w; ++j) xt[x_nhwc.Offset4(n, c, i, j)] = x[x_nchw.Offset4(n, c, i, j)];
  const int cg = p.c_per_group();
  for (int k = 0; k < p.k; ++k)
    for (int c = 0; c < cg; ++c)
      for (int r = 0; r < p.r; ++r)
        for (int s = 0; s < p.s; ++s) wt[((k * p.r + r) * p.s + s) * cg + c] = w[((k * cg + c) * p.r + r) * p.s + s];
  const std::vector<float> y_nhwc = RunConv(q, xt, wt);
  const TensorDesc y1 = p.output_desc(), y2 = q.output_desc();
  for (int n = 0; n < p.n; ++n)
    for (int k = 0; k < p.k; ++k)
      for (int i = 0; i < p.p(); ++i)
        for (int j = 0; j < p.q(); ++j) ASSERT_EQ(y_nhwc[y2.Offset4(n, k, i, j)], y_nchw[y1.Offset4(n, k, i, j)]);
}

TEST(ReferenceConv2dTest, DilationEqualsLargerFilterWithZeros) {
  Conv2dProblem p;
  p.n = 1, p.c = 2, p.k = 3, p.h = 9, p.w = 9, p.r = 3, p.s = 3, p.dilation_h = 2, p.dilation_w = 2;
  p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = 2;
  const std::vector<float> x = RandomFloats(p.input_desc().num_elements(), 51);
  const std::vector<float> w = RandomFloats(p.filter_elements(), 52);
  Conv2dProblem big = p;
  big.r = big.s = 5, big.dilation_h = big.dilation_w = 1;
  std::vector<float> wbig(big.filter_elements(), 0.0f);
  for (int k = 0; k < p.k; ++k)
    for (int c = 0; c < p.c; ++c)
      for (int r = 0; r < 3; ++r)
        for (int s = 0; s < 3; ++s) wbig[((k * p.c + c) * 5 + 2 * r) * 5 + 2 * s] = w[((k * p.c + c) * 3 + r) * 3 + s];
  EXPECT_THAT(CompareFloats(RunConv(p, x, w), RunConv(big, x, wbig), kFp32), IsOk());
}

TEST(ReferenceConv2dTest, EpilogueComposesScaleBiasResidualAndActivation) {
  Conv2dProblem p;
  p.n = 2, p.c = 3, p.k = 4, p.h = 5, p.w = 5, p.r = 3, p.s = 3, p.pad_top = p.pad_left = 1;
  const std::vector<float> x = RandomFloats(p.input_desc().num_elements(), 61);
  const std::vector<float> w = RandomFloats(p.filter_elements(), 62);
  const std::vector<float> plain = RunConv(p, x, w);
  const std::vector<float> residual = RandomFloats(plain.size(), 63);
  const std::vector<float> bias = RandomFloats(p.k, 64), scale = RandomFloats(p.k, 65);
  const int plane = p.p() * p.q();
  for (ResidualMode mode : {ResidualMode::kNone, ResidualMode::kBeforeActivation, ResidualMode::kAfterActivation}) {
    Conv2dProblem fused = p;
    fused.epilogue = Epilogue{true, true, mode, Activation::Relu()};
    const std::vector<float> y = RunConv(fused, x, w, &residual, bias.data(), scale.data());
    std::vector<float> expected(y.size());
    for (size_t i = 0; i < y.size(); ++i) {
      const int k = static_cast<int>(i / plane) % p.k;
      double v = double{plain[i]} * scale[k] + bias[k];
      if (mode == ResidualMode::kBeforeActivation) v += residual[i];
      v = std::max(v, 0.0);
      if (mode == ResidualMode::kAfterActivation) v += residual[i];
      expected[i] = static_cast<float>(v);
    }
    EXPECT_THAT(CompareFloats(y, expected, kFp32), IsOk()) << ToString(fused.epilogue);
  }
}

TEST(ReferenceConv2dTest, Fp16OutputIsTheRoundedFp32Result) {
  Conv2dProblem p;
  p.n = 1, p.c = 3, p.k = 2, p.h = 6, p.w = 5, p.r = 3, p.s = 3;
  Conv2dProblem half = p;
  half.dtype = DataType::kFloat16;
  CONVOY_ASSERT_OK_AND_ASSIGN(HostBuffer x16, testing::RandomBuffer(DataType::kFloat16, p.input_desc().num_elements(), 71));
  CONVOY_ASSERT_OK_AND_ASSIGN(HostBuffer w16, testing::RandomBuffer(DataType::kFloat16, p.filter_elements(), 72));
  const int64_t out = p.output_desc().num_elements();
  std::vector<uint16_t> y16(out);
  ASSERT_THAT(Conv2d(half, Conv2dArgs{x16.data(), w16.data(), nullptr, nullptr, nullptr, y16.data()}), IsOk());
  const std::vector<float> y32 =
      RunConv(p, testing::ToFloats(x16.data(), DataType::kFloat16, p.input_desc().num_elements()),
              testing::ToFloats(w16.data(), DataType::kFloat16, p.filter_elements()));
  for (int64_t i = 0; i < out; ++i) ASSERT_EQ(y16[i], FloatToHalfBits(y32[i])) << i;
}

TEST(ReferenceConv2dTest, RejectsInvalidProblemsAndMissingOperands) {
  Conv2dProblem p;
  p.c = 3, p.k = 4, p.groups = 2;
  float buffer[64] = {};
  EXPECT_THAT(Conv2d(p, Conv2dArgs{buffer, buffer, nullptr, nullptr, nullptr, buffer}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("groups=2 must divide c=3")));
  p.groups = 1;
  EXPECT_THAT(Conv2d(p, Conv2dArgs{buffer, nullptr, nullptr, nullptr, nullptr, buffer}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("args.w is null")));
  p.epilogue.has_bias = true;
  EXPECT_THAT(Conv2d(p, Conv2dArgs{buffer, buffer, nullptr, nullptr, nullptr, buffer}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("bias")));
}


// The transposed convolution is the adjoint of the convolution with the same filter, strides, pads, dilations and
// groups: <conv(x), y> == <x, conv_transpose(y)> for any x and y (the filter [K, C/g, R, S] read as ConvTranspose's
// [C_in, C_out/g, R, S]). The reference scatters and the convolution gathers, so this checks one against the other,
// in both layouts, with odd strides, padding, dilation and groups.
TEST(ReferenceConvTranspose2dTest, IsTheAdjointOfConv2d) {
  struct Case {
    int c, k, h, w, r, s, stride_h, stride_w, pad, dilation, groups;
  };
  uint32_t seed = 11;
  for (const Case& c : {Case{3, 4, 7, 6, 3, 3, 2, 1, 1, 1, 1}, Case{4, 6, 9, 8, 3, 2, 3, 2, 0, 2, 2},
                        Case{4, 4, 5, 5, 3, 3, 2, 2, 1, 1, 4}, Case{2, 5, 6, 7, 4, 4, 2, 2, 1, 1, 1}}) {
    for (Layout layout : {Layout::kNCHW, Layout::kNHWC}) {
      Conv2dProblem conv;
      conv.n = 2, conv.c = c.c, conv.k = c.k, conv.h = c.h, conv.w = c.w, conv.r = c.r, conv.s = c.s;
      conv.stride_h = c.stride_h, conv.stride_w = c.stride_w;
      conv.pad_top = conv.pad_bottom = conv.pad_left = conv.pad_right = c.pad;
      conv.dilation_h = conv.dilation_w = c.dilation, conv.groups = c.groups, conv.layout = layout;
      ConvTranspose2dProblem t;
      t.n = conv.n, t.c = conv.k, t.k = conv.c, t.h = conv.p(), t.w = conv.q(), t.r = c.r, t.s = c.s;
      t.out_h = conv.h, t.out_w = conv.w, t.pad_top = t.pad_left = c.pad;
      t.stride_h = c.stride_h, t.stride_w = c.stride_w, t.dilation_h = t.dilation_w = c.dilation;
      t.groups = c.groups, t.layout = layout;
      const std::vector<float> x = RandomFloats(conv.input_desc().num_elements(), ++seed);
      const std::vector<float> w = RandomFloats(conv.filter_elements(), ++seed);
      const std::vector<float> y = RandomFloats(conv.output_desc().num_elements(), ++seed);
      // The convolution reads its filter as [K, R, S, C/g] in NHWC problems, ConvTranspose always as ONNX's order.
      std::vector<float> conv_w = w;
      if (layout == Layout::kNHWC) {
        const int cg = c.c / c.groups;
        for (int k = 0; k < c.k; ++k)
          for (int ch = 0; ch < cg; ++ch)
            for (int r = 0; r < c.r; ++r)
              for (int s = 0; s < c.s; ++s) conv_w[((k * c.r + r) * c.s + s) * cg + ch] = w[((k * cg + ch) * c.r + r) * c.s + s];
      }
      const std::vector<float> conv_x = RunConv(conv, x, conv_w);
      std::vector<float> transposed_y(x.size());
      testing::PoisonWithNaN(transposed_y.data(), DataType::kFloat32, static_cast<int64_t>(transposed_y.size()));
      ASSERT_THAT(ConvTranspose2d(t, ConvTranspose2dArgs{y.data(), w.data(), nullptr, transposed_y.data()}), IsOk());
      double lhs = 0, rhs = 0, scale = 0;
      for (size_t i = 0; i < y.size(); ++i) lhs += double{conv_x[i]} * y[i], scale += std::abs(double{conv_x[i]} * y[i]);
      for (size_t i = 0; i < x.size(); ++i) rhs += double{x[i]} * transposed_y[i];
      EXPECT_NEAR(lhs, rhs, 1e-5 * scale + 1e-6) << t.ToString();
    }
  }
}

// A bias adds to every output; a missing bias or an unsupported layout is refused.
TEST(ReferenceConvTranspose2dTest, BiasAddsPerChannelAndMissingOperandsAreRefused) {
  ConvTranspose2dProblem p;
  p.n = 1, p.c = 2, p.h = 3, p.w = 3, p.k = 3, p.r = p.s = 2, p.stride_h = p.stride_w = 2, p.out_h = p.out_w = 6;
  const std::vector<float> x = RandomFloats(2 * 9, 5), w = RandomFloats(2 * 3 * 4, 6), bias = {0.5f, -1.0f, 2.0f};
  std::vector<float> plain(3 * 36), biased(3 * 36);
  ASSERT_THAT(ConvTranspose2d(p, ConvTranspose2dArgs{x.data(), w.data(), nullptr, plain.data()}), IsOk());
  p.has_bias = true;
  ASSERT_THAT(ConvTranspose2d(p, ConvTranspose2dArgs{x.data(), w.data(), bias.data(), biased.data()}), IsOk());
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_NEAR(biased[i], plain[i] + bias[i / 36], 1e-6) << i;
  EXPECT_THAT(ConvTranspose2d(p, ConvTranspose2dArgs{x.data(), w.data(), nullptr, biased.data()}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("args.bias (has_bias) is null")));
  p.layout = Layout::kNCHW8c;
  EXPECT_THAT(p.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("the layout must be NCHW or NHWC")));
}

}  // namespace
}  // namespace convoy::reference
