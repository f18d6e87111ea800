// INT8 planning of QDQ models: which convolutions and residual adds fold (AnalyzeQuantizedConvs) and why the others
// do not; plans with them as QuantizedConv2dOp / QuantizedAddOp steps on 8-bit tensors, the quantize / dequantize steps only
// where FP32 ops meet them, in NCHW, blocked and NHWC plans at several batch sizes, run by the executor on fresh
// random inputs (outputs poisoned with NaN) and compared with the reference interpreter, which simulates every
// quantization in FP32 exactly as the QDQ graph defines it.
//
// Tolerance: server/runtime/quantized_plan_checks.h (every output within one quantization step of the reference, at
// least 99 % of them identical over all the runs of a test; a per-run 99 % failed about once in 60 runs).
#include "server/runtime/quantized_conv_folding.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/exact_int8_test_support.h"
#include "kernels/cpu/onednn_support.h"
#include "kernels/common/status_matchers.h"
#include "kernels/cpu/cpu_device.h"
#include "kernels/testing/test_tensors.h"
#include "server/runtime/executor.h"
#include "server/runtime/planner.h"
#include "server/runtime/planner_test_graphs.h"
#include "server/runtime/quantized_plan_checks.h"
#include "server/runtime/reference_interpreter.h"

namespace convoy::runtime {
namespace {

using ::convoy::runtime::testing::CountSteps;
using ::convoy::runtime::testing::ExpectWithinOneStep;
using ::convoy::runtime::testing::IdenticalShare;
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

// The plan's quantize and dequantize steps (converts between FP32 and 8-bit; layout reorders are not counted).
int CountQuantizeSteps(const ExecutionPlan& plan) {
  int count = 0;
  for (const auto& step : plan.steps()) {
    if (step->op() != convoy::OpKind::kConvert) continue;
    const std::string problem = step->ProblemString(1);
    count += problem.find("INT8 NHWC") != std::string::npos;  // UINT8 too, either side
  }
  return count;
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
  IdenticalShare share;
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
    // oneDNN's where its INT8 products are exact (VNNI), the own kernels elsewhere.
    const bool onednn_exact = cpu::onednn::CheckExactInt8Products().ok();
    for (const auto& step : plan->steps()) {
      if (step->op() != convoy::OpKind::kQuantizedConv2d) continue;
      if (onednn_exact) {
        EXPECT_EQ(step->AlgorithmName(1), "cpu.quantized_conv2d.onednn_nhwc");
      } else {
        EXPECT_THAT(std::string(step->AlgorithmName(1)), ::testing::StartsWith("cpu.quantized_conv2d.gemm_nhwc"));
      }
    }
    ASSERT_EQ(plan->quantized_layers().size(), 6u);
    EXPECT_THAT(plan->QuantizationSummary(),
                HasSubstr("4 of 5 quantized convolutions and 1 of 1 quantized adds run INT8; 1 stay FP32"));
    EXPECT_THAT(plan->ToString(1), HasSubstr("conv_d: FP32 (activation sigmoid is fused into it"));
    for (int batch = 1; batch <= 3; ++batch) ExpectWithinOneStep(graph, plan, batch, steps, share);
  }
}

// Runs `plan` at `batch` on `x` and returns its outputs (NaN-poisoned before the run).
std::vector<std::vector<float>> RunPlan(std::shared_ptr<const ExecutionPlan> plan, int batch, Tensor x) {
  auto executor = Executor::Create({plan});
  EXPECT_THAT(executor.status(), IsOk());
  if (!executor.ok()) return {};
  std::vector<TensorView> input_views = {{(*executor)->ExpectedInputDesc(0, batch), x.data.data()}};
  std::vector<std::vector<float>> outputs(plan->outputs().size());
  std::vector<TensorView> output_views;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const TensorDesc desc = (*executor)->ExpectedOutputDesc(i, batch);
    outputs[i].assign(desc.num_elements(), std::nanf(""));
    output_views.push_back({desc, outputs[i].data()});
  }
  EXPECT_THAT((*executor)->Run(batch, input_views, output_views), IsOk());
  return outputs;
}

