// convoy::Mutex, MutexLock and CondVar: the subset of absl::Mutex's API that Convoy uses, built on std::mutex.
//
// Why not absl::Mutex itself: Debian ships Abseil as prebuilt shared libraries compiled without ThreadSanitizer, so
// TSAN cannot see absl::Mutex's lock and unlock and reports every access it protects as a data race. std::mutex goes
// through pthread, which TSAN intercepts, so `--config=tsan` runs are meaningful. The API (and Clang's thread-safety
// annotations) match absl's, so code reads the same:
//
//   convoy::Mutex mu_;
//   int value_ ABSL_GUARDED_BY(mu_);
//   convoy::MutexLock lock(&mu_);
//   mu_.Await(absl::Condition(this, &Queue::HasWork));        // re-evaluated whenever the mutex is released
//   bool ready = mu_.AwaitWithDeadline(condition, deadline);
//
// Await works like absl's conditional critical sections: waiters re-check their condition each time any holder
// releases the mutex (Unlock, or a holder starting to wait), so no explicit notify is needed; a waiter that only
// re-checked its condition wakes nobody.
#ifndef CONVOY_KERNELS_COMMON_MUTEX_H_
#define CONVOY_KERNELS_COMMON_MUTEX_H_

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace convoy {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  // Wakes the waiters before it lets go: a waiter whose condition now holds may destroy the mutex (and the object
  // it guards) as soon as it runs, so nothing of this Mutex is touched after mu_ is released.
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    if (waiters_ > 0) released_.notify_all();
    mu_.unlock();
  }
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return mu_.try_lock(); }
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}

  // Blocks until cond is true; the mutex is held on entry and on return.
  void Await(const absl::Condition& cond) ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    AwaitWithDeadline(cond, absl::InfiniteFuture());
  }
  // Returns whether cond became true before the deadline (the mutex is held on return either way).
  bool AwaitWithDeadline(const absl::Condition& cond, absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(this);
  bool AwaitWithTimeout(const absl::Condition& cond, absl::Duration timeout) ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    return AwaitWithDeadline(cond, absl::Now() + timeout);
  }

 private:
  friend class CondVar;
  std::mutex mu_;
  std::condition_variable released_;
  int waiters_ = 0;  // guarded by mu_
};

class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// A condition variable used with convoy::Mutex (the absl::CondVar API subset).
class CondVar {
 public:
  void Wait(Mutex* mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { WaitWithDeadline(mu, absl::InfiniteFuture()); }
  // Returns true on timeout (as absl::CondVar does).
  bool WaitWithDeadline(Mutex* mu, absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  bool WaitWithTimeout(Mutex* mu, absl::Duration timeout) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return WaitWithDeadline(mu, absl::Now() + timeout);
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

// ---- implementation ----

inline bool Mutex::AwaitWithDeadline(const absl::Condition& cond, absl::Time deadline) {
  std::unique_lock<std::mutex> lock(mu_, std::adopt_lock);
  ++waiters_;
  bool satisfied = cond.Eval();
  bool woken = false;
  while (!satisfied) {
    // Waiting releases the mutex: like Unlock, let the other waiters re-check what this holder may have changed. Only
    // on the way in: a waiter woken to find its condition still false changed nothing, and waking the others again
    // would have two idle waiters wake each other forever (each wait-wake round a pair of futex calls, a core's worth
    // of CPU taken from every other thread).
    if (waiters_ > 1 && !woken) released_.notify_all();
    woken = true;
    if (deadline == absl::InfiniteFuture()) {
      released_.wait(lock);
    } else if (released_.wait_until(lock, absl::ToChronoTime(deadline)) == std::cv_status::timeout) {
      satisfied = cond.Eval();
      break;
    }
    satisfied = cond.Eval();
  }
  --waiters_;
  lock.release();  // still held: ownership goes back to the caller
  return satisfied;
}

inline bool CondVar::WaitWithDeadline(Mutex* mu, absl::Time deadline) {
  std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
  if (mu->waiters_ > 0) mu->released_.notify_all();  // waiting releases the mutex, as Unlock does
  bool timed_out = false;
  if (deadline == absl::InfiniteFuture()) {
    cv_.wait(lock);
  } else {
    timed_out = cv_.wait_until(lock, absl::ToChronoTime(deadline)) == std::cv_status::timeout;
  }
  lock.release();
  return timed_out;
}

}  // namespace convoy

#endif  // CONVOY_KERNELS_COMMON_MUTEX_H_
