// The CUDA device layer. Built twice: against the CUDA emulation (cuda_device_emulated_test, runs everywhere) and
// against the real runtime (cuda_device_test): on a machine without a GPU that one checks the clean UNAVAILABLE
// statuses and skips the rest; on a GPU it runs everything, graph capture included.
#include "kernels/cuda/cuda_device.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "kernels/cuda/cuda_graph.h"
#include "kernels/cuda/cuda_stream.h"
#include "kernels/cuda/gpu_info.h"
#include "kernels/cuda/memory_pool.h"
#include "kernels/cuda/pinned_buffer.h"
#include "kernels/cuda_emulation/cuda_status.h"
#include "kernels/common/status_macros.h"

namespace convoy::cuda {
namespace {

using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::StartsWith;

bool HaveDevice() { return ListGpus().ok(); }

#define SKIP_WITHOUT_DEVICE() \
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device: " << ListGpus().status()

TEST(GpuInfoTest, ListGpusReportsTheEmulationOrTheRealDevicesOrCleanlyNone) {
  const absl::StatusOr<std::vector<GpuInfo>> gpus = ListGpus();
  if (IsCudaEmulated()) {
    ASSERT_TRUE(gpus.ok()) << gpus.status();
    ASSERT_EQ(gpus->size(), 1u);
    EXPECT_TRUE((*gpus)[0].emulated);
    EXPECT_THAT((*gpus)[0].Identity(), StartsWith("cuda-emulated:CUDA emulation:sm="));
  } else if (!gpus.ok()) {
    EXPECT_THAT(gpus.status(), StatusIs(absl::StatusCode::kUnavailable, HasSubstr("no CUDA device: ")));
    std::cout << "[cuda_device_test] " << gpus.status() << "\n";
  } else {
    for (const GpuInfo& gpu : *gpus) {
      std::cout << "[cuda_device_test] " << gpu.ToString() << " identity " << gpu.Identity() << "\n";
      EXPECT_THAT(gpu.Identity(), StartsWith("cuda:"));
      EXPECT_GT(gpu.sm_count, 0);
      EXPECT_GE(gpu.compute_major, 7);
      EXPECT_GT(gpu.total_memory_bytes, 0u);
    }
  }
}

TEST(CudaDeviceTest, CreateFailsCleanlyWithoutADeviceAndForAMissingIndex) {
  if (!HaveDevice()) {
    EXPECT_THAT(CudaDevice::Create({}).status(), StatusIs(absl::StatusCode::kUnavailable, HasSubstr("no CUDA device")));
    return;
  }
  CudaDevice::Options options;
  options.device_index = 1000;
  EXPECT_THAT(CudaDevice::Create(options).status(), StatusIs(absl::StatusCode::kNotFound, HasSubstr("1000")));
}

TEST(CudaDeviceTest, IdentityContextAndCopyRoundTrip) {
  SKIP_WITHOUT_DEVICE();
  CONVOY_ASSERT_OK_AND_ASSIGN(std::unique_ptr<CudaDevice> device, CudaDevice::Create({}));
  EXPECT_EQ(device->backend(), Backend::kCuda);
  EXPECT_THAT(device->Identity(), StartsWith(IsCudaEmulated() ? "cuda-emulated:" : "cuda:"));
  const ExecutionContext context = device->context();
  EXPECT_EQ(context.backend, Backend::kCuda);
  EXPECT_NE(context.cuda_stream, nullptr);
  EXPECT_EQ(context.cuda_stream, device->stream());

  std::vector<int32_t> host(1000), back(1000, -1);
  for (int i = 0; i < 1000; ++i) host[i] = i * 7 - 3;
  CONVOY_ASSERT_OK_AND_ASSIGN(DeviceAllocation buffer, device->Allocate(host.size() * sizeof(int32_t)));
  ASSERT_NE(buffer.data(), nullptr);
  CONVOY_ASSERT_OK(device->CopyToDevice(buffer.data(), host.data(), host.size() * sizeof(int32_t)));
  CONVOY_ASSERT_OK(device->Synchronize());
  CONVOY_ASSERT_OK(device->CopyToHost(back.data(), buffer.data(), back.size() * sizeof(int32_t)));
  EXPECT_EQ(back, host);
}

TEST(CudaDeviceTest, TimeRunsReturnsOneTimePerRepAndPropagatesErrors) {
  SKIP_WITHOUT_DEVICE();
  CONVOY_ASSERT_OK_AND_ASSIGN(std::unique_ptr<CudaDevice> device, CudaDevice::Create({}));
  CONVOY_ASSERT_OK_AND_ASSIGN(DeviceAllocation buffer, device->Allocate(1 << 20));
  int calls = 0;
  CONVOY_ASSERT_OK_AND_ASSIGN(std::vector<double> times, device->TimeRuns(
                                                              [&]() -> absl::Status {
                                                                ++calls;
                                                                return CudaStatus(cudaMemsetAsync(buffer.data(), 0,
                                                                                                  buffer.bytes(),
                                                                                                  device->stream()),
                                                                                  "memset");
                                                              },
                                                              2, 3));
  EXPECT_EQ(calls, 5);
  ASSERT_EQ(times.size(), 3u);
  for (double t : times) EXPECT_GE(t, 0.0);
  EXPECT_THAT(device->TimeRuns([] { return absl::InternalError("kernel said no"); }, 0, 1).status(),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("kernel said no")));
}

TEST(CudaMemoryPoolTest, ReusesFreedBlocksOfTheSameRoundedSize) {
  SKIP_WITHOUT_DEVICE();
  CONVOY_ASSERT_OK_AND_ASSIGN(std::shared_ptr<CudaMemoryPool> pool, CudaMemoryPool::Create({}));
  void* first = nullptr;
  {
    CONVOY_ASSERT_OK_AND_ASSIGN(DeviceAllocation a, pool->Allocate(1000));
    first = a.data();
    EXPECT_EQ(a.bytes(), 1024u);  // rounded to the 512-byte granularity
    EXPECT_EQ(pool->stats().in_use_bytes, 1024u);
  }
  EXPECT_EQ(pool->stats().in_use_bytes, 0u);
  EXPECT_EQ(pool->stats().cached_bytes, 1024u);
  CONVOY_ASSERT_OK_AND_ASSIGN(DeviceAllocation b, pool->Allocate(900));  // rounds to 1024 too
  EXPECT_EQ(b.data(), first);
  CONVOY_ASSERT_OK_AND_ASSIGN(DeviceAllocation c, pool->Allocate(4000));  // a new block
  EXPECT_NE(c.data(), first);
  const CudaMemoryPool::Stats stats = pool->stats();
  EXPECT_EQ(stats.cuda_mallocs, 2);
  EXPECT_EQ(stats.reuses, 1);
  EXPECT_EQ(stats.in_use_bytes, 1024u + 4096u);
  EXPECT_EQ(stats.cached_bytes, 0u);
}

TEST(CudaMemoryPoolTest, DoesNotHandOutMuchLargerBlocks) {
  SKIP_WITHOUT_DEVICE();
  CONVOY_ASSERT_OK_AND_ASSIGN(std::shared_ptr<CudaMemoryPool> pool, CudaMemoryPool::Create({}));
  { CONVOY_ASSERT_OK_AND_ASSIGN(DeviceAllocation big, pool->Allocate(1 << 20)); }
  CONVOY_ASSERT_OK_AND_ASSIGN(DeviceAllocation small, pool->Allocate(512));
  EXPECT_EQ(small.bytes(), 512u);
  EXPECT_EQ(pool->stats().cuda_mallocs, 2);
  EXPECT_EQ(pool->stats().cached_bytes, size_t{1} << 20);
  CONVOY_ASSERT_OK(pool->ReleaseCached());
  EXPECT_EQ(pool->stats().cached_bytes, 0u);
}

TEST(CudaMemoryPoolTest, EnforcesTheTotalLimitAndFreesTheCacheToStayUnderIt) {
  SKIP_WITHOUT_DEVICE();
  CudaMemoryPool::Options options;
  options.max_total_bytes = 4096;
  CONVOY_ASSERT_OK_AND_ASSIGN(std::shared_ptr<CudaMemoryPool> pool, CudaMemoryPool::Create(options));
  {
    CONVOY_ASSERT_OK_AND_ASSIGN(DeviceAllocation all, pool->Allocate(4096));
    EXPECT_THAT(pool->Allocate(1).status(),
                StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("exceeds the limit of 4096")));
  }
  EXPECT_EQ(pool->stats().cached_bytes, 4096u);
  CONVOY_ASSERT_OK_AND_ASSIGN(DeviceAllocation small, pool->Allocate(512));  // cache dropped to make room
  EXPECT_EQ(pool->stats().cached_bytes, 0u);
  EXPECT_EQ(pool->stats().in_use_bytes, 512u);
}

