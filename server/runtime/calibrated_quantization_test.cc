// precision int8 on an FP32 graph: residual adds separated, the calibration targets, the table turned into
// quantize-dequantize nodes that the INT8 folding takes (every layer of a MobileNet-style block folds), plans that
// run those layers as INT8 steps and agree with the quantization simulated in FP32 and, to the quantization's
// error, with the FP32 graph; tables that do not fit the graph fail naming the entry; layers kept FP32 cost nothing.
//
// The table is made here as `convoy calibrate` makes it (min-max over the reference interpreter's values on random
// inputs), so the test needs no model file.
#include "server/runtime/calibrated_quantization.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "kernels/cpu/cpu_device.h"
#include "server/runtime/executor.h"
#include "server/runtime/planner.h"
#include "server/runtime/quantized_conv_folding.h"
#include "server/runtime/reference_interpreter.h"

namespace convoy::runtime {
namespace {

using ::convoy::testing::IsOk;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

uint32_t FreshSeed() { return std::random_device{}(); }

// The INT8 steps and the FP32 simulation of the same quantization land on the same step except at rounding ties,
// where they pick neighbours, and a step that differs in an early layer travels on through the next ones. Measured
// over 8 runs x 2 layouts of the four-layer block: 1196-1199 of 1200 outputs identical. The largest difference, over
// 8495 seeded runs of either layout (Zen 4, 2026-12-06): 0 steps in 797, 1 in 7116, 2 in 557, 3 in 24, 4 in 1 (3 was
// the bound before and failed about once in 2000-4000 runs). Asserted: 5 steps, 98 % identical.
constexpr float kStepsFromSimulation = 5;

// INT8 against FP32 on these random blocks, as a fraction of the largest FP32 output: the MEAN error. Measured over
// 700 fresh seeds: 0.0013-0.0027 (median 0.0016-0.0017). The largest single error has a long tail with random
// weights (median 0.012-0.015, 1 % of seeds above 0.10, worst seen 0.25), so no bound on it is a property of the
// code; the exact check of the INT8 steps is the one against the simulation above. Asserted: 0.01.
constexpr double kMeanErrorOfFp32Output = 0.01;

// The same for the classifier tail's logits (TailGraph: 30 logits of 16 pooled values each; random weights can
// cancel, which makes the largest logit small). Measured over 2000 fresh seeds: median 0.0017, 99th percentile
// 0.0084, worst 0.021. Asserted: 0.05.
constexpr double kTailMeanErrorOfFp32Output = 0.05;

Tensor Random(Shape shape, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  Tensor t = Tensor::Zeros(std::move(shape));
  for (float& v : t.data) v = dist(rng);
  return t;
}

// x [N,8,10,10] -> conv1 3x3 (ReLU6) -> conv2 1x1 + x (residual fused, as the passes leave a MobileNet projection)
// -> conv3 1x1 (`head` activation) -> relu -> out.
absl::StatusOr<Graph> BlockGraph(uint32_t seed, Activation head = Activation::Relu(),
                                 Activation block = Activation{}) {
  std::mt19937 rng(seed);
  Graph g;
  CONVOY_RETURN_IF_ERROR(g.AddInput("x", {kBatch, 8, 10, 10}));
  CONVOY_RETURN_IF_ERROR(g.AddConstant("w1", Random({16, 8, 3, 3}, rng, -0.3f, 0.3f)));
  CONVOY_RETURN_IF_ERROR(g.AddConstant("b1", Random({16}, rng, -0.2f, 0.5f)));
  CONVOY_RETURN_IF_ERROR(g.AddConstant("w2", Random({8, 16, 1, 1}, rng, -0.3f, 0.3f)));
  CONVOY_RETURN_IF_ERROR(g.AddConstant("b2", Random({8}, rng, -0.2f, 0.2f)));
  CONVOY_RETURN_IF_ERROR(g.AddConstant("w3", Random({4, 8, 1, 1}, rng, -0.5f, 0.5f)));
  CONVOY_RETURN_IF_ERROR(g.AddConstant("b3", Random({4}, rng, 0.0f, 0.3f)));
  Conv2dAttrs c1;
  c1.window.kernel_h = c1.window.kernel_w = 3;
  c1.window.pad_top = c1.window.pad_left = c1.window.pad_bottom = c1.window.pad_right = 1;
  c1.has_bias = true;
  c1.activation = Activation::Clip(0, 6);
  CONVOY_RETURN_IF_ERROR(g.AddNode(MakeNode("conv1", c1, {"x", "w1", "b1"}, {"y1"})));
  Conv2dAttrs c2;
  c2.has_bias = true;
  c2.residual = ResidualPosition::kBeforeActivation;
  c2.activation = block;  // identity: a projection + x; ReLU: ResNet's relu(conv + x)
  CONVOY_RETURN_IF_ERROR(g.AddNode(MakeNode("conv2", c2, {"y1", "w2", "b2", "x"}, {"y2"})));
  Conv2dAttrs c3;
  c3.has_bias = true;
  c3.activation = head;
  CONVOY_RETURN_IF_ERROR(g.AddNode(MakeNode("conv3", c3, {"y2", "w3", "b3"}, {"y3"})));
  CONVOY_RETURN_IF_ERROR(g.AddNode(MakeNode("relu", ActivationAttrs{Activation::Relu()}, {"y3"}, {"out"})));
  CONVOY_RETURN_IF_ERROR(g.AddOutput("out"));
  CONVOY_RETURN_IF_ERROR(g.Finalize());
  return g;
}

// A classifier's tail: x [N,8,10,10] -> conv1 3x3 (ReLU) -> global average pool -> Flatten -> Gemm (10 classes,
// B as [10, 16] with transpose_b or [16, 10]) -> logits. With `se`, the pool feeds a 1x1 convolution instead (a
// squeeze-and-excitation branch), whose output is the graph's.
absl::StatusOr<Graph> TailGraph(uint32_t seed, bool transpose_b, bool se = false) {
  std::mt19937 rng(seed);
  Graph g;
  CONVOY_RETURN_IF_ERROR(g.AddInput("x", {kBatch, 8, 10, 10}));
  CONVOY_RETURN_IF_ERROR(g.AddConstant("w1", Random({16, 8, 3, 3}, rng, -0.3f, 0.3f)));
  CONVOY_RETURN_IF_ERROR(g.AddConstant("b1", Random({16}, rng, -0.2f, 0.5f)));
  Conv2dAttrs c1;
  c1.window.kernel_h = c1.window.kernel_w = 3;
  c1.window.pad_top = c1.window.pad_left = c1.window.pad_bottom = c1.window.pad_right = 1;
  c1.has_bias = true;
  c1.activation = Activation::Relu();
  CONVOY_RETURN_IF_ERROR(g.AddNode(MakeNode("conv1", c1, {"x", "w1", "b1"}, {"y1"})));
  Pool2dAttrs pool;
  pool.kind = PoolKind::kAverage;
  pool.global = true;
  CONVOY_RETURN_IF_ERROR(g.AddNode(MakeNode("pool", pool, {"y1"}, {"pooled"})));
  if (se) {
    CONVOY_RETURN_IF_ERROR(g.AddConstant("w2", Random({4, 16, 1, 1}, rng, -0.5f, 0.5f)));
    Conv2dAttrs c2;
    c2.activation = Activation::Relu();
    CONVOY_RETURN_IF_ERROR(g.AddNode(MakeNode("se_reduce", c2, {"pooled", "w2"}, {"logits"})));
  } else {
    CONVOY_RETURN_IF_ERROR(g.AddNode(MakeNode("flatten", FlattenAttrs{1}, {"pooled"}, {"flat"})));
    CONVOY_RETURN_IF_ERROR(
        g.AddConstant("fc_w", Random(transpose_b ? Shape{10, 16} : Shape{16, 10}, rng, -0.5f, 0.5f)));
    CONVOY_RETURN_IF_ERROR(g.AddConstant("fc_b", Random({10}, rng, -0.3f, 0.3f)));
    GemmAttrs gemm;
    gemm.transpose_b = transpose_b;
    gemm.has_bias = true;
    CONVOY_RETURN_IF_ERROR(g.AddNode(MakeNode("fc", gemm, {"flat", "fc_w", "fc_b"}, {"logits"})));
  }
  CONVOY_RETURN_IF_ERROR(g.AddOutput("logits"));
  CONVOY_RETURN_IF_ERROR(g.Finalize());
  return g;
}

// A min-max table for `graph` over `batches` random batches of 4, as `convoy calibrate` makes it.
absl::StatusOr<CalibrationTable> MinMaxTable(const Graph& graph, uint32_t seed, int batches = 4) {
  Graph g = graph;
  CONVOY_RETURN_IF_ERROR(SeparateResidualAdds(g).status());
  const CalibrationTargets targets = FindCalibrationTargets(g);
  for (const std::string& t : targets.tensors) {
    if (t != "x" && !g.IsGraphOutput(t)) CONVOY_RETURN_IF_ERROR(g.AddOutput(t));
  }
  CONVOY_RETURN_IF_ERROR(g.Finalize());
  std::vector<TensorStatistics> stats(targets.tensors.size());
  std::mt19937 rng(seed);
  for (int b = 0; b < batches; ++b) {
    std::map<std::string, Tensor> inputs = {{"x", Random({4, 8, 10, 10}, rng, -1.0f, 1.0f)}};
    CONVOY_ASSIGN_OR_RETURN(auto values, RunReference(g, inputs));
    for (size_t i = 0; i < stats.size(); ++i) {
      const Tensor& v = targets.tensors[i] == "x" ? inputs.at("x") : values.at(targets.tensors[i]);
      stats[i].Add(v.data.data(), static_cast<int64_t>(v.data.size()));
    }
  }
  CalibrationTable table;
  for (size_t i = 0; i < stats.size(); ++i) {
    CONVOY_ASSIGN_OR_RETURN(ActivationRange range, ChooseRange(stats[i], CalibrationMethod::kMinMax, 100, false));
    TensorQuantization q = QuantizeRange(range, false);
    q.name = targets.tensors[i];
    table.tensors.push_back(q);
  }
  for (LayerCalibration layer : targets.layers) {
    if (layer.has_weights() && layer.int8) {
      for (const Node& n : g.nodes()) {
        if (n.name == layer.name) layer.weight_scales = LayerWeightScales(g, n);
      }
    }
    table.layers.push_back(layer);
  }
  return table;
}

int CountQdqNodes(const Graph& graph) {
  int n = 0;
  for (const Node& node : graph.nodes()) {
    n += node.op() == OpKind::kActivation &&
         node.As<ActivationAttrs>().activation.kind == ActivationKind::kQuantizeDequantizeU8;
  }
  return n;
}

// Runs `graph` planned on the CPU (FP32 plan, INT8 steps on) at `batch` on `x`; the output poisoned first.
absl::StatusOr<std::vector<float>> RunPlan(const Graph& graph, Layout layout, int batch, const Tensor& x,
                                           std::shared_ptr<const ExecutionPlan>* plan_out = nullptr) {
  PlannerOptions options;
  options.device = &CpuDevice::Default();
  options.layout = layout;
  options.max_batch_size = batch;
  CONVOY_ASSIGN_OR_RETURN(std::shared_ptr<const ExecutionPlan> plan, BuildExecutionPlan(graph, options));
  CONVOY_ASSIGN_OR_RETURN(auto executor, Executor::Create({plan}));
  std::vector<float> out(executor->ExpectedOutputDesc(0, batch).num_elements(), std::nanf(""));
  std::vector<TensorView> ins = {{executor->ExpectedInputDesc(0, batch), const_cast<float*>(x.data.data())}};
  std::vector<TensorView> outs = {{executor->ExpectedOutputDesc(0, batch), out.data()}};
  CONVOY_RETURN_IF_ERROR(executor->Run(batch, ins, outs));
  if (plan_out) *plan_out = plan;
  return out;
}

TEST(SeparateResidualAddsTest, SplitsAFusedProjectionResidualAndKeepsTheMeaning) {
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph fused, BlockGraph(seed));
  Graph separated = fused;
  CONVOY_ASSERT_OK_AND_ASSIGN(int count, SeparateResidualAdds(separated));
  EXPECT_EQ(count, 1);
  const int add = separated.ProducerIndex("y2");
  ASSERT_GE(add, 0);
  EXPECT_EQ(separated.nodes()[add].name, "conv2/residual_add");
  EXPECT_THAT(separated.nodes()[add].inputs, ElementsAre("conv2/conv_output", "x"));
  const Node& conv2 = separated.nodes()[separated.ProducerIndex("conv2/conv_output")];
  EXPECT_EQ(conv2.inputs.size(), 3u);
  EXPECT_EQ(conv2.As<Conv2dAttrs>().residual, ResidualPosition::kNone);
  std::mt19937 rng(seed + 1);
  const std::map<std::string, Tensor> inputs = {{"x", Random({2, 8, 10, 10}, rng, -1.0f, 1.0f)}};
  CONVOY_ASSERT_OK_AND_ASSIGN(auto want, RunReference(fused, inputs));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto got, RunReference(separated, inputs));
  for (size_t i = 0; i < want.at("out").data.size(); ++i) {
    ASSERT_NEAR(got.at("out").data[i], want.at("out").data[i], 1e-5f) << i;
  }
  // ResNet's relu(conv + x): conv, Add, ReLU, with the same meaning.
  Graph resnet = fused;
  resnet.mutable_nodes()[resnet.ProducerIndex("y2")].As<Conv2dAttrs>().activation = Activation::Relu();
  CONVOY_ASSERT_OK_AND_ASSIGN(auto resnet_want, RunReference(resnet, inputs));
  CONVOY_ASSERT_OK_AND_ASSIGN(int one, SeparateResidualAdds(resnet));
  EXPECT_EQ(one, 1);
  EXPECT_EQ(resnet.nodes()[resnet.ProducerIndex("y2")].name, "conv2/residual_relu");
  CONVOY_ASSERT_OK_AND_ASSIGN(auto resnet_got, RunReference(resnet, inputs));
  for (size_t i = 0; i < resnet_want.at("out").data.size(); ++i) {
    ASSERT_NEAR(resnet_got.at("out").data[i], resnet_want.at("out").data[i], 1e-5f) << i;
  }
}

