// FakeClock: waiters wake when their condition holds or when the test moves time past their deadline, and
// BlockUntilSettled tells a parked waiter from one about to wake. No test here sleeps.
#include "server/batching/fake_clock.h"

#include <random>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
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
  absl::Mutex mu;
  bool flag = false;
  absl::MutexLock lock(&mu);
  EXPECT_FALSE(clock.AwaitWithDeadline(&mu, absl::Condition(&flag), clock.Now()));
  flag = true;
  EXPECT_TRUE(clock.AwaitWithDeadline(&mu, absl::Condition(&flag), absl::InfiniteFuture()));
}

TEST(FakeClockTest, WaiterWakesWhenTimeReachesItsDeadline) {
  FakeClock clock;
  const absl::Time deadline = clock.Now() + absl::Milliseconds(5);
  absl::Mutex mu;
  bool never = false;
  absl::Notification woke;
  std::thread waiter([&] {
    absl::MutexLock lock(&mu);
    EXPECT_FALSE(clock.AwaitWithDeadline(&mu, absl::Condition(&never), deadline));
    EXPECT_GE(clock.Now(), deadline);
    woke.Notify();
  });
  clock.BlockUntilSettled(1);
  clock.Advance(absl::Milliseconds(4));
  clock.BlockUntilSettled(1);  // still parked: 1 ms to go
  EXPECT_FALSE(woke.HasBeenNotified());
  clock.Advance(absl::Milliseconds(1));
  woke.WaitForNotification();
  waiter.join();
  EXPECT_EQ(clock.waiter_count(), 0);
}

TEST(FakeClockTest, WaiterWakesWhenItsConditionBecomesTrue) {
  FakeClock clock;
  absl::Mutex mu;
  bool ready = false;
  std::thread waiter([&] {
    absl::MutexLock lock(&mu);
    EXPECT_TRUE(clock.AwaitWithDeadline(&mu, absl::Condition(&ready), absl::InfiniteFuture()));
  });
  clock.BlockUntilSettled(1);
  {
    absl::MutexLock lock(&mu);
    ready = true;
  }
  waiter.join();
  EXPECT_EQ(clock.waiter_count(), 0);
}

}  // namespace
}  // namespace convoy::batching
