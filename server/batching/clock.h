// Clock: where time-driven code (the dynamic batcher's queue delay, timeouts, graceful drain) reads the time and
// waits for a deadline. Production code uses Clock::Real(); tests inject a FakeClock (fake_clock.h) and step time
// instead of sleeping. Waits use convoy::Mutex (kernels/common/mutex.h: absl::Mutex's API on std::mutex, so
// ThreadSanitizer sees the locking).
//
//   convoy::MutexLock lock(&mu_);
//   clock_.AwaitWithDeadline(&mu_, absl::Condition(&work_arrived_), clock_.Now() + absl::Milliseconds(5));
#ifndef CONVOY_SERVER_BATCHING_CLOCK_H_
#define CONVOY_SERVER_BATCHING_CLOCK_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"  // absl::Condition
#include "kernels/common/mutex.h"
#include "absl/time/time.h"

namespace convoy::batching {

class Clock {
 public:
  virtual ~Clock() = default;

  virtual absl::Time Now() const = 0;

  // With `*mu` held: releases it until `condition` holds or Now() reaches `deadline`, then reacquires it. Returns
  // the condition's value at return, like convoy::Mutex::AwaitWithDeadline. The condition must read only state
  // guarded by `*mu` (and the clock).
  virtual bool AwaitWithDeadline(convoy::Mutex* mu, const absl::Condition& condition, absl::Time deadline) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu) = 0;

  // The process-wide wall clock (absl::Now, and convoy::Mutex::AwaitWithDeadline).
  static const Clock& Real();
};

}  // namespace convoy::batching

#endif  // CONVOY_SERVER_BATCHING_CLOCK_H_