TEST(FindCalibrationTargetsTest, ListsTheTensorsAroundEveryConvAndAdd) {
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, BlockGraph(FreshSeed(), Activation{ActivationKind::kSigmoid, 0, 0}));
  ASSERT_THAT(SeparateResidualAdds(graph).status(), IsOk());
  const CalibrationTargets targets = FindCalibrationTargets(graph);
  // conv3's sigmoid cannot run INT8: its output is not measured.
  EXPECT_THAT(targets.tensors, ElementsAre("x", "y1", "conv2/conv_output", "y2"));
  ASSERT_EQ(targets.layers.size(), 4u);
  EXPECT_EQ(targets.layers[2].name, "conv2/residual_add");
  EXPECT_EQ(targets.layers[2].kind, CalibratedLayerKind::kResidualAdd);
  EXPECT_FALSE(targets.layers[3].int8);
  EXPECT_THAT(targets.layers[3].reason, HasSubstr("activation sigmoid is fused into it"));
}

TEST(QuantizeWithCalibrationTableTest, EveryLayerRunsInt8AndAgreesWithTheSimulationAndFp32) {
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph fp32, BlockGraph(seed));
  CONVOY_ASSERT_OK_AND_ASSIGN(CalibrationTable table, MinMaxTable(fp32, seed + 1));
  Graph int8 = fp32;
  CONVOY_ASSERT_OK_AND_ASSIGN(std::vector<LayerOutcome> outcomes, QuantizeWithCalibrationTable(int8, table, "t.yaml"));
  ASSERT_EQ(outcomes.size(), 4u);
  for (const LayerOutcome& o : outcomes) EXPECT_TRUE(o.int8) << o.node << ": " << o.detail;
  EXPECT_THAT(outcomes[0].detail, HasSubstr("weights INT8 per channel (16 scales"));
  EXPECT_EQ(CountQdqNodes(int8), 5);  // x, y1, conv2's own output, the sum, y3
  const QuantizedConvAnalysis analysis = AnalyzeQuantizedConvs(int8);
  EXPECT_EQ(analysis.folds.size(), 3u);
  EXPECT_EQ(analysis.adds.size(), 1u);
  const float y3_step = table.FindTensor("y3")->scale;

  std::mt19937 rng(seed + 2);
  for (Layout layout : {Layout::kNHWC, Layout::kNCHW8c}) {
    SCOPED_TRACE(LayoutName(layout));
    const int batch = 3;
    const Tensor x = Random({batch, 8, 10, 10}, rng, -1.0f, 1.0f);
    std::shared_ptr<const ExecutionPlan> plan;
    CONVOY_ASSERT_OK_AND_ASSIGN(std::vector<float> got, RunPlan(int8, layout, batch, x, &plan));
    int int8_steps = 0;
    for (const QuantizedLayerChoice& layer : plan->quantized_layers()) int8_steps += layer.int8;
    EXPECT_EQ(int8_steps, 4) << plan->QuantizationSummary();
    CONVOY_ASSERT_OK_AND_ASSIGN(auto simulated, RunReference(int8, {{"x", x}}));
    CONVOY_ASSERT_OK_AND_ASSIGN(auto reference, RunReference(fp32, {{"x", x}}));
    const std::vector<float>& sim = simulated.at("out").data;
    const std::vector<float>& ref = reference.at("out").data;
    ASSERT_EQ(got.size(), sim.size());
    size_t identical = 0;
    double largest = 0, worst = 0, total = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      // The INT8 steps against the FP32 simulation of the same quantization (kStepsFromSimulation).
      ASSERT_LE(std::fabs(got[i] - sim[i]), kStepsFromSimulation * y3_step * 1.001f) << i << ": " << got[i] << " vs "
                                                                                       << sim[i];
      identical += std::fabs(got[i] - sim[i]) < y3_step * 0.001f;
      largest = std::max(largest, std::fabs(static_cast<double>(ref[i])));
      worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - ref[i]));
      total += std::fabs(static_cast<double>(got[i]) - ref[i]);
    }
    EXPECT_GE(identical, got.size() * 98 / 100);
    // Against FP32 (four 8-bit layers with min-max ranges from the same distribution): the mean error
    // (kMeanErrorOfFp32Output).
    const double mean = total / static_cast<double>(got.size());
    EXPECT_LE(mean, kMeanErrorOfFp32Output * largest) << "step " << y3_step << ", max error " << worst;
    std::cout << LayoutName(layout) << ": INT8 vs FP32 mean error " << mean << ", max " << worst << " ("
              << worst / y3_step << " output steps, output max " << largest << "); " << identical << " of "
              << got.size() << " equal to the simulation\n";
  }
}

