// A caching allocator for device memory: blocks freed by their DeviceAllocation go back to a per-size free list and
// are handed out again without cudaMalloc/cudaFree (both synchronize the whole device on real GPUs, so a server must
// not call them per request). Thread-safe.
//
//   CONVOY_ASSIGN_OR_RETURN(std::shared_ptr<CudaMemoryPool> pool, CudaMemoryPool::Create({.device = 0}));
//   CONVOY_ASSIGN_OR_RETURN(DeviceAllocation buffer, pool->Allocate(bytes));   // returns to the pool when destroyed
//
// Stream order: a block released by its owner may be handed out again at once, to work on any stream. Release a
// block only when the work that used it is done: Convoy's runtime does (each executor waits for its own stream at
// the end of every run and outlives its arena; the planner waits for the device before handing out a plan). A caller
// that frees a block with work still queued on it must synchronize first (or keep the allocation alive).
//
// Blocks are sized in `granularity` steps (rounded up), and a request takes a cached block of the same rounded size or
// up to `max_oversize_ratio` times larger (the smallest that fits). When cudaMalloc fails the pool frees its cached
// blocks and tries once more.
#ifndef CONVOY_KERNELS_CUDA_MEMORY_POOL_H_
#define CONVOY_KERNELS_CUDA_MEMORY_POOL_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "kernels/common/mutex.h"
#include "kernels/registry/device.h"

namespace convoy::cuda {

class CudaMemoryPool : public std::enable_shared_from_this<CudaMemoryPool> {
 public:
  struct Options {
    int device = 0;
    // Total bytes the pool may hold (in use + cached); 0 = unlimited. A request that would exceed it fails with
    // RESOURCE_EXHAUSTED instead of taking the whole GPU: give each model instance a budget.
    size_t max_total_bytes = 0;
    // Cached (free) bytes kept for reuse; blocks released beyond this are returned to CUDA. 0 = keep everything.
    size_t max_cached_bytes = 0;
    // Allocation sizes are rounded up to a multiple of this (and every block is at least this aligned, since
    // cudaMalloc aligns to 256 bytes). Coarser granularity reuses more, wastes more.
    size_t granularity = 512;
    // A request may take a cached block up to this many times its rounded size.
    double max_oversize_ratio = 1.25;
  };

  struct Stats {
    size_t in_use_bytes = 0;
    size_t cached_bytes = 0;
    size_t peak_bytes = 0;     // highest in_use + cached
    int64_t cuda_mallocs = 0;  // calls that reached cudaMalloc
    int64_t reuses = 0;        // requests served from the cache
  };

  static absl::StatusOr<std::shared_ptr<CudaMemoryPool>> Create(const Options& options);
  ~CudaMemoryPool();  // frees the cached blocks; blocks still in use keep the pool alive (their deleters own it)

  // A block of at least `bytes` (0 -> an empty allocation). RESOURCE_EXHAUSTED past max_total_bytes or when CUDA is
  // out of memory.
  absl::StatusOr<DeviceAllocation> Allocate(size_t bytes);
  // Returns every cached block to CUDA (e.g. after a model unloads).
  absl::Status ReleaseCached();
  Stats stats() const;
  const Options& options() const { return options_; }

 private:
  explicit CudaMemoryPool(const Options& options) : options_(options) {}
  void Release(void* data, size_t block_bytes);
  absl::Status FreeCachedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  mutable convoy::Mutex mu_;
  std::multimap<size_t, void*> free_blocks_ ABSL_GUARDED_BY(mu_);  // rounded size -> block
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace convoy::cuda

#endif  // CONVOY_KERNELS_CUDA_MEMORY_POOL_H_
