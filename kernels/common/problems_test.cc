#include "kernels/common/problems.h"

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/hash/hash.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/pool_window.h"
#include "kernels/common/status_matchers.h"

namespace convoy {
namespace {

using ::convoy::testing::IsOk;
using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;

Conv2dProblem ResNetConv() {
  Conv2dProblem p;
  p.n = 2, p.h = 14, p.w = 14, p.c = 64, p.k = 64, p.r = 3, p.s = 3;
  p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = 1;
  p.groups = 1;
  return p;
}

// Every field mutated in turn must change equality, the hash and the cache-key string.
TEST(ProblemsTest, Conv2dEveryFieldDistinguishesProblems) {
  const Conv2dProblem base = ResNetConv();
  std::vector<std::function<void(Conv2dProblem&)>> mutations = {
      [](auto& p) { p.n = 3; },          [](auto& p) { p.h = 15; },
      [](auto& p) { p.w = 15; },         [](auto& p) { p.c = 32; },
      [](auto& p) { p.k = 32; },         [](auto& p) { p.r = 1; },
      [](auto& p) { p.s = 1; },          [](auto& p) { p.pad_top = 0; },
      [](auto& p) { p.pad_bottom = 0; }, [](auto& p) { p.pad_left = 0; },
      [](auto& p) { p.pad_right = 0; },  [](auto& p) { p.stride_h = 2; },
      [](auto& p) { p.stride_w = 2; },   [](auto& p) { p.dilation_h = 2; },
      [](auto& p) { p.dilation_w = 2; }, [](auto& p) { p.groups = 2; },
      [](auto& p) { p.dtype = DataType::kFloat16; },
      [](auto& p) { p.layout = Layout::kNHWC; },
      [](auto& p) { p.allow_tf32 = true; },
      [](auto& p) { p.epilogue.has_bias = true; },
      [](auto& p) { p.epilogue.has_scale = true; },
      [](auto& p) { p.epilogue.residual = ResidualMode::kBeforeActivation; },
      [](auto& p) { p.epilogue.activation = Activation::Relu(); },
      [](auto& p) { p.epilogue.activation = Activation::Clip(0, 5.5f); },
  };
  EXPECT_EQ(std::tuple_size<decltype(base.Tie())>::value, 20u) << "a new field needs a mutation here";
  for (size_t i = 0; i < mutations.size(); ++i) {
    Conv2dProblem p = base;
    mutations[i](p);
    EXPECT_NE(p, base) << "mutation " << i;
    EXPECT_NE(absl::HashOf(p), absl::HashOf(base)) << "mutation " << i;
    EXPECT_NE(p.ToString(), base.ToString()) << "mutation " << i;
  }
  Conv2dProblem copy = base;
  EXPECT_EQ(copy, base);
  EXPECT_EQ(absl::HashOf(copy), absl::HashOf(base));
}

TEST(ProblemsTest, GroupsAndDilationNeverCollide) {
  Conv2dProblem grouped = ResNetConv();
  grouped.groups = 64;  // depthwise
  Conv2dProblem dilated = ResNetConv();
  dilated.dilation_h = dilated.dilation_w = 2;
  EXPECT_NE(grouped, ResNetConv());
  EXPECT_NE(dilated, ResNetConv());
  EXPECT_NE(grouped.ToString(), dilated.ToString());
}

TEST(ProblemsTest, Conv2dOutputShapes) {
  Conv2dProblem p;
  p.n = 1, p.h = 224, p.w = 224, p.c = 3, p.k = 64, p.r = 7, p.s = 7;
  p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = 3;
  p.stride_h = p.stride_w = 2;
  EXPECT_EQ(p.p(), 112);
  EXPECT_EQ(p.q(), 112);
  p.pad_right = 0;  // asymmetric
  EXPECT_EQ(p.q(), 111);  // (224 + 3 + 0 - 7) / 2 + 1
  p.dilation_h = 2;
  EXPECT_EQ(p.p(), (224 + 6 - 13) / 2 + 1);
  EXPECT_EQ(p.flops(), 2LL * 64 * p.p() * p.q() * 3 * 49);
}

TEST(ProblemsTest, Conv2dValidateNamesTheProblem) {
  Conv2dProblem p = ResNetConv();
  EXPECT_THAT(p.Validate(), IsOk());
  p.groups = 3;
  EXPECT_THAT(p.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("groups=3 must divide c=64")));
  p = ResNetConv();
  p.h = 1;
  p.pad_top = p.pad_bottom = 0;
  EXPECT_THAT(p.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("output would be")));
  p = ResNetConv();
  p.dtype = DataType::kUInt8;
  EXPECT_THAT(p.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("UINT8")));
}

