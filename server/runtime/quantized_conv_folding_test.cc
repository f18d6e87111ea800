// INT8 planning of QDQ models: which convolutions and residual adds fold (AnalyzeQuantizedConvs) and why the others
// do not; plans with them as QuantizedConv2dOp / QuantizedAddOp steps on 8-bit tensors, the quantize / dequantize steps only
// where FP32 ops meet them, in NCHW, blocked and NHWC plans at several batch sizes, run by the executor on fresh
// random inputs (outputs poisoned with NaN) and compared with the reference interpreter, which simulates every
// quantization in FP32 exactly as the QDQ graph defines it.
//
// Tolerance. The INT8 steps accumulate exactly and requantize with one FP32 product; the reference accumulates in
// double and quantizes the FP32 result. The two land on the same step except where a value lies within rounding
// error of a tie, where they may pick neighbouring steps, and a step that differs travels on to later layers.
// Asserted: every output within one quantization step of the reference, and at least 99 % of them identical.
#include "server/runtime/quantized_conv_folding.h"

#include <cmath>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "kernels/cpu/cpu_device.h"
#include "kernels/testing/test_tensors.h"
#include "server/runtime/executor.h"
#include "server/runtime/planner.h"
#include "server/runtime/planner_test_graphs.h"
#include "server/runtime/reference_interpreter.h"

namespace convoy::runtime {
namespace {

using ::convoy::testing::IsOk;
using ::testing::HasSubstr;

uint32_t FreshSeed() { return std::random_device{}(); }

PlannerOptions CpuOptions(Layout layout, int max_batch_size) {
  PlannerOptions options;
  options.device = &CpuDevice::Default();
  options.precision = Precision::kFp32;
  options.layout = layout;
  options.max_batch_size = max_batch_size;
  return options;
}

int CountSteps(const ExecutionPlan& plan, convoy::OpKind op) {
  int count = 0;
  for (const auto& step : plan.steps()) count += step->op() == op;
  return count;
}

// Runs `plan` at `batch` on uniform [-1, 1) inputs and compares each output with the reference, in units of the
// output's quantization step (`steps`, by output name).
void ExpectWithinOneStep(const Graph& graph, std::shared_ptr<const ExecutionPlan> plan, int batch,
                         const std::map<std::string, float>& steps) {
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE(::testing::Message() << "batch " << batch << " seed " << seed);
  CONVOY_ASSERT_OK_AND_ASSIGN(auto executor, Executor::Create({plan}));
  std::map<std::string, Tensor> inputs;
  inputs["x"] = testing::RandomTensor(ConcreteShape(graph.inputs()[0].shape, batch), seed);
  std::vector<TensorView> input_views = {{executor->ExpectedInputDesc(0, batch), inputs["x"].data.data()}};
  std::vector<std::vector<float>> outputs(plan->outputs().size());
  std::vector<TensorView> output_views;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const TensorDesc desc = executor->ExpectedOutputDesc(i, batch);
    outputs[i].assign(desc.num_elements(), std::nanf(""));
    output_views.push_back({desc, outputs[i].data()});
  }
  ASSERT_THAT(executor->Run(batch, input_views, output_views), IsOk());
  CONVOY_ASSERT_OK_AND_ASSIGN(auto expected, RunReference(graph, inputs));
  for (size_t i = 0; i < outputs.size(); ++i) {
    const std::string& name = plan->outputs()[i].name;
    const std::vector<float>& want = expected.at(name).data;
    ASSERT_EQ(outputs[i].size(), want.size());
    const float step = steps.at(name);
    size_t identical = 0;
    for (size_t j = 0; j < want.size(); ++j) {
      const float diff = std::fabs(outputs[i][j] - want[j]);
      ASSERT_LE(diff, step * 1.001f) << "output '" << name << "' element " << j << ": " << outputs[i][j]
                                     << " vs reference " << want[j] << "\n" << plan->ToString(batch);
      identical += diff < step * 0.001f;
    }
    EXPECT_GE(identical, want.size() * 99 / 100) << "output '" << name << "': " << identical << " of " << want.size()
                                                << " identical";
  }
}

TEST(QuantizedConvFoldingTest, FoldsConvsBetweenQdqNodesAndSaysWhyTheOthersStayFp32) {
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::QuantizedBlockGraph(FreshSeed()));
  const QuantizedConvAnalysis analysis = AnalyzeQuantizedConvs(graph);
  for (const char* conv : {"conv_a", "conv_b", "conv_c", "conv_e"}) {
    EXPECT_NE(analysis.Find(conv), nullptr) << conv << ": " << analysis.fp32_reasons.count(conv);
  }
  EXPECT_NE(analysis.FindAdd("add"), nullptr);
  // add(qdq_b, qdq_a): conv_b's output is read by the add alone and qdq_a is computed before conv_b, so the add is
  // proposed for fusion into conv_b, as its first operand; qdq_b then has no step of its own.
  EXPECT_EQ(analysis.Find("conv_b")->fused_add, QuantizedFusedAdd::kConvIsA);
  EXPECT_EQ(analysis.Find("conv_b")->residual, "a_q");
  EXPECT_EQ(analysis.FindAdd("add")->fused_into, "conv_b");
  EXPECT_TRUE(analysis.FusedAway("qdq_b"));
  EXPECT_TRUE(analysis.FusedAway("add"));
  EXPECT_FALSE(analysis.FusedAway("qdq_a"));
  EXPECT_EQ(analysis.Find("conv_e")->fused_add, QuantizedFusedAdd::kNone);
  ASSERT_EQ(analysis.fp32_reasons.count("conv_d"), 1u);
  EXPECT_THAT(analysis.fp32_reasons.at("conv_d"), HasSubstr("activation sigmoid is fused into it"));