TEST(CudaMemoryPoolTest, CachesAtMostMaxCachedBytes) {
  SKIP_WITHOUT_DEVICE();
  CudaMemoryPool::Options options;
  options.max_cached_bytes = 2048;
  CONVOY_ASSERT_OK_AND_ASSIGN(std::shared_ptr<CudaMemoryPool> pool, CudaMemoryPool::Create(options));
  {
    CONVOY_ASSERT_OK_AND_ASSIGN(DeviceAllocation a, pool->Allocate(2048));
    CONVOY_ASSERT_OK_AND_ASSIGN(DeviceAllocation b, pool->Allocate(2048));
  }
  EXPECT_EQ(pool->stats().cached_bytes, 2048u);
  EXPECT_EQ(pool->stats().in_use_bytes, 0u);
}

TEST(CudaMemoryPoolTest, AllocationsMayOutliveThePoolHandle) {
  SKIP_WITHOUT_DEVICE();
  DeviceAllocation survivor;
  {
    CONVOY_ASSERT_OK_AND_ASSIGN(std::shared_ptr<CudaMemoryPool> pool, CudaMemoryPool::Create({}));
    CONVOY_ASSERT_OK_AND_ASSIGN(survivor, pool->Allocate(256));
  }
  ASSERT_NE(survivor.data(), nullptr);
  survivor = DeviceAllocation();  // returns the block to the pool, which then frees it (ASan checks no leak)
}

