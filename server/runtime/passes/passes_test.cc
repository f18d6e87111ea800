// Tests for every pass: each builds random graphs, runs the pass on a copy, checks the node counts show the rewrite
// happened (or did not, where it must not), and checks the reference interpreter gives the same outputs before and
// after (max |diff| <= 1e-5 * max |reference| per output).
#include "server/runtime/passes/passes.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "server/runtime/passes/pass_test_graphs.h"

namespace convoy::runtime::passes {
namespace {

using ::convoy::runtime::testing::CountOps;
using ::convoy::runtime::testing::ExpectSameOutputs;
using ::convoy::runtime::testing::RandomGraphBuilder;
using ::convoy::testing::IsOk;

// Finalizes b's graph, applies `pass` to a copy, returns the copy.
template <typename Pass>
Graph ApplyToCopy(RandomGraphBuilder& b, Pass pass, int expected_rewrites) {
  EXPECT_THAT(b.graph().Finalize(), IsOk());
  Graph after = b.graph();
  auto rewrites = pass(after);
  EXPECT_THAT(rewrites, IsOk());
  if (rewrites.ok() && expected_rewrites >= 0) {
    EXPECT_EQ(*rewrites, expected_rewrites);
  }
  return after;
}

TEST(FoldConstantsTest, FoldsConstantSubgraph) {
  RandomGraphBuilder b(4, 5, 5);
  std::string scale = b.Binary(BinaryKind::kAdd, b.Constant({1, 4, 1, 1}), b.Constant({1, 4, 1, 1}));
  std::string y = b.Binary(BinaryKind::kMul, "x", b.Act(scale, Activation{ActivationKind::kTanh}));
  ASSERT_THAT(b.graph().AddOutput(y), IsOk());
  Graph after = ApplyToCopy(b, FoldConstants, 2);
  EXPECT_EQ(b.graph().nodes().size(), 3u);
  EXPECT_EQ(after.nodes().size(), 1u);
  ExpectSameOutputs(b.graph(), after);
}

TEST(EliminateIdentitiesTest, RemovesIdentitiesAndKeepsOutputNames) {
  RandomGraphBuilder b(3, 4, 4);
  std::string y = b.Identity(b.Act(b.Identity("x"), Activation::Relu()));
  ASSERT_THAT(b.graph().AddOutput(y), IsOk());
  Graph after = ApplyToCopy(b, EliminateIdentities, 2);
  EXPECT_EQ(CountOps(after, OpKind::kIdentity), 0);
  EXPECT_EQ(after.nodes().size(), 1u);
  EXPECT_EQ(after.outputs()[0], y);
  ExpectSameOutputs(b.graph(), after);
}

TEST(EliminateIdentitiesTest, KeepsIdentityFromInputToOutput) {
  RandomGraphBuilder b(3, 4, 4);
  ASSERT_THAT(b.graph().AddOutput(b.Identity("x")), IsOk());
  Graph after = ApplyToCopy(b, EliminateIdentities, 0);
  EXPECT_EQ(CountOps(after, OpKind::kIdentity), 1);
}

TEST(EliminateDeadNodesTest, RemovesUnreachableBranchAndItsConstants) {
  RandomGraphBuilder b(3, 6, 6);
  std::string live = b.Conv("x", 4, 3, 1, 1);
  b.Act(b.Conv("x", 8, 1, 1, 0), Activation::Relu());  // read by nobody
  ASSERT_THAT(b.graph().AddOutput(live), IsOk());
  Graph after = ApplyToCopy(b, EliminateDeadNodes, 2);
  EXPECT_EQ(after.nodes().size(), 1u);
  EXPECT_EQ(after.constants().size(), 2u);
  ExpectSameOutputs(b.graph(), after);
}

TEST(FoldBatchNormIntoConvTest, FoldsIntoConvWithAndWithoutBias) {
  RandomGraphBuilder b(3, 9, 9);
  std::string a = b.BatchNorm(b.Conv("x", 8, 3, 2, 1, 1, /*bias=*/false));
  std::string c = b.BatchNorm(b.Conv(b.Act(a, Activation::Relu()), 8, 3, 1, 1, /*groups=*/8, /*bias=*/true));
  ASSERT_THAT(b.graph().AddOutput(c), IsOk());
  Graph after = ApplyToCopy(b, FoldBatchNormIntoConv, 2);
  EXPECT_EQ(CountOps(after, OpKind::kBatchNorm), 0);
  EXPECT_EQ(CountOps(after, OpKind::kConv2d), 2);
  ExpectSameOutputs(b.graph(), after);
}

TEST(FoldBatchNormIntoConvTest, LeavesBatchNormAfterActivationOrSharedConv) {
  RandomGraphBuilder b(3, 6, 6);
  std::string conv = b.Conv("x", 4, 3, 1, 1);
  std::string after_relu = b.BatchNorm(b.Act(conv, Activation::Relu()));
  std::string shared = b.BatchNorm(conv);  // conv output also read by the relu
  ASSERT_THAT(b.graph().AddOutput(after_relu), IsOk());
  ASSERT_THAT(b.graph().AddOutput(shared), IsOk());
  Graph after = ApplyToCopy(b, FoldBatchNormIntoConv, 0);
  EXPECT_EQ(CountOps(after, OpKind::kBatchNorm), 2);
}

TEST(FuseActivationPatternsTest, RecognizesSiluAndHardSwish) {
  RandomGraphBuilder b(4, 5, 5);
  std::string silu = b.Binary(BinaryKind::kMul, "x", b.Act("x", Activation{ActivationKind::kSigmoid}));
  std::string hswish = b.Binary(BinaryKind::kMul, b.Act(silu, Activation{ActivationKind::kHardSigmoid, 1.0f / 6, 0.5f}),
                                silu);
  // alpha 0.2 is ONNX's default hard sigmoid, not hard swish's gate: must stay.
  std::string other = b.Binary(BinaryKind::kMul, hswish, b.Act(hswish, Activation{ActivationKind::kHardSigmoid, 0.2f, 0.5f}));
  ASSERT_THAT(b.graph().AddOutput(other), IsOk());
  Graph after = ApplyToCopy(b, FuseActivationPatterns, 2);
  EXPECT_EQ(CountOps(after, OpKind::kBinary), 1);
  EXPECT_EQ(after.nodes().size(), 4u);
  ExpectSameOutputs(b.graph(), after);
}

// x * (1 + erf(x / sqrt 2)) * 0.5 as torch.onnx writes it, with the division or a multiplication by 1 / sqrt 2 and
// either association of the two products.
std::string ErfGelu(RandomGraphBuilder& b, const std::string& x, bool divide, bool half_last, float half = 0.5f) {
  auto scalar = [&](float v) {
    const std::string name = b.graph().UniqueName("scalar");
    EXPECT_THAT(b.graph().AddConstant(name, Tensor{{}, {v}}), IsOk());
    return name;
  };
  const std::string scaled = divide ? b.Binary(BinaryKind::kDiv, x, scalar(1.41421356f))
                                    : b.Binary(BinaryKind::kMul, scalar(0.70710678f), x);
  const std::string gate = b.Binary(BinaryKind::kAdd, scalar(1.0f), b.Node(UnaryAttrs{UnaryKind::kErf}, {scaled}));
  if (half_last) return b.Binary(BinaryKind::kMul, b.Binary(BinaryKind::kMul, x, gate), scalar(half));
  return b.Binary(BinaryKind::kMul, b.Binary(BinaryKind::kMul, scalar(half), x), gate);
}

TEST(FuseActivationPatternsTest, RecognizesTheErfFormOfGelu) {
  RandomGraphBuilder b(4, 5, 5);
  std::string y = ErfGelu(b, b.Conv("x", 4, 3, 1, 1), /*divide=*/true, /*half_last=*/true);
  y = ErfGelu(b, y, /*divide=*/false, /*half_last=*/false);
  y = ErfGelu(b, y, /*divide=*/true, /*half_last=*/true, /*half=*/0.6f);  // not a GELU: stays
  ASSERT_THAT(b.graph().AddOutput(y), IsOk());
  Graph after = ApplyToCopy(b, FuseActivationPatterns, 2);
  EXPECT_EQ(CountOps(after, OpKind::kActivation), 2);
  EXPECT_EQ(CountOps(after, OpKind::kUnary), 1);
  EXPECT_EQ(after.nodes().size(), 1u + 2u + 5u);
  ExpectSameOutputs(b.graph(), after);
}

TEST(FuseGemmEpilogueTest, LinearLayersOnChannelsLastTensorsTakeTheirBiasAndActivation) {
  // ConvNeXt's block: [N,C,H,W] -> [N,H,W,C], Linear to 2C (MatMul, then the bias added along the last axis, first
  // operand the constant as torch.onnx writes it), GELU, Linear back with a [1,1,C] bias.
  RandomGraphBuilder b(4, 3, 5);
  const std::string nhwc = b.Node(TransposeAttrs{{0, 2, 3, 1}}, {"x"});
  const std::string fc1 = b.Node(GemmAttrs{}, {nhwc, b.Constant({4, 8})});
  const std::string act = b.Act(b.Binary(BinaryKind::kAdd, b.Constant({8}), fc1), Activation{ActivationKind::kGelu});
  const std::string fc2 = b.Node(GemmAttrs{}, {act, b.Constant({8, 4})});
  const std::string y = b.Binary(BinaryKind::kAdd, fc2, b.Constant({1, 1, 4}));
  // A Gemm whose Add broadcasts its output to a larger shape keeps the Add.
  const std::string narrow = b.Node(GemmAttrs{}, {nhwc, b.Constant({4, 1})});
  const std::string wide = b.Binary(BinaryKind::kAdd, narrow, b.Constant({1, 1, 1, 6}));
  ASSERT_THAT(b.graph().AddOutput(y), IsOk());
  ASSERT_THAT(b.graph().AddOutput(wide), IsOk());
  Graph after = ApplyToCopy(b, FuseGemmEpilogue, 3);
  EXPECT_EQ(CountOps(after, OpKind::kGemm), 3);
  EXPECT_EQ(CountOps(after, OpKind::kBinary), 1);
  EXPECT_EQ(CountOps(after, OpKind::kActivation), 0);
  ExpectSameOutputs(b.graph(), after);
}

TEST(FuseConvEpilogueTest, ResNetBlockBecomesTwoFusedConvs) {
  RandomGraphBuilder b(8, 6, 6);
  std::string h = b.Act(b.Conv("x", 8, 3, 1, 1), Activation::Relu());
  std::string y = b.Act(b.Binary(BinaryKind::kAdd, b.Conv(h, 8, 3, 1, 1), "x"), Activation::Relu());
  ASSERT_THAT(b.graph().AddOutput(y), IsOk());
  Graph after = ApplyToCopy(b, FuseConvEpilogue, 3);
  ASSERT_EQ(after.nodes().size(), 2u);
  const auto& second = after.nodes()[1].As<Conv2dAttrs>();
  EXPECT_EQ(second.residual, ResidualPosition::kBeforeActivation);
  EXPECT_EQ(second.activation.kind, ActivationKind::kRelu);
  ExpectSameOutputs(b.graph(), after);
}

TEST(FuseConvEpilogueTest, ResidualAfterActivationAndChannelConstants) {
  RandomGraphBuilder b(6, 5, 5);
  std::string scaled = b.Binary(BinaryKind::kMul, b.Conv("x", 6, 1, 1, 0, 1, false), b.Constant({1, 6, 1, 1}, 0.5f, 2.0f));
  std::string shifted = b.Binary(BinaryKind::kSub, scaled, b.Constant({6, 1, 1}));
  std::string divided = b.Binary(BinaryKind::kDiv, shifted, b.Constant({1}, 1.0f, 2.0f));
  std::string y = b.Binary(BinaryKind::kAdd, "x", b.Act(divided, Activation::Clip(0.0f, 6.0f)));
  ASSERT_THAT(b.graph().AddOutput(y), IsOk());
  Graph after = ApplyToCopy(b, FuseConvEpilogue, 5);
  ASSERT_EQ(after.nodes().size(), 1u);
  const auto& conv = after.nodes()[0].As<Conv2dAttrs>();
  EXPECT_TRUE(conv.has_bias);
  EXPECT_EQ(conv.residual, ResidualPosition::kAfterActivation);
  EXPECT_EQ(conv.activation.kind, ActivationKind::kClip);
  ExpectSameOutputs(b.graph(), after);
}

TEST(FuseConvEpilogueTest, DoesNotFuseWhatIsNotPerChannel) {
  RandomGraphBuilder b(4, 4, 4);
  // [4] broadcasts along W, and constant - conv is not affine in the conv's direction with Sub's sign kept.
  std::string along_w = b.Binary(BinaryKind::kMul, b.Conv("x", 4, 1, 1, 0), b.Constant({4}));
  std::string reversed = b.Binary(BinaryKind::kDiv, b.Constant({1, 4, 1, 1}, 1.0f, 2.0f), b.Conv("x", 4, 1, 1, 0));
  ASSERT_THAT(b.graph().AddOutput(along_w), IsOk());
  ASSERT_THAT(b.graph().AddOutput(reversed), IsOk());
  Graph after = ApplyToCopy(b, FuseConvEpilogue, 0);
  EXPECT_EQ(CountOps(after, OpKind::kBinary), 2);
}

TEST(FuseChannelShuffleTest, ReshapeTransposeReshapeBecomesShuffle) {
  RandomGraphBuilder b(6, 3, 3);
  std::string v = b.Node(ReshapeAttrs{{0, 3, 2, 3, 3}}, {"x"});
  std::string t = b.Node(TransposeAttrs{{0, 2, 1, 3, 4}}, {v});
  std::string y = b.Node(ReshapeAttrs{{0, -1, 3, 3}}, {t});
  ASSERT_THAT(b.graph().AddOutput(y), IsOk());
  Graph after = ApplyToCopy(b, FuseChannelShuffle, 1);
  ASSERT_EQ(after.nodes().size(), 1u);
  EXPECT_EQ(after.nodes()[0].As<ChannelShuffleAttrs>().groups, 3);
  ExpectSameOutputs(b.graph(), after);
}

PadAttrs SpatialPad(int64_t top, int64_t left, int64_t bottom, int64_t right, PadMode mode = PadMode::kConstant,
                    float value = 0.0f) {
  return PadAttrs{mode, {0, 0, top, left, 0, 0, bottom, right}, value};
}

TEST(FoldPadIntoConvTest, AsymmetricSamePaddingBecomesTheConvsPadding) {
  RandomGraphBuilder b(3, 9, 8);
  // TF "same" for a stride-2 3x3 conv on 9x8: nothing before, one row/column after; then a padded conv adds to its
  // own pads (1 + 1 <= 2 for a 3x3 kernel); a dilated 3x3 (reach 4) takes pads of 3.
  std::string a = b.Conv(b.Node(SpatialPad(0, 0, 1, 1), {"x"}), 4, 3, 2, 0);
  std::string c = b.Conv(b.Node(SpatialPad(1, 0, 0, 1), {a}), 4, 3, 1, 1);
  Conv2dAttrs dilated;
  dilated.window = Window2d{3, 3, 1, 1, 0, 0, 0, 0, 2, 2};
  std::string d = b.Node(dilated, {b.Node(SpatialPad(3, 1, 2, 4), {c}), b.Constant({2, 4, 3, 3})});
  ASSERT_THAT(b.graph().AddOutput(d), IsOk());
  Graph after = ApplyToCopy(b, FoldPadIntoConv, 3);
  EXPECT_EQ(CountOps(after, OpKind::kPad), 0) << after.ToString();
  ASSERT_EQ(after.nodes().size(), 3u);
  const Window2d& w = after.nodes()[1].As<Conv2dAttrs>().window;
  EXPECT_EQ(std::vector<int64_t>({w.pad_top, w.pad_left, w.pad_bottom, w.pad_right}),
            std::vector<int64_t>({2, 1, 1, 2}));
  ExpectSameOutputs(b.graph(), after);
}

TEST(FoldPadIntoConvTest, KeepsPadsThatAreNotZeroSpatialOrReachPastTheKernel) {
  RandomGraphBuilder b(4, 7, 7);
  std::vector<std::string> outs = {
      b.Conv(b.Node(SpatialPad(1, 1, 1, 1, PadMode::kReflect), {"x"}), 4, 3, 1, 0),
      b.Conv(b.Node(SpatialPad(1, 1, 1, 1, PadMode::kConstant, 0.5f), {"x"}), 4, 3, 1, 0),
      b.Conv(b.Node(SpatialPad(3, 0, 0, 0), {"x"}), 4, 3, 1, 0),  // 3 rows of zeros > the 3x3 kernel's reach of 2
      b.Conv(b.Node(SpatialPad(1, 1, 1, 1), {"x"}), 4, 1, 1, 0),  // a 1x1 kernel reaches no padding
  };
  // Padding the channels is not a convolution's padding.
  std::string channels = b.Node(PadAttrs{PadMode::kConstant, {0, 1, 0, 0, 0, 1, 0, 0}, 0.0f}, {"x"});
  outs.push_back(b.Conv(channels, 4, 3, 1, 1));
  // Shared: the 3x3 conv absorbs it, the pool still reads the padded tensor.
  std::string shared = b.Node(SpatialPad(1, 1, 1, 1), {"x"});
  outs.push_back(b.Conv(shared, 4, 3, 1, 0));
  Pool2dAttrs pool;
  pool.window = Window2d{2, 2, 2, 2, 0, 0, 0, 0, 1, 1};
  outs.push_back(b.Node(pool, {shared}));
  for (const std::string& o : outs) ASSERT_THAT(b.graph().AddOutput(o), IsOk());
  Graph after = ApplyToCopy(b, FoldPadIntoConv, 1);
  EXPECT_EQ(CountOps(after, OpKind::kPad), 6);
  ExpectSameOutputs(b.graph(), after);
}

TEST(OptimizeGraphTest, RandomResNetLikeNetworkKeepsOnlyFusedOps) {
  RandomGraphBuilder b(3, 12, 12);
  std::string h = b.Act(b.BatchNorm(b.Conv("x", 8, 3, 2, 1, 1, false)), Activation::Relu());
  for (int block = 0; block < 2; ++block) {
    std::string r = b.Act(b.BatchNorm(b.Conv(b.Identity(h), 8, 3, 1, 1, 1, false)), Activation::Relu());
    r = b.BatchNorm(b.Conv(r, 8, 3, 1, 1, 2, false));
    h = b.Act(b.Binary(BinaryKind::kAdd, r, h), Activation::Relu());
  }
  Pool2dAttrs gap;
  gap.global = true;
  gap.kind = PoolKind::kAverage;
  std::string pooled = b.Node(FlattenAttrs{1}, {b.Node(gap, {h})});
  GemmAttrs fc;
  fc.transpose_b = true;
  fc.has_bias = true;
  std::string logits = b.Node(fc, {pooled, b.Constant({5, 8}), b.Constant({5})});
  ASSERT_THAT(b.graph().AddOutput(b.Node(SoftmaxAttrs{1}, {logits})), IsOk());
  ASSERT_THAT(b.graph().Finalize(), IsOk());
  Graph after = b.graph();
  CONVOY_ASSERT_OK_AND_ASSIGN(OptimizeStats stats, OptimizeGraph(after));
  EXPECT_EQ(stats.batch_norms_folded, 5);
  EXPECT_EQ(stats.identities_removed, 2);
  // 5 convs + pool + flatten + gemm + softmax.
  EXPECT_EQ(after.nodes().size(), 9u) << after.ToString();
  ExpectSameOutputs(b.graph(), after);
}

}  // namespace
}  // namespace convoy::runtime::passes
