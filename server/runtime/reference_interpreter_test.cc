// Tests for the reference interpreter against direct formulas on fresh random inputs.
#include "server/runtime/reference_interpreter.h"

#include <cmath>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"

namespace convoy::runtime {
namespace {

using ::convoy::testing::IsOk;
using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;

Tensor RandomTensor(Shape shape, std::mt19937& rng) {
  Tensor t = Tensor::Zeros(std::move(shape));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& v : t.data) v = dist(rng);
  return t;
}

TEST(ReferenceInterpreterTest, ConvMatchesDirectSumWithPaddingStrideAndGroups) {
  std::mt19937 rng(std::random_device{}());
  Graph g;
  Conv2dAttrs a;
  a.window = Window2d{3, 2, 2, 1, 1, 0, 0, 1, 1, 2};
  a.groups = 2;
  a.has_bias = true;
  ASSERT_THAT(g.AddInput("x", {kBatch, 4, 7, 6}), IsOk());
  Tensor w = RandomTensor({6, 2, 3, 2}, rng), b = RandomTensor({6}, rng);
  ASSERT_THAT(g.AddConstant("w", w), IsOk());
  ASSERT_THAT(g.AddConstant("b", b), IsOk());
  ASSERT_THAT(g.AddNode(MakeNode("conv", a, {"x", "w", "b"}, {"y"})), IsOk());
  ASSERT_THAT(g.AddOutput("y"), IsOk());
  ASSERT_THAT(g.Finalize(), IsOk());
  Tensor x = RandomTensor({2, 4, 7, 6}, rng);
  CONVOY_ASSERT_OK_AND_ASSIGN(auto out, RunReference(g, {{"x", x}}));
  const Tensor& y = out.at("y");
  // Height: (7 + 1 - 3) / 2 + 1 = 3; width: (6 + 1 - 3) / 1 + 1 = 5 (dilation 2 makes the 2-wide kernel span 3).
  ASSERT_EQ(y.shape, (Shape{2, 6, 3, 5}));
  for (int n = 0; n < 2; ++n) {
    for (int k = 0; k < 6; ++k) {
      for (int p = 0; p < 3; ++p) {
        for (int q = 0; q < 5; ++q) {
          double expected = b.data[k];
          for (int c = 0; c < 2; ++c) {
            for (int r = 0; r < 3; ++r) {
              for (int s = 0; s < 2; ++s) {
                int ih = p * 2 - 1 + r, iw = q + s * 2;
                if (ih < 0 || ih >= 7 || iw >= 6) continue;
                expected += x.data[((n * 4 + (k / 3) * 2 + c) * 7 + ih) * 6 + iw] * w.data[((k * 2 + c) * 3 + r) * 2 + s];
              }
            }
          }
          EXPECT_NEAR(y.data[((n * 6 + k) * 3 + p) * 5 + q], expected, 1e-5);
        }
      }
    }
  }
}

TEST(ReferenceInterpreterTest, SoftmaxRowsSumToOneAndChannelShuffleIsAPermutation) {
  std::mt19937 rng(std::random_device{}());
  Graph g;
  ASSERT_THAT(g.AddInput("x", {kBatch, 6, 2, 2}), IsOk());
  ASSERT_THAT(g.AddNode(MakeNode("shuffle", ChannelShuffleAttrs{3}, {"x"}, {"s"})), IsOk());
  ASSERT_THAT(g.AddNode(MakeNode("softmax", SoftmaxAttrs{1}, {"s"}, {"y"})), IsOk());
  ASSERT_THAT(g.AddOutput("s"), IsOk());
  ASSERT_THAT(g.AddOutput("y"), IsOk());
  ASSERT_THAT(g.Finalize(), IsOk());
  Tensor x = RandomTensor({3, 6, 2, 2}, rng);
  CONVOY_ASSERT_OK_AND_ASSIGN(auto out, RunReference(g, {{"x", x}}));
  const Tensor& s = out.at("s");
  // groups 3, 2 channels per group: output channel order 0,2,4,1,3,5.
  const int order[] = {0, 2, 4, 1, 3, 5};
  for (int n = 0; n < 3; ++n) {
    for (int c = 0; c < 6; ++c) {
      for (int i = 0; i < 4; ++i) EXPECT_EQ(s.data[(n * 6 + c) * 4 + i], x.data[(n * 6 + order[c]) * 4 + i]);
    }
  }
  const Tensor& y = out.at("y");
  for (int n = 0; n < 3; ++n) {
    for (int i = 0; i < 4; ++i) {
      double sum = 0;
      for (int c = 0; c < 6; ++c) sum += y.data[(n * 6 + c) * 4 + i];
      EXPECT_NEAR(sum, 1.0, 1e-6);
    }
  }
}

TEST(ReferenceInterpreterTest, AveragePoolExcludesPaddingUnlessAsked) {
  Graph g;
  Pool2dAttrs a;
  a.kind = PoolKind::kAverage;
  a.window = Window2d{2, 2, 2, 2, 1, 1, 1, 1, 1, 1};
  ASSERT_THAT(g.AddInput("x", {1, 1, 2, 2}), IsOk());
  ASSERT_THAT(g.AddNode(MakeNode("exclude", a, {"x"}, {"e"})), IsOk());
  a.count_include_pad = true;
  ASSERT_THAT(g.AddNode(MakeNode("include", a, {"x"}, {"i"})), IsOk());
  ASSERT_THAT(g.AddOutput("e"), IsOk());
  ASSERT_THAT(g.AddOutput("i"), IsOk());
  ASSERT_THAT(g.Finalize(), IsOk());
  std::mt19937 rng(std::random_device{}());
  Tensor x = RandomTensor({1, 1, 2, 2}, rng);
  CONVOY_ASSERT_OK_AND_ASSIGN(auto out, RunReference(g, {{"x", x}}));
  // Each 2x2 window at stride 2 with pad 1 covers exactly one input element and three padding cells.
  for (int i = 0; i < 4; ++i) {
    EXPECT_FLOAT_EQ(out.at("e").data[i], x.data[i]);
    EXPECT_FLOAT_EQ(out.at("i").data[i], x.data[i] / 4);
  }
}

TEST(ReferenceInterpreterTest, RejectsWrongInputShape) {
  Graph g;
  ASSERT_THAT(g.AddInput("x", {kBatch, 3}), IsOk());
  ASSERT_THAT(g.AddNode(MakeNode("id", IdentityAttrs{}, {"x"}, {"y"})), IsOk());
  ASSERT_THAT(g.AddOutput("y"), IsOk());
  ASSERT_THAT(g.Finalize(), IsOk());
  EXPECT_THAT(RunReference(g, {{"x", Tensor::Zeros({2, 4})}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("expected shape [2,3]")));
}

}  // namespace
}  // namespace convoy::runtime
