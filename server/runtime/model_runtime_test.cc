// ModelRuntime tests on the sample Convoy-YAML model (model_repo/simple_cnn): the optimized runtime matches the
// reference interpreter on fresh random inputs, input validation names the tensor and the numbers, a config that
// disagrees with the model fails the load, and instances of one model run side by side.
#include "server/runtime/model_runtime.h"

#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_macros.h"
#include "kernels/common/status_matchers.h"
#include "kernels/cpu/cpu_device.h"
#include "kernels/cpu/onednn_support.h"
#include "kernels/testing/test_tensors.h"
#include "server/repository/model_repository.h"
#include "server/runtime/reference_interpreter.h"

namespace convoy::runtime {
namespace {

using ::convoy::testing::IsOk;
using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;

absl::StatusOr<ModelRuntimeOptions> SimpleCnnOptions() {
  repository::ScannedModel scanned = repository::ScanModelDirectory("model_repo/simple_cnn");
  if (!scanned.status.ok()) return scanned.status;
  ModelRuntimeOptions options;
  options.model_path = scanned.versions.back().model_path;
  options.config = scanned.config;
  options.device = &CpuDevice::Default();
  return options;
}

// Runs `model` at batch 3 on fresh random images into NaN-poisoned outputs and compares with the reference interpreter.
void ExpectMatchesReferenceAtBatch3(const ModelRuntime& model) {
  CONVOY_ASSERT_OK_AND_ASSIGN(auto instance, model.CreateInstance());
  const int batch = 3;
  Tensor x = Tensor::Zeros({batch, 3, 32, 32});
  ::convoy::testing::FillUniform(x.data.data(), DataType::kFloat32, x.data.size(), std::random_device{}());
  std::vector<float> y(batch * 10);
  ::convoy::testing::PoisonWithNaN(y.data(), DataType::kFloat32, y.size());
  ASSERT_THAT(instance->Run(batch, {TensorView{TensorDesc(DataType::kFloat32, {batch, 3, 32, 32}), x.data.data()}},
                            {TensorView{TensorDesc(DataType::kFloat32, {batch, 10}), y.data()}}),
              IsOk());
  CONVOY_ASSERT_OK_AND_ASSIGN(auto expected, RunReference(model.graph(), {{"images", x}}));
  EXPECT_THAT(::convoy::testing::CompareFloats(y, expected.at("probabilities").data, {1e-4, 1e-6}), IsOk());
}

TEST(ModelRuntimeTest, MatchesReferenceInterpreterAndLogsEachPhase) {
  CONVOY_ASSERT_OK_AND_ASSIGN(ModelRuntimeOptions options, SimpleCnnOptions());
  std::vector<std::string> log;
  options.log = [&log](const std::string& line) { log.push_back(line); };
  CONVOY_ASSERT_OK_AND_ASSIGN(auto model, ModelRuntime::Create(options));
  ASSERT_EQ(model->inputs().size(), 1u);
  EXPECT_EQ(model->inputs()[0].dims, (std::vector<int64_t>{-1, 3, 32, 32}));
  EXPECT_EQ(model->outputs()[0].dims, (std::vector<int64_t>{-1, 10}));
  EXPECT_THAT(log, ::testing::Contains(HasSubstr("simple_cnn: imported and optimized")));
  // The CPU default follows oneDNN's kernels (DefaultCpuLayout). Blocked: 6 kernel steps plus 1 reorder (the C=3
  // stem reads the NCHW image and writes blocked; the Flatten before the classifier reads NCHW). NHWC: 6 kernel steps
  // plus 2 conversions (the NCHW image into NHWC, the pooled 8x8 map back to NCHW before the Flatten).
  const Layout layout = DefaultCpuLayout(cpu::onednn::HasAvx512Kernels(), false);
  EXPECT_THAT(log, ::testing::Contains(HasSubstr(layout == Layout::kNCHW8c ? "simple_cnn: planned 7 steps"
                                                                           : "simple_cnn: planned 8 steps")));
  EXPECT_THAT(log, ::testing::Contains(HasSubstr(absl::StrCat("(fp32, ", LayoutName(layout), ")"))));
  EXPECT_THAT(log, ::testing::Contains(HasSubstr("simple_cnn: memory at batch 32: arena")));
  EXPECT_THAT(log, ::testing::Contains(HasSubstr("simple_cnn: warmed up in")));

  ExpectMatchesReferenceAtBatch3(*model);
}

// image_by_image_steps forces a prefix at every batch size from 2 (capped at the longest), 0 or the config's false
// turns it off, and auto measures only where the plan was tuned, logging what it chose.
TEST(ModelRuntimeTest, ImageByImageForcedOffOrMeasuredWhereTuned) {
  CONVOY_ASSERT_OK_AND_ASSIGN(ModelRuntimeOptions options, SimpleCnnOptions());
  std::vector<std::string> log;
  options.log = [&log](const std::string& line) { log.push_back(line); };
  AlgorithmCache untuned;  // not the process-wide cache, which other tests may have tuned
  options.cache = &untuned;
  options.image_by_image_steps = 2;
  CONVOY_ASSERT_OK_AND_ASSIGN(auto forced, ModelRuntime::Create(options));
  EXPECT_EQ(forced->image_by_image_steps(1), 0);
  EXPECT_EQ(forced->image_by_image_steps(3), 2);
  EXPECT_EQ(forced->image_by_image_steps(32), 2);
  EXPECT_THAT(log, ::testing::Contains(HasSubstr("simple_cnn: every batch size from 2 runs its first 2 of")));
  ExpectMatchesReferenceAtBatch3(*forced);

  options.image_by_image_steps = 1000;
  CONVOY_ASSERT_OK_AND_ASSIGN(auto longest, ModelRuntime::Create(options));
  EXPECT_GT(longest->image_by_image_steps(3), 2);
  EXPECT_LT(longest->image_by_image_steps(3), static_cast<int>(longest->plan().steps().size()));
  ExpectMatchesReferenceAtBatch3(*longest);

  options.image_by_image_steps.reset();
  options.config->optimization.image_by_image = false;
  CONVOY_ASSERT_OK_AND_ASSIGN(auto off, ModelRuntime::Create(options));
  EXPECT_EQ(off->image_by_image_steps(3), 0);

  // Heuristic choices carry no times: nothing is measured.
  log.clear();
  options.config->optimization.image_by_image = true;
  CONVOY_ASSERT_OK_AND_ASSIGN(auto heuristic, ModelRuntime::Create(options));
  for (int b = 1; b <= 32; ++b) EXPECT_EQ(heuristic->image_by_image_steps(b), 0) << b;
  EXPECT_THAT(log, ::testing::Not(::testing::Contains(HasSubstr("image by image"))));

  // Tuned at 1 and 4: batch 4 is measured (whichever way it goes on this machine), the other sizes are not.
  log.clear();
  options.selection = AlgorithmSelection::kTune;
  options.tune_batch_sizes = {1, 4};
  AlgorithmCache cache;
  options.cache = &cache;
  CONVOY_ASSERT_OK_AND_ASSIGN(auto tuned, ModelRuntime::Create(options));
  EXPECT_THAT(log, ::testing::Contains(HasSubstr("simple_cnn: image by image, measured at each tuned batch size")));
  EXPECT_THAT(log, ::testing::Contains(HasSubstr("batch 4")));
  EXPECT_EQ(tuned->image_by_image_steps(3), 0);
  EXPECT_LE(tuned->image_by_image_steps(4), static_cast<int>(tuned->plan().steps().size()));
  ExpectMatchesReferenceAtBatch3(*tuned);
}

// precision auto is bf16 exactly where oneDNN reports BF16 compute (AMX / AVX512-BF16), fp32 elsewhere, and the load
// log says which; the plan is made in the resolved precision.
TEST(ModelRuntimeTest, PrecisionAutoResolvesByTheCpusBf16Compute) {
  CONVOY_ASSERT_OK_AND_ASSIGN(ModelRuntimeOptions options, SimpleCnnOptions());
  options.precision = Precision::kAuto;
  std::vector<std::string> log;
  options.log = [&log](const std::string& line) { log.push_back(line); };
  CONVOY_ASSERT_OK_AND_ASSIGN(auto model, ModelRuntime::Create(options));
  const bool bf16 = cpu::onednn::HasBf16Compute();
  EXPECT_THAT(log, ::testing::Contains(HasSubstr(bf16 ? "precision auto -> bf16" : "precision auto -> fp32")));
  const std::string layout(LayoutName(DefaultCpuLayout(cpu::onednn::HasAvx512Kernels(), false)));
  EXPECT_THAT(log, ::testing::Contains(HasSubstr(absl::StrCat(bf16 ? "(bf16, " : "(fp32, ", layout, ")"))));
}

// A graph of one 3x3 convolution of 8 channels in `groups` groups, then a plain 1x1 one.
absl::StatusOr<Graph> GroupedConvGraph(int64_t groups) {
  Graph g;
  CONVOY_RETURN_IF_ERROR(g.AddInput("x", {kBatch, 8, 6, 6}));
  Conv2dAttrs conv;
  conv.window = Window2d{3, 3, 1, 1, 1, 1, 1, 1, 1, 1};
  conv.groups = groups;
  CONVOY_RETURN_IF_ERROR(g.AddConstant("w", Tensor::Zeros({8, 8 / groups, 3, 3})));
  CONVOY_RETURN_IF_ERROR(g.AddNode(MakeNode("conv", conv, {"x", "w"}, {"y"})));
  Conv2dAttrs pointwise;
  pointwise.window = Window2d{1, 1, 1, 1, 0, 0, 0, 0, 1, 1};
  CONVOY_RETURN_IF_ERROR(g.AddConstant("w1", Tensor::Zeros({8, 8, 1, 1})));
  CONVOY_RETURN_IF_ERROR(g.AddNode(MakeNode("pointwise", pointwise, {"y", "w1"}, {"z"})));
  CONVOY_RETURN_IF_ERROR(g.AddOutput("z"));
  CONVOY_RETURN_IF_ERROR(g.Finalize());
  return g;
}

// Depthwise convolutions (MobileNet, EfficientNet) do not count as grouped for the default layout; other groups do.
TEST(ModelRuntimeTest, OnlyGroupedConvolutionsOtherThanDepthwiseCount) {
  for (int64_t groups : {1, 2, 4, 8}) {
    CONVOY_ASSERT_OK_AND_ASSIGN(Graph g, GroupedConvGraph(groups));
    EXPECT_EQ(HasGroupedNonDepthwiseConv(g), groups == 2 || groups == 4) << groups << " groups";
  }
}

// NHWC where oneDNN has AVX-512 kernels (brgconv, jit:avx512_core, depthwise included) unless the model has grouped
// convolutions other than depthwise, blocked elsewhere; a plan of simple_cnn (no grouped convolution) made without a
// layout follows it on this CPU.
TEST(ModelRuntimeTest, DefaultCpuLayoutFollowsOnednnsKernelsAndTheModel) {
  EXPECT_EQ(DefaultCpuLayout(true, false), Layout::kNHWC);
  EXPECT_EQ(DefaultCpuLayout(true, true), Layout::kNCHW8c);
  EXPECT_EQ(DefaultCpuLayout(false, false), Layout::kNCHW8c);
  EXPECT_EQ(DefaultCpuLayout(false, true), Layout::kNCHW8c);
  CONVOY_ASSERT_OK_AND_ASSIGN(ModelRuntimeOptions options, SimpleCnnOptions());
  options.warmup = false;
  CONVOY_ASSERT_OK_AND_ASSIGN(auto model, ModelRuntime::Create(options));
  EXPECT_EQ(model->plan().layout(), DefaultCpuLayout(cpu::onednn::HasAvx512Kernels(), false));
  options.layout = Layout::kNCHW8c;
  CONVOY_ASSERT_OK_AND_ASSIGN(auto blocked, ModelRuntime::Create(options));
  EXPECT_EQ(blocked->plan().layout(), Layout::kNCHW8c);
}

TEST(ModelRuntimeTest, ValidateInputNamesTheTensorAndTheNumbers) {
  CONVOY_ASSERT_OK_AND_ASSIGN(ModelRuntimeOptions options, SimpleCnnOptions());
  options.warmup = false;
  CONVOY_ASSERT_OK_AND_ASSIGN(auto model, ModelRuntime::Create(options));
  const TensorDesc good(DataType::kFloat32, {1, 3, 32, 32});
  EXPECT_THAT(model->ValidateInput(0, 1, good, 12288), IsOk());
  EXPECT_THAT(model->ValidateInput(0, 1, good, 12284),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("input 'images': expected 12288 bytes for shape [1,3,32,32] FP32, got 12284")));
  EXPECT_THAT(model->ValidateInput(0, 2, good, 12288),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("input 'images': expected shape [2,3,32,32], got [1,3,32,32]")));
  EXPECT_THAT(model->ValidateInput(0, 1, TensorDesc(DataType::kFloat16, {1, 3, 32, 32}), 6144),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("input 'images': expected datatype FP32, got FP16")));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto instance, model->CreateInstance());
  std::vector<float> x(33 * 3 * 32 * 32), y(33 * 10);
  EXPECT_THAT(instance->Run(33, {TensorView{TensorDesc(DataType::kFloat32, {33, 3, 32, 32}), x.data()}},
                            {TensorView{TensorDesc(DataType::kFloat32, {33, 10}), y.data()}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("batch size 33 is outside [1, 32]")));
}

TEST(ModelRuntimeTest, ConfigThatDisagreesWithTheModelFailsTheLoad) {
  CONVOY_ASSERT_OK_AND_ASSIGN(ModelRuntimeOptions options, SimpleCnnOptions());
  options.config->inputs[0].dims = {3, 64, 64};
  EXPECT_THAT(ModelRuntime::Create(options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("input 'images': the config gives [N,3,64,64], the model has [N,3,32,32]")));
  CONVOY_ASSERT_OK_AND_ASSIGN(options, SimpleCnnOptions());
  options.config->outputs[0].name = "logits";
  EXPECT_THAT(ModelRuntime::Create(options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("config output 'logits' is not an output")));
}

}  // namespace
}  // namespace convoy::runtime