TEST(FindCalibrationTargetsTest, AClassifiersPoolAndGemmAreLayersAnSeBranchsPoolIsNot) {
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, TailGraph(FreshSeed(), /*transpose_b=*/true));
  CalibrationTargets targets = FindCalibrationTargets(graph);
  // The Flatten's output is measured as the Gemm's input: the same values as the pool's, so the same quantization.
  EXPECT_THAT(targets.tensors, ElementsAre("x", "y1", "pooled", "flat"));
  ASSERT_EQ(targets.layers.size(), 3u);
  EXPECT_EQ(targets.layers[1].kind, CalibratedLayerKind::kGlobalAveragePool);
  EXPECT_EQ(targets.layers[2].kind, CalibratedLayerKind::kGemm);
  for (const LayerCalibration& layer : targets.layers) EXPECT_TRUE(layer.int8) << layer.name << ": " << layer.reason;
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph se, TailGraph(FreshSeed(), true, /*se=*/true));
  targets = FindCalibrationTargets(se);
  ASSERT_EQ(targets.layers.size(), 2u);  // conv1 and se_reduce: the pool is no layer of the table
  EXPECT_EQ(targets.layers[1].name, "se_reduce");
  // A Gemm the INT8 kernels cannot run keeps its pool FP32 too, and says why.
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph scaled, TailGraph(FreshSeed(), true));
  scaled.mutable_nodes()[scaled.ProducerIndex("logits")].As<GemmAttrs>().alpha = 0.5f;
  targets = FindCalibrationTargets(scaled);
  ASSERT_EQ(targets.layers.size(), 3u);
  EXPECT_FALSE(targets.layers[1].int8);
  EXPECT_THAT(targets.layers[1].reason, HasSubstr("the Gemm after it stays FP32: its alpha or beta is not 1"));
  EXPECT_FALSE(targets.layers[2].int8);
  EXPECT_THAT(targets.tensors, ElementsAre("x", "y1"));
}

