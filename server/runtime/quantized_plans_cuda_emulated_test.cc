// INT8 plans of QDQ graphs on the CUDA backend, through the CUDA emulation: the planner folds the same convolutions,
// residual adds and classifier tail on an emulated CudaDevice as on the CPU, into cuda.quantized_conv2d.* steps (the
// multipliers fixed in the problem, packed with the filter; a residual add fused into the convolution that computes
// one of its operands, as on the CPU), cuda.quantized_add.elementwise steps (an add that cannot fuse) and
// cuda.convert.* quantize / dequantize steps at the edges; and where the CUDA kernel declines a fold, that layer stays
// FP32 with the reason in quantized_layers() and the plan still builds and runs.
//
// Outputs are compared with the CPU's INT8 plan on the same fresh random inputs (seed in the failure message),
// outputs poisoned with NaN first. Tolerance: none for the outputs the INT8 chain writes (both backends compute the
// exact integer sums and onnxruntime's requantization and add bit for bit); one quantization step for an output
// behind an FP32 layer (conv_d's sigmoid: FP32 convolutions sum in another order on the two backends, and a value at a
// rounding tie of the output's QDQ node may land on the neighbouring step), at least 99 % of them identical; and
// against the reference interpreter, one step for the plan with a layer left in FP32.
//
// The whole-model check (torchvision ResNet-18 and MobileNetV2 quantized by onnxruntime, on the emulated GPU through
// `convoy run`, against onnxruntime and the CPU plan) is tests/python/test_quantized_models.py.
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "kernels/cpu/cpu_device.h"
#include "kernels/cuda/shared_test_device.h"
#include "kernels/testing/test_tensors.h"
#include "server/runtime/executor.h"
#include "server/runtime/planner.h"
#include "server/runtime/planner_test_graphs.h"
#include "server/runtime/reference_interpreter.h"

namespace convoy::runtime {
namespace {

using ::convoy::runtime::testing::CountSteps;
using ::convoy::testing::IsOk;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

uint32_t FreshSeed() { return std::random_device{}(); }

PlannerOptions Options(Device& device, Layout layout, int max_batch_size) {
  PlannerOptions options;
  options.device = &device;
  options.precision = Precision::kFp32;
  options.layout = layout;
  options.max_batch_size = max_batch_size;
  return options;
}

// Every output of `plan` at `batch` on input x, in logical (NCHW or row-major) order whatever layout the plan
// exchanges it in.
std::map<std::string, std::vector<float>> RunPlan(std::shared_ptr<const ExecutionPlan> plan, int batch,
                                                  const Tensor& x, bool record) {
  std::map<std::string, std::vector<float>> out;
  absl::StatusOr<std::unique_ptr<Executor>> executor = Executor::Create({plan, record});
  EXPECT_THAT(executor.status(), IsOk());
  if (!executor.ok()) return out;
  const TensorDesc in_desc = (*executor)->ExpectedInputDesc(0, batch);
  EXPECT_EQ(in_desc.layout(), Layout::kNCHW);
  std::vector<TensorView> inputs = {{in_desc, const_cast<float*>(x.data.data())}};
  std::vector<std::vector<float>> buffers(plan->outputs().size());
  std::vector<TensorView> views;
  for (size_t i = 0; i < buffers.size(); ++i) {
    const TensorDesc desc = (*executor)->ExpectedOutputDesc(i, batch);
    buffers[i].assign(desc.num_elements(), std::nanf(""));
    views.push_back({desc, buffers[i].data()});
  }
  EXPECT_THAT((*executor)->Run(batch, inputs, views), IsOk());
  for (size_t i = 0; i < buffers.size(); ++i) {
    const TensorDesc& desc = views[i].desc;
    std::vector<float> logical = buffers[i];
    if (desc.rank() == 4) {
      int64_t j = 0;
      for (int64_t n = 0; n < desc.dim(0); ++n)
        for (int64_t c = 0; c < desc.dim(1); ++c)
          for (int64_t h = 0; h < desc.dim(2); ++h)
            for (int64_t w = 0; w < desc.dim(3); ++w) logical[j++] = buffers[i][desc.Offset4(n, c, h, w)];
    }
    out[plan->outputs()[i].name] = std::move(logical);
  }
  return out;
}

// Every element bit for bit.
void ExpectIdentical(const std::vector<float>& actual, const std::vector<float>& expected, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i) {
    ASSERT_EQ(std::memcmp(&actual[i], &expected[i], sizeof(float)), 0)
        << what << " element " << i << ": " << actual[i] << " vs " << expected[i];
  }
}

// Every element within one `step`, at least `min_identical_percent` % identical.
void ExpectWithinOneStep(const std::vector<float>& actual, const std::vector<float>& expected, float step,
                         const std::string& what, int min_identical_percent = 99) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  size_t identical = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const float diff = std::fabs(actual[i] - expected[i]);
    ASSERT_LE(diff, step * 1.001f) << what << " element " << i << ": " << actual[i] << " vs " << expected[i];
    identical += diff < step * 0.001f;
  }
  EXPECT_GE(identical, actual.size() * min_identical_percent / 100)
      << what << ": " << identical << " of " << actual.size() << " identical";
}

