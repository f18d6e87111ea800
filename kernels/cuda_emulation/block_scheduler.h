// Runs one thread block of an emulated CUDA kernel: every thread is a Fiber, all run by the calling OS thread.
//
// Threads run one at a time, each until it reaches a barrier (__syncthreads), a warp collective (__shfl_sync, mma,
// ldmatrix, ...) or its end. When no thread can run:
//   - waiting warp collectives whose named lanes have all arrived are resolved and their lanes run again;
//   - if every live thread waits at the same __syncthreads, the barrier opens;
//   - anything else (a thread exited or waits elsewhere while others wait at a barrier, a lane named in a mask never
//     arrives) is a divergence bug: RunBlock returns an error naming the threads, lanes and source lines. No hang.
// Shared memory is per block, poisoned with 0xFF bytes (NaN for float, half and bfloat16) when the block starts, and
// under ASAN everything outside the declared arrays is poisoned for the sanitizer too. It is laid out as the hardware
// lays it out: the static arrays first (from shared address 0, in declaration order), the dynamic shared memory after
// them, its base aligned to 16 bytes and no more (a kernel that needs its stages 128- or 1024-byte aligned must round
// the pointer up itself). Static arrays are declared as the kernel runs, so the dynamic base of a block comes from
// the static size the kernel's earlier blocks declared (kept per kernel for the process); in the first block of a
// kernel whose dynamic memory is asked for before its static arrays are declared, the base is what is declared so
// far and later static arrays go after the dynamic memory.
//
// Device-side builtins (device_builtins.h, tensor_core_emulation.h) reach the running block through
// BlockScheduler::Current(). One BlockScheduler per OS thread; it keeps its fiber stacks and shared-memory arena for
// reuse by every later block.
#ifndef CONVOY_KERNELS_CUDA_EMULATION_BLOCK_SCHEDULER_H_
#define CONVOY_KERNELS_CUDA_EMULATION_BLOCK_SCHEDULER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cuda_emulation/fiber.h"
#include "kernels/cuda_emulation/schedule.h"
#include "kernels/cuda_emulation/vector_types.h"

