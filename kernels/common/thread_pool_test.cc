// ThreadPool's contract, run against each build of the pool (thread_pool_test: the build's default;
// thread_pool_threads_test: the std::thread build): every index covered once in chunks of the promised size, more
// than one thread used, nested and concurrent calls, RunReserved's exclusivity, and no CPU burnt while idle.
#include "kernels/common/thread_pool.h"

#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "kernels/common/mutex.h"
#include "gtest/gtest.h"

namespace convoy {
namespace {

TEST(ThreadPoolTest, SaysWhichBuildRuns) {
  const std::string name = ThreadPool::RuntimeName();
  std::printf("ThreadPool build: %s\n", name.c_str());
  EXPECT_TRUE(name == "openmp" || name == "std::thread") << name;
}

TEST(ThreadPoolTest, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 4}) {
    ThreadPool pool(threads);
    for (int64_t count : {1, 2, 3, 7, 64, 1000, 12345}) {
      std::vector<std::atomic<int>> hits(count);
      pool.ParallelFor(count, [&](int64_t begin, int64_t end) {
        ASSERT_LE(0, begin);
        ASSERT_LT(begin, end);
        ASSERT_LE(end, count);
        for (int64_t i = begin; i < end; ++i) hits[i].fetch_add(1);
      });
      for (int64_t i = 0; i < count; ++i) ASSERT_EQ(hits[i].load(), 1) << "threads " << threads << " index " << i;
    }
  }
}

TEST(ThreadPoolTest, ChunksKeepMinChunkAndCoverRandomRanges) {
  std::mt19937 rng(std::random_device{}());
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int round = 0; round < 200; ++round) {
      const int64_t count = std::uniform_int_distribution<int64_t>(1, 5000)(rng);
      const int64_t min_chunk = std::uniform_int_distribution<int64_t>(1, 300)(rng);
      std::vector<std::atomic<int>> hits(count);
      std::atomic<int> short_chunks{0};  // chunks below min_chunk that do not end the range
      pool.ParallelFor(
          count,
          [&](int64_t begin, int64_t end) {
            if (end - begin < min_chunk && end != count) short_chunks.fetch_add(1);
            for (int64_t i = begin; i < end; ++i) hits[i].fetch_add(1);
          },
          min_chunk);
      ASSERT_EQ(short_chunks.load(), 0) << "count " << count << " min_chunk " << min_chunk;
      for (int64_t i = 0; i < count; ++i) {
        ASSERT_EQ(hits[i].load(), 1) << "threads " << threads << " count " << count << " index " << i;
      }
    }
  }
}

TEST(ThreadPoolTest, EmptyRangeCallsNothing) {
  ThreadPool pool(2);
  int calls = 0;
  pool.ParallelFor(0, [&](int64_t, int64_t) { ++calls; });
  pool.ParallelFor(-5, [&](int64_t, int64_t) { ++calls; });
  EXPECT_EQ(calls, 0);
}

// Every chunk waits until `threads` distinct threads have entered one: a pool that ran the chunks on fewer threads
// would stall here (and fail after the wait's bound), however fast or busy the machine is.
void ExpectThreadsUsed(int threads) {
  ThreadPool pool(threads);
  convoy::Mutex mu;
  std::set<std::thread::id> ids;
  const auto all_in = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return ids.size() >= static_cast<size_t>(threads); };
  pool.ParallelFor(64, [&](int64_t, int64_t) {
    convoy::MutexLock lock(&mu);
    ids.insert(std::this_thread::get_id());
    mu.AwaitWithTimeout(absl::Condition(&all_in), absl::Seconds(60));
  });
  EXPECT_EQ(ids.size(), static_cast<size_t>(threads));
  EXPECT_EQ(ids.count(std::this_thread::get_id()), 1u) << "the calling thread takes chunks too";
}

TEST(ThreadPoolTest, UsesEveryThread) {
  ExpectThreadsUsed(2);
  ExpectThreadsUsed(3);
}

TEST(ThreadPoolTest, NestedAndConcurrentCallsComplete) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  auto work = [&] {
    pool.ParallelFor(100, [&](int64_t b, int64_t e) {
      pool.ParallelFor(10, [&](int64_t b2, int64_t e2) { total.fetch_add((e - b) * (e2 - b2)); });
    });
  };
  std::thread other(work);
  work();
  other.join();
  EXPECT_EQ(total.load(), 2 * 100 * 10);
}

