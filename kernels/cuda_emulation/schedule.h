// The order in which the CUDA emulation runs the threads of a block between two barriers.
//
// Real GPUs give no ordering guarantee between threads of a block that have not met at a barrier, so a kernel that
// misses a __syncthreads() can pass by luck. The emulation runs the threads of a block one after another, each until
// its next barrier or warp collective, in one of these orders:
//   - Forward (default): thread 0, 1, 2, ... A thread that reads what a LATER thread writes before the barrier sees
//     poisoned shared memory (NaN / 0xFF).
//   - Reverse: last thread first. Catches reads of what an EARLIER thread writes.
//   - SeededRandom(seed): a fresh permutation after every barrier, deterministic per (seed, block, barrier round).
//   - LaggingWarp(w): forward, except that warp w runs after every other thread in each pass: a warp that falls
//     behind the rest of its warpgroup (catches work released after one warp's progress, e.g. a pipeline stage
//     released by one thread of a consumer warpgroup while another warp still reads it).
// Run a kernel's test under all three (see ScopedSchedule) to expose missing barriers.
//
// The process-wide default comes from CONVOY_EMULATION_SCHEDULE: "forward", "reverse", "random:<seed>" or
// "lag:<warp>".
#ifndef CONVOY_KERNELS_CUDA_EMULATION_SCHEDULE_H_
#define CONVOY_KERNELS_CUDA_EMULATION_SCHEDULE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace convoy::cuda_emulation {

enum class ScheduleOrder { kForward, kReverse, kSeededRandom, kLaggingWarp };

struct Schedule {
  ScheduleOrder order = ScheduleOrder::kForward;
  uint64_t seed = 0;  // kSeededRandom: the seed; kLaggingWarp: the warp that lags

  static Schedule Forward() { return {ScheduleOrder::kForward, 0}; }
  static Schedule Reverse() { return {ScheduleOrder::kReverse, 0}; }
  static Schedule SeededRandom(uint64_t seed) { return {ScheduleOrder::kSeededRandom, seed}; }
  static Schedule LaggingWarp(int warp) { return {ScheduleOrder::kLaggingWarp, static_cast<uint64_t>(warp)}; }

  std::string ToString() const;
  // Parses "forward", "reverse", "random:<seed>" or "lag:<warp>".
  static absl::StatusOr<Schedule> Parse(absl::string_view text);
};

// The schedule of launches that start from now on (process-wide; read once per launch).
void SetSchedule(const Schedule& schedule);
Schedule GetSchedule();

// Sets a schedule for its lifetime and restores the previous one (tests).
class ScopedSchedule {
 public:
  explicit ScopedSchedule(const Schedule& schedule) : previous_(GetSchedule()) { SetSchedule(schedule); }
  ~ScopedSchedule() { SetSchedule(previous_); }
  ScopedSchedule(const ScopedSchedule&) = delete;
  ScopedSchedule& operator=(const ScopedSchedule&) = delete;

 private:
  Schedule previous_;
};

}  // namespace convoy::cuda_emulation

#endif  // CONVOY_KERNELS_CUDA_EMULATION_SCHEDULE_H_