// Tuning times oneDNN's CPU INT8 convolution algorithms (its first choice and the variants: the jit_int8 kernels, the
// matmul form of 1x1 layers) for the folded convolutions; a plan whose cache names the variant `kJit` wherever it
// ran (as a tuning that found it faster leaves it) runs it in those steps and gives outputs identical, bit for bit,
// to the heuristic plan's.
void CheckTunedPlansTimeTheVariantAndItsStepsGiveIdenticalOutputs(const absl::string_view kJit) {
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed << ", variant " << kJit);
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::QuantizedBlockGraph(seed));
  AlgorithmCache heuristic_cache;
  PlannerOptions heuristic = CpuOptions(Layout::kNHWC, 2);
  heuristic.cache = &heuristic_cache;
  CONVOY_ASSERT_OK_AND_ASSIGN(auto heuristic_plan, BuildExecutionPlan(graph, heuristic));

  AlgorithmCache cache;
  PlannerOptions tuned = heuristic;
  tuned.cache = &cache;
  tuned.selection = AlgorithmSelection::kTune;
  tuned.tuning.min_timed_ms = 2;  // a test: enough runs to time the candidates, not a measurement
  tuned.tuning.cold_start_warmup_ms = 10;
  CONVOY_ASSERT_OK_AND_ASSIGN(auto tuned_plan, BuildExecutionPlan(graph, tuned));
  // Every tuned INT8 convolution recorded both algorithms; where the jit variant ran, its entry is made to name it.
  int int8_entries = 0, jit_timed = 0;
  for (const std::string& key : cache.Keys()) {
    std::optional<CacheEntry> entry = cache.Peek(key);
    ASSERT_TRUE(entry.has_value());
    bool int8 = false, jit_ok = false;
    for (const CandidateTiming& c : entry->candidates) {
      int8 |= c.algorithm == "cpu.quantized_conv2d.onednn_nhwc";
      if (c.algorithm == kJit) jit_ok = c.ok;
      if (c.ok) {
        EXPECT_GT(c.time_ms, 0) << key << " " << c.algorithm;
      }
    }
    if (!int8) continue;
    ++int8_entries;
    EXPECT_TRUE(entry->tuned) << key;
    if (!jit_ok) continue;
    ++jit_timed;
    entry->algorithm = std::string(kJit);
    cache.Insert(key, *entry);
  }
  EXPECT_GT(int8_entries, 0);
  ASSERT_GT(jit_timed, 0) << kJit << " ran in no tuned INT8 convolution of\n" << tuned_plan->ToString(1);
  // The same options again, now answered from the cache: the variant in every step where it was timed.
  CONVOY_ASSERT_OK_AND_ASSIGN(auto jit_plan, BuildExecutionPlan(graph, tuned));
  for (int batch = 1; batch <= 2; ++batch) {
    int jit_steps = 0;
    for (const auto& step : jit_plan->steps()) jit_steps += step->AlgorithmName(batch) == kJit;
    EXPECT_GT(jit_steps, 0) << "batch " << batch << "\n" << jit_plan->ToString(batch);
    const Tensor x = testing::RandomTensor(ConcreteShape(graph.inputs()[0].shape, batch), FreshSeed());
    const std::vector<std::vector<float>> want = RunPlan(heuristic_plan, batch, x);
    for (const auto& plan : {tuned_plan, jit_plan}) {
      const std::vector<std::vector<float>> got = RunPlan(plan, batch, x);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i].size(), want[i].size());
        for (size_t j = 0; j < got[i].size(); ++j) {
          ASSERT_EQ(got[i][j], want[i][j]) << "batch " << batch << " output " << i << " element " << j << "\n"
                                           << plan->ToString(batch);
        }
      }
    }
  }
}

TEST(QuantizedConvFoldingTest, TunedPlansTimeTheJitVariantAndItsStepsGiveIdenticalOutputs) {
  CONVOY_SKIP_UNLESS_EXACT_CPU_INT8();  // the variants are oneDNN's
  CheckTunedPlansTimeTheVariantAndItsStepsGiveIdenticalOutputs("cpu.quantized_conv2d.onednn_nhwc_jit");
}