namespace convoy::cuda_emulation {

// Device limits the emulation enforces (those of an sm_90 part).
inline constexpr int kWarpSize = 32;
inline constexpr int kWarpgroupSize = 128;  // 4 consecutive warps, the first at a warp index divisible by 4
inline constexpr int kMaxThreadsPerBlock = 1024;
inline constexpr size_t kMaxStaticSharedBytes = 48 * 1024;
inline constexpr size_t kDefaultMaxDynamicSharedBytes = 48 * 1024;
inline constexpr size_t kMaxSharedBytesPerBlock = 227 * 1024;

// Where in the kernel source a thread waits (file is a string literal from __builtin_FILE()).
struct SourceLocation {
  const char* file = "?";
  int line = 0;
  std::string ToString() const;
};

// The coordinates device code reads through threadIdx, blockIdx, blockDim and gridDim. The scheduler rewrites
// thread_idx before it resumes each fiber; they never move between OS threads.
struct ThreadCoordinates {
  uint3 thread_idx{0, 0, 0};
  uint3 block_idx{0, 0, 0};
  dim3 block_dim;
  dim3 grid_dim;
};
inline thread_local ThreadCoordinates tls_coordinates;

// A warp collective kind: `resolve` runs once when every lane named in the mask has arrived. `payloads[lane]` is the
// lane's own argument/result block (nullptr for lanes outside the mask). It returns an error message, or "" if fine.
struct WarpCollectiveKind {
  const char* name;
  std::string (*resolve)(void* const payloads[kWarpSize], unsigned mask);
};

// A warpgroup collective (wgmma.mma_async, setmaxnreg): `resolve` runs once when all 128 threads of the warpgroup
// (warps 4w..4w+3) wait at the same collective; payloads[i] is thread 128w + i's. Returns an error message or "".
struct WarpgroupCollectiveKind {
  const char* name;
  std::string (*resolve)(void* const payloads[kWarpgroupSize]);
};

// Per-block state of an emulated feature that lives beside the scheduler (the Hopper emulation's mbarriers, bulk
// copies, wgmma groups). One instance per BlockScheduler, created on first use, told when each block starts.
class BlockExtension {
 public:
  virtual ~BlockExtension() = default;
  // A new block of `thread_count` threads starts (also called right after creation, mid-block).
  virtual void StartBlock(int thread_count) = 0;
  // No thread can run: complete asynchronous work (bulk copies landing). Returns true if anything changed, or an
  // error the block fails with.
  virtual absl::StatusOr<bool> ProgressWhenQuiet() { return false; }
  // Every thread exited: anything still in flight is an error.
  virtual absl::Status FinishBlock() { return absl::OkStatus(); }
  // Extra lines for a stall report (e.g. the state of each mbarrier).
  virtual std::string DescribeState() const { return ""; }
  // Thread `thread` ran and suspended (or exited): whatever it wrote to shared memory in that slice is its own.
  virtual void ThreadSuspended(int thread) { (void)thread; }
};

// The body every thread of the grid runs: invoke(closure).
struct KernelBody {
  void (*invoke)(const void* closure) = nullptr;
  const void* closure = nullptr;
};

struct BlockLaunch {
  const void* kernel = nullptr;  // identity: the shared-memory layout learned from its earlier blocks
  dim3 grid_dim;
  dim3 block_dim;
  uint3 block_idx{0, 0, 0};
  size_t dynamic_shared_bytes = 0;
  Schedule schedule;
  KernelBody body;
};

// A cp.async copy issued but not yet waited for (it lands in shared memory at cp.async.wait_group).
struct PendingAsyncCopy {
  void* destination;
  unsigned char bytes[16];
  int size;
  int64_t group;  // -1 until cp.async.commit_group
};

class BlockScheduler {
 public:
  // The scheduler of the calling OS thread (created on first use).
  static BlockScheduler& ForThisThread();
  // The scheduler running the calling fiber; aborts if called outside a kernel.
  static BlockScheduler& Current();
  ~BlockScheduler();
  BlockScheduler(const BlockScheduler&) = delete;
  BlockScheduler& operator=(const BlockScheduler&) = delete;

  // Runs every thread of the block to completion or to the first bug found.
  absl::Status RunBlock(const BlockLaunch& launch);

  // ------------------------------------------------------------- called from a running emulated thread (a fiber)
  enum class BarrierReduction { kNone, kCount, kAnd, kOr };
  // __syncthreads() and its _count/_and/_or forms; returns the reduction (0 for kNone).
  int SyncThreads(SourceLocation where, BarrierReduction reduction, int predicate);
  // Waits until every lane in `mask` arrived at the same kind of collective, then kind.resolve ran.
  void WarpCollective(const WarpCollectiveKind& kind, unsigned mask, void* payload, SourceLocation where);
  // Waits until all 128 threads of the caller's warpgroup arrived at the same kind of collective at the same source
  // line, then kind.resolve ran. Fails at once if the block does not hold the caller's whole warpgroup.
  void WarpgroupCollective(const WarpgroupCollectiveKind& kind, void* payload, SourceLocation where);
  // Suspends the calling thread until ready(context) is true (checked whenever no thread can run); describe(context)
  // says what it waits for in a stall report.
  void BlockUntil(bool (*ready)(const void*), const void* context, std::string (*describe)(const void*),
                  SourceLocation where);
  // Threads whose BlockUntil condition now holds (e.g. a phase the caller just completed) become runnable and run
  // before the caller continues: the most adversarial interleaving for the code after the caller's release.
  void WakeReadyThreadsAndYield();
  // Lanes of the caller's warp that exist and have not exited (what __activemask() reports here).
  unsigned LiveLanesOfCurrentWarp() const;
  int current_lane() const;
  int current_thread() const;  // linear thread index in the block
  int thread_count() const { return thread_count_; }
  const void* kernel() const { return launch_.kernel; }
  // The per-scheduler instance of extension type E (created with E() on first use and started for this block).
  template <typename E>
  E& Extension() {
    static const char key = 0;
    for (auto& [k, extension] : extensions_) {
      if (k == &key) return static_cast<E&>(*extension);
    }
    extensions_.emplace_back(&key, std::make_unique<E>());
    extensions_.back().second->StartBlock(thread_count_);
    return static_cast<E&>(*extensions_.back().second);
  }
  // Stops the block: RunBlock returns `message` (prefixed with the thread's coordinates). Never returns, so the
  // calling fiber's frames are never unwound: build the message in a named local and move it in, so no temporary
  // std::string of the caller is left holding heap memory (LeakSanitizer would report it).
  [[noreturn]] void FailCurrentThread(std::string&& message);

