// Greedy best-fit arena placement over buffer lifetimes (see memory_planner.h).
#include "server/runtime/memory_planner.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/common/align.h"

namespace convoy::runtime {
namespace {


// The root of each buffer, following alias chains; fails on cycles and bad indices.
absl::StatusOr<std::vector<int>> ResolveRoots(const std::vector<BufferUse>& uses) {
  const int count = static_cast<int>(uses.size());
  std::vector<int> roots(count);
  for (int i = 0; i < count; ++i) {
    int root = i;
    for (int hops = 0; uses[root].alias_of >= 0; ++hops) {
      if (uses[root].alias_of >= count || hops > count) {
        return absl::InvalidArgumentError(absl::StrCat("buffer ", i, ": alias chain is broken or cyclic at buffer ",
                                                       root, " (alias_of ", uses[root].alias_of, ", ", count,
                                                       " buffers)"));
      }
      root = uses[root].alias_of;
    }
    roots[i] = root;
  }
  return roots;
}

struct Interval {
  int first = 0, last = 0;  // live steps, inclusive
  bool Overlaps(const Interval& o) const { return first <= o.last && o.first <= last; }
};

// Each root's lifetime: the union of its own and its aliases' lifetimes.
std::vector<Interval> RootLifetimes(const std::vector<BufferUse>& uses, const std::vector<int>& roots) {
  std::vector<Interval> live(uses.size());
  for (size_t i = 0; i < uses.size(); ++i) live[i] = {uses[i].first_step, uses[i].last_step};
  for (size_t i = 0; i < uses.size(); ++i) {
    Interval& r = live[roots[i]];
    r.first = std::min(r.first, uses[i].first_step);
    r.last = std::max(r.last, uses[i].last_step);
  }
  return live;
}

// Best-fit offset for `bytes` among the placed [offset, offset + size) ranges live at the same time (sorted by
// offset): the smallest gap that fits, else the top of the highest.
size_t BestFitOffset(std::vector<std::pair<size_t, size_t>> busy, size_t bytes) {
  std::sort(busy.begin(), busy.end());
  size_t best = SIZE_MAX, best_gap = SIZE_MAX, cursor = 0;
  for (const auto& [offset, size] : busy) {
    if (offset > cursor && offset - cursor >= bytes && offset - cursor < best_gap) {
      best = cursor;
      best_gap = offset - cursor;
    }
    cursor = std::max(cursor, offset + size);
  }
  return best != SIZE_MAX ? best : cursor;
}

}  // namespace

absl::StatusOr<MemoryPlan> PlanActivationMemory(const std::vector<BufferUse>& uses, size_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("alignment must be a power of two, got ", alignment));
  }
  for (size_t i = 0; i < uses.size(); ++i) {
    if (uses[i].first_step > uses[i].last_step) {
      return absl::InvalidArgumentError(absl::StrCat("buffer ", i, " is written at step ", uses[i].first_step,
                                                     " after its last read at step ", uses[i].last_step));
    }
  }
  MemoryPlan plan;
  auto roots = ResolveRoots(uses);
  if (!roots.ok()) return roots.status();
  plan.roots = *std::move(roots);
  const std::vector<Interval> live = RootLifetimes(uses, plan.roots);

  std::vector<int> order;  // arena roots, largest first (ties: earliest first, then index, for determinism)
  for (size_t i = 0; i < uses.size(); ++i) {
    if (plan.roots[i] == static_cast<int>(i) && !uses[i].external) order.push_back(static_cast<int>(i));
  }
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    if (uses[a].bytes != uses[b].bytes) return uses[a].bytes > uses[b].bytes;
    if (live[a].first != live[b].first) return live[a].first < live[b].first;
    return a < b;
  });

  std::vector<int64_t> root_offset(uses.size(), -1);
  std::vector<int> placed;
  for (int root : order) {
    const size_t bytes = AlignUp(std::max<size_t>(uses[root].bytes, 1), alignment);
    std::vector<std::pair<size_t, size_t>> busy;
    for (int other : placed) {
      if (live[other].Overlaps(live[root])) {
        busy.emplace_back(root_offset[other], AlignUp(std::max<size_t>(uses[other].bytes, 1), alignment));
      }
    }
    const size_t offset = BestFitOffset(std::move(busy), bytes);
    root_offset[root] = static_cast<int64_t>(offset);
    plan.arena_bytes = std::max(plan.arena_bytes, offset + bytes);
    plan.no_reuse_bytes += bytes;
    placed.push_back(root);
  }
  plan.offsets.resize(uses.size());
  for (size_t i = 0; i < uses.size(); ++i) plan.offsets[i] = root_offset[plan.roots[i]];
  return plan;
}

absl::Status VerifyMemoryPlan(const std::vector<BufferUse>& uses, const MemoryPlan& plan) {
  if (plan.offsets.size() != uses.size() || plan.roots.size() != uses.size()) {
    return absl::InternalError(absl::StrCat("plan covers ", plan.offsets.size(), " buffers, expected ", uses.size()));
  }
  const std::vector<Interval> live = RootLifetimes(uses, plan.roots);
  std::vector<int> arena_roots;
  for (size_t i = 0; i < uses.size(); ++i) {
    if (plan.roots[i] != static_cast<int>(i) || uses[i].external) continue;
    if (plan.offsets[i] < 0 || plan.offsets[i] + uses[i].bytes > plan.arena_bytes) {
      return absl::InternalError(absl::StrCat("buffer ", i, " at offset ", plan.offsets[i], " with ", uses[i].bytes,
                                              " bytes lies outside the arena of ", plan.arena_bytes, " bytes"));
    }
    arena_roots.push_back(static_cast<int>(i));
  }
  for (size_t x = 0; x < arena_roots.size(); ++x) {
    for (size_t y = x + 1; y < arena_roots.size(); ++y) {
      const int a = arena_roots[x], b = arena_roots[y];
      if (!live[a].Overlaps(live[b])) continue;
      const int64_t a_end = plan.offsets[a] + static_cast<int64_t>(uses[a].bytes);
      const int64_t b_end = plan.offsets[b] + static_cast<int64_t>(uses[b].bytes);
      if (plan.offsets[a] < b_end && plan.offsets[b] < a_end && uses[a].bytes > 0 && uses[b].bytes > 0) {
        return absl::InternalError(absl::StrCat("buffers ", a, " [", plan.offsets[a], ",", a_end, ") steps ",
                                                live[a].first, "..", live[a].last, " and ", b, " [",
                                                plan.offsets[b], ",", b_end, ") steps ", live[b].first, "..",
                                                live[b].last, " are live together and overlap"));
      }
    }
  }
  return absl::OkStatus();
}

std::string FormatBytes(size_t bytes) {
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  if (bytes < (size_t{1} << 20)) return absl::StrFormat("%.1f KiB", bytes / 1024.0);
  if (bytes < (size_t{1} << 30)) return absl::StrFormat("%.2f MiB", bytes / 1048576.0);
  return absl::StrFormat("%.2f GiB", bytes / 1073741824.0);
}

std::string DescribeMemoryPlan(const MemoryPlan& plan) {
  const double percent = plan.no_reuse_bytes == 0 ? 100.0 : 100.0 * plan.arena_bytes / plan.no_reuse_bytes;
  return absl::StrFormat("arena %s (no reuse: %s, %.0f%%)", FormatBytes(plan.arena_bytes),
                         FormatBytes(plan.no_reuse_bytes), percent);
}

}  // namespace convoy::runtime