class CalibratedTailTest : public ::testing::TestWithParam<bool> {};

// The pool and the Gemm run as INT8 steps (the pool as a depthwise convolution, the Gemm as a 1x1 convolution with
// an FP32 output, the Flatten between them on the 8-bit bytes), and the logits agree with the FP32 simulation of the
// same quantization and, to the quantization's error, with FP32.
TEST_P(CalibratedTailTest, PoolAndGemmRunInt8) {
  const bool transpose_b = GetParam();
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph fp32, TailGraph(seed, transpose_b));
  CONVOY_ASSERT_OK_AND_ASSIGN(CalibrationTable table, MinMaxTable(fp32, seed + 1));
  ASSERT_EQ(table.FindTensor("pooled")->scale, table.FindTensor("flat")->scale);
  ASSERT_EQ(table.FindTensor("pooled")->zero_point, table.FindTensor("flat")->zero_point);
  ASSERT_EQ(table.FindLayer("fc")->weight_scales.size(), 10u);
  // The Gemm's scales are per output column: each is the largest |w| of its column over 127.
  const Tensor& fc_w = *fp32.FindConstant("fc_w");
  for (int k = 0; k < 10; ++k) {
    float largest = 0;
    for (int c = 0; c < 16; ++c) largest = std::max(largest, std::fabs(fc_w.data[transpose_b ? k * 16 + c : c * 10 + k]));
    EXPECT_FLOAT_EQ(table.FindLayer("fc")->weight_scales[k], largest / 127) << k;
  }
  Graph int8 = fp32;
  CONVOY_ASSERT_OK_AND_ASSIGN(std::vector<LayerOutcome> outcomes, QuantizeWithCalibrationTable(int8, table, "t.yaml"));
  ASSERT_EQ(outcomes.size(), 3u);
  for (const LayerOutcome& o : outcomes) EXPECT_TRUE(o.int8) << o.node << ": " << o.detail;
  EXPECT_EQ(outcomes[1].kind, CalibratedLayerKind::kGlobalAveragePool);
  EXPECT_THAT(outcomes[1].detail, HasSubstr("as a depthwise convolution with unit weights"));
  EXPECT_EQ(outcomes[2].kind, CalibratedLayerKind::kGemm);
  EXPECT_THAT(outcomes[2].detail, HasSubstr(", out FP32, weights INT8"));
  EXPECT_THAT(outcomes[2].detail, HasSubstr("weights INT8 per channel (10 scales"));
  EXPECT_EQ(CountQdqNodes(int8), 4);  // x, y1, pooled, flat

  std::mt19937 rng(seed + 2);
  const int batch = 3;
  const Tensor x = Random({batch, 8, 10, 10}, rng, -1.0f, 1.0f);
  std::shared_ptr<const ExecutionPlan> plan;
  CONVOY_ASSERT_OK_AND_ASSIGN(std::vector<float> got, RunPlan(int8, Layout::kNHWC, batch, x, &plan));
  int int8_steps = 0;
  for (const QuantizedLayerChoice& layer : plan->quantized_layers()) int8_steps += layer.int8;
  EXPECT_EQ(int8_steps, 3) << plan->QuantizationSummary();
  CONVOY_ASSERT_OK_AND_ASSIGN(auto simulated, RunReference(int8, {{"x", x}}));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto reference, RunReference(fp32, {{"x", x}}));
  const std::vector<float>& sim = simulated.at("logits").data;
  const std::vector<float>& ref = reference.at("logits").data;
  ASSERT_EQ(got.size(), sim.size());
  // One step of a pooled value moves a logit by at most step x max |w| of its column; kStepsFromSimulation of them
  // (ties rounded to the other neighbour in an earlier layer) bound the difference from the simulation.
  const float pooled_step = table.FindTensor("flat")->scale;
  float column_sum = 0;
  for (float w : fc_w.data) column_sum = std::max(column_sum, std::fabs(w));
  const float bound = kStepsFromSimulation * pooled_step * column_sum * 16;
  double largest = 0, total = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << i;
    ASSERT_LE(std::fabs(got[i] - sim[i]), bound) << i << ": " << got[i] << " vs " << sim[i];
    largest = std::max(largest, std::fabs(static_cast<double>(ref[i])));
    total += std::fabs(static_cast<double>(got[i]) - ref[i]);
  }
  const double mean = total / static_cast<double>(got.size());
  std::cout << "INT8 tail vs FP32: mean error " << mean / largest << " of the largest logit\n";
  EXPECT_LE(mean, kTailMeanErrorOfFp32Output * largest);
}

