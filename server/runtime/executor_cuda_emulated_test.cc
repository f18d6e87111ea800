// The executor on the CUDA backend, run through the CUDA emulation: each executor owns a stream, plans run with and
// without a recorded CUDA graph per batch size, replays see new inputs, a failed recording falls back to running
// the steps, and executors of one plan run concurrently on one device; copies go through pinned staging, every kernel
// runs once before the first capture, Run sets its device, and a failed allocation leaves no error behind. Outputs
// are compared with the reference interpreter (double-precision per op) on fresh random inputs, the output buffers
// poisoned with NaN before each run; FP32 plans within 1e-4 relative + 1e-5 absolute. UINT8 image inputs are normalized by the plan's first step.
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda_emulation/cuda_host_api.h"
#include "kernels/registry/forwarding_device.h"
#include "kernels/testing/test_tensors.h"
#include "server/runtime/executor.h"
#include "server/runtime/planner.h"
#include "server/runtime/planner_test_graphs.h"
#include "server/runtime/reference_interpreter.h"

namespace convoy::runtime {
namespace {

using ::convoy::testing::IsOk;
using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::StartsWith;

uint32_t FreshSeed() { return std::random_device{}(); }

std::unique_ptr<cuda::CudaDevice> EmulatedGpu() {
  absl::StatusOr<std::unique_ptr<cuda::CudaDevice>> device = cuda::CudaDevice::Create({});
  EXPECT_TRUE(device.ok()) << device.status();
  if (!device.ok()) return nullptr;
  EXPECT_THAT((*device)->Identity(), StartsWith("cuda-emulated:"));
  return std::move(*device);
}

absl::StatusOr<std::shared_ptr<const ExecutionPlan>> PlanFor(Device* device, const Graph& graph, int max_batch_size) {
  PlannerOptions options;
  options.device = device;
  options.layout = Layout::kNHWC;
  options.max_batch_size = max_batch_size;
  return BuildExecutionPlan(graph, options);
}

// Runs EveryOpGraph's plan at `batch_size` on fresh random input and checks both outputs against the reference.
absl::Status RunAndCompare(const Graph& graph, Executor& executor, int batch_size) {
  const Tensor x = testing::RandomTensor({batch_size, 3, 8, 8}, FreshSeed());
  CONVOY_ASSIGN_OR_RETURN(auto expected, RunReference(graph, {{"x", x}}));
  std::vector<float> probs(batch_size * 10), features(batch_size * 8 * 4 * 4);
  ::convoy::testing::PoisonWithNaN(probs.data(), DataType::kFloat32, probs.size());
  ::convoy::testing::PoisonWithNaN(features.data(), DataType::kFloat32, features.size());
  CONVOY_RETURN_IF_ERROR(
      executor.Run(batch_size, {TensorView{executor.ExpectedInputDesc(0, batch_size), const_cast<float*>(x.data.data())}},
                   {TensorView{executor.ExpectedOutputDesc(0, batch_size), probs.data()},
                    TensorView{executor.ExpectedOutputDesc(1, batch_size), features.data()}}));
  CONVOY_RETURN_IF_ERROR(::convoy::testing::CompareFloats(probs, expected.at("probs").data, {1e-4, 1e-5}));
  return ::convoy::testing::CompareFloats(features, expected.at("features").data, {1e-4, 1e-5});
}

TEST(ExecutorCudaTest, RecordsOneGraphPerBatchSizeAndReplaysItOnNewInputs) {
  auto gpu = EmulatedGpu();
  ASSERT_NE(gpu, nullptr);
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::EveryOpGraph(FreshSeed()));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, PlanFor(gpu.get(), graph, 3));
  ASSERT_GT(plan->steps().size(), 10u);
  for (const auto& step : plan->steps()) {
    for (int batch : {1, 3}) EXPECT_THAT(std::string(step->AlgorithmName(batch)), StartsWith("cuda.")) << step->name();
  }
  CONVOY_ASSERT_OK_AND_ASSIGN(auto executor, Executor::Create({plan, /*record_per_batch_size=*/true}));
  EXPECT_NE(executor->context().cuda_stream, gpu->stream()) << "each executor gets a stream of its own";
  EXPECT_NE(executor->context().cuda_stream, nullptr);
  for (int batch : {1, 3, 1, 3, 2, 2}) {
    SCOPED_TRACE(absl::StrCat("batch ", batch));
    ASSERT_THAT(RunAndCompare(graph, *executor, batch), IsOk());
    EXPECT_TRUE(executor->replays(batch));
  }
  EXPECT_EQ(executor->recorded_batch_sizes(), 3);
  EXPECT_THAT(executor->recording_error(), IsOk());
}