TEST(QuantizedConvFoldingTest, TunedPlansTimeTheMatmulFormAndItsStepsGiveIdenticalOutputs) {
  CONVOY_SKIP_UNLESS_EXACT_CPU_INT8();
  CheckTunedPlansTimeTheVariantAndItsStepsGiveIdenticalOutputs("cpu.quantized_conv2d.onednn_matmul_nhwc");
}

// int8_single_rounding_adds: the add fused into conv_b as the residual epilogue, rounded once. Its sum, checked
// against that formula computed here in double from the integers (the residual a_q as the plan output it, conv_b's
// INT8 weights and INT32 bias from the graph): every element within one step of qdq_s, and at least 99 % identical
// (the plan forms its two multipliers in FP32, so values within rounding error of a tie may land on the neighbour).
TEST(QuantizedConvFoldingTest, SingleRoundingAddsRunAsTheResidualEpilogueAndRoundOnce) {
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::QuantizedBlockGraph(seed, true, false, /*expose_sum=*/true));
  const float sa = 4.0f / 255, ss = 0.06f;  // qdq_a (zero point 0), qdq_s (zero point 100): the graph's
  const int zs = 100;
  const Tensor* wb = graph.FindConstant("wb");
  const Tensor* bias = graph.FindConstant("wb_b");
  const ConstantQuantization* wq = graph.FindConstantQuantization("wb");
  ASSERT_TRUE(wb != nullptr && bias != nullptr && wq != nullptr);
  const double sw = wq->scales[0];
  for (Layout layout : {Layout::kNHWC, Layout::kNCHW8c}) {
    SCOPED_TRACE(LayoutName(layout));
    PlannerOptions options = CpuOptions(layout, 2);
    options.int8_single_rounding_adds = true;
    CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, BuildExecutionPlan(graph, options));
    EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kQuantizedAdd), 0) << plan->ToString(1);
    int residual_epilogues = 0, exact_adds = 0;
    for (const auto& step : plan->steps()) {
      residual_epilogues += step->ProblemString(1).find("+residual(") != std::string::npos;
      exact_adds += step->ProblemString(1).find(" +add(") != std::string::npos;
    }
    EXPECT_EQ(residual_epilogues, 1) << plan->ToString(1);
    EXPECT_EQ(exact_adds, 0) << plan->ToString(1);
    EXPECT_THAT(plan->QuantizationSummary(),
                HasSubstr("1 of 1 quantized adds run INT8 (1 of the adds fused and rounded once"));
    EXPECT_THAT(plan->ToString(1), HasSubstr("add: INT8, rounded once"));
    for (int batch = 1; batch <= 2; ++batch) {
      const Tensor x = testing::RandomTensor(ConcreteShape(graph.inputs()[0].shape, batch), FreshSeed());
      const std::vector<std::vector<float>> got = RunPlan(plan, batch, x);
      std::map<std::string, const std::vector<float>*> out;
      for (size_t i = 0; i < got.size(); ++i) out[plan->outputs()[i].name] = &got[i];
      ASSERT_TRUE(out.count("ya") && out.count("ys"));
      const std::vector<float>& ya = *out["ya"];
      const std::vector<float>& ys = *out["ys"];
      constexpr int kC = 32, kPixels = 64;  // conv_b: 32 -> 32 channels, 1x1, on 8x8 images (NCHW outputs)
      ASSERT_EQ(ys.size(), size_t(batch) * kC * kPixels);
      size_t identical = 0;
      for (int n = 0; n < batch; ++n) {
        for (int k = 0; k < kC; ++k) {
          for (int p = 0; p < kPixels; ++p) {
            int64_t acc = std::llround(bias->data[k] / (double(sa) * sw));
            for (int c = 0; c < kC; ++c) {
              const int64_t a_q = std::llround(ya[(n * kC + c) * kPixels + p] / sa);
              acc += a_q * std::llround(wb->data[k * kC + c] / sw);
            }
            const double residual = std::nearbyint(ya[(n * kC + k) * kPixels + p] / sa) * sa;
            const double v = double(acc) * double(sa) * sw / ss + residual / ss;
            const double q = std::clamp(std::nearbyint(v) + zs, 0.0, 255.0);
            const float want = static_cast<float>((q - zs) * ss);
            const float have = ys[(n * kC + k) * kPixels + p];
            ASSERT_LE(std::fabs(have - want), ss * 1.001f)
                << "batch " << batch << " n " << n << " k " << k << " pixel " << p << ": " << have << " vs " << want;
            identical += std::fabs(have - want) < ss * 0.001f;
          }
        }
      }
      EXPECT_GE(identical, ys.size() * 99 / 100) << identical << " of " << ys.size() << " identical";
    }
  }
}