INSTANTIATE_TEST_SUITE_P(BothWeightLayouts, CalibratedTailTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("TransposedB") : std::string("PlainB");
                         });

TEST(QuantizeWithCalibrationTableTest, ResNetStyleReluAfterTheResidualRunsInt8) {
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph fp32, BlockGraph(seed, Activation::Relu(), Activation::Relu()));
  Graph separated = fp32;
  CONVOY_ASSERT_OK_AND_ASSIGN(int count, SeparateResidualAdds(separated));
  EXPECT_EQ(count, 1);
  EXPECT_EQ(separated.nodes()[separated.ProducerIndex("y2")].name, "conv2/residual_relu");
  // The add's measured output is the ReLU's: that is what its INT8 step will write.
  EXPECT_THAT(FindCalibrationTargets(separated).tensors, ElementsAre("x", "y1", "conv2/conv_output", "y2", "y3"));
  CONVOY_ASSERT_OK_AND_ASSIGN(CalibrationTable table, MinMaxTable(fp32, seed + 1));
  EXPECT_EQ(table.FindTensor("y2")->zero_point, 0);
  Graph int8 = fp32;
  CONVOY_ASSERT_OK_AND_ASSIGN(std::vector<LayerOutcome> outcomes, QuantizeWithCalibrationTable(int8, table, "t.yaml"));
  ASSERT_EQ(outcomes.size(), 4u);
  for (const LayerOutcome& o : outcomes) EXPECT_TRUE(o.int8) << o.node << ": " << o.detail;
  EXPECT_EQ(int8.nodes()[int8.ProducerIndex("y2")].name, "conv2/residual_add");  // the ReLU went
  std::mt19937 rng(seed + 2);
  const Tensor x = Random({2, 8, 10, 10}, rng, -1.0f, 1.0f);
  CONVOY_ASSERT_OK_AND_ASSIGN(std::vector<float> got, RunPlan(int8, Layout::kNHWC, 2, x));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto simulated, RunReference(int8, {{"x", x}}));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto reference, RunReference(fp32, {{"x", x}}));
  const float step = table.FindTensor("y3")->scale;
  double largest = 0, worst = 0, total = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_LE(std::fabs(got[i] - simulated.at("out").data[i]), kStepsFromSimulation * step * 1.001f) << i;
    largest = std::max(largest, std::fabs(static_cast<double>(reference.at("out").data[i])));
    worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - reference.at("out").data[i]));
    total += std::fabs(static_cast<double>(got[i]) - reference.at("out").data[i]);
  }
  EXPECT_LE(total / static_cast<double>(got.size()), kMeanErrorOfFp32Output * largest) << "max error " << worst;
  // With INT8 symmetric activations the saturation is no ReLU: the ReLU stays and the add stays FP32.
  CalibrationTable symmetric = table;
  for (TensorQuantization& t : symmetric.tensors) t.is_signed = true, t.zero_point = 0;
  symmetric.tensors[3].scale = std::max(std::fabs(symmetric.tensors[3].lo), symmetric.tensors[3].hi) / 127;
  Graph kept = fp32;
  CONVOY_ASSERT_OK_AND_ASSIGN(outcomes, QuantizeWithCalibrationTable(kept, symmetric, "t.yaml"));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto kept_out, RunReference(kept, {{"x", x}}));
  for (float v : kept_out.at("out").data) ASSERT_GE(v, 0.0f);
  bool relu_present = false;
  for (const Node& n : kept.nodes()) {
    relu_present |= n.op() == OpKind::kActivation && n.As<ActivationAttrs>().activation.kind == ActivationKind::kRelu &&
                    n.outputs[0] == "y2";
  }
  EXPECT_TRUE(relu_present || kept.nodes()[kept.ProducerIndex("y2")].op() == OpKind::kConv2d);
}