TEST(ThreadPoolTest, NestedCallsRunInlineOnTheirThread) {
  ThreadPool pool(3);
  std::atomic<int> nested_on_other_thread{0};
  std::atomic<int64_t> covered{0};
  pool.ParallelFor(30, [&](int64_t b, int64_t e) {
    const auto outer = std::this_thread::get_id();
    pool.ParallelFor(50, [&](int64_t b2, int64_t e2) {
      if (std::this_thread::get_id() != outer) nested_on_other_thread.fetch_add(1);
      covered.fetch_add((e - b) * (e2 - b2));
    });
    int reserved_threads = 0;
    pool.RunReserved([&](int threads) { reserved_threads = threads; });
    EXPECT_EQ(reserved_threads, 1) << "RunReserved inside a ParallelFor runs at once on one thread";
  });
  EXPECT_EQ(nested_on_other_thread.load(), 0);
  EXPECT_EQ(covered.load(), 30 * 50);
}

// Several callers at once (model instances sharing the pool): every call covers its range exactly once, whichever
// caller gets the team.
TEST(ThreadPoolTest, ConcurrentCallersEachCoverTheirRange) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    constexpr int kCallers = 4;
    constexpr int kCalls = 300;
    std::atomic<int> failures{0};
    std::vector<std::thread> callers;
    for (int c = 0; c < kCallers; ++c) {
      callers.emplace_back([&, c] {
        std::mt19937 rng(c * 7919 + threads);
        for (int call = 0; call < kCalls; ++call) {
          const int64_t count = std::uniform_int_distribution<int64_t>(1, 700)(rng);
          std::vector<std::atomic<int>> hits(count);
          pool.ParallelFor(count, [&](int64_t b, int64_t e) {
            for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
          });
          for (int64_t i = 0; i < count; ++i) {
            if (hits[i].load() != 1) failures.fetch_add(1);
          }
        }
      });
    }
    for (auto& t : callers) t.join();
    EXPECT_EQ(failures.load(), 0) << "threads " << threads;
  }
}

// While one caller holds the pool in RunReserved, another caller's ParallelFor runs inline on that caller's thread
// (never on the reserved threads), and a second RunReserved waits.
TEST(ThreadPoolTest, RunReservedExcludesOtherWork) {
  ThreadPool pool(2);
  std::atomic<bool> reserved{false}, release{false}, second_ran_while_reserved{false};
  std::thread holder([&] {
    pool.RunReserved([&](int threads) {
      EXPECT_EQ(threads, 2);
      reserved = true;
      while (!release) std::this_thread::yield();
    });
  });
  while (!reserved) std::this_thread::yield();
  const auto caller = std::this_thread::get_id();
  std::atomic<int> foreign_chunks{0};
  std::atomic<int64_t> covered{0};
  pool.ParallelFor(1000, [&](int64_t b, int64_t e) {
    if (std::this_thread::get_id() != caller) foreign_chunks.fetch_add(1);
    covered.fetch_add(e - b);
  });
  EXPECT_EQ(foreign_chunks.load(), 0);
  EXPECT_EQ(covered.load(), 1000);
  std::thread second([&] {
    pool.RunReserved([&](int) { second_ran_while_reserved = !release.load(); });
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  release = true;
  second.join();
  holder.join();
  EXPECT_FALSE(second_ran_while_reserved.load());
}

// Back-to-back tiny jobs (a plan's steps): the hand-over must neither lose a chunk nor deadlock.
TEST(ThreadPoolTest, ManyTinyJobsInARow) {
  ThreadPool pool(2);
  int64_t total = 0;
  std::atomic<int64_t> sum{0};
  for (int call = 0; call < 20000; ++call) {
    const int64_t count = 2 + call % 5;
    pool.ParallelFor(count, [&](int64_t b, int64_t e) { sum.fetch_add(e - b); });
    total += count;
  }
  EXPECT_EQ(sum.load(), total);
}

double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// An idle pool uses no CPU: after a burst of jobs its threads may spin for a bounded while (the OpenMP build), then
// they sleep. Measured as the process's CPU time over an idle second, after a second of grace.
TEST(ThreadPoolTest, IdlePoolUsesNoCpu) {
  ThreadPool pool(2);
  std::atomic<int64_t> sum{0};
  for (int call = 0; call < 1000; ++call) pool.ParallelFor(8, [&](int64_t b, int64_t e) { sum.fetch_add(e - b); });
  EXPECT_EQ(sum.load(), 8000);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const double before = ProcessCpuSeconds();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const double used = ProcessCpuSeconds() - before;
  EXPECT_LT(used, 0.05) << "CPU seconds used by an idle pool over one second";
}

}  // namespace
}  // namespace convoy
