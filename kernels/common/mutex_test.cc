#include "kernels/common/mutex.h"

#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace convoy {
namespace {

struct Counter {
  Mutex mu;
  int value ABSL_GUARDED_BY(mu) = 0;
};

TEST(MutexTest, ExcludesAndAwaitsConditions) {
  Counter c;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&c] {
      for (int i = 0; i < 1000; ++i) {
        MutexLock lock(&c.mu);
        ++c.value;
      }
    });
  }
  {
    MutexLock lock(&c.mu);
    c.mu.Await(absl::Condition(+[](Counter* x) ABSL_NO_THREAD_SAFETY_ANALYSIS { return x->value == 4000; }, &c));
    EXPECT_EQ(c.value, 4000);
  }
  for (auto& t : threads) t.join();
}

// The waiter deletes the mutex as soon as its condition holds, while the threads that made it hold may still be in
// Unlock: Unlock must not touch the mutex once it let go (under ThreadSanitizer and AddressSanitizer, a notify after
// the release is a race with the destructor, or a use after free).
TEST(MutexTest, WaiterMayDestroyTheMutexOnceItsConditionHolds) {
  for (int round = 0; round < 200; ++round) {
    auto* c = new Counter;
    {
      MutexLock lock(&c->mu);
      c->value = 2;
    }
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t) {
      threads.emplace_back([c] {
        MutexLock lock(&c->mu);
        --c->value;
      });
    }
    c->mu.Lock();
    c->mu.Await(absl::Condition(+[](Counter* x) ABSL_NO_THREAD_SAFETY_ANALYSIS { return x->value == 0; }, c));
    c->mu.Unlock();
    delete c;
    for (auto& t : threads) t.join();
  }
}

TEST(MutexTest, AwaitWithTimeoutReturnsFalseWhenConditionStaysFalse) {
  Counter c;
  MutexLock lock(&c.mu);
  const absl::Time start = absl::Now();
  EXPECT_FALSE(c.mu.AwaitWithTimeout(
      absl::Condition(+[](Counter* x) ABSL_NO_THREAD_SAFETY_ANALYSIS { return x->value == 1; }, &c),
      absl::Milliseconds(20)));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(19));
}

TEST(MutexTest, CondVarWakesWaiter) {
  Counter c;
  CondVar cv;
  std::thread setter([&] {
    MutexLock lock(&c.mu);
    c.value = 7;
    cv.Signal();
  });
  {
    MutexLock lock(&c.mu);
    while (c.value != 7) cv.Wait(&c.mu);
    EXPECT_EQ(c.value, 7);
  }
  setter.join();
}

// A holder that changes state and then waits itself (without unlocking in between) must still wake the waiters
// whose condition it made true.
TEST(MutexTest, AwaitWakesOtherWaitersWhenItBlocks) {
  struct State {
    Mutex mu;
    int stage ABSL_GUARDED_BY(mu) = 0;
    bool waiting ABSL_GUARDED_BY(mu) = false;
  } state;
  std::thread waiter([&] {
    MutexLock lock(&state.mu);
    state.waiting = true;  // set under the lock, which the waiter gives up only inside the Await below
    state.mu.Await(absl::Condition(+[](State* s) ABSL_NO_THREAD_SAFETY_ANALYSIS { return s->stage == 1; }, &state));
    state.stage = 2;
  });
  // The waiter blocks first: holding the lock while `waiting` is true means the waiter is inside its Await. (A spin
  // on the lock, not an Await, so the check does not lean on the behaviour under test.)
  while (true) {
    state.mu.Lock();
    if (state.waiting) break;
    state.mu.Unlock();
    std::this_thread::yield();
  }
  {
    state.stage = 1;
    EXPECT_TRUE(state.mu.AwaitWithTimeout(
        absl::Condition(+[](State* s) ABSL_NO_THREAD_SAFETY_ANALYSIS { return s->stage == 2; }, &state),
        absl::Seconds(10)));
    state.mu.Unlock();
  }
  waiter.join();
}

// Two waiters whose conditions stay false must sleep: neither re-checking its condition is a release that wakes the
// other. (They used to wake each other in turn, forever, taking a core from every other thread of the process.)
TEST(MutexTest, IdleWaitersDoNotWakeEachOther) {
  struct State {
    Mutex mu;
    bool go ABSL_GUARDED_BY(mu) = false;
    std::atomic<int> checks{0};
    bool Ready() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      checks.fetch_add(1);
      return go;
    }
  } state;
  std::atomic<int> inside{0};
  auto wait = [&] {
    MutexLock lock(&state.mu);
    inside.fetch_add(1);
    state.mu.Await(absl::Condition(&state, &State::Ready));
  };
  std::thread first(wait), second(wait);
  while (inside.load() < 2 || state.checks.load() < 2) std::this_thread::yield();
  absl::SleepFor(absl::Milliseconds(20));  // both are blocked by now (a livelock would be thousands of checks in)
  const int settled = state.checks.load();
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_LE(state.checks.load() - settled, 2) << "idle waiters kept re-checking their conditions";
  {
    MutexLock lock(&state.mu);
    state.go = true;
  }
  first.join();
  second.join();
}

}  // namespace
}  // namespace convoy