TEST(QuantizeWithCalibrationTableTest, LayersKeptFp32StayExactlyFp32) {
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph fp32, BlockGraph(seed));
  CONVOY_ASSERT_OK_AND_ASSIGN(CalibrationTable table, MinMaxTable(fp32, seed + 1));
  for (LayerCalibration& layer : table.layers) {
    if (layer.name == "conv3") layer.int8 = false, layer.reason = "the classifier";
  }
  Graph int8 = fp32;
  CONVOY_ASSERT_OK_AND_ASSIGN(std::vector<LayerOutcome> outcomes, QuantizeWithCalibrationTable(int8, table, "t.yaml"));
  auto conv3 = std::find_if(outcomes.begin(), outcomes.end(), [](const LayerOutcome& o) { return o.node == "conv3"; });
  ASSERT_NE(conv3, outcomes.end());
  EXPECT_FALSE(conv3->int8);
  EXPECT_THAT(conv3->detail, HasSubstr("kept FP32 by t.yaml: the classifier"));
  EXPECT_EQ(int8.FindConstant("w3")->data, fp32.FindConstant("w3")->data);  // untouched weights
  EXPECT_NE(int8.FindConstant("w1")->data, fp32.FindConstant("w1")->data);  // quantized ones
  EXPECT_EQ(CountQdqNodes(int8), 4);  // y3 is not quantized
  // No table entry at all: FP32 too, and the rest still runs INT8.
  table.layers.erase(table.layers.begin());  // conv1
  Graph partial = fp32;
  CONVOY_ASSERT_OK_AND_ASSIGN(outcomes, QuantizeWithCalibrationTable(partial, table, "t.yaml"));
  int int8_layers = 0;
  for (const LayerOutcome& o : outcomes) {
    int8_layers += o.int8;
    if (o.node == "conv1") {
      EXPECT_THAT(o.detail, HasSubstr("no entry in t.yaml"));
    }
  }
  EXPECT_EQ(int8_layers, 2);  // conv2 and the add
  EXPECT_EQ(partial.FindConstant("w1")->data, fp32.FindConstant("w1")->data);
}