// A UINT8 HWC image input normalized on the device by the plan's first step (inside the recorded graph), vs the
// reference on the same normalization done here in double precision.
TEST(ExecutorCudaTest, Uint8ImagesAreNormalizedOnTheDeviceInsideTheGraph) {
  auto gpu = EmulatedGpu();
  ASSERT_NE(gpu, nullptr);
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::EveryOpGraph(FreshSeed()));
  PreprocessProblem preprocess;
  preprocess.h = 8, preprocess.w = 8, preprocess.c = 3;
  preprocess.mean = {0.485f, 0.456f, 0.406f, 0};
  preprocess.stddev = {0.229f, 0.224f, 0.225f, 1};
  PlannerOptions options;
  options.device = gpu.get();
  options.layout = Layout::kNHWC;
  options.max_batch_size = 2;
  options.preprocessing["x"] = preprocess;
  CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, BuildExecutionPlan(graph, options));
  EXPECT_EQ(plan->steps().front()->op(), ::convoy::OpKind::kPreprocess);
  EXPECT_THAT(std::string(plan->steps().front()->AlgorithmName(1)), StartsWith("cuda."));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto executor, Executor::Create({plan, /*record_per_batch_size=*/true}));
  EXPECT_EQ(executor->ExpectedInputDesc(0, 2).dims(), (std::vector<int64_t>{2, 8, 8, 3}));
  EXPECT_EQ(executor->ExpectedInputDesc(0, 2).dtype(), DataType::kUInt8);
  std::mt19937 random(FreshSeed());
  for (int batch : {2, 1, 2}) {
    std::vector<uint8_t> pixels(batch * 8 * 8 * 3);
    for (uint8_t& p : pixels) p = static_cast<uint8_t>(random() % 256);
    Tensor x{{batch, 3, 8, 8}, std::vector<float>(pixels.size())};
    for (int n = 0; n < batch; ++n)
      for (int y = 0; y < 8; ++y)
        for (int w = 0; w < 8; ++w)
          for (int c = 0; c < 3; ++c) {
            const double unit = pixels[((n * 8 + y) * 8 + w) * 3 + c] / 255.0;
            x.data[((n * 3 + c) * 8 + y) * 8 + w] =
                static_cast<float>((unit - preprocess.mean[c]) / preprocess.stddev[c]);
          }
    CONVOY_ASSERT_OK_AND_ASSIGN(auto expected, RunReference(graph, {{"x", x}}));
    std::vector<float> probs(batch * 10), features(batch * 8 * 4 * 4);
    ::convoy::testing::PoisonWithNaN(probs.data(), DataType::kFloat32, probs.size());
    ::convoy::testing::PoisonWithNaN(features.data(), DataType::kFloat32, features.size());
    ASSERT_THAT(executor->Run(batch, {TensorView{executor->ExpectedInputDesc(0, batch), pixels.data()}},
                              {TensorView{executor->ExpectedOutputDesc(0, batch), probs.data()},
                               TensorView{executor->ExpectedOutputDesc(1, batch), features.data()}}),
                IsOk());
    EXPECT_TRUE(executor->replays(batch));
    EXPECT_THAT(::convoy::testing::CompareFloats(probs, expected.at("probs").data, {1e-4, 1e-5}), IsOk());
    EXPECT_THAT(::convoy::testing::CompareFloats(features, expected.at("features").data, {1e-4, 1e-5}), IsOk());
  }
}

