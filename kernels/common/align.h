// Rounding byte counts up to an alignment: workspace carving, arenas and allocations (64 bytes: a cache line and
// an AVX-512 vector).
#ifndef CONVOY_KERNELS_COMMON_ALIGN_H_
#define CONVOY_KERNELS_COMMON_ALIGN_H_

#include <cstddef>

namespace convoy {

inline constexpr size_t kCacheLineBytes = 64;

// The smallest multiple of `alignment` (> 0) that is at least `value`.
constexpr size_t AlignUp(size_t value, size_t alignment = kCacheLineBytes) {
  return (value + alignment - 1) / alignment * alignment;
}

}  // namespace convoy

#endif  // CONVOY_KERNELS_COMMON_ALIGN_H_