  const QuantizedConvFold& a = *analysis.Find("conv_a");
  EXPECT_EQ(a.input, "x_q");
  EXPECT_EQ(a.output_node, "qdq_a");
  EXPECT_EQ(a.src_type, DataType::kUInt8);
  EXPECT_EQ(a.src_zero_point, 128);
  EXPECT_TRUE(a.relu);
  // The bias was an INT32 at input scale x weight scale: recovered exactly, within the INT32 range drawn.
  ASSERT_EQ(a.bias.size(), 32u);
  for (int32_t b : a.bias) EXPECT_LE(std::abs(b), 2000);
  // The weights come back as the integers they were made from: w == q * scale[k] for every element.
  const Tensor& wa = *graph.FindConstant("wa");
  const ConstantQuantization& qa = *graph.FindConstantQuantization("wa");
  for (size_t i = 0; i < wa.data.size(); i += 37) {
    EXPECT_EQ(static_cast<float>(a.weights[i]) * qa.scales[i / (16 * 9)], wa.data[i]) << i;
  }
  // ReLU6 before an INT8 output whose range is [0, 6]: the saturation alone.
  const QuantizedConvFold& c = *analysis.Find("conv_c");
  EXPECT_FALSE(c.relu);
  EXPECT_EQ(c.dst_type, DataType::kInt8);
  EXPECT_EQ(analysis.Find("conv_e")->src_type, DataType::kInt8);

  // Weights without a quantization record (an FP32 conv between QDQ nodes) stay FP32.
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph unannotated, testing::QuantizedBlockGraph(FreshSeed(), false));
  const QuantizedConvAnalysis partial = AnalyzeQuantizedConvs(unannotated);
  EXPECT_EQ(partial.Find("conv_a"), nullptr);
  EXPECT_THAT(partial.fp32_reasons.at("conv_a"), HasSubstr("its weights 'wa' are not a DequantizeLinear of an INT8"));
  EXPECT_NE(partial.Find("conv_b"), nullptr);
}

TEST(QuantizedConvFoldingTest, WeightsRewrittenAfterImportNoLongerFold) {
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::QuantizedBlockGraph(FreshSeed()));
  graph.mutable_constants().at("wb").data[5] += 0.4f * 0.004f;  // as a pass folding a scale into it would
  const QuantizedConvAnalysis analysis = AnalyzeQuantizedConvs(graph);
  EXPECT_EQ(analysis.Find("conv_b"), nullptr);
  EXPECT_THAT(analysis.fp32_reasons.at("conv_b"), HasSubstr("no longer dequantize exactly from INT8 (element 5"));
}