TEST(ExecutorCudaTest, WithoutRecordingEveryStepRunsAndMatchesToo) {
  auto gpu = EmulatedGpu();
  ASSERT_NE(gpu, nullptr);
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::EveryOpGraph(FreshSeed()));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, PlanFor(gpu.get(), graph, 2));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto executor, Executor::Create({plan}));
  for (int batch : {2, 1}) {
    ASSERT_THAT(RunAndCompare(graph, *executor, batch), IsOk()) << "batch " << batch;
    EXPECT_FALSE(executor->replays(batch));
  }
  EXPECT_EQ(executor->recorded_batch_sizes(), 0);
}

TEST(ExecutorCudaTest, AStepObserverRunsStepsOneByOne) {
  auto gpu = EmulatedGpu();
  ASSERT_NE(gpu, nullptr);
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::EveryOpGraph(FreshSeed()));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, PlanFor(gpu.get(), graph, 1));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto executor, Executor::Create({plan, /*record_per_batch_size=*/true}));
  size_t steps_seen = 0;
  executor->set_step_observer([&](int, const PlanStep&, double) { ++steps_seen; });
  ASSERT_THAT(RunAndCompare(graph, *executor, 1), IsOk());
  EXPECT_EQ(steps_seen, plan->steps().size());
  EXPECT_FALSE(executor->replays(1));
}

// A device whose queues fail every recording: the executor must still serve, step by step, and say why.
class RecordingFailsDevice : public ForwardingDevice {
 public:
  using ForwardingDevice::ForwardingDevice;
  absl::StatusOr<std::unique_ptr<DeviceQueue>> CreateQueue() override {
    CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<DeviceQueue> queue, inner().CreateQueue());
    return std::unique_ptr<DeviceQueue>(new Queue(std::move(queue)));
  }

 private:
  class Queue : public DeviceQueue {
   public:
    explicit Queue(std::unique_ptr<DeviceQueue> inner) : inner_(std::move(inner)) {}
    ExecutionContext context() const override { return inner_->context(); }
    absl::Status CopyToDevice(void* d, const void* h, size_t n) override { return inner_->CopyToDevice(d, h, n); }
    absl::Status CopyToHost(void* h, const void* d, size_t n) override { return inner_->CopyToHost(h, d, n); }
    absl::Status Synchronize() override { return inner_->Synchronize(); }
    bool CanRecord() const override { return true; }
    absl::StatusOr<std::unique_ptr<RecordedWork>> Record(const std::function<absl::Status()>&) override {
      return absl::InternalError("injected recording failure");
    }

   private:
    std::unique_ptr<DeviceQueue> inner_;
  };
};

TEST(ExecutorCudaTest, AFailedRecordingFallsBackToRunningTheSteps) {
  auto gpu = EmulatedGpu();
  ASSERT_NE(gpu, nullptr);
  RecordingFailsDevice device(gpu.get());
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::EveryOpGraph(FreshSeed()));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, PlanFor(&device, graph, 2));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto executor, Executor::Create({plan, /*record_per_batch_size=*/true}));
  for (int batch : {2, 2, 1}) {
    ASSERT_THAT(RunAndCompare(graph, *executor, batch), IsOk()) << "batch " << batch;
    EXPECT_FALSE(executor->replays(batch));
  }
  EXPECT_THAT(executor->recording_error(),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("recording batch size 1: injected recording failure")));
}

TEST(ExecutorCudaTest, ExecutorsOfOnePlanRunConcurrentlyOnTheirOwnStreams) {
  auto gpu = EmulatedGpu();
  ASSERT_NE(gpu, nullptr);
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::EveryOpGraph(FreshSeed()));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, PlanFor(gpu.get(), graph, 2));
  constexpr int kThreads = 3;
  std::vector<std::unique_ptr<Executor>> executors;
  for (int t = 0; t < kThreads; ++t) {
    CONVOY_ASSERT_OK_AND_ASSIGN(auto executor, Executor::Create({plan, /*record_per_batch_size=*/t != 0}));
    for (const auto& other : executors) EXPECT_NE(executor->context().cuda_stream, other->context().cuda_stream);
    executors.push_back(std::move(executor));
  }
  std::vector<absl::Status> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int run = 0; run < 3 && results[t].ok(); ++run) results[t] = RunAndCompare(graph, *executors[t], 1 + run % 2);
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_THAT(results[t], IsOk()) << "executor " << t;
}

