// FakeClock: waiters wake when their condition holds or when the test moves time past their deadline, and
// BlockUntilSettled tells a parked waiter from one about to wake. No test here sleeps.
#include "server/batching/fake_clock.h"

#include <atomic>
#include <random>
#include <thread>

#include "kernels/common/mutex.h"
#include "gtest/gtest.h"

namespace convoy::batching {
namespace {

TEST(FakeClockTest, TimeMovesOnlyWhenTold) {
  std::mt19937 rng(std::random_device{}());
  const absl::Time start = absl::FromUnixSeconds(1'000 + rng() % 1'000'000);
  FakeClock clock(start);
  EXPECT_EQ(clock.Now(), start);
  const absl::Duration step = absl::Microseconds(1 + rng() % 1000);
  clock.Advance(step);
  EXPECT_EQ(clock.Now(), start + step);
  clock.Advance(-step);
  EXPECT_EQ(clock.Now(), start + step) << "negative steps are ignored";
  clock.SetTime(start);
  EXPECT_EQ(clock.Now(), start);
}

TEST(FakeClockTest, AwaitReturnsAtOnceWhenTheDeadlineHasPassed) {
  FakeClock clock;
  convoy::Mutex mu;
  bool flag = false;
  convoy::MutexLock lock(&mu);
  EXPECT_FALSE(clock.AwaitWithDeadline(&mu, absl::Condition(&flag), clock.Now()));
  flag = true;
  EXPECT_TRUE(clock.AwaitWithDeadline(&mu, absl::Condition(&flag), absl::InfiniteFuture()));
}

TEST(FakeClockTest, WaiterWakesWhenTimeReachesItsDeadline) {
  FakeClock clock;
  const absl::Time deadline = clock.Now() + absl::Milliseconds(5);
  convoy::Mutex mu;
  bool never = false;
  std::atomic<bool> woke{false};
  std::thread waiter([&] {
    convoy::MutexLock lock(&mu);
    EXPECT_FALSE(clock.AwaitWithDeadline(&mu, absl::Condition(&never), deadline));
    EXPECT_GE(clock.Now(), deadline);
    woke = true;
  });
  clock.BlockUntilSettled(1);
  clock.Advance(absl::Milliseconds(4));
  clock.BlockUntilSettled(1);  // still parked: 1 ms to go
  EXPECT_FALSE(woke);
  clock.Advance(absl::Milliseconds(1));
  waiter.join();
  EXPECT_TRUE(woke);
  EXPECT_EQ(clock.waiter_count(), 0);
}

TEST(FakeClockTest, WaiterWakesWhenItsConditionBecomesTrue) {
  FakeClock clock;
  convoy::Mutex mu;
  bool ready = false;
  std::thread waiter([&] {
    convoy::MutexLock lock(&mu);
    EXPECT_TRUE(clock.AwaitWithDeadline(&mu, absl::Condition(&ready), absl::InfiniteFuture()));
  });
  clock.BlockUntilSettled(1);
  {
    convoy::MutexLock lock(&mu);
    ready = true;
  }
  waiter.join();
  EXPECT_EQ(clock.waiter_count(), 0);
}

}  // namespace
}  // namespace convoy::batching
