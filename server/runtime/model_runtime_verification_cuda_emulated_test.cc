// Verified algorithm choices end to end, on the emulated GPU: a CUDA conv algorithm that returns wrong results is
// registered in this binary only, ahead of every other candidate for the heuristic (highest score) and for tuning
// (fastest: it only clears the output). model_repo/simple_cnn (its RGB stem padded to 8 channels, a second conv, a
// dense layer) loads in FP16 NHWC through ModelRuntime with the heuristic and with tuning: the wrong candidate is
// rejected on every conv problem, never used by the plan, logged with its error, counted in
// convoy_algorithm_rejected_total (scraped from a metrics registry fed as the server feeds it), the model still
// matches the CPU runtime, and a restart from the saved algorithm cache verifies nothing again.
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "kernels/cpu/cpu_device.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/shared_test_device.h"
#include "kernels/cuda_emulation/cuda_host_api.h"
#include "kernels/cuda_emulation/cuda_status.h"
#include "kernels/registry/registry.h"
#include "kernels/registry/verification.h"
#include "kernels/testing/test_tensors.h"
#include "server/metrics/metrics_registry.h"
#include "server/metrics/testing/scrape.h"
#include "server/repository/model_repository.h"
#include "server/runtime/algorithm_counters.h"
#include "server/runtime/model_runtime.h"