// ---- Host-side behaviour a GPU needs and a synchronous emulation would hide (kernels/cuda_emulation/host_runtime.h
// counts or rejects what the GPU would punish) ----

// Inputs and outputs go through the executor's page-locked staging buffers: no queued copy touches pageable memory
// (on a GPU such a copy blocks the host and overlaps nothing).
TEST(ExecutorCudaTest, CopiesGoThroughPinnedStagingBuffers) {
  auto gpu = EmulatedGpu();
  ASSERT_NE(gpu, nullptr);
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::EveryOpGraph(FreshSeed()));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, PlanFor(gpu.get(), graph, 2));
  for (const bool record : {false, true}) {
    CONVOY_ASSERT_OK_AND_ASSIGN(auto executor, Executor::Create({plan, record}));
    const int64_t before = cuda_emulation::PageableAsyncCopyCount();
    for (int batch : {2, 1, 2}) ASSERT_THAT(RunAndCompare(graph, *executor, batch), IsOk());
    EXPECT_EQ(cuda_emulation::PageableAsyncCopyCount(), before) << "record " << record;
  }
}

// The first run of a batch size launches every kernel outside a capture before recording (under lazy module
// loading a kernel's first launch loads its module, which must not happen inside the capture).
TEST(ExecutorCudaTest, EveryKernelRunsOnceBeforeTheFirstCapture) {
  auto gpu = EmulatedGpu();
  ASSERT_NE(gpu, nullptr);
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::EveryOpGraph(FreshSeed()));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, PlanFor(gpu.get(), graph, 3));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto executor, Executor::Create({plan, /*record_per_batch_size=*/true}));
  cuda_emulation::ForgetLoadedKernels();  // as in a fresh process: no kernel launched yet
  const int64_t before = cuda_emulation::FirstLaunchesInCaptureCount();
  for (int batch : {3, 1, 3}) {
    ASSERT_THAT(RunAndCompare(graph, *executor, batch), IsOk());
    EXPECT_TRUE(executor->replays(batch));
  }
  EXPECT_EQ(cuda_emulation::FirstLaunchesInCaptureCount(), before);
  EXPECT_THAT(executor->recording_error(), IsOk());
}

// Run makes its queue's device current: a server thread with another GPU current still launches on the right one.
TEST(ExecutorCudaTest, RunsOnItsOwnDeviceWhateverDeviceIsCurrent) {
  cuda_emulation::SetDeviceCount(2);
  absl::StatusOr<std::unique_ptr<cuda::CudaDevice>> second = cuda::CudaDevice::Create({/*device_index=*/1});
  ASSERT_THAT(second, IsOk());
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::EveryOpGraph(FreshSeed()));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, PlanFor(second->get(), graph, 2));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto executor, Executor::Create({plan, /*record_per_batch_size=*/true}));
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  for (int batch : {1, 2, 1}) ASSERT_THAT(RunAndCompare(graph, *executor, batch), IsOk()) << "batch " << batch;
  int current = -1;
  ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
  EXPECT_EQ(current, 0) << "Run restores the caller's device";
  executor.reset();
  plan.reset();
  second->reset();
  cuda_emulation::SetDeviceCount(1);
}

// A failed allocation's CUDA error is consumed where it becomes a Status: the next launch does not fail with it
// (on a GPU, kernel<<<>>> followed by cudaGetLastError() would report the stale out-of-memory).
TEST(ExecutorCudaTest, AFailedAllocationDoesNotFailTheNextRun) {
  auto gpu = EmulatedGpu();
  ASSERT_NE(gpu, nullptr);
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::EveryOpGraph(FreshSeed()));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, PlanFor(gpu.get(), graph, 1));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto executor, Executor::Create({plan}));
  cuda_emulation::SetDeviceMemoryCapacity(size_t{1} << 20);  // less than the pool already holds
  EXPECT_THAT(gpu->Allocate(size_t{64} << 20), StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("cudaMalloc")));
  cuda_emulation::SetDeviceMemoryCapacity(0);
  EXPECT_THAT(RunAndCompare(graph, *executor, 1), IsOk());
}

}  // namespace
}  // namespace convoy::runtime