TEST(QuantizeWithCalibrationTableTest, ADeadChannelGetsAWeightScaleItsBiasFits) {
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph fp32, BlockGraph(seed));
  // Output channel 5 of conv1: weights near zero (a dead channel after batch-norm folding), bias 0.4.
  Tensor& w1 = fp32.mutable_constants().at("w1");
  for (int i = 0; i < 8 * 9; ++i) w1.data[5 * 8 * 9 + i] = (i % 2 ? 1e-9f : -1e-9f);
  fp32.mutable_constants().at("b1").data[5] = 0.4f;
  CONVOY_ASSERT_OK_AND_ASSIGN(CalibrationTable table, MinMaxTable(fp32, seed + 1, 1));
  const float input_scale = table.FindTensor("x")->scale;
  std::vector<float> scales = table.FindLayer("conv1")->weight_scales;
  const float before = scales[5];
  EXPECT_EQ(FitBiasInInt32(fp32, fp32.nodes()[fp32.ProducerIndex("y1")], input_scale, scales), 1);
  EXPECT_GT(scales[5], before);
  EXPECT_LE(0.4 / (static_cast<double>(input_scale) * scales[5]), kLargestBiasSteps);
  // The load applies it to the table's own scales: conv1 folds (its INT32 bias fits).
  Graph int8 = fp32;
  CONVOY_ASSERT_OK_AND_ASSIGN(std::vector<LayerOutcome> outcomes, QuantizeWithCalibrationTable(int8, table, "t.yaml"));
  EXPECT_TRUE(outcomes[0].int8) << outcomes[0].node << ": " << outcomes[0].detail;
}

