// FakeClock: a Clock for tests whose time moves only when the test calls Advance() or SetTime(). Threads waiting in
// AwaitWithDeadline wake when their condition becomes true or when the test moves time past their deadline, so
// time-driven behaviour (queue delays, timeouts, drain deadlines) is tested without sleeping.
//
// BlockUntilSettled(n) lets a test wait, without sleeping, until n threads are parked on this clock with nothing to
// do until the test acts (their condition false, their deadline in the future); only then is "nothing happened
// yet" a meaningful assertion.
//
//   FakeClock clock;
//   ... start a batcher with &clock, enqueue a request ...
//   clock.BlockUntilSettled(1);          // the batcher waits for the queue delay
//   clock.Advance(absl::Microseconds(100));
//
// An object waiting on this clock must not be destroyed while another thread is inside Advance, SetTime or
// BlockUntilSettled (tests call all of them from the test thread, so this holds naturally).
#ifndef CONVOY_SERVER_BATCHING_FAKE_CLOCK_H_
#define CONVOY_SERVER_BATCHING_FAKE_CLOCK_H_

#include <atomic>
#include <cstdint>
#include <map>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"  // absl::Condition
#include "kernels/common/mutex.h"
#include "absl/time/time.h"
#include "server/batching/clock.h"

namespace convoy::batching {

class FakeClock final : public Clock {
 public:
  // Starts at an arbitrary fixed time well after the Unix epoch.
  FakeClock();
  explicit FakeClock(absl::Time start);

  absl::Time Now() const override;
  bool AwaitWithDeadline(convoy::Mutex* mu, const absl::Condition& condition, absl::Time deadline) const override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu);

  // Moves time forward (a negative duration is ignored) and wakes waiters whose deadline has come.
  void Advance(absl::Duration duration);
  void SetTime(absl::Time time);

  // Blocks until at least `count` threads wait on this clock with their condition false and their deadline after
  // Now(), i.e. they will not move until something else happens.
  void BlockUntilSettled(int count) const;

  // Threads inside AwaitWithDeadline right now, settled or not.
  int waiter_count() const;

 private:
  struct Waiter {
    convoy::Mutex* mu;
    const absl::Condition* condition;
    absl::Time deadline;
  };

  uint64_t Register(const Waiter* waiter) const;
  void Unregister(uint64_t id) const;
  // Locks and unlocks every waiter's mutex so convoy::Mutex re-evaluates their wake-up conditions.
  void WakeWaiters() const;
  // How many of the waiters registered under the given ids are settled; locks each waiter's mutex in turn.
  int CountSettled(const std::map<uint64_t, convoy::Mutex*>& waiters) const;

  std::atomic<int64_t> now_unix_nanos_;
  mutable convoy::Mutex registry_mu_;  // lock order: a waiter's own mutex first, then this one
  mutable std::map<uint64_t, const Waiter*> waiters_ ABSL_GUARDED_BY(registry_mu_);
  mutable uint64_t next_id_ ABSL_GUARDED_BY(registry_mu_) = 1;
  // Bumped whenever a waiter arrives or leaves.
  mutable uint64_t generation_ ABSL_GUARDED_BY(registry_mu_) = 0;
};

}  // namespace convoy::batching

#endif  // CONVOY_SERVER_BATCHING_FAKE_CLOCK_H_