TEST(ProblemsTest, PoolCeilModeMatchesOnnxRule) {
  Pool2dProblem p;
  p.mode = PoolMode::kMax;
  p.h = p.w = 112, p.r = p.s = 3, p.stride_h = p.stride_w = 2;
  p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = 1;
  EXPECT_EQ(p.p(), 56);
  Pool2dProblem q;
  q.h = q.w = 6, q.r = q.s = 3, q.stride_h = q.stride_w = 2, q.ceil_mode = true;
  EXPECT_EQ(q.p(), 3);  // floor would give 2
  q.ceil_mode = false;
  EXPECT_EQ(q.p(), 2);
  Pool2dProblem g;
  g.mode = PoolMode::kGlobalAverage;
  g.h = 7, g.w = 9;
  EXPECT_EQ(g.p(), 1);
  EXPECT_EQ(g.q(), 1);
  Pool2dProblem flags = p;
  flags.count_include_pad = true;
  EXPECT_NE(flags, p);
  EXPECT_NE(flags.ToString(), p.ToString());
}

// ONNX's output size with dilations: floor or ceil of (H + pads - ((r - 1) * d + 1)) / stride, plus 1 (the sizes of
// onnx's test_maxpool_2d_dilations and test_maxpool_3d_dilations_use_ref_impl_large).
TEST(ProblemsTest, DilatedPoolSizeKeyAndEmptyWindows) {
  Pool2dProblem p;
  p.h = p.w = 4, p.r = p.s = 2, p.dilation_h = p.dilation_w = 2;
  EXPECT_EQ(p.p(), 2);
  EXPECT_EQ(p.q(), 2);
  Pool2dProblem large;
  large.h = large.w = 32, large.r = large.s = 5, large.stride_h = large.stride_w = 3, large.ceil_mode = true;
  large.dilation_h = 2;
  EXPECT_EQ(large.p(), 9);
  EXPECT_EQ(large.q(), 10);  // undilated: (32 - 5) / 3 rounded up, plus 1
  large.ceil_mode = false;
  EXPECT_EQ(large.p(), 8);
  EXPECT_THAT(large.Validate(), IsOk());
  Pool2dProblem undilated = large;
  undilated.dilation_h = 1;
  EXPECT_NE(undilated, large);
  EXPECT_NE(absl::Hash<Pool2dProblem>{}(undilated), absl::Hash<Pool2dProblem>{}(large));
  EXPECT_THAT(large.ToString(), HasSubstr("dilation=2,1"));
  EXPECT_THAT(undilated.ToString(), Not(HasSubstr("dilation")));  // undilated keys are as before
  // Padding up to the dilated window's extent is allowed; a window whose taps all miss the input is not.
  Pool2dProblem sparse;
  sparse.h = 1, sparse.w = 6, sparse.r = 2, sparse.dilation_h = 3, sparse.pad_top = 1, sparse.pad_bottom = 2;
  EXPECT_EQ(sparse.p(), 1);  // taps at rows -1 and 2 of a 1-row input
  EXPECT_THAT(sparse.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no tap inside")));
  sparse.dilation_w = 0;
  EXPECT_THAT(sparse.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("dilation_w")));
}

// PoolTapsAlong against counting every tap, over random windows.
TEST(PoolWindowTest, TapsMatchCountingEveryTap) {
  std::mt19937 rng(std::random_device{}());
  for (int trial = 0; trial < 2000; ++trial) {
    const int taps = 1 + int(rng() % 6), dilation = 1 + int(rng() % 4), extent = 1 + int(rng() % 12);
    const int pad_begin = int(rng() % 5), pad_end = int(rng() % 5);
    const int start = -pad_begin + int(rng() % (extent + pad_begin + 1));
    int first = -1, count = 0, padded = 0;
    for (int i = 0; i < taps; ++i) {
      const int at = start + i * dilation;
      if (at < extent + pad_end) ++padded;
      if (at < 0 || at >= extent) continue;
      if (first < 0) first = at;
      ++count;
    }
    const PoolTaps t = PoolTapsAlong(start, taps, dilation, extent, pad_end);
    SCOPED_TRACE(::testing::Message() << "start " << start << " taps " << taps << " dilation " << dilation
                                      << " extent " << extent << " pad_end " << pad_end);
    EXPECT_EQ(t.count, count);
    EXPECT_EQ(t.padded, padded);
    if (count > 0) {
      EXPECT_EQ(t.first, first);
    }
  }
}

