// Schedule parsing and the process-wide schedule setting (see schedule.h).
#include "kernels/cuda_emulation/schedule.h"

#include <cstdio>
#include <cstdlib>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"

namespace convoy::cuda_emulation {
namespace {

Schedule ScheduleFromEnvironment() {
  const char* text = std::getenv("CONVOY_EMULATION_SCHEDULE");
  if (text == nullptr || *text == '\0') return Schedule::Forward();
  absl::StatusOr<Schedule> parsed = Schedule::Parse(text);
  if (!parsed.ok()) {
    std::fprintf(stderr, "CONVOY_EMULATION_SCHEDULE ignored: %s\n", parsed.status().ToString().c_str());
    return Schedule::Forward();
  }
  return *parsed;
}

struct ScheduleSetting {
  absl::Mutex mu;
  Schedule schedule ABSL_GUARDED_BY(mu) = ScheduleFromEnvironment();
};

ScheduleSetting& Setting() {
  static ScheduleSetting* setting = new ScheduleSetting();
  return *setting;
}

}  // namespace

std::string Schedule::ToString() const {
  switch (order) {
    case ScheduleOrder::kForward:
      return "forward";
    case ScheduleOrder::kReverse:
      return "reverse";
    case ScheduleOrder::kSeededRandom:
      return absl::StrCat("random:", seed);
    case ScheduleOrder::kLaggingWarp:
      return absl::StrCat("lag:", seed);
  }
  return "unknown";
}

absl::StatusOr<Schedule> Schedule::Parse(absl::string_view text) {
  if (text == "forward") return Forward();
  if (text == "reverse") return Reverse();
  uint64_t seed = 0;
  absl::string_view seed_text = text;
  if (absl::ConsumePrefix(&seed_text, "random:") && absl::SimpleAtoi(seed_text, &seed)) return SeededRandom(seed);
  absl::string_view warp_text = text;
  int warp = 0;
  if (absl::ConsumePrefix(&warp_text, "lag:") && absl::SimpleAtoi(warp_text, &warp) && warp >= 0 && warp < 32) {
    return LaggingWarp(warp);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("schedule '", text, "': expected 'forward', 'reverse', 'random:<seed>' or 'lag:<warp 0-31>'"));
}

void SetSchedule(const Schedule& schedule) {
  ScheduleSetting& setting = Setting();
  absl::MutexLock lock(&setting.mu);
  setting.schedule = schedule;
}

Schedule GetSchedule() {
  ScheduleSetting& setting = Setting();
  absl::MutexLock lock(&setting.mu);
  return setting.schedule;
}

}  // namespace convoy::cuda_emulation
