// ResNet-50 through ModelRuntime on the device: correctness against PyTorch and images/s (see model_bench.h).
#include "tests/gpu/model_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/common/status_macros.h"
#include "kernels/testing/test_tensors.h"
#include "server/runtime/model_runtime.h"

namespace convoy::gpu_check {
namespace {

using runtime::ModelInstance;
using runtime::ModelRuntime;

// `count` floats from a raw little-endian FP32 file.
absl::StatusOr<std::vector<float>> ReadFloats(const std::string& path, size_t count) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::vector<float> values(count);
  in.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(count * sizeof(float)));
  if (in.gcount() != static_cast<std::streamsize>(count * sizeof(float))) {
    return absl::DataLossError(absl::StrCat(path, ": expected ", count * sizeof(float), " bytes, read ", in.gcount()));
  }
  return values;
}

std::vector<int64_t> WithBatch(std::vector<int64_t> dims, int batch) {
  if (!dims.empty() && dims[0] < 0) dims[0] = batch;
  return dims;
}

absl::Status CompareWithTorch(const ModelBenchOptions& options, const ModelRuntime& model, ModelInstance& instance) {
  const int batch = 2;
  const std::vector<int64_t> in_dims = WithBatch(model.inputs()[0].dims, batch);
  const std::vector<int64_t> out_dims = WithBatch(model.outputs()[0].dims, batch);
  const TensorDesc in_desc(DataType::kFloat32, in_dims), out_desc(DataType::kFloat32, out_dims);
  CONVOY_ASSIGN_OR_RETURN(std::vector<float> x,
                          ReadFloats(options.model_dir + "/reference_input.bin", in_desc.num_elements()));
  CONVOY_ASSIGN_OR_RETURN(std::vector<float> expected,
                          ReadFloats(options.model_dir + "/reference_logits.bin", out_desc.num_elements()));
  std::vector<float> y(expected.size());
  testing::PoisonWithNaN(y.data(), DataType::kFloat32, y.size());
  CONVOY_RETURN_IF_ERROR(instance.Run(batch, {TensorView{in_desc, x.data()}}, {TensorView{out_desc, y.data()}}));
  double max_error = 0, max_reference = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    if (!std::isfinite(y[i])) return absl::InternalError(absl::StrCat("logit ", i, " is ", y[i]));
    max_error = std::max(max_error, std::abs(static_cast<double>(y[i]) - expected[i]));
    max_reference = std::max(max_reference, std::abs(static_cast<double>(expected[i])));
  }
  const double relative = max_error / std::max(max_reference, 1e-30);
  Say(absl::StrFormat("resnet50 fp16 (Convoy, CUDA) vs fp32 (PyTorch): max |error| %.3g, max |logit| %.3g, "
                      "relative %.3g (limit 5e-2)",
                      max_error, max_reference, relative));
  if (relative > 5e-2) return absl::InternalError(absl::StrFormat("relative error %.3g exceeds 5e-2", relative));
  return absl::OkStatus();
}

absl::Status TimeBatch(const ModelBenchOptions& options, const ModelRuntime& model, ModelInstance& instance,
                       int batch) {
  const TensorDesc in_desc(DataType::kFloat32, WithBatch(model.inputs()[0].dims, batch));
  const TensorDesc out_desc(DataType::kFloat32, WithBatch(model.outputs()[0].dims, batch));
  CONVOY_ASSIGN_OR_RETURN(HostBuffer x, testing::RandomBuffer(DataType::kFloat32, in_desc.num_elements(), 5));
  std::vector<float> y(out_desc.num_elements());
  const TensorView in{in_desc, x.data()}, out{out_desc, y.data()};
  for (int i = 0; i < 3; ++i) CONVOY_RETURN_IF_ERROR(instance.Run(batch, {in}, {out}));  // records, then replays
  const bool graph = instance.executor().replays(batch);
  const int runs = options.quick ? 1 : std::max(3, 256 / batch), rounds = options.quick ? 1 : 5;
  std::vector<double> ms_per_run;
  for (int r = 0; r < rounds; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < runs; ++i) CONVOY_RETURN_IF_ERROR(instance.Run(batch, {in}, {out}));
    ms_per_run.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / runs);
  }
  std::sort(ms_per_run.begin(), ms_per_run.end());
  const double ms = ms_per_run[ms_per_run.size() / 2];
  Say(absl::StrFormat("convoy   resnet50 fp16 NHWC batch %3d: %8.3f ms/batch %9.1f images/s  (%s, host->host)", batch,
                      ms, batch * 1000.0 / ms, graph ? "CUDA graph" : "steps, no graph"));
  if (!graph) {
    return absl::InternalError(
        absl::StrCat("no CUDA graph was recorded: ", instance.executor().recording_error().message()));
  }
  return absl::OkStatus();
}

}  // namespace

void RunModelBench(const ModelBenchOptions& options, cuda::CudaDevice& device, CaseRunner& cases) {
  Say("== Whole model: ResNet-50 through ModelRuntime (FP16 NHWC, a CUDA graph per batch size) ==");
  runtime::ModelRuntimeOptions load;
  load.model_path = options.model_dir + "/model.yaml";
  load.device = &device;
  load.precision = runtime::Precision::kFp16;
  load.layout = Layout::kNHWC;
  load.cuda_graphs = true;
  load.default_max_batch_size = *std::max_element(options.batches.begin(), options.batches.end());
  load.warmup = false;
  // The ops phases check every algorithm against the CPU reference on this device and this phase compares the logits
  // with PyTorch's, so the load skips the per-choice verification: with it, every convolution is checked at every
  // batch size 1..64 (3392 choices; the first run on an H200 was still loading when the phase's 60 s cap came).
  load.tuning.verification.enabled = false;
  load.log = [](const std::string& line) { Say("  load: ", line); };
  std::unique_ptr<ModelRuntime> model;
  std::unique_ptr<ModelInstance> instance;
  // Loaded by every process of the phase (a process that resumes after a fault needs the model too).
  const bool loaded = cases.RunSetup(absl::StrCat("model load ", load.model_path), [&]() -> absl::Status {
    const auto start = std::chrono::steady_clock::now();
    CONVOY_ASSIGN_OR_RETURN(model, ModelRuntime::Create(load));
    CONVOY_ASSIGN_OR_RETURN(instance, model->CreateInstance());
    Say(absl::StrFormat("loaded in %.2f s: %d steps, weights %.1f MB, arena %.1f MB per instance",
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                        model->plan().steps().size(), model->load_report().weight_bytes / 1e6,
                        model->load_report().arena_bytes / 1e6));
    return absl::OkStatus();
  });
  if (!loaded || model == nullptr) {
    for (int batch : options.batches) cases.Skip(absl::StrCat("model time batch ", batch), "the model did not load");
    return;
  }
  cases.Run("model resnet50 fp16 vs PyTorch fp32 logits", [&] { return CompareWithTorch(options, *model, *instance); });
  for (int batch : options.batches) {
    cases.Run(absl::StrCat("model time batch ", batch), [&] { return TimeBatch(options, *model, *instance, batch); });
  }
}

}  // namespace convoy::gpu_check
