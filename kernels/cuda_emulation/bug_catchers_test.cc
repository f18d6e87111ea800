// Shows that the CUDA emulation catches each kind of kernel bug it is meant to catch: reads of unwritten shared
// memory (poison), missing __syncthreads (schedule modes), divergent barriers, warp collectives with absent lanes or
// bad masks, reads of cp.async destinations before the wait, __trap, bad launch configurations, and (under
// --config=asan) out-of-bounds global and shared memory accesses. Also that a failed launch leaves the emulation
// usable and that the error reaches absl::Status with its detail.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "kernels/cuda_emulation/cuda_host_api.h"
#include "kernels/cuda_emulation/cuda_status.h"
#include "kernels/cuda_emulation/sanitizers.h"
#include "kernels/cuda_emulation/test_device_buffer.h"
#include "kernels/cuda_emulation/testdata/sample_kernels.h"

namespace convoy::cuda_emulation {
namespace {

namespace testdata = ::convoy::cuda_emulation_testdata;
using ::convoy::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::vector<float> RandomFloats(size_t n) {
  std::mt19937 random(std::random_device{}());
  std::uniform_real_distribution<float> uniform(-100.0f, 100.0f);
  std::vector<float> values(n);
  for (float& v : values) v = uniform(random);
  return values;
}

TEST(SharedMemoryPoisonTest, UnwrittenSharedMemoryReadsAsNaN) {
  const std::vector<float> input = RandomFloats(32);
  TestDeviceBuffer<float> in(input), out(64);
  ASSERT_EQ(testdata::LaunchReadUnwrittenShared(in.get(), out.get(), nullptr), cudaSuccess) << LastErrorDetail();
  const std::vector<float> got = out.Download();
  for (int t = 0; t < 32; ++t) EXPECT_EQ(got[t], input[t]) << "thread " << t;
  for (int t = 32; t < 64; ++t) EXPECT_TRUE(std::isnan(got[t])) << "thread " << t << " read " << got[t];
}

// Runs the neighbour exchange (tile[t] = in[t]; out[t] = tile[t + direction]) and counts NaN outputs.
int CountPoisonedOutputs(const Schedule& schedule, int direction, bool with_barrier) {
  constexpr int kThreads = 256;
  const std::vector<float> input = RandomFloats(kThreads);
  TestDeviceBuffer<float> in(input), out(kThreads);
  ScopedSchedule scoped(schedule);
  EXPECT_EQ(testdata::LaunchNeighborExchange(in.get(), out.get(), kThreads, direction, with_barrier, nullptr),
            cudaSuccess)
      << LastErrorDetail();
  const std::vector<float> got = out.Download();
  int poisoned = 0;
  for (int t = 0; t < kThreads; ++t) {
    const int source = t + direction;
    if (std::isnan(got[t])) {
      ++poisoned;
    } else {
      EXPECT_EQ(got[t], source >= 0 && source < kThreads ? input[source] : 0.0f) << "thread " << t;
    }
  }
  return poisoned;
}

TEST(ScheduleModeTest, ForwardOrderExposesReadsOfLaterThreadsWrites) {
  EXPECT_GT(CountPoisonedOutputs(Schedule::Forward(), +1, /*with_barrier=*/false), 0);
  EXPECT_EQ(CountPoisonedOutputs(Schedule::Forward(), +1, /*with_barrier=*/true), 0);
}

TEST(ScheduleModeTest, ReverseOrderExposesWhatForwardOrderMisses) {
  // Reading the left neighbour happens to work when threads run in increasing order...
  EXPECT_EQ(CountPoisonedOutputs(Schedule::Forward(), -1, /*with_barrier=*/false), 0);
  // ...and is caught when they run backwards.
  EXPECT_GT(CountPoisonedOutputs(Schedule::Reverse(), -1, /*with_barrier=*/false), 0);
  EXPECT_EQ(CountPoisonedOutputs(Schedule::Reverse(), -1, /*with_barrier=*/true), 0);
}

TEST(ScheduleModeTest, SeededRandomOrderExposesBothDirections) {
  for (uint64_t seed : {1u, 2u, 3u}) {
    EXPECT_GT(CountPoisonedOutputs(Schedule::SeededRandom(seed), -1, false), 0) << "seed " << seed;
    EXPECT_GT(CountPoisonedOutputs(Schedule::SeededRandom(seed), +1, false), 0) << "seed " << seed;
    EXPECT_EQ(CountPoisonedOutputs(Schedule::SeededRandom(seed), -1, true), 0) << "seed " << seed;
    EXPECT_EQ(CountPoisonedOutputs(Schedule::SeededRandom(seed), +1, true), 0) << "seed " << seed;
  }
}

TEST(ScheduleModeTest, ParsesTheEnvironmentSyntax) {
  CONVOY_ASSERT_OK_AND_ASSIGN(Schedule random, Schedule::Parse("random:42"));
  EXPECT_EQ(random.order, ScheduleOrder::kSeededRandom);
  EXPECT_EQ(random.seed, 42u);
  CONVOY_ASSERT_OK_AND_ASSIGN(Schedule reverse, Schedule::Parse("reverse"));
  EXPECT_EQ(reverse.order, ScheduleOrder::kReverse);
  EXPECT_THAT(Schedule::Parse("random:x"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("schedule 'random:x'")));
}

TEST(DivergenceTest, BarrierAfterEarlyExitFailsTheLaunch) {
  TestDeviceBuffer<float> out(64);
  EXPECT_EQ(testdata::LaunchBarrierAfterEarlyExit(out.get(), nullptr), cudaErrorLaunchFailure);
  EXPECT_THAT(LastErrorDetail(), AllOf(HasSubstr("divergent __syncthreads"),
                                       HasSubstr("threads 0-15 waits at "
                                                 "__syncthreads (kernels/"
                                                 "cuda_emulation/testdata/"
                                                 "buggy_kernels.cu:"),
                                       HasSubstr("threads 16-63 exited")));
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // reading it cleared it
}

TEST(DivergenceTest, BarriersOnDifferentLinesFailTheLaunch) {
  TestDeviceBuffer<float> out(64);
  EXPECT_EQ(testdata::LaunchBarriersOnDifferentLines(out.get(), nullptr), cudaErrorLaunchFailure);
  EXPECT_THAT(LastErrorDetail(), AllOf(HasSubstr("divergent __syncthreads"), HasSubstr("buggy_kernels.cu:"),
                                       HasSubstr("but thread (1,0,0) waits at the one at")));
}

TEST(WarpCollectiveTest, LaneNamedInTheMaskThatExitedFailsTheLaunch) {
  TestDeviceBuffer<float> in(RandomFloats(32)), out(32);
  EXPECT_EQ(testdata::LaunchShuffleWithExitedLane(in.get(), out.get(), nullptr), cudaErrorLaunchFailure);
  EXPECT_THAT(LastErrorDetail(), AllOf(HasSubstr("warp collective cannot complete"),
                                       HasSubstr("waits at __shfl_xor_sync (kernels/cuda_emulation/testdata/"
                                                 "buggy_kernels.cu:"),
                                       HasSubstr("threads 31 exited")));
}

TEST(WarpCollectiveTest, MaskWithoutTheCallingLaneFailsTheLaunch) {
  TestDeviceBuffer<float> in(RandomFloats(32)), out(32);
  EXPECT_EQ(testdata::LaunchShuffleMaskWithoutCaller(in.get(), out.get(), nullptr), cudaErrorLaunchFailure);
  EXPECT_THAT(LastErrorDetail(), HasSubstr("mask 0x0000ffff does not name the calling lane 16"));
}

TEST(CpAsyncTest, ReadingTheDestinationBeforeTheWaitReadsPoison) {
  const std::vector<float> input = RandomFloats(128);
  TestDeviceBuffer<float> in(input), out(128);
  ASSERT_EQ(testdata::LaunchCpAsyncRead(in.get(), out.get(), /*wait=*/false, nullptr), cudaSuccess);
  for (float v : out.Download()) EXPECT_TRUE(std::isnan(v)) << v;
  out.Poison();
  ASSERT_EQ(testdata::LaunchCpAsyncRead(in.get(), out.get(), /*wait=*/true, nullptr), cudaSuccess);
  EXPECT_EQ(out.Download(), input);
}

TEST(TrapTest, TrapFailsTheLaunchNamingTheThread) {
  TestDeviceBuffer<float> out(32);
  EXPECT_EQ(testdata::LaunchTrapInThread5(out.get(), nullptr), cudaErrorLaunchFailure);
  EXPECT_THAT(LastErrorDetail(), AllOf(HasSubstr("thread (5,0,0)"), HasSubstr("__trap()")));
}

TEST(LaunchConfigurationTest, TooManyThreadsPerBlockIsRejected) {
  TestDeviceBuffer<float> out(2048);
  EXPECT_EQ(testdata::LaunchWriteEveryThread(out.get(), 2048, nullptr), cudaErrorInvalidConfiguration);
  EXPECT_THAT(LastErrorDetail(), HasSubstr("block (2048,1,1) (2048 threads)"));
  EXPECT_TRUE(std::isnan(out.Download()[0]));  // nothing ran
}

TEST(LaunchErrorTest, LaunchErrorBecomesStatusWithDetail) {
  TestDeviceBuffer<float> out(64);
  const absl::Status status =
      convoy::cuda::CudaStatus(testdata::LaunchBarrierAfterEarlyExit(out.get(), nullptr), "barrier kernel");
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInternal, AllOf(HasSubstr("barrier kernel: cudaErrorLaunchFailure"),
                                                                  HasSubstr("divergent __syncthreads"))));
}

