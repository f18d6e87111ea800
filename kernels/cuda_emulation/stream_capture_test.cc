// Stream capture in the CUDA emulation: what a stream records is not run until the graph is launched, replays reuse
// the captured pointers, and the calls CUDA forbids during a capture (allocation, synchronous copies, any wait, work
// on the legacy default stream) fail and invalidate it, as they do on a GPU. Inputs are fresh random floats; the
// sum kernel is compared with a double-precision sum within 1e-5 * sum(|x|) + 1e-6.
#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda_emulation/cuda_host_api.h"
#include "kernels/cuda_emulation/test_device_buffer.h"
#include "kernels/cuda_emulation/testdata/sample_kernels.h"

namespace convoy::cuda_emulation {
namespace {

namespace testdata = ::convoy::cuda_emulation_testdata;

class StreamCaptureTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess); }
  void TearDown() override {
    cudaStreamCaptureStatus status;
    ASSERT_EQ(cudaStreamIsCapturing(stream_, &status), cudaSuccess);
    EXPECT_EQ(status, cudaStreamCaptureStatusNone) << "a test left its capture open";
    EXPECT_EQ(cudaStreamDestroy(stream_), cudaSuccess);
  }

  std::vector<float> RandomFloats(size_t n) {
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    std::vector<float> values(n);
    for (float& v : values) v = uniform(random_);
    return values;
  }

  // Ends the open capture and expects it to have been invalidated.
  void ExpectCaptureInvalidated() {
    cudaStreamCaptureStatus status;
    ASSERT_EQ(cudaStreamIsCapturing(stream_, &status), cudaSuccess);
    EXPECT_EQ(status, cudaStreamCaptureStatusInvalidated);
    cudaGraph_t graph = nullptr;
    EXPECT_EQ(cudaStreamEndCapture(stream_, &graph), cudaErrorStreamCaptureInvalidated);
    EXPECT_EQ(graph, nullptr);
    (void)cudaGetLastError();
  }

  cudaStream_t stream_ = nullptr;
  std::mt19937 random_{std::random_device{}()};
};

TEST_F(StreamCaptureTest, RecordsInsteadOfRunningAndReplaysOnTheSamePointers) {
  constexpr int kN = 4096, kBlocks = 4, kThreads = 128;
  std::vector<float> host = RandomFloats(kN);
  TestDeviceBuffer<float> input(host);
  TestDeviceBuffer<float> staging(std::vector<float>(kN, 0.0f));
  TestDeviceBuffer<float> sums(std::vector<float>(kBlocks, std::nanf("")));

  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(staging.get(), input.get(), kN * sizeof(float), cudaMemcpyDeviceToDevice, stream_),
            cudaSuccess);
  ASSERT_EQ(testdata::LaunchBlockSum(staging.get(), kN, sums.get(), kBlocks, kThreads, stream_), cudaSuccess)
      << LastErrorDetail();
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess) << LastErrorDetail();
  ASSERT_NE(graph, nullptr);
  for (int b = 0; b < kBlocks; ++b) EXPECT_TRUE(std::isnan(sums.Download()[b])) << "the capture ran block " << b;
  EXPECT_EQ(staging.Download()[0], 0.0f) << "the captured copy ran";

  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int replay = 0; replay < 3; ++replay) {
    host = RandomFloats(kN);  // new data in the captured input buffer, as a server does before each replay
    ASSERT_EQ(cudaMemcpy(input.get(), host.data(), kN * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemset(sums.get(), 0xFF, kBlocks * sizeof(float)), cudaSuccess);  // NaN
    ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess) << LastErrorDetail();
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    double total = 0, magnitude = 0;
    for (float v : host) total += v, magnitude += std::fabs(v);
    double got = 0;
    for (float s : sums.Download()) got += s;
    EXPECT_NEAR(got, total, 1e-5 * magnitude + 1e-6) << "replay " << replay;
  }
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
}

TEST_F(StreamCaptureTest, AllocationDuringCaptureFailsAndInvalidatesIt) {
  TestDeviceBuffer<float> out(std::vector<float>(32, 0.0f));
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  void* pointer = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(cudaMalloc(&pointer, 1024), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(pointer, nullptr);
  EXPECT_NE(LastErrorDetail().find("cudaMalloc"), std::string::npos) << LastErrorDetail();
  // Work queued after the failure is refused too.
  EXPECT_EQ(testdata::LaunchWriteEveryThread(out.get(), 32, stream_), cudaErrorStreamCaptureInvalidated);
  ExpectCaptureInvalidated();
  // After the capture ended, allocation works again.
  ASSERT_EQ(cudaMalloc(&pointer, 1024), cudaSuccess);
  EXPECT_EQ(cudaFree(pointer), cudaSuccess);
}

TEST_F(StreamCaptureTest, SynchronousCopiesAndWaitsDuringCaptureFail) {
  float host[4] = {1, 2, 3, 4};
  TestDeviceBuffer<float> device(std::vector<float>(4, 0.0f));
  struct Case {
    const char* name;
    std::function<cudaError_t()> call;
  };
  const std::vector<Case> cases = {
      {"cudaMemcpy", [&] { return cudaMemcpy(device.get(), host, sizeof(host), cudaMemcpyHostToDevice); }},
      {"cudaMemset", [&] { return cudaMemset(device.get(), 0, sizeof(host)); }},
      {"cudaStreamSynchronize", [&] { return cudaStreamSynchronize(stream_); }},
      {"cudaDeviceSynchronize", [] { return cudaDeviceSynchronize(); }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaSuccess);
    EXPECT_EQ(c.call(), cudaErrorStreamCaptureUnsupported);
    EXPECT_NE(LastErrorDetail().find(c.name), std::string::npos) << LastErrorDetail();
    ExpectCaptureInvalidated();
  }
  EXPECT_EQ(device.Download()[0], 0.0f);
}

TEST_F(StreamCaptureTest, LaunchOnTheLegacyStreamDuringCaptureFails) {
  TestDeviceBuffer<float> out(std::vector<float>(32, 0.0f));
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  EXPECT_EQ(testdata::LaunchWriteEveryThread(out.get(), 32, /*stream=*/nullptr), cudaErrorStreamCaptureImplicit);
  EXPECT_NE(LastErrorDetail().find("legacy default stream"), std::string::npos) << LastErrorDetail();
  ExpectCaptureInvalidated();
  EXPECT_EQ(out.Download()[0], 0.0f);
}

TEST_F(StreamCaptureTest, OtherThreadsAreNotRestrictedInThreadLocalMode) {
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  cudaError_t on_other_thread = cudaErrorUnknown;
  std::thread other([&] {
    void* pointer = nullptr;
    on_other_thread = cudaMalloc(&pointer, 256);
    cudaFree(pointer);
  });
  other.join();
  EXPECT_EQ(on_other_thread, cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
}

TEST_F(StreamCaptureTest, CaptureMisuseIsReported) {
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(stream_, &graph), cudaErrorIllegalState);
  EXPECT_EQ(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeThreadLocal), cudaErrorStreamCaptureUnsupported);
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  EXPECT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), cudaErrorIllegalState);
  cudaError_t ended_elsewhere = cudaSuccess;
  std::thread other([&] {
    cudaGraph_t g = nullptr;
    ended_elsewhere = cudaStreamEndCapture(stream_, &g);
  });
  other.join();
  EXPECT_EQ(ended_elsewhere, cudaErrorStreamCaptureWrongThread);
  ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  (void)cudaGetLastError();
}

}  // namespace
}  // namespace convoy::cuda_emulation
