// FakeClock: test time that moves only when told to. See fake_clock.h.
#include "server/batching/fake_clock.h"

#include <vector>

namespace convoy::batching {

FakeClock::FakeClock() : FakeClock(absl::FromUnixSeconds(1'700'000'000)) {}

FakeClock::FakeClock(absl::Time start) : now_unix_nanos_(absl::ToUnixNanos(start)) {}

absl::Time FakeClock::Now() const { return absl::FromUnixNanos(now_unix_nanos_.load(std::memory_order_acquire)); }

bool FakeClock::AwaitWithDeadline(convoy::Mutex* mu, const absl::Condition& condition, absl::Time deadline) const {
  const Waiter waiter{mu, &condition, deadline};
  // convoy::Mutex re-evaluates this whenever `*mu` is released: by the code whose state the condition reads, or by
  // WakeWaiters() after time moved.
  struct WakeUp {
    const FakeClock* clock;
    const Waiter* waiter;
    bool operator()() const { return waiter->condition->Eval() || clock->Now() >= waiter->deadline; }
  } wake_up{this, &waiter};
  const uint64_t id = Register(&waiter);
  mu->Await(absl::Condition(&wake_up));
  Unregister(id);
  return condition.Eval();
}

uint64_t FakeClock::Register(const Waiter* waiter) const {
  convoy::MutexLock lock(&registry_mu_);
  const uint64_t id = next_id_++;
  waiters_[id] = waiter;
  ++generation_;
  return id;
}

void FakeClock::Unregister(uint64_t id) const {
  convoy::MutexLock lock(&registry_mu_);
  waiters_.erase(id);
  ++generation_;
}

void FakeClock::Advance(absl::Duration duration) {
  if (duration <= absl::ZeroDuration()) return;
  now_unix_nanos_.fetch_add(absl::ToInt64Nanoseconds(duration), std::memory_order_acq_rel);
  WakeWaiters();
}

void FakeClock::SetTime(absl::Time time) {
  now_unix_nanos_.store(absl::ToUnixNanos(time), std::memory_order_release);
  WakeWaiters();
}

void FakeClock::WakeWaiters() const {
  std::vector<convoy::Mutex*> mutexes;
  {
    convoy::MutexLock lock(&registry_mu_);
    for (const auto& [id, waiter] : waiters_) mutexes.push_back(waiter->mu);
  }
  // Not under registry_mu_: the lock order is a waiter's mutex first.
  for (convoy::Mutex* mu : mutexes) {
    mu->Lock();
    mu->Unlock();
  }
}

int FakeClock::CountSettled(const std::map<uint64_t, convoy::Mutex*>& waiters) const {
  int settled = 0;
  for (const auto& [id, mu] : waiters) {
    convoy::MutexLock waiter_lock(mu);
    // Holding the waiter's mutex, a waiter still registered is parked inside Await, so its Waiter is alive.
    convoy::MutexLock registry_lock(&registry_mu_);
    const auto it = waiters_.find(id);
    if (it == waiters_.end()) continue;
    const Waiter& waiter = *it->second;
    if (!waiter.condition->Eval() && Now() < waiter.deadline) ++settled;
  }
  return settled;
}

void FakeClock::BlockUntilSettled(int count) const {
  if (count <= 0) return;
  while (true) {
    std::map<uint64_t, convoy::Mutex*> snapshot;
    uint64_t generation = 0;
    {
      convoy::MutexLock lock(&registry_mu_);
      const auto enough_waiters = [this, count]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return static_cast<int>(waiters_.size()) >= count;
      };
      registry_mu_.Await(absl::Condition(&enough_waiters));
      generation = generation_;
      for (const auto& [id, waiter] : waiters_) snapshot[id] = waiter->mu;
    }
    if (CountSettled(snapshot) >= count) return;
    // Some waiter is about to wake; it will leave (and perhaps come back), which changes the generation.
    convoy::MutexLock lock(&registry_mu_);
    const auto waiters_changed = [this, generation]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return generation_ != generation;
    };
    registry_mu_.Await(absl::Condition(&waiters_changed));
  }
}

int FakeClock::waiter_count() const {
  convoy::MutexLock lock(&registry_mu_);
  return static_cast<int>(waiters_.size());
}

}  // namespace convoy::batching