// Without the option, or where the conv has a ReLU of its own (applied before the add, which the residual epilogue
// cannot express), the fused add stays exact.
TEST(QuantizedConvFoldingTest, SingleRoundingAddsApplyOnlyWithoutTheConvsOwnRelu) {
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::QuantizedBlockGraph(FreshSeed()));
  QuantizedConvAnalysis analysis = AnalyzeQuantizedConvs(graph);
  const QuantizedConvFold* conv_b = analysis.Find("conv_b");
  ASSERT_NE(conv_b, nullptr);
  ASSERT_NE(conv_b->fused_add, QuantizedFusedAdd::kNone);
  const QuantizedAddFold* add = analysis.FindAdd(conv_b->add);
  ASSERT_NE(add, nullptr);
  EXPECT_TRUE(SingleRoundingAddApplies(*conv_b, *add));
  QuantizedConvFold with_relu = *conv_b;
  with_relu.relu = true;
  EXPECT_FALSE(SingleRoundingAddApplies(with_relu, *add));
  QuantizedAddFold int8_residual = *add;  // the residual operand (a) in another type than the sum
  int8_residual.quantization.b_type = DataType::kInt8;
  int8_residual.quantization.a_type = DataType::kInt8;
  EXPECT_FALSE(SingleRoundingAddApplies(*conv_b, int8_residual));
  // The exact form: the conv's own rounding, then the add (no residual epilogue).
  const QuantizedConv2dProblem exact = MakeQuantizedConvProblem(*conv_b, 1, 32, 8, 8, add);
  EXPECT_EQ(exact.epilogue.residual, ResidualMode::kNone);
  EXPECT_EQ(exact.fused_add, conv_b->fused_add);
  QuantizedConvFold single = *conv_b;
  single.add_single_rounding = true;
  const QuantizedConv2dProblem once = MakeQuantizedConvProblem(single, 1, 32, 8, 8, add);
  EXPECT_EQ(once.fused_add, QuantizedFusedAdd::kNone);
  EXPECT_EQ(once.epilogue.residual, ResidualMode::kBeforeActivation);
  EXPECT_EQ(once.epilogue.dst_zero_point, add->quantization.y_zero_point);
  EXPECT_FLOAT_EQ(once.epilogue.residual_scale, (4.0f / 255) / 0.06f);
  ASSERT_EQ(once.epilogue.scales.size(), exact.epilogue.scales.size());
  for (size_t k = 0; k < once.epilogue.scales.size(); ++k) {
    // x_scale * w_scale / y_scale against the conv's own x_scale * w_scale / b_scale: the ratio of the two outputs'
    // scales.
    EXPECT_NEAR(once.epilogue.scales[k] / exact.epilogue.scales[k], (8.0f / 255) / 0.06f, 1e-5);
  }
}

TEST(QuantizedConvFoldingTest, TurnedOffEveryQuantizationIsSimulated) {
  IdenticalShare share;
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::QuantizedBlockGraph(FreshSeed()));
  PlannerOptions options = CpuOptions(Layout::kNCHW, 2);
  options.int8_convolutions = false;
  CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, BuildExecutionPlan(graph, options));
  EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kQuantizedConv2d), 0);
  EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kConv2d), 5);
  EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kQuantizedAdd), 0);
  EXPECT_THAT(plan->QuantizationSummary(), HasSubstr("0 of 5 quantized convolutions and 0 of 1 quantized adds"));
  EXPECT_THAT(plan->QuantizationSummary(), HasSubstr("INT8 steps are turned off"));
  ExpectWithinOneStep(graph, plan, 2, {{"y", 4.0f / 255}, {"y2", 12.0f / 255}}, share);
}

