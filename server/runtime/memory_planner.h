// Liveness-based activation memory planning: places every buffer a plan step writes at an offset in one arena so that
// buffers whose lifetimes overlap never overlap in memory.
//
// A buffer is live from the step that writes it to the last step that reads it (inclusive). Graph inputs are live
// from before the first step (first_step = -1); graph outputs until after the last (last_step = num_steps). Aliases
// (Flatten/Reshape/Identity views) own no memory: they share their source's offset and extend its lifetime.
// External buffers (the caller's own memory, e.g. zero-copy CPU inputs) get no arena space at all.
//
// Placement is greedy best-fit: the largest buffers first, each into the smallest gap left between the
// already-placed buffers it is live together with, or on top of them when no gap fits.
//
//   std::vector<BufferUse> uses = ...;   // one per tensor, indexed like the plan's tensors
//   CONVOY_ASSIGN_OR_RETURN(MemoryPlan memory, PlanActivationMemory(uses, /*alignment=*/64));
//   void* p = arena_base + memory.offsets[tensor];
#ifndef CONVOY_SERVER_RUNTIME_MEMORY_PLANNER_H_
#define CONVOY_SERVER_RUNTIME_MEMORY_PLANNER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace convoy::runtime {

struct BufferUse {
  size_t bytes = 0;
  int alias_of = -1;      // index of the buffer whose storage this one shares, or -1
  bool external = false;  // lives outside the arena (caller memory); ignored for aliases
  int first_step = 0;     // the step that writes it; -1 = live before the first step
  int last_step = 0;      // the last step that reads it; num_steps = live after the last step
};

struct MemoryPlan {
  // Byte offset of each buffer in the arena (aliases: their root's offset); -1 for external buffers and aliases of
  // external buffers.
  std::vector<int64_t> offsets;
  // The root buffer each buffer's storage belongs to (itself when it is not an alias).
  std::vector<int> roots;
  size_t arena_bytes = 0;     // peak: the arena size this plan needs
  size_t no_reuse_bytes = 0;  // what one buffer per tensor would need (the sum of aligned root sizes)
};

// Plans the arena. Fails on an alias cycle, an alias pointing out of range, or first_step > last_step.
absl::StatusOr<MemoryPlan> PlanActivationMemory(const std::vector<BufferUse>& uses, size_t alignment);

// Checks the plan's invariant: no two non-external roots that are live at the same step overlap in memory, and every
// root lies inside [0, arena_bytes). Returns the first violation found. Used by tests and debug checks.
absl::Status VerifyMemoryPlan(const std::vector<BufferUse>& uses, const MemoryPlan& plan);

// "arena 1.2 MiB (no reuse: 4.8 MiB, 25%)"
std::string DescribeMemoryPlan(const MemoryPlan& plan);
std::string FormatBytes(size_t bytes);

}  // namespace convoy::runtime

#endif  // CONVOY_SERVER_RUNTIME_MEMORY_PLANNER_H_