TEST(ProblemsTest, ConcatChannelsAreKeyed) {
  ConcatProblem a;
  a.channels = {16, 32};
  ConcatProblem b = a;
  b.channels = {32, 16};
  EXPECT_NE(a, b);
  EXPECT_NE(a.ToString(), b.ToString());
  EXPECT_EQ(a.total_channels(), 48);
  ConcatProblem empty;
  EXPECT_THAT(empty.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("at least one input")));
}

TEST(ProblemsTest, TransposeIsKeyedValidatedAndCoalesced) {
  TransposeProblem p;
  p.dims = {2, 3, 4, 5}, p.perm = {0, 2, 3, 1};  // NCHW -> NHWC
  ASSERT_THAT(p.Validate(), IsOk());
  EXPECT_EQ(p.output_dims(), (std::vector<int64_t>{2, 4, 5, 3}));
  EXPECT_EQ(p.num_elements(), 120);
  EXPECT_EQ(p.ToString(), "transpose dims=2,3,4,5 perm=0,2,3,1 FP32");
  TransposeProblem other = p;
  other.perm = {0, 3, 1, 2};
  EXPECT_NE(p, other);
  EXPECT_NE(absl::Hash<TransposeProblem>()(p), absl::Hash<TransposeProblem>()(other));
  other = p;
  other.dtype = DataType::kFloat16;
  EXPECT_NE(p, other);

  // NCHW -> NHWC is the batched swap [N, C, H*W] -> [N, H*W, C]; NHWC -> NCHW of [N, H, W, C] = [2, 3, 4, 5] is
  // [N, H*W, C] -> [N, C, H*W]; unit dims vanish.
  TransposeProblem c = p.Coalesced();
  EXPECT_EQ(c.dims, (std::vector<int64_t>{2, 3, 20}));
  EXPECT_EQ(c.perm, (std::vector<int>{0, 2, 1}));
  p.perm = {0, 3, 1, 2};
  c = p.Coalesced();
  EXPECT_EQ(c.dims, (std::vector<int64_t>{2, 12, 5}));
  EXPECT_EQ(c.perm, (std::vector<int>{0, 2, 1}));
  p.dims = {1, 3, 1, 5}, p.perm = {2, 3, 0, 1};
  c = p.Coalesced();
  EXPECT_EQ(c.dims, (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(c.perm, (std::vector<int>{1, 0}));
  p.dims = {2, 3, 4}, p.perm = {0, 1, 2};  // identity: one flat dim
  c = p.Coalesced();
  EXPECT_EQ(c.dims, (std::vector<int64_t>{24}));
  EXPECT_EQ(c.perm, (std::vector<int>{0}));
  p.dims = {2, 3, 4, 5, 6}, p.perm = {3, 4, 0, 1, 2};
  c = p.Coalesced();
  EXPECT_EQ(c.dims, (std::vector<int64_t>{24, 30}));
  EXPECT_EQ(c.perm, (std::vector<int>{1, 0}));

  p.dims = {2, 3}, p.perm = {0, 0};
  EXPECT_THAT(p.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a permutation")));
  p.perm = {1, 0, 2};
  EXPECT_THAT(p.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("perm has 3 entries for rank 2")));
  p.dims = {1, 1, 1, 1, 1, 1, 1}, p.perm = {0, 1, 2, 3, 4, 5, 6};
  EXPECT_THAT(p.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rank must be 1..6")));
  p.dims = {2, 0}, p.perm = {1, 0};
  EXPECT_THAT(p.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("dim 1 must be positive")));
}

TEST(ProblemsTest, TensorDescStridesFollowLayout) {
  TensorDesc nchw = TensorDesc::Image(DataType::kFloat32, 2, 3, 4, 5, Layout::kNCHW);
  TensorDesc nhwc = TensorDesc::Image(DataType::kFloat16, 2, 3, 4, 5, Layout::kNHWC);
  EXPECT_EQ(nchw.strides(), (std::vector<int64_t>{60, 20, 5, 1}));
  EXPECT_EQ(nhwc.strides(), (std::vector<int64_t>{60, 1, 15, 3}));
  EXPECT_EQ(nhwc.Offset4(1, 2, 3, 4), 60 + 2 + 45 + 12);
  EXPECT_EQ(nhwc.size_bytes(), 240u);
  EXPECT_EQ(nchw.ToString(), "[2,3,4,5] FP32 NCHW");
  EXPECT_TRUE(nhwc.is_dense());
}

TEST(ProblemsTest, EpilogueOrderOfResidual) {
  Epilogue before;
  before.residual = ResidualMode::kBeforeActivation;
  before.activation = Activation::Relu();
  Epilogue after = before;
  after.residual = ResidualMode::kAfterActivation;
  // acc=-2, residual=1: relu(-2 + 1) = 0, relu(-2) + 1 = 1.
  EXPECT_EQ(ApplyEpilogue(-2.0f, before, nullptr, nullptr, 0, 1.0f), 0.0f);
  EXPECT_EQ(ApplyEpilogue(-2.0f, after, nullptr, nullptr, 0, 1.0f), 1.0f);
  const float scale[] = {2.0f}, bias[] = {0.5f};
  Epilogue folded;
  folded.has_scale = folded.has_bias = true;
  EXPECT_EQ(ApplyEpilogue(3.0f, folded, scale, bias, 0, 0.0f), 6.5f);
}

TEST(ProblemsTest, ActivationsMatchDoubleReference) {
  const std::vector<Activation> activations = {
      Activation::Identity(), Activation::Relu(), Activation::Relu6(), Activation::LeakyRelu(0.1f),
      Activation::Of(ActivationKind::kSigmoid), Activation::Of(ActivationKind::kTanh),
      Activation::Of(ActivationKind::kSilu), Activation::Of(ActivationKind::kHardSigmoid, 0.2f, 0.5f),
      Activation::Of(ActivationKind::kHardSwish), Activation::Of(ActivationKind::kGelu),
      Activation::QuantizeDequantizeU8(0.05f, 128), Activation::QuantizeDequantizeS8(0.03f, -7)};
  for (const Activation& a : activations) {
    for (float x = -8.0f; x <= 8.0f; x += 0.37f) {
      EXPECT_NEAR(ApplyActivation(x, a), ApplyActivationReference(x, a), 1e-5 * (1 + std::fabs(x)))
          << ToString(a) << " at " << x;
    }
  }
}

TEST(ProblemsTest, QuantizeDequantizeRoundsHalfToEvenAndSaturates) {
  const Activation u8 = Activation::QuantizeDequantizeU8(0.5f, 10);
  EXPECT_EQ(ApplyActivation(0.25f, u8), 0.0f);     // 0.5 -> 0 (even)
  EXPECT_EQ(ApplyActivation(0.75f, u8), 1.0f);     // 1.5 -> 2
  EXPECT_EQ(ApplyActivation(-1.25f, u8), -1.0f);   // -2.5 -> -2
  EXPECT_EQ(ApplyActivation(-100.0f, u8), -5.0f);  // saturates at q = 0: (0 - 10) * 0.5
  EXPECT_EQ(ApplyActivation(1000.0f, u8), 122.5f); // saturates at q = 255
  const Activation s8 = Activation::QuantizeDequantizeS8(0.25f, -3);
  EXPECT_EQ(ApplyActivation(-1000.0f, s8), -31.25f);  // q = -128
  EXPECT_EQ(ApplyActivation(1000.0f, s8), 32.5f);     // q = 127
  EXPECT_EQ(ApplyActivation(std::nanf(""), s8), -31.25f);
  for (float x = -40.0f; x <= 40.0f; x += 0.0625f) {
    EXPECT_EQ(ApplyActivation(x, u8), static_cast<float>(ApplyActivationReference(x, u8))) << x;
    EXPECT_EQ(ApplyActivation(x, s8), static_cast<float>(ApplyActivationReference(x, s8))) << x;
  }
}

}  // namespace
}  // namespace convoy