TEST(QuantizedConvFoldingTest, FoldsTheClassifierTailPoolFlattenGemm) {
  for (const bool transpose_b : {true, false}) {
    SCOPED_TRACE(transpose_b ? "B [K, C]" : "B [C, K]");
    CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::QuantizedClassifierGraph(FreshSeed(), transpose_b));
    const QuantizedConvAnalysis analysis = AnalyzeQuantizedConvs(graph);
    ASSERT_NE(analysis.Find("pool"), nullptr) << analysis.fp32_reasons.count("pool");
    const QuantizedConvFold& pool = *analysis.Find("pool");
    EXPECT_EQ(pool.source, QuantizedFoldSource::kGlobalAveragePool);
    EXPECT_EQ(pool.groups, 40);
    EXPECT_EQ(pool.window.kernel_h, 5);
    EXPECT_EQ(pool.window.kernel_w, 7);
    EXPECT_EQ(pool.input, "f_q");
    EXPECT_EQ(pool.output, "p_q");
    EXPECT_TRUE(pool.bias.empty());
    // onnxruntime's QLinearGlobalAveragePool scale, x_scale / (y_scale * H * W) in FP32, for every channel.
    for (float m : pool.multipliers) EXPECT_EQ(m, (3.0f / 255) / ((1.0f / 255) * 35.0f));
    ASSERT_NE(analysis.FindView("flatten"), nullptr);
    EXPECT_EQ(analysis.FindView("flatten")->input, "p_q");
    EXPECT_EQ(analysis.FindView("flatten")->output, "flat_q");
    EXPECT_TRUE(analysis.ReadsQuantized("flatten", "p_q"));
    ASSERT_NE(analysis.Find("fc"), nullptr) << analysis.fp32_reasons.count("fc");
    const QuantizedConvFold& fc = *analysis.Find("fc");
    EXPECT_EQ(fc.source, QuantizedFoldSource::kGemm);
    EXPECT_EQ(fc.input, "flat_q");
    EXPECT_EQ(fc.weight_shape, (Shape{12, 40, 1, 1}));
    ASSERT_EQ(fc.bias.size(), 12u);
    // The weights come back as [K, C] integers whichever way B lies: w[k][c] == q * scale[k].
    const Tensor& w = *graph.FindConstant("wy");
    const ConstantQuantization& q = *graph.FindConstantQuantization("wy");
    for (int k = 0; k < 12; ++k) {
      EXPECT_EQ(fc.multipliers[k], (1.0f / 255) * q.scales[k] / (4.0f / 255));
      for (int c = 0; c < 40; ++c) {
        const float value = w.data[transpose_b ? k * 40 + c : c * 12 + k];
        EXPECT_EQ(static_cast<float>(fc.weights[k * 40 + c]) * q.scales[k], value) << k << "," << c;
      }
    }
  }
}

TEST(QuantizedConvFoldingTest, GemmsThatAreNoInt8MatrixProductStayFp32) {
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::QuantizedClassifierGraph(FreshSeed()));
  for (Node& node : graph.mutable_nodes()) {
    if (node.name == "fc") node.As<GemmAttrs>().alpha = 0.5f;
  }
  const QuantizedConvAnalysis analysis = AnalyzeQuantizedConvs(graph);
  EXPECT_EQ(analysis.Find("fc"), nullptr);
  EXPECT_THAT(analysis.fp32_reasons.at("fc"), HasSubstr("its alpha 0.5 and beta 1 are not 1"));
  EXPECT_NE(analysis.Find("pool"), nullptr);
}