// Every step of the plan runs a CUDA algorithm; the INT8 ones are the INT8 kernels, verified on the device.
void ExpectCudaInt8Steps(const ExecutionPlan& plan, int batch) {
  for (const auto& step : plan.steps()) {
    const std::string algorithm(step->AlgorithmName(batch));
    EXPECT_THAT(algorithm, StartsWith("cuda.")) << plan.ToString(batch);
    if (step->op() == convoy::OpKind::kQuantizedConv2d) {
      // The mma.sync kernels, or on the emulated compute capability 9.0 device a wgmma one where it is estimated
      // faster.
      EXPECT_THAT(algorithm, AnyOf(StartsWith("cuda.quantized_conv2d.implicit_gemm_"),
                                   StartsWith("cuda.quantized_conv2d.hopper_")));
      EXPECT_THAT(step->ProblemString(batch), HasSubstr("const_scales"));
      EXPECT_TRUE(step->Verified(batch)) << step->name() << ": not verified on the device";
    }
    if (step->op() == convoy::OpKind::kQuantizedAdd) {
      EXPECT_EQ(algorithm, "cuda.quantized_add.elementwise");
    }
    if (step->op() == convoy::OpKind::kConvert) {
      EXPECT_THAT(algorithm, StartsWith("cuda.convert."));
    }
  }
}

int CountFusedAdds(const ExecutionPlan& plan) {
  int fused = 0;
  for (const auto& step : plan.steps()) fused += step->ProblemString(1).find(" +add(conv=") != std::string::npos;
  return fused;
}

class QuantizedBlockCudaTest : public ::testing::TestWithParam<bool> {};  // whether conv_b's output is also an output

TEST_P(QuantizedBlockCudaTest, RunsInt8OnCudaAndMatchesTheCpuPlan) {
  const bool expose_b = GetParam();
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed << (expose_b ? " (yb exposed: the add keeps its step)" : ""));
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::QuantizedBlockGraph(seed, true, expose_b));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto cpu_plan,
                              BuildExecutionPlan(graph, Options(CpuDevice::Default(), Layout::kNCHW8c, 3)));
  for (const Layout layout : {Layout::kNHWC, Layout::kNCHW}) {
    for (const bool record : {false, true}) {
      if (record && layout == Layout::kNCHW) continue;
      SCOPED_TRACE(::testing::Message() << LayoutName(layout) << (record ? " with CUDA graphs" : ""));
      CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, BuildExecutionPlan(graph, Options(cuda::SharedTestDevice(), layout, 3)));
      // conv_a, b, c, e INT8; the add fused into conv_b (either operand order runs exactly on CUDA), or its own INT8
      // step where conv_b's output has another reader; conv_d FP32.
      EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kQuantizedConv2d), 4) << plan->ToString(1);
      EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kQuantizedAdd), expose_b ? 1 : 0) << plan->ToString(1);
      EXPECT_EQ(CountFusedAdds(*plan), expose_b ? 0 : 1) << plan->ToString(1);
      EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kConv2d), 1) << plan->ToString(1);
      EXPECT_THAT(plan->QuantizationSummary(),
                  HasSubstr("4 of 5 quantized convolutions and 1 of 1 quantized adds run INT8; 1 stay FP32"));
      EXPECT_THAT(plan->ToString(1), HasSubstr("conv_d: FP32 (activation sigmoid is fused into it"));
      for (int batch = 1; batch <= 3; ++batch) {
        SCOPED_TRACE(::testing::Message() << "batch " << batch);
        ExpectCudaInt8Steps(*plan, batch);
        const Tensor x = testing::RandomTensor(ConcreteShape(graph.inputs()[0].shape, batch), seed + batch);
        auto gpu = RunPlan(plan, batch, x, record);
        auto cpu = RunPlan(cpu_plan, batch, x, false);
        ASSERT_EQ(gpu.size(), expose_b ? 3u : 2u);
        ExpectIdentical(gpu["y2"], cpu["y2"], "y2 (the INT8 chain's output)");
        if (expose_b) ExpectIdentical(gpu["yb"], cpu["yb"], "yb (conv_b's output)");
        ExpectWithinOneStep(gpu["y"], cpu["y"], 4.0f / 255, "y (behind the FP32 conv_d)");
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AddFusedOrNot, QuantizedBlockCudaTest, ::testing::Bool());

