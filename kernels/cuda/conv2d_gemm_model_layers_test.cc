// Every tensor-core conv2d and GEMM algorithm (every tile, every split factor) and the depthwise kernel against the
// CPU reference on the layers of ResNet-50, MobileNetV2 and EfficientNet-Lite0 at batch 1, 8 and 32, on the emulated
// CudaDevice, through the shared cross-backend suite (fresh inputs per layer, outputs NaN-poisoned, the suite's
// tolerances: op_case_traits.h).
//
// The layers keep their real channels, filters, strides, padding, groups and fused epilogues; the emulation pays for
// every output pixel, so the input's spatial size is reduced to give a 3x3 output at batch 1, 2x2 at batch 8 and 1x1
// at batch 32 (GEMM rows 9, 32, 32: the tiling along the channels, the taps of the gather and the images of the batch
// are the real ones). The classifier GEMM of each model runs at m = batch. The SIMT fallbacks (not new, and as slow
// as the rest put together) run on the shared list only (conv2d_gemm_emulated_test).
//
// Thread orders: forward for every layer in FP16; FP32-as-TF32 and BF16 at batch 8; the reverse and seeded-random
// orders on the MobileNetV2 and EfficientNet layers at batch 8 and ResNet-50's at batch 1 (the other ResNet-50
// shapes run in forward order only: they cost most, and the same kernels run under every order on these).
//
// Two targets split the cases (together they run every one): conv2d_gemm_model_layers_emulated_test (CI) runs all
// but ResNet-50's TF32/BF16 and thread-order cases, which conv2d_gemm_resnet50_layers_emulated_test (tagged manual,
// minutes of CPU) runs: `bazel test //kernels/cuda:conv2d_gemm_resnet50_layers_emulated_test`.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/cuda/conv2d_gemm_test_problems.h"
#include "kernels/cuda/shared_test_device.h"
#include "kernels/cuda_emulation/schedule.h"
#include "kernels/testing/cross_backend_suite.h"

namespace convoy::testing {
namespace {

cuda::CudaDevice& Device() { return cuda::SharedTestDevice(); }

int OutputSizeFor(int batch) { return batch == 1 ? 3 : batch == 8 ? 2 : 1; }

CrossBackendOptions NewKernelsOnly() {
  CrossBackendOptions options;
  options.algorithm_filter = [](absl::string_view name) { return !absl::EndsWith(name, ".simt") &&
                                                                 !absl::EndsWith(name, ".direct_simt"); };
  options.require_every_algorithm = false;
  return options;
}

void RunModel(const std::string& model, int batch, DataType dtype) {
  std::vector<Conv2dProblem> convs;
  for (const ResNetLayer& layer : ModelConvLayerProblems(model, batch, OutputSizeFor(batch), dtype)) {
    convs.push_back(layer.problem);
  }
  std::cout << model << " batch " << batch << " " << DataTypeName(dtype) << "\n";
  ExpectAllAlgorithmsMatchReference<Conv2dOp>(Backend::kCuda, Device(), convs, NewKernelsOnly());
  ExpectAllAlgorithmsMatchReference<GemmOp>(Backend::kCuda, Device(), ModelFcProblems(model, batch, dtype),
                                            NewKernelsOnly());
}

struct ModelBatch {
  std::string model;
  int batch;
};

class ModelLayersTest : public ::testing::TestWithParam<ModelBatch> {};

TEST_P(ModelLayersTest, Fp16) { RunModel(GetParam().model, GetParam().batch, DataType::kFloat16); }

std::vector<ModelBatch> AllModelBatches() {
  std::vector<ModelBatch> out;
  for (const std::string& model : TestModels()) {
    for (int batch : {1, 8, 32}) out.push_back({model, batch});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Layers, ModelLayersTest, ::testing::ValuesIn(AllModelBatches()),
                         [](const ::testing::TestParamInfo<ModelBatch>& info) {
                           return absl::StrCat(info.param.model, "_b", info.param.batch);
                         });

class ModelLayersOtherTypesTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelLayersOtherTypesTest, Tf32AndBf16AtBatch8) {
  RunModel(GetParam(), 8, DataType::kFloat32);
  RunModel(GetParam(), 8, DataType::kBFloat16);
}

std::string ModelName(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

INSTANTIATE_TEST_SUITE_P(Layers, ModelLayersOtherTypesTest, ::testing::ValuesIn(TestModels()), ModelName);

class ModelLayersScheduleTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelLayersScheduleTest, ReverseAndRandomThreadOrders) {
  const std::string& model = GetParam();
  const int batch = model == "resnet50" ? 1 : 8;
  using cuda_emulation::Schedule;
  for (const Schedule& schedule : {Schedule::Reverse(), Schedule::SeededRandom(23)}) {
    SCOPED_TRACE(schedule.ToString());
    std::cout << "schedule " << schedule.ToString() << "\n";
    cuda_emulation::ScopedSchedule scoped(schedule);
    RunModel(model, batch, DataType::kFloat16);
  }
}

INSTANTIATE_TEST_SUITE_P(Layers, ModelLayersScheduleTest, ::testing::ValuesIn(TestModels()), ModelName);

}  // namespace
}  // namespace convoy::testing