TEST(QuantizedConvFoldingTest, PoolAndGemmWithAQdqNodeOnOneSideAreNoQuantizedLayer) {
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::QuantizedClassifierGraph(FreshSeed()));
  // The pool's output read by an FP32 op too (as a calibration table that quantizes only the convolutions' tensors
  // leaves it): neither folded nor listed with a reason.
  for (Node& node : graph.mutable_nodes()) {
    if (node.name == "flatten") node.inputs[0] = "p";
  }
  graph.mutable_outputs().push_back("p");
  ASSERT_THAT(graph.Finalize(), IsOk());
  const QuantizedConvAnalysis analysis = AnalyzeQuantizedConvs(graph);
  EXPECT_EQ(analysis.Find("pool"), nullptr);
  EXPECT_EQ(analysis.fp32_reasons.count("pool"), 0u);
  EXPECT_EQ(analysis.FindView("flatten"), nullptr);
  EXPECT_NE(analysis.Find("conv"), nullptr);
  EXPECT_NE(analysis.Find("fc"), nullptr);  // flat_q is still a QDQ node's output
}

TEST(QuantizedConvFoldingTest, PlansTheClassifierTailInInt8AndMatchTheSimulationWithinOneStep) {
  IdenticalShare share;
  for (const bool transpose_b : {true, false}) {
    CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::QuantizedClassifierGraph(FreshSeed(), transpose_b));
    for (Layout layout : {Layout::kNCHW, Layout::kNCHW8c, Layout::kNHWC}) {
      SCOPED_TRACE(::testing::Message() << LayoutName(layout) << (transpose_b ? " B [K, C]" : " B [C, K]"));
      CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, BuildExecutionPlan(graph, CpuOptions(layout, 3)));
      // conv, pool and fc as INT8 convolutions; no FP32 pool or Gemm; one quantize (x) and one dequantize (y): the
      // tail stays 8-bit from the conv to the logits.
      EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kQuantizedConv2d), 3) << plan->ToString(1);
      EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kPool2d), 0) << plan->ToString(1);
      EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kGemm), 0) << plan->ToString(1);
      EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kConvert), 2) << plan->ToString(1);
      EXPECT_THAT(plan->QuantizationSummary(),
                  HasSubstr("1 of 1 quantized convolutions run INT8, and 2 of 2 quantized pooling and Gemm layers"));
      for (int batch = 1; batch <= 3; ++batch) ExpectWithinOneStep(graph, plan, batch, {{"y", 4.0f / 255}}, share);
    }
  }
}

TEST(QuantizedConvFoldingTest, MaxPoolBetweenQdqNodesOfOneQuantizationRunsOnTheBytes) {
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::QuantizedMaxPoolGraph(FreshSeed()));
  const QuantizedConvAnalysis analysis = AnalyzeQuantizedConvs(graph);
  ASSERT_NE(analysis.FindMaxPool("pool"), nullptr);
  EXPECT_EQ(analysis.FindMaxPool("pool")->input, "f_q");
  EXPECT_EQ(analysis.FindMaxPool("pool")->output, "p_q");
  EXPECT_EQ(analysis.FindMaxPool("pool")->type, DataType::kUInt8);
  EXPECT_TRUE(analysis.ReadsQuantized("pool", "f_q"));
  // Another output scale: the maximum's integer is not the output's, so the pool stays FP32.
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph rescaled, testing::QuantizedMaxPoolGraph(FreshSeed(), 5.0f / 255));
  EXPECT_EQ(AnalyzeQuantizedConvs(rescaled).FindMaxPool("pool"), nullptr);
}