// int8_single_rounding_adds on CUDA: the add fused into conv_b as the residual epilogue (one rounding), as on the CPU.
// The sum against the CPU plan's (oneDNN's sum post-op, whose FMA may round a tie the other way): within one step of
// qdq_s, at least 99 % identical; the residual operand (conv_a's output, exact on both) bit for bit.
TEST(QuantizedPlansCudaEmulatedTest, SingleRoundingAddsRunAsTheResidualEpilogueAndMatchTheCpuPlan) {
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::QuantizedBlockGraph(seed, true, false, /*expose_sum=*/true));
  PlannerOptions cpu_options = Options(CpuDevice::Default(), Layout::kNHWC, 2);
  cpu_options.int8_single_rounding_adds = true;
  CONVOY_ASSERT_OK_AND_ASSIGN(auto cpu_plan, BuildExecutionPlan(graph, cpu_options));
  PlannerOptions options = Options(cuda::SharedTestDevice(), Layout::kNHWC, 2);
  options.int8_single_rounding_adds = true;
  CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, BuildExecutionPlan(graph, options));
  EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kQuantizedAdd), 0) << plan->ToString(1);
  EXPECT_EQ(CountFusedAdds(*plan), 0) << plan->ToString(1);
  EXPECT_THAT(plan->QuantizationSummary(), HasSubstr("(1 of the adds fused and rounded once"));
  int residual_epilogues = 0;
  for (const auto& step : plan->steps()) residual_epilogues += step->ProblemString(1).find("+residual(") != std::string::npos;
  EXPECT_EQ(residual_epilogues, 1) << plan->ToString(1);
  for (int batch = 1; batch <= 2; ++batch) {
    SCOPED_TRACE(::testing::Message() << "batch " << batch);
    ExpectCudaInt8Steps(*plan, batch);
    const Tensor x = testing::RandomTensor(ConcreteShape(graph.inputs()[0].shape, batch), seed + batch);
    auto gpu = RunPlan(plan, batch, x, false);
    auto cpu = RunPlan(cpu_plan, batch, x, false);
    ExpectIdentical(gpu["ya"], cpu["ya"], "ya (the residual operand)");
    ExpectWithinOneStep(gpu["ys"], cpu["ys"], 0.06f, "ys (the sum, rounded once)");
  }
}