TEST(QuantizeWithCalibrationTableTest, TablesThatDoNotFitFailNamingTheEntry) {
  const uint32_t seed = FreshSeed();
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph fp32, BlockGraph(seed));
  CONVOY_ASSERT_OK_AND_ASSIGN(const CalibrationTable good, MinMaxTable(fp32, seed + 1, 1));
  auto error = [&fp32](const CalibrationTable& table) {
    Graph g = fp32;
    return std::string(QuantizeWithCalibrationTable(g, table, "m/1/calibration.yaml").status().message());
  };
  CalibrationTable other = good;
  other.tensors[1].name = "y9";
  EXPECT_THAT(error(other), HasSubstr("m/1/calibration.yaml: tensors['y9']: the model has no tensor of that name"));
  other = good;
  other.layers[0].name = "conv9";
  EXPECT_THAT(error(other), HasSubstr("layers['conv9']: the model has no layer of that name"));
  other = good;
  other.layers[0].weight_scales.pop_back();
  EXPECT_THAT(error(other), HasSubstr("layers['conv1'].weight_scales: 15 scales, the convolution has 16 output"));
  other = good;
  other.layers[0].weight_scales[3] /= 2;
  EXPECT_THAT(error(other), HasSubstr("layers['conv1'].weight_scales[3]: "));
  EXPECT_THAT(error(other), HasSubstr("a table made for other weights?"));
  other = good;
  other.layers[2].kind = CalibratedLayerKind::kConv;  // the add listed as a conv
  EXPECT_THAT(error(other), HasSubstr("the table has a convolution, the model's node is Binary"));
}

}  // namespace
}  // namespace convoy::runtime