// The stem conv -> max pool -> conv stays 8-bit from the first conv to the last: one quantize (x), one dequantize (y),
// the pool a UINT8 NHWC step, and the outputs those of the simulation (the pool adds no rounding).
TEST(QuantizedConvFoldingTest, PlansTheMaxPoolOnEightBitValuesAndMatchTheSimulationWithinOneStep) {
  IdenticalShare share;
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::QuantizedMaxPoolGraph(FreshSeed()));
  for (Layout layout : {Layout::kNCHW, Layout::kNCHW8c, Layout::kNHWC}) {
    SCOPED_TRACE(LayoutName(layout));
    CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, BuildExecutionPlan(graph, CpuOptions(layout, 3)));
    EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kQuantizedConv2d), 2) << plan->ToString(1);
    EXPECT_EQ(CountQuantizeSteps(*plan), 2) << plan->ToString(1);
    ASSERT_EQ(CountSteps(*plan, convoy::OpKind::kPool2d), 1) << plan->ToString(1);
    for (const auto& step : plan->steps()) {
      if (step->op() != convoy::OpKind::kPool2d) continue;
      EXPECT_THAT(step->ProblemString(1), HasSubstr("UINT8 NHWC"));
      EXPECT_EQ(step->AlgorithmName(1), "cpu.pool2d.onednn_nhwc");
    }
    for (int batch = 1; batch <= 3; ++batch) ExpectWithinOneStep(graph, plan, batch, {{"y", 4.0f / 255}}, share);
  }
  // With INT8 steps turned off the pool is FP32 between simulated quantizations, and the outputs the same.
  PlannerOptions off = CpuOptions(Layout::kNCHW, 2);
  off.int8_convolutions = false;
  CONVOY_ASSERT_OK_AND_ASSIGN(auto fp32, BuildExecutionPlan(graph, off));
  for (const auto& step : fp32->steps()) {
    if (step->op() == convoy::OpKind::kPool2d) {
      EXPECT_THAT(step->ProblemString(1), HasSubstr("FP32"));
    }
  }
  ExpectWithinOneStep(graph, fp32, 2, {{"y", 4.0f / 255}}, share);
}

// The pool's output QDQ node with another scale: FP32 pool, a dequantize before it and a quantize after.
TEST(QuantizedConvFoldingTest, MaxPoolBetweenDifferentQuantizationsStaysFp32) {
  IdenticalShare share;
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::QuantizedMaxPoolGraph(FreshSeed(), 5.0f / 255));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, BuildExecutionPlan(graph, CpuOptions(Layout::kNHWC, 2)));
  EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kQuantizedConv2d), 2) << plan->ToString(1);
  for (const auto& step : plan->steps()) {
    if (step->op() == convoy::OpKind::kPool2d) {
      EXPECT_THAT(step->ProblemString(1), HasSubstr("FP32"));
    }
  }
  EXPECT_EQ(CountQuantizeSteps(*plan), 4) << plan->ToString(1);
  ExpectWithinOneStep(graph, plan, 2, {{"y", 4.0f / 255}}, share);
}

// onnxruntime's arithmetic on UINT8 values (its MLAS kernels): ONNX QuantizeLinear; the requantization of an INT32
// accumulator (QLinearConv, QGemm, QLinearGlobalAveragePool): float(acc) * multiplier, rounded half to even, plus the
// zero point, saturated.
int QuantizeLinear(float x, float scale, int zero_point) {
  return static_cast<int>(std::clamp(std::nearbyint(x / scale) + static_cast<float>(zero_point), 0.0f, 255.0f));
}
int Requantize(int64_t acc, float multiplier, int zero_point) {
  const float v = std::nearbyint(static_cast<float>(acc) * multiplier) + static_cast<float>(zero_point);
  return static_cast<int>(std::clamp(v, 0.0f, 255.0f));
}

class Int8TailTest : public ::testing::TestWithParam<bool> {};  // whether the logits are quantized