TEST(CudaMemoryPoolTest, RejectsBadOptionsAndGivesEmptyAllocationsForZeroBytes) {
  CudaMemoryPool::Options options;
  options.granularity = 100;
  EXPECT_THAT(CudaMemoryPool::Create(options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("power of two")));
  options = {};
  options.max_oversize_ratio = 0.5;
  EXPECT_THAT(CudaMemoryPool::Create(options).status(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("")));
  CONVOY_ASSERT_OK_AND_ASSIGN(std::shared_ptr<CudaMemoryPool> pool, CudaMemoryPool::Create({}));
  CONVOY_ASSERT_OK_AND_ASSIGN(DeviceAllocation empty, pool->Allocate(0));
  EXPECT_EQ(empty.data(), nullptr);
}

TEST(CudaStreamTest, StreamsAndEventsAreMoveOnlyOwners) {
  SKIP_WITHOUT_DEVICE();
  CONVOY_ASSERT_OK_AND_ASSIGN(CudaStream stream, CudaStream::Create({}));
  ASSERT_NE(stream.get(), nullptr);
  CudaStream moved = std::move(stream);
  EXPECT_EQ(stream.get(), nullptr);  // NOLINT: checking the moved-from state
  CONVOY_EXPECT_OK(moved.Synchronize());

  CONVOY_ASSERT_OK_AND_ASSIGN(CudaEvent start, CudaEvent::Create({}));
  CONVOY_ASSERT_OK_AND_ASSIGN(CudaEvent end, CudaEvent::Create({}));
  CONVOY_ASSERT_OK(start.Record(moved.get()));
  CONVOY_ASSERT_OK(end.Record(moved.get()));
  CONVOY_ASSERT_OK(end.Synchronize());
  CONVOY_ASSERT_OK_AND_ASSIGN(float ms, CudaEvent::ElapsedMilliseconds(start, end));
  EXPECT_GE(ms, 0.0f);
  CONVOY_EXPECT_OK(end.MakeStreamWait(moved.get()));

  CudaEvent empty;
  EXPECT_THAT(CudaEvent::ElapsedMilliseconds(empty, end).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("empty")));
  EXPECT_THAT(empty.Record(moved.get()), StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("empty")));
}