  // Per-block storage for the static __shared__ array declared at `key` (CONVOY_SHARED_ARRAY). All threads of a
  // block get the same bytes, poisoned when first declared in the block.
  void* StaticShared(const void* key, size_t bytes, size_t alignment, SourceLocation where);
  void* DynamicShared();
  // True if [address, address + bytes) lies inside this block's shared memory.
  bool IsShared(const void* address, size_t bytes) const;
  // The shared-window address of a pointer into shared memory (what cvta.to.shared gives; the arena starts at a
  // 1024-byte aligned address) and back; SharedPointer returns nullptr if [address, address + bytes) is outside.
  uint32_t SharedAddress(const void* pointer) const;
  unsigned char* SharedPointer(uint32_t address, size_t bytes) const;
  // Bytes of shared memory declared so far in this block (dynamic plus static arrays).
  size_t shared_bytes_in_use() const { return shared_cursor_; }
  unsigned char* shared_arena() const { return shared_arena_; }

  // cp.async bookkeeping of the current thread.
  std::vector<PendingAsyncCopy>& pending_async_copies();
  int64_t& committed_async_groups();

 private:
  struct EmulatedThread;

  BlockScheduler();
  static void ThreadMain(void* thread);

  absl::Status PrepareBlock(const BlockLaunch& launch);
  void ResetSharedMemory(size_t dynamic_bytes);
  void BuildRunOrder(int round);
  absl::Status RunUntilQuiet();
  // Resolves every complete warp collective; returns true if any lane can run again.
  absl::StatusOr<bool> ResolveWarpCollectives();
  absl::StatusOr<bool> ResolveWarp(int warp);
  absl::StatusOr<bool> ResolveWarpgroupCollectives();
  bool ReleaseBlockedThreads();
  bool RunThread(int index);  // false if the thread failed the block
  absl::Status OpenBarrier();
  absl::Status DescribeStall() const;
  std::string DescribeThread(const EmulatedThread& thread) const;
  void SuspendCurrent();

  FiberStackPool stacks_;
  std::vector<std::unique_ptr<EmulatedThread>> threads_;
  std::vector<int> run_order_;
  std::vector<int> urgent_;  // woken by WakeReadyThreadsAndYield, run next
  int thread_count_ = 0;
  int warp_count_ = 0;
  EmulatedThread* current_ = nullptr;
  BlockLaunch launch_;
  std::string failure_;  // set by FailCurrentThread
  bool failed_ = false;

  // Shared memory: static arrays from 0 to static_cursor_, then the dynamic part at dynamic_offset_ (16-byte aligned),
  // then static arrays that did not fit below it (first block of a kernel only). shared_cursor_ is the end of it all.
  static constexpr size_t kDynamicUnplaced = ~size_t{0};
  void PlaceDynamicShared(size_t offset);
  unsigned char* shared_arena_ = nullptr;
  size_t shared_capacity_ = 0;
  size_t shared_cursor_ = 0;
  size_t static_cursor_ = 0;
  size_t static_layout_bytes_ = 0;  // where the static arrays end when all sit below the dynamic part (learned)
  size_t dynamic_offset_ = kDynamicUnplaced;
  size_t static_shared_bytes_ = 0;
  struct StaticSlot {
    const void* key;
    size_t offset;
  };
  std::vector<StaticSlot> static_slots_;
  std::vector<std::pair<const void*, std::unique_ptr<BlockExtension>>> extensions_;
};

}  // namespace convoy::cuda_emulation

#endif  // CONVOY_KERNELS_CUDA_EMULATION_BLOCK_SCHEDULER_H_
