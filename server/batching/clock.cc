// The real clock: absl::Now() and convoy::Mutex::AwaitWithDeadline.
#include "server/batching/clock.h"

namespace convoy::batching {
namespace {

class RealClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }

  bool AwaitWithDeadline(convoy::Mutex* mu, const absl::Condition& condition, absl::Time deadline) const override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu) {
    return mu->AwaitWithDeadline(condition, deadline);
  }
};

}  // namespace

const Clock& Clock::Real() {
  static const RealClock* const clock = new RealClock();
  return *clock;
}

}  // namespace convoy::batching
