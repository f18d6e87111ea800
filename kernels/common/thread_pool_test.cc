#include "kernels/common/thread_pool.h"

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "kernels/common/mutex.h"
#include "gtest/gtest.h"

namespace convoy {
namespace {

TEST(ThreadPoolTest, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    for (int64_t count : {1, 7, 64, 1000, 12345}) {
      std::vector<std::atomic<int>> hits(count);
      pool.ParallelFor(count, [&](int64_t begin, int64_t end) {
        ASSERT_LE(0, begin);
        ASSERT_LE(end, count);
        for (int64_t i = begin; i < end; ++i) hits[i].fetch_add(1);
      });
      for (int64_t i = 0; i < count; ++i) ASSERT_EQ(hits[i].load(), 1) << "threads " << threads << " index " << i;
    }
  }
}

TEST(ThreadPoolTest, UsesMoreThanOneThread) {
  ThreadPool pool(2);
  convoy::Mutex mu;
  std::set<std::thread::id> ids;
  // Every chunk waits until a second thread has entered one: a pool that ran every chunk on one thread would stall
  // here (and fail after the wait's bound), however fast or busy the machine is.
  const auto two_threads = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return ids.size() >= 2; };
  pool.ParallelFor(64, [&](int64_t, int64_t) {
    convoy::MutexLock lock(&mu);
    ids.insert(std::this_thread::get_id());
    mu.AwaitWithTimeout(absl::Condition(&two_threads), absl::Seconds(60));
  });
  EXPECT_EQ(ids.size(), 2u);
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

}  // namespace
}  // namespace convoy