TEST(QuantizedPlansCudaEmulatedTest, ClassifierTailRunsInt8OnCudaAndMatchesTheCpuPlanBitForBit) {
  for (const bool quantized_logits : {true, false}) {
    for (const bool transpose_b : {true, false}) {
      const uint32_t seed = FreshSeed();
      SCOPED_TRACE(::testing::Message() << "seed " << seed << (quantized_logits ? " UINT8 logits" : " FP32 logits")
                                        << (transpose_b ? " B [K, C]" : " B [C, K]"));
      CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::QuantizedClassifierGraph(seed, transpose_b, quantized_logits));
      CONVOY_ASSERT_OK_AND_ASSIGN(auto cpu_plan,
                                  BuildExecutionPlan(graph, Options(CpuDevice::Default(), Layout::kNCHW8c, 2)));
      CONVOY_ASSERT_OK_AND_ASSIGN(auto plan,
                                  BuildExecutionPlan(graph, Options(cuda::SharedTestDevice(), Layout::kNHWC, 2)));
      // conv, pool and fc as INT8 convolutions, 8-bit from the conv to the logits: no FP32 pool or Gemm.
      EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kQuantizedConv2d), 3) << plan->ToString(1);
      EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kPool2d), 0) << plan->ToString(1);
      EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kGemm), 0) << plan->ToString(1);
      EXPECT_THAT(plan->QuantizationSummary(),
                  HasSubstr("1 of 1 quantized convolutions run INT8, and 2 of 2 quantized pooling and Gemm layers"));
      for (int batch = 1; batch <= 2; ++batch) {
        ExpectCudaInt8Steps(*plan, batch);
        const Tensor x = testing::RandomTensor(ConcreteShape(graph.inputs()[0].shape, batch), seed + batch);
        ExpectIdentical(RunPlan(plan, batch, x, false)["y"], RunPlan(cpu_plan, batch, x, false)["y"], "y");
      }
    }
  }
}

// A global average pool over 260 x 260 pixels is a reduction of 67600 taps, past what the CUDA INT8 kernel's int32
// sums hold for every input (kMaxQuantizedReduction, 65793): that layer stays FP32 (the pool on the FP32 dequantized
// tensor, its output quantized again for the 8-bit Flatten and Gemm) with the kernel's reason, and the plan runs.
TEST(QuantizedPlansCudaEmulatedTest, APoolTheCudaKernelDeclinesStaysFp32WithTheReason) {
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::QuantizedClassifierGraph(seed, true, true, 260, 260));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto plan,
                              BuildExecutionPlan(graph, Options(cuda::SharedTestDevice(), Layout::kNHWC, 1)));
  EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kQuantizedConv2d), 2) << plan->ToString(1);  // conv, fc
  EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kPool2d), 1) << plan->ToString(1);
  bool pool_listed = false;
  for (const QuantizedLayerChoice& layer : plan->quantized_layers()) {
    if (layer.node != "pool") {
      EXPECT_TRUE(layer.int8) << layer.node << ": " << layer.reason;
      continue;
    }
    pool_listed = true;
    EXPECT_FALSE(layer.int8);
    EXPECT_THAT(layer.reason, HasSubstr("no INT8 algorithm of this device implements"));
    EXPECT_THAT(layer.reason, HasSubstr("R*S*C/groups = 67600 exceeds 65793"));
  }
  EXPECT_TRUE(pool_listed) << plan->ToString(1);
  ExpectCudaInt8Steps(*plan, 1);
  // The pool's FP32 simulation and the reference's double land on neighbouring steps where a pooled value lies at a
  // rounding tie, and a step there moves the 12 logits: 3-5 % of them one step off (two of one image's 12 in about
  // one run of ten). So 4 images, 48 logits: every one within a step, at least 75 % identical.
  std::vector<float> gpu_logits, reference_logits;
  for (uint32_t image = 0; image < 4; ++image) {
    const Tensor x = testing::RandomTensor(ConcreteShape(graph.inputs()[0].shape, 1), seed + 7919 * image);
    auto gpu = RunPlan(plan, 1, x, false);
    CONVOY_ASSERT_OK_AND_ASSIGN(auto expected, RunReference(graph, {{"x", x}}));
    gpu_logits.insert(gpu_logits.end(), gpu["y"].begin(), gpu["y"].end());
    reference_logits.insert(reference_logits.end(), expected.at("y").data.begin(), expected.at("y").data.end());
  }
  ExpectWithinOneStep(gpu_logits, reference_logits, 4.0f / 255, "y against the reference", 75);
}

}  // namespace
}  // namespace convoy::runtime