TEST(QuantizedConvFoldingTest, ClipInsideTheOutputRangeIsNotFolded) {
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::QuantizedBlockGraph(FreshSeed()));
  for (Node& node : graph.mutable_nodes()) {
    if (node.name == "conv_c") node.As<Conv2dAttrs>().activation = Activation::Clip(0.0f, 3.0f);
  }
  const QuantizedConvAnalysis analysis = AnalyzeQuantizedConvs(graph);
  EXPECT_EQ(analysis.Find("conv_c"), nullptr);
  EXPECT_THAT(analysis.fp32_reasons.at("conv_c"), HasSubstr("Clip(0, 3) lands on steps -128..0 of its output's INT8"));
}

TEST(QuantizedConvFoldingTest, PlansRunFoldedConvsInInt8AndMatchTheSimulationWithinOneStep) {
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::QuantizedBlockGraph(FreshSeed()));
  const std::map<std::string, float> steps = {{"y", 4.0f / 255}, {"y2", 12.0f / 255}};
  for (Layout layout : {Layout::kNCHW, Layout::kNCHW8c, Layout::kNHWC}) {
    SCOPED_TRACE(LayoutName(layout));
    CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, BuildExecutionPlan(graph, CpuOptions(layout, 3)));
    EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kQuantizedConv2d), 4) << plan->ToString(1);
    // The add runs INT8: fused into conv_b where the algorithm reproduces its rounding for these (random) scales,
    // else as its own step.
    int fused = 0;
    for (const auto& step : plan->steps()) fused += step->ProblemString(1).find(" +add(conv=a: ") != std::string::npos;
    EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kQuantizedAdd) + fused, 1) << plan->ToString(1);
    // Quantized: x, for conv_a. Dequantized: conv_e's output, for conv_d and the caller. Everything from conv_a to
    // conv_e (the add included) stays 8-bit.
    int quantize = 0, dequantize = 0;
    for (const auto& step : plan->steps()) {
      if (step->op() != convoy::OpKind::kConvert) continue;
      const std::string problem = step->ProblemString(1);
      quantize += problem.find("-> UINT8") != std::string::npos || problem.find("-> INT8") != std::string::npos;
      dequantize += problem.find("INT8 NHWC -> FP32") != std::string::npos;  // UINT8 too
    }
    EXPECT_EQ(quantize, 1) << plan->ToString(1);
    EXPECT_EQ(dequantize, 1) << plan->ToString(1);
    for (const auto& step : plan->steps()) {
      if (step->op() == convoy::OpKind::kQuantizedConv2d) {
        EXPECT_EQ(step->AlgorithmName(1), "cpu.quantized_conv2d.onednn_nhwc");
      }
    }
    ASSERT_EQ(plan->quantized_layers().size(), 6u);
    EXPECT_THAT(plan->QuantizationSummary(),
                HasSubstr("4 of 5 quantized convolutions and 1 of 1 quantized adds run INT8; 1 stay FP32"));
    EXPECT_THAT(plan->ToString(1), HasSubstr("conv_d: FP32 (activation sigmoid is fused into it"));
    for (int batch = 1; batch <= 3; ++batch) ExpectWithinOneStep(graph, plan, batch, steps);
  }
}

TEST(QuantizedConvFoldingTest, TurnedOffEveryQuantizationIsSimulated) {
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::QuantizedBlockGraph(FreshSeed()));
  PlannerOptions options = CpuOptions(Layout::kNCHW, 2);
  options.int8_convolutions = false;
  CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, BuildExecutionPlan(graph, options));
  EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kQuantizedConv2d), 0);
  EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kConv2d), 5);
  EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kQuantizedAdd), 0);
  EXPECT_THAT(plan->QuantizationSummary(), HasSubstr("0 of 5 quantized convolutions and 0 of 1 quantized adds"));
  EXPECT_THAT(plan->QuantizationSummary(), HasSubstr("INT8 steps are turned off"));
  ExpectWithinOneStep(graph, plan, 2, {{"y", 4.0f / 255}, {"y2", 12.0f / 255}});
}

}  // namespace
}  // namespace convoy::runtime