namespace convoy::runtime {
namespace {

using ::convoy::testing::IsOk;
using ::testing::HasSubstr;

constexpr char kWrong[] = "test.cuda.conv2d.wrong_results";

// Implements whatever the 64x64 tensor-core implicit GEMM (or its 1x1 twin) implements, claims the heuristic's
// highest score, and writes zeros: wrong, and faster than anything that computes.
class WrongResultsConv2d final : public Conv2dAlgorithm {
 public:
  absl::string_view name() const override { return kWrong; }
  Backend backend() const override { return Backend::kCuda; }
  absl::Status CanImplement(const Conv2dProblem& problem) const override {
    const auto& registry = OpRegistry<Conv2dOp>::Global();
    for (const char* twin : {"cuda.conv2d.implicit_gemm_64x64", "cuda.conv2d.gemm_1x1_64x64"}) {
      if (registry.Find(twin)->CanImplement(problem).ok()) return absl::OkStatus();
    }
    return absl::UnimplementedError("not a tensor-core problem");
  }
  absl::Status Run(const Conv2dProblem& problem, const Conv2dArgs& args, Workspace,
                   const ExecutionContext& context) const override {
    const size_t bytes = static_cast<size_t>(problem.output_desc().num_elements()) * DataTypeSize(problem.dtype);
    return cuda::CudaStatus(cudaMemsetAsync(args.y, 0, bytes, static_cast<cudaStream_t>(context.cuda_stream)),
                            "cudaMemsetAsync");
  }
  int HeuristicScore(const Conv2dProblem&) const override { return 1000; }
};

CONVOY_REGISTER_ALGORITHM(Conv2dOp, WrongResultsConv2d);

cuda::CudaDevice& EmulatedGpu() { return cuda::SharedTestDevice(); }

absl::StatusOr<ModelRuntimeOptions> SimpleCnn(Device& device, AlgorithmCache& cache) {
  repository::ScannedModel scanned = repository::ScanModelDirectory("model_repo/simple_cnn");
  if (!scanned.status.ok()) return scanned.status;
  ModelRuntimeOptions options;
  options.model_path = scanned.versions.back().model_path;
  options.config = scanned.config;
  options.config->max_batch_size = 2;  // batch sizes 1 and 2 are planned (and verified)
  options.warmup = false;
  options.device = &device;
  options.cache = &cache;
  return options;
}

int64_t WrongRejections() {
  int64_t total = 0;
  for (const auto& c : AlgorithmRejections::Global().Counts()) {
    if (c.algorithm == kWrong) total += c.count;
  }
  return total;
}

// Runs the GPU model and the CPU model on one random batch and compares (FP16 compute: tolerance 1e-2 of each
// element plus 1e-2 of the output's largest magnitude, as model_runtime_cuda_emulated_test states for FP16).
void ExpectServesLikeTheCpu(const ModelRuntime& gpu, int batch) {
  AlgorithmCache cpu_cache;
  CONVOY_ASSERT_OK_AND_ASSIGN(ModelRuntimeOptions cpu_options, SimpleCnn(CpuDevice::Default(), cpu_cache));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto cpu, ModelRuntime::Create(cpu_options));
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(absl::StrCat("input seed ", seed));
  CONVOY_ASSERT_OK_AND_ASSIGN(HostTensor input, HostTensor::Create(TensorDesc(DataType::kFloat32, {batch, 3, 32, 32})));
  ::convoy::testing::FillUniform(input.data(), DataType::kFloat32, input.desc().num_elements(), seed);
  std::vector<HostTensor> outputs;
  for (int i = 0; i < 2; ++i) {
    CONVOY_ASSERT_OK_AND_ASSIGN(HostTensor out, HostTensor::Create(TensorDesc(DataType::kFloat32, {batch, 10})));
    ::convoy::testing::PoisonWithNaN(out.data(), DataType::kFloat32, out.desc().num_elements());
    outputs.push_back(std::move(out));
  }
  CONVOY_ASSERT_OK_AND_ASSIGN(auto gpu_instance, gpu.CreateInstance());
  CONVOY_ASSERT_OK_AND_ASSIGN(auto cpu_instance, cpu->CreateInstance());
  ASSERT_THAT(gpu_instance->Run(batch, {input.view()}, {outputs[0].view()}), IsOk());
  ASSERT_THAT(cpu_instance->Run(batch, {input.view()}, {outputs[1].view()}), IsOk());
  const int64_t count = outputs[0].desc().num_elements();
  const std::vector<float> actual = ::convoy::testing::ToFloats(outputs[0].data(), DataType::kFloat32, count);
  const std::vector<float> expected = ::convoy::testing::ToFloats(outputs[1].data(), DataType::kFloat32, count);
  double scale = 0;
  for (float e : expected) scale = std::max(scale, double(std::fabs(e)));
  EXPECT_THAT(::convoy::testing::CompareFloats(actual, expected, {1e-2, 1e-2 * scale}), IsOk());
}

// Every conv step of the plan, at every batch size, uses a verified algorithm other than the wrong one; returns how
// many conv steps the plan has.
int ExpectNoWrongAlgorithm(const ModelRuntime& model) {
  int convs = 0;
  for (const auto& step : model.plan().steps()) {
    if (step->op() != convoy::OpKind::kConv2d) continue;
    ++convs;
    for (int batch = 1; batch <= model.plan().max_batch_size(); ++batch) {
      EXPECT_NE(step->AlgorithmName(batch), kWrong) << step->name() << " batch " << batch;
      EXPECT_TRUE(absl::StartsWith(step->AlgorithmName(batch), "cuda.conv2d.")) << step->AlgorithmName(batch);
      EXPECT_TRUE(step->Verified(batch)) << step->name() << " batch " << batch;
    }
  }
  return convs;
}

class VerifiedChoicesTest : public ::testing::TestWithParam<AlgorithmSelection> {};

TEST_P(VerifiedChoicesTest, WrongCandidateIsRejectedCountedAndNeverUsed) {
  AlgorithmCache cache;
  CONVOY_ASSERT_OK_AND_ASSIGN(ModelRuntimeOptions options, SimpleCnn(EmulatedGpu(), cache));
  options.precision = Precision::kFp16;
  options.selection = GetParam();
  options.tuning.warmup_runs = 0;
  options.tuning.timed_runs = 1;
  options.tuning.min_timed_ms = 0;
  options.tuning.confirm_rounds = 0;
  std::vector<std::string> log;
  options.log = [&log](const std::string& line) { log.push_back(line); };
  const int64_t before = WrongRejections();

  CONVOY_ASSERT_OK_AND_ASSIGN(auto model, ModelRuntime::Create(options));
  const int convs = ExpectNoWrongAlgorithm(*model);
  EXPECT_EQ(convs, 2);
  // The stem reads the RGB input padded to 8 channels, so the wrong candidate (a tensor-core one) competed there too.
  bool padded_stem = false;
  for (const auto& step : model->plan().steps()) padded_stem |= absl::StrContains(step->ProblemString(1), "padded to c=8");
  EXPECT_TRUE(padded_stem) << model->plan().ToString(1);
  // One rejection per conv problem (2 convs x batch sizes 1 and 2), each logged with its error.
  EXPECT_EQ(WrongRejections(), before + 2 * convs);
  int logged = 0;
  for (const std::string& line : log) {
    if (absl::StrContains(line, absl::StrCat("rejected ", kWrong))) {
      ++logged;
      EXPECT_THAT(line, HasSubstr("mismatch"));
      EXPECT_THAT(line, HasSubstr("x the tolerance"));
    }
  }
  EXPECT_EQ(logged, 2 * convs);
  ExpectServesLikeTheCpu(*model, 2);

  // The metric, as the server exports it.
  metrics::MetricsRegistry::Options metrics_options;
  metrics_options.listen_address = "127.0.0.1:0";
  metrics_options.gpu_metrics = false;
  CONVOY_ASSERT_OK_AND_ASSIGN(auto metrics, metrics::MetricsRegistry::Create(metrics_options));
  metrics->SetAlgorithmCacheSource(&KernelAlgorithmCounters);
  CONVOY_ASSERT_OK_AND_ASSIGN(std::string page, metrics::testing::HttpGet(metrics->port(), "/metrics"));
  const std::optional<double> exported = metrics::testing::SampleValue(
      page, "convoy_algorithm_rejected_total", {{"algorithm", kWrong}, {"reason", "mismatch"}});
  ASSERT_TRUE(exported.has_value()) << page;
  EXPECT_EQ(*exported, static_cast<double>(WrongRejections()));

  // A restart with the saved cache: the same choices, no candidate verified (or rejected) again.
  const std::string path = absl::StrCat(::testing::TempDir(), "/verified_", static_cast<int>(GetParam()), ".cache");
  ASSERT_THAT(cache.Save(path), IsOk());
  AlgorithmCache restarted;
  ASSERT_THAT(restarted.Load(path), IsOk());
  CONVOY_ASSERT_OK_AND_ASSIGN(ModelRuntimeOptions again, SimpleCnn(EmulatedGpu(), restarted));
  again.precision = Precision::kFp16;
  again.selection = GetParam();
  std::vector<std::string> log_again;
  again.log = [&log_again](const std::string& line) { log_again.push_back(line); };
  const int64_t after_first = WrongRejections();
  CONVOY_ASSERT_OK_AND_ASSIGN(auto reloaded, ModelRuntime::Create(again));
  ExpectNoWrongAlgorithm(*reloaded);
  EXPECT_EQ(WrongRejections(), after_first);
  for (const std::string& line : log_again) EXPECT_THAT(line, ::testing::Not(HasSubstr("rejected")));
  for (size_t i = 0; i < model->plan().steps().size(); ++i) {
    EXPECT_EQ(model->plan().steps()[i]->AlgorithmName(1), reloaded->plan().steps()[i]->AlgorithmName(1));
  }
  std::remove(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(Selections, VerifiedChoicesTest,
                         ::testing::Values(AlgorithmSelection::kHeuristic, AlgorithmSelection::kTune),
                         [](const ::testing::TestParamInfo<AlgorithmSelection>& info) {
                           return info.param == AlgorithmSelection::kTune ? "Tune" : "Heuristic";
                         });

// With verify_algorithms: false in the config the heuristic's first choice is taken unchecked: the wrong one is then
// what the plan runs (the check above is what keeps it out).
TEST(VerifiedChoicesTest, TurningVerificationOffLetsTheWrongCandidateIn) {
  AlgorithmCache cache;
  CONVOY_ASSERT_OK_AND_ASSIGN(ModelRuntimeOptions options, SimpleCnn(EmulatedGpu(), cache));
  options.precision = Precision::kFp16;
  options.config->optimization.verify_algorithms = false;
  CONVOY_ASSERT_OK_AND_ASSIGN(auto model, ModelRuntime::Create(options));
  bool wrong_used = false;
  for (const auto& step : model->plan().steps()) wrong_used |= step->AlgorithmName(1) == kWrong;
  EXPECT_TRUE(wrong_used);
}

}  // namespace
}  // namespace convoy::runtime