TEST_P(Int8TailTest, Int8PoolAndGemmComputeOnnxruntimeArithmeticBitForBit) {
  const bool quantized_logits = GetParam();
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed << (quantized_logits ? " UINT8 logits" : " FP32 logits"));
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::QuantizedClassifierGraph(seed, true, quantized_logits));
  graph.mutable_outputs().push_back("p_q");  // the pool's 8-bit output, dequantized (exactly) for the caller too
  ASSERT_THAT(graph.Finalize(), IsOk());
  const int batch = 3;
  CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, BuildExecutionPlan(graph, CpuOptions(Layout::kNCHW8c, batch)));
  EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kQuantizedConv2d), 3) << plan->ToString(batch);
  CONVOY_ASSERT_OK_AND_ASSIGN(auto executor, Executor::Create({plan}));
  Tensor x = testing::RandomTensor({batch, 24, 5, 7}, seed);
  std::vector<TensorView> inputs = {{executor->ExpectedInputDesc(0, batch), x.data.data()}};
  std::vector<std::vector<float>> outputs(2);
  std::vector<TensorView> output_views;
  for (size_t i = 0; i < 2; ++i) {
    const TensorDesc desc = executor->ExpectedOutputDesc(i, batch);
    outputs[i].assign(desc.num_elements(), std::nanf(""));
    output_views.push_back({desc, outputs[i].data()});
  }
  ASSERT_THAT(executor->Run(batch, inputs, output_views), IsOk());

  // The expected 8-bit values from the graph's own integers and scales.
  auto integers = [&graph](const std::string& name, int64_t row_length, bool by_column, int64_t columns) {
    const Tensor& w = *graph.FindConstant(name);
    const ConstantQuantization& q = *graph.FindConstantQuantization(name);
    std::vector<int> out(w.data.size());
    for (size_t i = 0; i < w.data.size(); ++i) {
      const float scale = q.scales.size() == 1 ? q.scales[0] : q.scales[by_column ? i % columns : i / row_length];
      out[i] = static_cast<int>(std::nearbyint(w.data[i] / scale));
    }
    return out;
  };
  const float sx = 2.0f / 255, sf = 3.0f / 255, sp = 1.0f / 255, sy = 4.0f / 255;
  const std::vector<int> wf = integers("wf", 24, false, 0), wy = integers("wy", 40, false, 0);
  const ConstantQuantization& qf = *graph.FindConstantQuantization("wf");
  const ConstantQuantization& qy = *graph.FindConstantQuantization("wy");
  const Tensor& bf = *graph.FindConstant("wf_b");
  const Tensor& by = *graph.FindConstant("wy_b");
  size_t checked = 0;
  for (int n = 0; n < batch; ++n) {
    std::vector<int64_t> sums(40, 0);
    for (int y = 0; y < 5; ++y) {
      for (int z = 0; z < 7; ++z) {
        for (int k = 0; k < 40; ++k) {
          int64_t acc = std::lround(bf.data[k] / (sx * qf.scales[k]));
          for (int c = 0; c < 24; ++c) {
            acc += (QuantizeLinear(x.data[((n * 24 + c) * 5 + y) * 7 + z], sx, 128) - 128) * wf[k * 24 + c];
          }
          sums[k] += Requantize(acc, sx * qf.scales[k] / sf, 0);  // the ReLU is the saturation at zero point 0
        }
      }
    }
    std::vector<int> pooled(40);
    for (int k = 0; k < 40; ++k) {
      const int f_zero_point = 0;  // qdq_f's
      pooled[k] = Requantize(sums[k] - f_zero_point * 35, sf / (sp * 35.0f), 3);
      const float want = static_cast<float>(pooled[k] - 3) * sp;
      ASSERT_EQ(outputs[1][n * 40 + k], want) << "pooled " << n << "," << k;
      ++checked;
    }
    for (int j = 0; j < 12; ++j) {
      int64_t acc = std::lround(by.data[j] / (sp * qy.scales[j]));
      for (int k = 0; k < 40; ++k) acc += (pooled[k] - 3) * wy[j * 40 + k];
      // UINT8 logits: QGemm's requantization, dequantized; FP32 logits: QGemm without y_scale, float(acc) times
      // x_scale * w_scale[j].
      const float want = quantized_logits
                             ? static_cast<float>(Requantize(acc, sp * qy.scales[j] / sy, 128) - 128) * sy
                             : static_cast<float>(acc) * (sp * qy.scales[j]);
      ASSERT_EQ(outputs[0][n * 12 + j], want) << "logit " << n << "," << j;
      ++checked;
    }
  }
  EXPECT_EQ(checked, size_t{batch * (40 + 12)});
  // The logits leave the INT8 steps once: a dequantize (UINT8 logits) or the Gemm's own FP32 output.
  EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kConvert), quantized_logits ? 3 : 2) << plan->ToString(batch);
}

INSTANTIATE_TEST_SUITE_P(Logits, Int8TailTest, ::testing::Bool());

}  // namespace
}  // namespace convoy::runtime
