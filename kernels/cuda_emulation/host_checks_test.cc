// The emulation's checks for host-side bugs a synchronous CPU runtime would otherwise hide (host_runtime.h): sticky
// kernel faults, launches into a stream of another device, the last error a failed call leaves for the next launch,
// pageable async copies and first launches inside a capture. Each test resets what it changes.
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda_emulation/cuda_host_api.h"
#include "kernels/cuda_emulation/testdata/sample_kernels.h"

namespace convoy::cuda_emulation {
namespace {

namespace testdata = ::convoy::cuda_emulation_testdata;

// c = a * b for 4x4 matrices on `stream` (a small working kernel).
cudaError_t LaunchSmallGemm(float* device_floats, cudaStream_t stream) {
  return testdata::LaunchTiledSgemm(device_floats, device_floats + 16, device_floats + 32, 4, 4, 4, stream);
}

TEST(HostChecksTest, AnErrorLeftUnreadComesBackFromTheNextLaunchAsOnAGpu) {
  float* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 48 * sizeof(float)), cudaSuccess);
  SetDeviceMemoryCapacity(1024);  // less than is in use: the next allocation fails
  void* too_much = nullptr;
  EXPECT_EQ(cudaMalloc(&too_much, 4096), cudaErrorMemoryAllocation);
  SetDeviceMemoryCapacity(0);
  EXPECT_EQ(LaunchSmallGemm(d, nullptr), cudaErrorMemoryAllocation) << "kernel<<<>>>; cudaGetLastError() sees it";
  EXPECT_EQ(LaunchSmallGemm(d, nullptr), cudaSuccess) << "read once, it is cleared";
  EXPECT_EQ(cudaFree(d), cudaSuccess);
}

TEST(HostChecksTest, KernelLaunchIntoAStreamOfAnotherDeviceFails) {
  SetDeviceCount(2);
  float* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 48 * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  cudaStream_t on_device_1 = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&on_device_1, cudaStreamNonBlocking), cudaSuccess);
  EXPECT_EQ(LaunchSmallGemm(d, on_device_1), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  EXPECT_EQ(LaunchSmallGemm(d, on_device_1), cudaErrorInvalidResourceHandle);
  EXPECT_NE(LastErrorDetail().find("stream of device 1 while device 0 is current"), std::string::npos)
      << LastErrorDetail();
  EXPECT_EQ(cudaSetDevice(2), cudaErrorInvalidDevice);
  (void)cudaGetLastError();
  EXPECT_EQ(cudaStreamDestroy(on_device_1), cudaSuccess);
  EXPECT_EQ(cudaFree(d), cudaSuccess);
  SetDeviceCount(1);
}

TEST(HostChecksTest, CountsAsyncCopiesFromPageableMemoryOnly) {
  std::vector<float> pageable(64, 1.0f);
  float* pinned = nullptr;
  float* d = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), 64 * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d, 64 * sizeof(float)), cudaSuccess);
  const int64_t before = PageableAsyncCopyCount();
  EXPECT_EQ(cudaMemcpyAsync(d, pinned + 8, 16 * sizeof(float), cudaMemcpyHostToDevice, nullptr), cudaSuccess);
  EXPECT_EQ(cudaMemcpyAsync(pinned, d, 64 * sizeof(float), cudaMemcpyDeviceToHost, nullptr), cudaSuccess);
  EXPECT_EQ(PageableAsyncCopyCount(), before);
  EXPECT_EQ(cudaMemcpyAsync(d, pageable.data(), 64 * sizeof(float), cudaMemcpyHostToDevice, nullptr), cudaSuccess);
  EXPECT_EQ(cudaMemcpyAsync(pageable.data(), d, 64 * sizeof(float), cudaMemcpyDeviceToHost, nullptr), cudaSuccess);
  EXPECT_EQ(PageableAsyncCopyCount(), before + 2);
  EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
  EXPECT_EQ(cudaFree(d), cudaSuccess);
}

TEST(HostChecksTest, CountsKernelsFirstLaunchedInsideACapture) {
  float* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 48 * sizeof(float)), cudaSuccess);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  for (const bool eager_first : {true, false}) {
    ForgetLoadedKernels();
    if (eager_first) {
      ASSERT_EQ(LaunchSmallGemm(d, stream), cudaSuccess);
    }
    const int64_t before = FirstLaunchesInCaptureCount();
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    ASSERT_EQ(LaunchSmallGemm(d, stream), cudaSuccess);
    cudaGraph_t graph = nullptr;
    ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
    EXPECT_EQ(FirstLaunchesInCaptureCount() - before, eager_first ? 0 : 1) << "eager first: " << eager_first;
    EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  }
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  EXPECT_EQ(cudaFree(d), cudaSuccess);
}

// Last: a sticky fault leaves the whole process's runtime unusable, as a GPU context is.
TEST(HostChecksTest, WithStickyFaultsOnAKernelFaultPoisonsEveryLaterCall) {
  float* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 48 * sizeof(float)), cudaSuccess);
  EXPECT_EQ(testdata::LaunchTrapInThread5(d, nullptr), cudaErrorLaunchFailure);
  EXPECT_EQ(LaunchSmallGemm(d, nullptr), cudaSuccess) << "off by default: the next launch works";
  SetStickyKernelFaults(true);
  EXPECT_EQ(testdata::LaunchTrapInThread5(d, nullptr), cudaErrorLaunchFailure);
  EXPECT_EQ(StickyFault(), cudaErrorLaunchFailure);
  EXPECT_EQ(LaunchSmallGemm(d, nullptr), cudaErrorLaunchFailure);
  void* more = nullptr;
  EXPECT_EQ(cudaMalloc(&more, 64), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure) << "a sticky error is never cleared";
  EXPECT_NE(LastErrorDetail().find("sticky"), std::string::npos) << LastErrorDetail();
}

}  // namespace
}  // namespace convoy::cuda_emulation