TEST(CudaStreamTest, ScopedDeviceReportsAnInvalidDevice) {
  SKIP_WITHOUT_DEVICE();
  {
    ScopedCudaDevice guard(0);
    CONVOY_EXPECT_OK(guard.status());
  }
  ScopedCudaDevice bad(4096);
  EXPECT_FALSE(bad.status().ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("cudaSetDevice(4096)"));
  int current = -1;
  ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
  EXPECT_EQ(current, 0);
}

TEST(PinnedHostBufferTest, AllocatesWritesAndMoves) {
  SKIP_WITHOUT_DEVICE();
  CONVOY_ASSERT_OK_AND_ASSIGN(PinnedHostBuffer buffer, PinnedHostBuffer::Allocate(4096));
  ASSERT_NE(buffer.data(), nullptr);
  EXPECT_EQ(buffer.size(), 4096u);
  std::memset(buffer.data(), 0x5A, buffer.size());
  PinnedHostBuffer moved = std::move(buffer);
  EXPECT_EQ(buffer.data(), nullptr);  // NOLINT: moved-from
  EXPECT_EQ(moved.as<uint8_t>()[4095], 0x5A);
  moved = PinnedHostBuffer();  // frees
  EXPECT_EQ(moved.size(), 0u);
  CONVOY_ASSERT_OK_AND_ASSIGN(PinnedHostBuffer empty, PinnedHostBuffer::Allocate(0));
  EXPECT_EQ(empty.data(), nullptr);
}

TEST(CudaGraphTest, CapturesWithoutRunningAndReplays) {
  SKIP_WITHOUT_DEVICE();
  CONVOY_ASSERT_OK_AND_ASSIGN(std::unique_ptr<CudaDevice> device, CudaDevice::Create({}));
  CONVOY_ASSERT_OK_AND_ASSIGN(DeviceAllocation a, device->Allocate(4096));
  CONVOY_ASSERT_OK_AND_ASSIGN(DeviceAllocation b, device->Allocate(4096));
  std::vector<uint8_t> pattern(4096, 0x11);
  CONVOY_ASSERT_OK(device->CopyToDevice(b.data(), pattern.data(), pattern.size()));
  auto body = [&]() -> absl::Status {
    CONVOY_RETURN_IF_CUDA_ERROR(cudaMemsetAsync(a.data(), 0x7E, 4096, device->stream()));
    CONVOY_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(b.data(), a.data(), 2048, cudaMemcpyDeviceToDevice, device->stream()));
    return absl::OkStatus();
  };
  ASSERT_TRUE(CudaGraphsSupported());
  absl::StatusOr<CudaGraph> graph = CudaGraph::Capture(device->stream(), body);
  ASSERT_TRUE(graph.ok()) << graph.status();
  std::vector<uint8_t> back(4096);
  CONVOY_ASSERT_OK(device->CopyToHost(back.data(), b.data(), back.size()));
  EXPECT_EQ(back[0], 0x11) << "capture must record, not run";
  CONVOY_ASSERT_OK(graph->Launch(device->stream()));
  CONVOY_ASSERT_OK(graph->Launch(device->stream()));
  CONVOY_ASSERT_OK(device->CopyToHost(back.data(), b.data(), back.size()));
  EXPECT_EQ(back[0], 0x7E);
  EXPECT_EQ(back[2047], 0x7E);
  EXPECT_EQ(back[2048], 0x11);

  // A failing body ends the capture; the stream works afterwards.
  EXPECT_THAT(CudaGraph::Capture(device->stream(), [] { return absl::AbortedError("body failed"); }).status(),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("body failed")));
  CONVOY_EXPECT_OK(device->Synchronize());
  EXPECT_THAT(CudaGraph::Capture(nullptr, body).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("legacy default stream")));

  // Allocating inside a capture is what a captured plan must never do: CUDA (and the emulation) refuse it, and the
  // capture fails as a whole; the device is usable afterwards.
  CONVOY_ASSERT_OK_AND_ASSIGN(std::unique_ptr<CudaDevice> other, CudaDevice::Create({}));
  absl::StatusOr<CudaGraph> allocating = CudaGraph::Capture(other->stream(), [&]() -> absl::Status {
    return other->Allocate(1 << 20).status();
  });
  EXPECT_FALSE(allocating.ok());
  CONVOY_EXPECT_OK(other->Synchronize());
  CONVOY_EXPECT_OK(other->Allocate(1 << 20).status());
}

}  // namespace
}  // namespace convoy::cuda