TEST(LaunchErrorTest, EmulationStaysUsableAfterAFailedLaunch) {
  for (int round = 0; round < 3; ++round) {
    TestDeviceBuffer<float> in(RandomFloats(32)), out(32);
    EXPECT_EQ(testdata::LaunchShuffleWithExitedLane(in.get(), out.get(), nullptr), cudaErrorLaunchFailure);
    EXPECT_EQ(testdata::LaunchTrapInThread5(out.get(), nullptr), cudaErrorLaunchFailure);
    EXPECT_EQ(CountPoisonedOutputs(Schedule::Forward(), +1, /*with_barrier=*/true), 0);
  }
}

// The sanitizer checks only run in a build with AddressSanitizer (bazel test --config=asan).
class AddressSanitizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CONVOY_EMULATION_ASAN) GTEST_SKIP() << "needs --config=asan";
    GTEST_FLAG_SET(death_test_style, "threadsafe");
  }
};

TEST_F(AddressSanitizerTest, OutOfBoundsGlobalWriteIsReported) {
  EXPECT_DEATH(
      {
        TestDeviceBuffer<float> out(31);  // one element short for 32 threads
        testdata::LaunchWriteEveryThread(out.get(), 32, nullptr);
      },
      "heap-buffer-overflow");
}

TEST_F(AddressSanitizerTest, SharedArrayOverrunIsReported) {
  EXPECT_DEATH(
      {
        TestDeviceBuffer<float> out(32);
        testdata::LaunchSharedOverrun(out.get(), nullptr);
      },
      "use-after-poison");
}

TEST_F(AddressSanitizerTest, InBoundsKernelsRunCleanly) {
  TestDeviceBuffer<float> out(32);
  ASSERT_EQ(testdata::LaunchWriteEveryThread(out.get(), 32, nullptr), cudaSuccess);
  for (float v : out.Download()) EXPECT_EQ(v, 1.0f);
}

}  // namespace
}  // namespace convoy::cuda_emulation
