// WorkerPool: tasks run on the pool's threads (never the caller's), as many at once as it has threads, in FIFO
// order; a full queue refuses with the exact UNAVAILABLE message; the destructor waits for running tasks and drops
// queued ones. Every wait is on an event the test controls (a gate), never on a duration.
#include "server/http/worker_pool.h"

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/mutex.h"
#include "kernels/common/status_matchers.h"

namespace convoy::http {
namespace {

using ::convoy::testing::IsOk;
using ::convoy::testing::StatusIs;

// Tasks that hold until the test opens the gate, counting how many have entered.
class Gate {
 public:
  void Enter() {
    convoy::MutexLock lock(&mu_);
    ++entered_;
    mu_.Await(absl::Condition(&open_));
  }
  void Open() {
    convoy::MutexLock lock(&mu_);
    open_ = true;
  }
  // Waits (up to a minute, so a broken pool fails instead of hanging) until `n` tasks have entered.
  bool WaitEntered(int n) {
    convoy::MutexLock lock(&mu_);
    auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return entered_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), absl::Minutes(1));
  }
  int entered() {
    convoy::MutexLock lock(&mu_);
    return entered_;
  }

 private:
  convoy::Mutex mu_;
  bool open_ ABSL_GUARDED_BY(mu_) = false;
  int entered_ ABSL_GUARDED_BY(mu_) = 0;
};

std::unique_ptr<WorkerPool> Pool(int threads, size_t max_queued) {
  WorkerPool::Options options;
  options.threads = threads;
  options.max_queued = max_queued;
  options.name = "test decoding";
  options.item = "request";
  options.limit_flag = "--test_queue";
  return std::move(WorkerPool::Create(options)).value();
}

TEST(WorkerPoolTest, RunsTasksOnItsOwnThreadsInOrder) {
  convoy::Mutex mu;
  std::vector<int> order;
  std::vector<std::thread::id> ran_on;
  const int n = 50;
  auto pool = Pool(1, 100);  // declared last, destroyed first: its threads stop before what their tasks touch goes
  for (int i = 0; i < n; ++i) {
    ASSERT_THAT(pool->Submit([&, i] {
      convoy::MutexLock lock(&mu);
      order.push_back(i);
      ran_on.push_back(std::this_thread::get_id());
    }), IsOk());
  }
  {
    convoy::MutexLock lock(&mu);
    auto done = [&]() { return order.size() == n; };
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&done), absl::Minutes(1)));
    for (int i = 0; i < n; ++i) EXPECT_EQ(order[i], i);
    for (const std::thread::id& id : ran_on) {
      EXPECT_NE(id, std::this_thread::get_id());
      EXPECT_EQ(id, ran_on[0]);  // one thread
    }
  }
}

TEST(WorkerPoolTest, RunsAsManyTasksAtOnceAsItHasThreads) {
  Gate gate;
  auto pool = Pool(3, 10);
  for (int i = 0; i < 5; ++i) ASSERT_THAT(pool->Submit([&] { gate.Enter(); }), IsOk());
  ASSERT_TRUE(gate.WaitEntered(3));
  EXPECT_EQ(gate.entered(), 3);  // the other two wait in the queue while the three threads are held
  gate.Open();
  ASSERT_TRUE(gate.WaitEntered(5));
}

TEST(WorkerPoolTest, AFullQueueIsUnavailableWithTheLimitAndFreesUpAgain) {
  Gate gate;
  auto pool = Pool(1, 2);
  ASSERT_THAT(pool->Submit([&] { gate.Enter(); }), IsOk());
  ASSERT_TRUE(gate.WaitEntered(1));  // the thread is busy: the next two wait
  ASSERT_THAT(pool->Submit([&] { gate.Enter(); }), IsOk());
  ASSERT_THAT(pool->Submit([&] { gate.Enter(); }), IsOk());
  auto refused_alive = std::make_shared<int>(0);
  std::weak_ptr<int> watch = refused_alive;
  EXPECT_THAT(pool->Submit([keep = std::move(refused_alive)] { FAIL() << "a refused task ran"; }),
              StatusIs(absl::StatusCode::kUnavailable,
                       "test decoding is busy: 2 requests wait for its 1 thread (the limit, --test_queue); try "
                       "again"));
  EXPECT_TRUE(watch.expired());  // the refused task was destroyed at once
  gate.Open();
  ASSERT_TRUE(gate.WaitEntered(3));
  ASSERT_THAT(pool->Submit([] {}), IsOk());  // room again once the queue drained
}

TEST(WorkerPoolTest, DestructionWaitsForRunningTasksAndDropsQueuedOnes) {
  Gate gate;
  std::atomic<bool> finished{false};
  auto pool = Pool(1, 10);
  ASSERT_THAT(pool->Submit([&] {
    gate.Enter();
    finished = true;
  }), IsOk());
  ASSERT_TRUE(gate.WaitEntered(1));
  auto queued_alive = std::make_shared<int>(0);
  std::weak_ptr<int> watch = queued_alive;
  std::atomic<bool> queued_ran{false};
  ASSERT_THAT(pool->Submit([&, keep = std::move(queued_alive)] { queued_ran = true; }), IsOk());
  WorkerPool* raw = pool.get();
  std::thread opener([&] {
    // Opens the gate only once the destructor has started (it marks the pool stopping before it joins the running
    // task, so the pool is still whole): the queued task must then be dropped, whatever the timing.
    while (!absl::StrContains(raw->Submit([] {}).message(), "shutting down")) std::this_thread::yield();
    gate.Open();
  });
  pool.reset();
  opener.join();
  EXPECT_TRUE(finished);
  EXPECT_FALSE(queued_ran);
  EXPECT_TRUE(watch.expired());
}

TEST(WorkerPoolTest, RejectsBadOptions) {
  WorkerPool::Options options;
  options.name = "pool";
  options.threads = 0;
  EXPECT_THAT(WorkerPool::Create(options), StatusIs(absl::StatusCode::kInvalidArgument,
                                                    "pool: threads must be >= 1, got 0"));
  options.threads = 1;
  options.max_queued = 0;
  EXPECT_THAT(WorkerPool::Create(options), StatusIs(absl::StatusCode::kInvalidArgument,
                                                    "pool: max_queued must be >= 1, got 0"));
}

}  // namespace
}  // namespace convoy::http
