// Tests for the graph IR: naming rules, topological order, cycle and dangling-edge errors, shape inference.
#include "server/runtime/graph.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"

namespace convoy::runtime {
namespace {

using ::convoy::testing::IsOk;
using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;

Conv2dAttrs Conv3x3(int64_t pad) {
  Conv2dAttrs a;
  a.window.kernel_h = a.window.kernel_w = 3;
  a.window.pad_top = a.window.pad_left = a.window.pad_bottom = a.window.pad_right = pad;
  return a;
}

TEST(GraphTest, SortsNodesAddedOutOfOrder) {
  Graph g;
  ASSERT_THAT(g.AddInput("x", {kBatch, 3, 8, 8}), IsOk());
  ASSERT_THAT(g.AddConstant("w", Tensor::Zeros({4, 3, 3, 3})), IsOk());
  ASSERT_THAT(g.AddNode(MakeNode("relu", ActivationAttrs{Activation::Relu()}, {"c"}, {"y"})), IsOk());
  ASSERT_THAT(g.AddNode(MakeNode("conv", Conv3x3(1), {"x", "w"}, {"c"})), IsOk());
  ASSERT_THAT(g.AddOutput("y"), IsOk());
  ASSERT_THAT(g.Finalize(), IsOk());
  EXPECT_EQ(g.nodes()[0].name, "conv");
  EXPECT_EQ(g.nodes()[1].name, "relu");
  EXPECT_EQ(*g.ShapeOf("y"), (Shape{kBatch, 4, 8, 8}));
  EXPECT_THAT(g.ToString(), HasSubstr("conv = Conv2d(x, w) kernel=3x3"));
}

TEST(GraphTest, ReportsCycleNamingANodeOnIt) {
  Graph g;
  ASSERT_THAT(g.AddInput("x", {kBatch, 4}), IsOk());
  ASSERT_THAT(g.AddNode(MakeNode("a", BinaryAttrs{BinaryKind::kAdd}, {"x", "c"}, {"a_out"})), IsOk());
  ASSERT_THAT(g.AddNode(MakeNode("b", ActivationAttrs{}, {"a_out"}, {"b_out"})), IsOk());
  ASSERT_THAT(g.AddNode(MakeNode("c", ActivationAttrs{}, {"b_out"}, {"c"})), IsOk());
  ASSERT_THAT(g.AddOutput("c"), IsOk());
  EXPECT_THAT(g.Finalize(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cycle through node")));
}

TEST(GraphTest, ReportsDanglingEdge) {
  Graph g;
  ASSERT_THAT(g.AddInput("x", {kBatch, 4}), IsOk());
  ASSERT_THAT(g.AddNode(MakeNode("add", BinaryAttrs{}, {"x", "ghost"}, {"y"})), IsOk());
  ASSERT_THAT(g.AddOutput("y"), IsOk());
  EXPECT_THAT(g.Finalize(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("reads 'ghost'")));
}

TEST(GraphTest, RejectsDuplicateNames) {
  Graph g;
  ASSERT_THAT(g.AddInput("x", {kBatch, 4}), IsOk());
  EXPECT_THAT(g.AddConstant("x", Tensor::Zeros({4})), StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("'x'")));
  EXPECT_THAT(g.AddNode(MakeNode("n", ActivationAttrs{}, {"x"}, {"x"})),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("output 'x'")));
}

TEST(GraphTest, ConvShapeMismatchNamesChannels) {
  Graph g;
  ASSERT_THAT(g.AddInput("x", {kBatch, 5, 8, 8}), IsOk());
  ASSERT_THAT(g.AddConstant("w", Tensor::Zeros({4, 3, 3, 3})), IsOk());
  ASSERT_THAT(g.AddNode(MakeNode("conv", Conv3x3(0), {"x", "w"}, {"y"})), IsOk());
  ASSERT_THAT(g.AddOutput("y"), IsOk());
  EXPECT_THAT(g.Finalize(), StatusIs(absl::StatusCode::kInvalidArgument,
                                     HasSubstr("node 'conv' (Conv2d): input has 5 channels")));
}

TEST(ShapeInferenceTest, PoolCeilModeAndStride) {
  Pool2dAttrs a;
  a.window = Window2d{3, 3, 2, 2, 0, 0, 0, 0, 1, 1};
  a.ceil_mode = true;
  Node node = MakeNode("pool", a, {"x"}, {"y"});
  auto shapes = InferOutputShapes(node, {{kBatch, 8, 10, 11}});
  ASSERT_THAT(shapes, IsOk());
  // floor((10-3)/2)+1 = 4, ceil -> 5 (last window starts at 8 < 10); width (11-3)/2+1 = 5 exactly.
  EXPECT_EQ((*shapes)[0], (Shape{kBatch, 8, 5, 5}));
}

TEST(ShapeInferenceTest, BroadcastsChannelVector) {
  Node node = MakeNode("mul", BinaryAttrs{BinaryKind::kMul}, {"a", "b"}, {"y"});
  auto shapes = InferOutputShapes(node, {{kBatch, 8, 4, 4}, {kBatch, 8, 1, 1}});
  ASSERT_THAT(shapes, IsOk());
  EXPECT_EQ((*shapes)[0], (Shape{kBatch, 8, 4, 4}));
  EXPECT_THAT(InferOutputShapes(node, {{kBatch, 8, 4, 4}, {3, 1, 1}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cannot broadcast [N,8,4,4] with [3,1,1]")));
}

TEST(ShapeInferenceTest, ReshapeKeepsBatchAndRejectsMerging) {
  Node keep = MakeNode("r", ReshapeAttrs{{0, 2, 4, 3, 3}}, {"x"}, {"y"});
  auto shapes = InferOutputShapes(keep, {{kBatch, 8, 3, 3}});
  ASSERT_THAT(shapes, IsOk());
  EXPECT_EQ((*shapes)[0], (Shape{kBatch, 2, 4, 3, 3}));
  Node infer = MakeNode("r", ReshapeAttrs{{-1, 72}}, {"x"}, {"y"});
  shapes = InferOutputShapes(infer, {{kBatch, 8, 3, 3}});
  ASSERT_THAT(shapes, IsOk());
  EXPECT_EQ((*shapes)[0], (Shape{kBatch, 72}));
  Node merge = MakeNode("r", ReshapeAttrs{{-1, 36}}, {"x"}, {"y"});
  EXPECT_THAT(InferOutputShapes(merge, {{kBatch, 8, 3, 3}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("batch dimension on its own")));
}

TEST(ShapeInferenceTest, FlattenAndGemm) {
  Node flatten = MakeNode("f", FlattenAttrs{1}, {"x"}, {"y"});
  auto shapes = InferOutputShapes(flatten, {{kBatch, 8, 3, 3}});
  ASSERT_THAT(shapes, IsOk());
  EXPECT_EQ((*shapes)[0], (Shape{kBatch, 72}));
  GemmAttrs ga;
  ga.transpose_b = true;
  ga.has_bias = true;
  Node gemm = MakeNode("g", ga, {"a", "b", "c"}, {"y"});
  shapes = InferOutputShapes(gemm, {{kBatch, 72}, {10, 72}, {10}});
  ASSERT_THAT(shapes, IsOk());
  EXPECT_EQ((*shapes)[0], (Shape{kBatch, 10}));
  EXPECT_THAT(InferOutputShapes(gemm, {{kBatch, 71}, {10, 72}, {10}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("K=71")));
}

}  // namespace
}  // namespace convoy::runtime
