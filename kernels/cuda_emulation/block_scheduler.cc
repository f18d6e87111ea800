// BlockScheduler: the fiber-per-thread block runner, barriers, warp rendezvous and shared memory (see the header).
#include "kernels/cuda_emulation/block_scheduler.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <numeric>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/common/align.h"
#include "kernels/common/status_macros.h"
#include "kernels/cuda_emulation/sanitizers.h"

#if CONVOY_EMULATION_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace convoy::cuda_emulation {
namespace {

enum class ThreadState : uint8_t { kRunnable, kAtBarrier, kAtWarpCollective, kAtWarpgroupCollective, kBlocked, kExited };

// Bytes left poisoned between static shared arrays under ASAN, so an overrun into the next array is reported.
constexpr size_t kSharedRedzoneBytes = CONVOY_EMULATION_ASAN ? 64 : 0;
constexpr size_t kSharedArenaBytes = kMaxSharedBytesPerBlock + 64 * 1024;  // room for alignment and redzones
constexpr unsigned char kSharedPoisonByte = 0xFF;                          // NaN in float, half and bfloat16

thread_local BlockScheduler* tls_running_scheduler = nullptr;

// The static shared bytes each kernel's blocks declared (the dynamic base of its later blocks), process-wide: blocks
// of one grid run on several OS threads.
class StaticLayouts {
 public:
  static StaticLayouts& Get() {
    static StaticLayouts* layouts = new StaticLayouts();
    return *layouts;
  }
  bool Lookup(const void* kernel, size_t* bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = bytes_.find(kernel);
    if (it == bytes_.end()) return false;
    *bytes = it->second;
    return true;
  }
  void Learn(const void* kernel, size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    size_t& known = bytes_[kernel];
    known = std::max(known, bytes);
  }

 private:
  std::mutex mu_;
  std::unordered_map<const void*, size_t> bytes_;
};


// Where the dynamic part starts after `static_bytes` of static arrays: the next 16-byte boundary (after an ASAN
// redzone); at 0 when there are none, as on the hardware.
size_t DynamicOffsetAfter(size_t static_bytes) {
  return static_bytes == 0 ? 0 : AlignUp(static_bytes + kSharedRedzoneBytes, 16);
}

std::string Coordinates(uint3 v) { return absl::StrCat("(", v.x, ",", v.y, ",", v.z, ")"); }

bool SameLocation(const SourceLocation& a, const SourceLocation& b) {
  return a.line == b.line && (a.file == b.file || std::strcmp(a.file, b.file) == 0);
}

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void PoisonForAsan(const void* address, size_t bytes) {
#if CONVOY_EMULATION_ASAN
  __asan_poison_memory_region(address, bytes);
#else
  (void)address, (void)bytes;
#endif
}

void UnpoisonForAsan(const void* address, size_t bytes) {
#if CONVOY_EMULATION_ASAN
  __asan_unpoison_memory_region(address, bytes);
#else
  (void)address, (void)bytes;
#endif
}

}  // namespace

std::string SourceLocation::ToString() const { return absl::StrCat(file, ":", line); }

struct BlockScheduler::EmulatedThread {
  Fiber fiber;
  BlockScheduler* scheduler = nullptr;
  uint3 thread_idx{0, 0, 0};
  int linear_id = 0;
  int warp = 0;
  int lane = 0;
  ThreadState state = ThreadState::kRunnable;
  SourceLocation waiting_at;
  // At a barrier.
  BarrierReduction reduction = BarrierReduction::kNone;
  int predicate = 0;
  int barrier_result = 0;
  // At a warp collective.
  const WarpCollectiveKind* collective = nullptr;
  unsigned collective_mask = 0;
  void* collective_payload = nullptr;
  // At a warpgroup collective.
  const WarpgroupCollectiveKind* warpgroup_collective = nullptr;
  void* warpgroup_payload = nullptr;
  // Blocked (BlockUntil).
  bool (*blocked_ready)(const void*) = nullptr;
  const void* blocked_context = nullptr;
  std::string (*blocked_describe)(const void*) = nullptr;
  // cp.async state.
  std::vector<PendingAsyncCopy> async_copies;
  int64_t committed_async_groups = 0;
};

BlockScheduler& BlockScheduler::ForThisThread() {
  thread_local std::unique_ptr<BlockScheduler> scheduler(new BlockScheduler());
  return *scheduler;
}

BlockScheduler& BlockScheduler::Current() {
  if (tls_running_scheduler == nullptr || tls_running_scheduler->current_ == nullptr) {
    std::fprintf(stderr, "CUDA emulation: a device builtin was called outside a running kernel\n");
    std::abort();
  }
  return *tls_running_scheduler;
}

BlockScheduler::BlockScheduler() : stacks_(DefaultFiberStackBytes()) {
  shared_capacity_ = kSharedArenaBytes;
  shared_arena_ = static_cast<unsigned char*>(std::aligned_alloc(1024, shared_capacity_));
}

BlockScheduler::~BlockScheduler() {
  UnpoisonForAsan(shared_arena_, shared_capacity_);
  std::free(shared_arena_);
}

void BlockScheduler::ThreadMain(void* argument) {
  EmulatedThread* thread = static_cast<EmulatedThread*>(argument);
  const KernelBody& body = thread->scheduler->launch_.body;
  body.invoke(body.closure);
}

absl::Status BlockScheduler::RunBlock(const BlockLaunch& launch) {
  CONVOY_RETURN_IF_ERROR(PrepareBlock(launch));
  tls_running_scheduler = this;
  absl::Status status = RunUntilQuiet();
  tls_running_scheduler = nullptr;
  current_ = nullptr;
  if (launch.kernel != nullptr) StaticLayouts::Get().Learn(launch.kernel, static_layout_bytes_);
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat("block ", Coordinates(launch.block_idx), " of grid ",
                                                    Coordinates(launch.grid_dim), ": ", status.message()));
  }
  return status;
}

absl::Status BlockScheduler::PrepareBlock(const BlockLaunch& launch) {
  launch_ = launch;
  failed_ = false;
  urgent_.clear();
  failure_.clear();
  const dim3 block = launch.block_dim;
  thread_count_ = static_cast<int>(block.x * block.y * block.z);
  warp_count_ = (thread_count_ + kWarpSize - 1) / kWarpSize;
  CONVOY_RETURN_IF_ERROR(stacks_.Reserve(thread_count_));
  while (static_cast<int>(threads_.size()) < thread_count_) threads_.push_back(std::make_unique<EmulatedThread>());
  for (int id = 0; id < thread_count_; ++id) {
    EmulatedThread& thread = *threads_[id];
    thread.scheduler = this;
    thread.linear_id = id;
    thread.thread_idx = uint3{id % block.x, (id / block.x) % block.y, id / (block.x * block.y)};
    thread.warp = id / kWarpSize;
    thread.lane = id % kWarpSize;
    thread.state = ThreadState::kRunnable;
    thread.async_copies.clear();
    thread.committed_async_groups = 0;
    thread.fiber.Start(&stacks_.stack(id), &BlockScheduler::ThreadMain, &thread);
  }
  tls_coordinates.block_idx = launch.block_idx;
  tls_coordinates.block_dim = launch.block_dim;
  tls_coordinates.grid_dim = launch.grid_dim;
  ResetSharedMemory(launch.dynamic_shared_bytes);
  for (auto& entry : extensions_) entry.second->StartBlock(thread_count_);
  return absl::OkStatus();
}

void BlockScheduler::ResetSharedMemory(size_t dynamic_bytes) {
  (void)dynamic_bytes;  // placed by PlaceDynamicShared
  PoisonForAsan(shared_arena_, shared_capacity_);
  shared_cursor_ = 0;
  static_cursor_ = 0;
  static_layout_bytes_ = 0;
  static_shared_bytes_ = 0;
  static_slots_.clear();
  dynamic_offset_ = kDynamicUnplaced;
  size_t known_static = 0;
  if (launch_.kernel != nullptr && StaticLayouts::Get().Lookup(launch_.kernel, &known_static)) {
    PlaceDynamicShared(DynamicOffsetAfter(known_static));
  }
}

void BlockScheduler::PlaceDynamicShared(size_t offset) {
  dynamic_offset_ = offset;
  const size_t bytes = launch_.dynamic_shared_bytes;
  UnpoisonForAsan(shared_arena_ + offset, bytes);
  std::memset(shared_arena_ + offset, kSharedPoisonByte, bytes);
  shared_cursor_ = std::max(shared_cursor_, offset + bytes);
}

void BlockScheduler::BuildRunOrder(int round) {
  run_order_.resize(thread_count_);
  std::iota(run_order_.begin(), run_order_.end(), 0);
  switch (launch_.schedule.order) {
    case ScheduleOrder::kForward:
      break;
    case ScheduleOrder::kReverse:
      std::reverse(run_order_.begin(), run_order_.end());
      break;
    case ScheduleOrder::kSeededRandom: {
      const uint3 b = launch_.block_idx;
      uint64_t state = launch_.schedule.seed ^ (uint64_t{b.x} << 40) ^ (uint64_t{b.y} << 20) ^ b.z ^
                       (static_cast<uint64_t>(round) * 0xD1B54A32D192ED03ull);
      for (int i = thread_count_ - 1; i > 0; --i) {
        std::swap(run_order_[i], run_order_[SplitMix64(state) % static_cast<uint64_t>(i + 1)]);
      }
      break;
    }
    case ScheduleOrder::kLaggingWarp: {
      const int lagging = static_cast<int>(launch_.schedule.seed);
      std::stable_partition(run_order_.begin(), run_order_.end(),
                            [lagging](int id) { return id / kWarpSize != lagging; });
      break;
    }
  }
}

// One loop: run every runnable thread once, resolve warp collectives, open a barrier when all wait at it, and
// diagnose anything else as a stall. Kept whole because the three steps share the quiet-state reasoning.
absl::Status BlockScheduler::RunUntilQuiet() {
  int round = 0;
  BuildRunOrder(round);
  for (;;) {
    for (int index : run_order_) {
      if (!RunThread(index)) return absl::InternalError(failure_);
      // Threads woken by the one that just ran (WakeReadyThreadsAndYield) run next, before the pass goes on.
      while (!urgent_.empty()) {
        const int woken = urgent_.back();
        urgent_.pop_back();
        if (!RunThread(woken)) return absl::InternalError(failure_);
      }
    }
    CONVOY_ASSIGN_OR_RETURN(bool lanes_released, ResolveWarpCollectives());
    if (lanes_released) continue;
    CONVOY_ASSIGN_OR_RETURN(bool warpgroups_released, ResolveWarpgroupCollectives());
    if (warpgroups_released) continue;
    if (ReleaseBlockedThreads()) continue;
    bool progressed = false;
    for (auto& entry : extensions_) {
      CONVOY_ASSIGN_OR_RETURN(bool progress, entry.second->ProgressWhenQuiet());
      progressed |= progress;
    }
    if (progressed) continue;
    int exited = 0, at_barrier = 0;
    for (int id = 0; id < thread_count_; ++id) {
      exited += threads_[id]->state == ThreadState::kExited;
      at_barrier += threads_[id]->state == ThreadState::kAtBarrier;
    }
    if (exited == thread_count_) {
      for (auto& entry : extensions_) CONVOY_RETURN_IF_ERROR(entry.second->FinishBlock());
      return absl::OkStatus();
    }
    if (at_barrier != thread_count_) return DescribeStall();
    CONVOY_RETURN_IF_ERROR(OpenBarrier());
    BuildRunOrder(++round);
  }
}

bool BlockScheduler::RunThread(int index) {
  EmulatedThread& thread = *threads_[index];
  if (thread.state != ThreadState::kRunnable) return true;
  current_ = &thread;
  tls_coordinates.thread_idx = thread.thread_idx;
  thread.fiber.Resume();
  current_ = nullptr;
  if (failed_) return false;
  for (auto& entry : extensions_) entry.second->ThreadSuspended(index);
  if (thread.fiber.finished()) thread.state = ThreadState::kExited;
  return true;
}

absl::Status BlockScheduler::OpenBarrier() {
  const EmulatedThread& first = *threads_[0];
  int count = 0;
  for (int id = 0; id < thread_count_; ++id) {
    const EmulatedThread& thread = *threads_[id];
    if (!SameLocation(thread.waiting_at, first.waiting_at) || thread.reduction != first.reduction) {
      return absl::InternalError(absl::StrCat(
          "divergent __syncthreads: thread ", Coordinates(first.thread_idx), " waits at the barrier at ",
          first.waiting_at.ToString(), " but thread ", Coordinates(thread.thread_idx), " waits at the one at ",
          thread.waiting_at.ToString(), "; every thread of a block must reach the same barrier"));
    }
    count += thread.predicate != 0;
  }
  int result = 0;
  switch (first.reduction) {
    case BarrierReduction::kNone:
      break;
    case BarrierReduction::kCount:
      result = count;
      break;
    case BarrierReduction::kAnd:
      result = count == thread_count_;
      break;
    case BarrierReduction::kOr:
      result = count > 0;
      break;
  }
  for (int id = 0; id < thread_count_; ++id) {
    threads_[id]->barrier_result = result;
    threads_[id]->state = ThreadState::kRunnable;
  }
  return absl::OkStatus();
}

std::string BlockScheduler::DescribeThread(const EmulatedThread& thread) const {
  switch (thread.state) {
    case ThreadState::kRunnable:
      return "runnable";
    case ThreadState::kExited:
      return "exited";
    case ThreadState::kAtBarrier:
      return absl::StrCat("waits at __syncthreads (", thread.waiting_at.ToString(), ")");
    case ThreadState::kAtWarpCollective:
      return absl::StrFormat("waits at %s (%s) with mask 0x%08x", thread.collective->name, thread.waiting_at.ToString(),
                             thread.collective_mask);
    case ThreadState::kAtWarpgroupCollective:
      return absl::StrFormat("waits at %s (%s) for its whole warpgroup (warps %d-%d)",
                             thread.warpgroup_collective->name, thread.waiting_at.ToString(), thread.warp / 4 * 4,
                             thread.warp / 4 * 4 + 3);
    case ThreadState::kBlocked:
      return absl::StrCat("waits for ", thread.blocked_describe(thread.blocked_context), " (",
                          thread.waiting_at.ToString(), ")");
  }
  return "?";
}

// Summarises who waits where as runs of consecutive threads with the same state ("threads 0-15 exited; ...").
absl::Status BlockScheduler::DescribeStall() const {
  bool any_collective = false, any_exited = false, any_blocked = false;
  std::string states;
  int groups = 0;
  for (int begin = 0; begin < thread_count_;) {
    const std::string what = DescribeThread(*threads_[begin]);
    int end = begin + 1;
    while (end < thread_count_ && DescribeThread(*threads_[end]) == what) ++end;
    any_collective |= threads_[begin]->state == ThreadState::kAtWarpCollective;
    any_exited |= threads_[begin]->state == ThreadState::kExited;
    any_blocked |= threads_[begin]->state == ThreadState::kBlocked ||
                   threads_[begin]->state == ThreadState::kAtWarpgroupCollective;
    if (groups++ < 12) {
      absl::StrAppend(&states, groups > 1 ? "; " : "", "threads ", begin,
                      end - begin > 1 ? absl::StrCat("-", end - 1) : "", " ", what);
    }
    begin = end;
  }
  if (groups > 12) absl::StrAppend(&states, "; ... (", groups - 12, " more groups)");
  const char* headline =
      any_collective ? "warp collective cannot complete (a lane named in its mask never arrives)"
      : any_blocked  ? "deadlock: threads wait for an mbarrier phase or a warpgroup collective that cannot complete"
      : any_exited   ? "divergent __syncthreads: some threads exited while others wait at a barrier"
                     : "threads cannot proceed";
  std::string extra;
  for (const auto& entry : extensions_) {
    const std::string state = entry.second->DescribeState();
    if (!state.empty()) absl::StrAppend(&extra, "; ", state);
  }
  return absl::InternalError(absl::StrCat(headline, ": ", states, extra));
}

absl::StatusOr<bool> BlockScheduler::ResolveWarpCollectives() {
  bool released = false;
  for (int warp = 0; warp < warp_count_; ++warp) {
    CONVOY_ASSIGN_OR_RETURN(bool warp_released, ResolveWarp(warp));
    released |= warp_released;
  }
  return released;
}

absl::StatusOr<bool> BlockScheduler::ResolveWarpgroupCollectives() {
  bool released = false;
  for (int group = 0; group * kWarpgroupSize < thread_count_; ++group) {
    const int first = group * kWarpgroupSize;
    if (first + kWarpgroupSize > thread_count_) break;  // WarpgroupCollective refuses partial warpgroups
    const EmulatedThread& leader = *threads_[first];
    int waiting = 0;
    for (int i = 0; i < kWarpgroupSize; ++i) waiting += threads_[first + i]->state == ThreadState::kAtWarpgroupCollective;
    if (waiting != kWarpgroupSize) continue;
    void* payloads[kWarpgroupSize] = {};
    for (int i = 0; i < kWarpgroupSize; ++i) {
      const EmulatedThread& other = *threads_[first + i];
      if (other.warpgroup_collective != leader.warpgroup_collective ||
          !SameLocation(other.waiting_at, leader.waiting_at)) {
        return absl::InternalError(absl::StrFormat(
            "warpgroup %d (warps %d-%d): thread %d calls %s (%s) but thread %d calls %s (%s); all 128 threads of a "
            "warpgroup must execute the same .sync.aligned instruction",
            group, 4 * group, 4 * group + 3, first, leader.warpgroup_collective->name, leader.waiting_at.ToString(),
            first + i, other.warpgroup_collective->name, other.waiting_at.ToString()));
      }
      payloads[i] = other.warpgroup_payload;
    }
    std::string error = leader.warpgroup_collective->resolve(payloads);
    if (!error.empty()) {
      return absl::InternalError(absl::StrFormat("warpgroup %d (warps %d-%d): %s (%s): %s", group, 4 * group,
                                                 4 * group + 3, leader.warpgroup_collective->name,
                                                 leader.waiting_at.ToString(), error));
    }
    for (int i = 0; i < kWarpgroupSize; ++i) threads_[first + i]->state = ThreadState::kRunnable;
    released = true;
  }
  return released;
}

bool BlockScheduler::ReleaseBlockedThreads() {
  bool released = false;
  for (int id = 0; id < thread_count_; ++id) {
    EmulatedThread& thread = *threads_[id];
    if (thread.state == ThreadState::kBlocked && thread.blocked_ready(thread.blocked_context)) {
      thread.state = ThreadState::kRunnable;
      released = true;
    }
  }
  return released;
}

absl::StatusOr<bool> BlockScheduler::ResolveWarp(int warp) {
  const int first_id = warp * kWarpSize;
  const int lanes = std::min(kWarpSize, thread_count_ - first_id);
  unsigned waiting = 0;
  for (int lane = 0; lane < lanes; ++lane) {
    if (threads_[first_id + lane]->state == ThreadState::kAtWarpCollective) waiting |= 1u << lane;
  }
  bool released = false;
  unsigned unvisited = waiting;
  while (unvisited != 0) {
    const EmulatedThread& leader = *threads_[first_id + __builtin_ctz(unvisited)];
    const unsigned mask = leader.collective_mask;
    unvisited &= ~mask;
    if ((mask & waiting) != mask) continue;  // a named lane has not arrived yet
    void* payloads[kWarpSize] = {};
    for (int lane = 0; lane < lanes; ++lane) {
      if ((mask >> lane & 1u) == 0) continue;
      const EmulatedThread& other = *threads_[first_id + lane];
      if (other.collective != leader.collective || other.collective_mask != mask) {
        return absl::InternalError(absl::StrFormat(
            "warp %d: lane %d calls %s (%s) with mask 0x%08x but lane %d calls %s (%s) with mask 0x%08x; the lanes "
            "named in a mask must call the same collective with the same mask",
            warp, leader.lane, leader.collective->name, leader.waiting_at.ToString(), mask, lane,
            other.collective->name, other.waiting_at.ToString(), other.collective_mask));
      }
      payloads[lane] = other.collective_payload;
    }
    std::string error = leader.collective->resolve(payloads, mask);
    if (!error.empty()) {
      return absl::InternalError(absl::StrFormat("warp %d: %s (%s) with mask 0x%08x: %s", warp, leader.collective->name,
                                                 leader.waiting_at.ToString(), mask, error));
    }
    for (int lane = 0; lane < lanes; ++lane) {
      if (mask >> lane & 1u) threads_[first_id + lane]->state = ThreadState::kRunnable;
    }
    released = true;
  }
  return released;
}

// ------------------------------------------------------------------------------------- called from emulated threads

void BlockScheduler::SuspendCurrent() { current_->fiber.SuspendToOwner(); }

int BlockScheduler::SyncThreads(SourceLocation where, BarrierReduction reduction, int predicate) {
  EmulatedThread& thread = *current_;
  thread.state = ThreadState::kAtBarrier;
  thread.waiting_at = where;
  thread.reduction = reduction;
  thread.predicate = predicate;
  SuspendCurrent();
  return thread.barrier_result;
}

void BlockScheduler::WarpCollective(const WarpCollectiveKind& kind, unsigned mask, void* payload,
                                    SourceLocation where) {
  EmulatedThread& thread = *current_;
  const int lanes = std::min(kWarpSize, thread_count_ - thread.warp * kWarpSize);
  const unsigned existing = lanes == kWarpSize ? 0xFFFFFFFFu : (1u << lanes) - 1;
  if ((mask >> thread.lane & 1u) == 0) {
    std::string message = absl::StrFormat("%s (%s): mask 0x%08x does not name the calling lane %d", kind.name,
                                          where.ToString(), mask, thread.lane);
    FailCurrentThread(std::move(message));
  }
  if ((mask & ~existing) != 0) {
    std::string message = absl::StrFormat(
        "%s (%s): mask 0x%08x names lanes that do not exist (warp %d has %d lanes: the block has %d threads)",
        kind.name, where.ToString(), mask, thread.warp, lanes, thread_count_);
    FailCurrentThread(std::move(message));
  }
  thread.state = ThreadState::kAtWarpCollective;
  thread.waiting_at = where;
  thread.collective = &kind;
  thread.collective_mask = mask;
  thread.collective_payload = payload;
  SuspendCurrent();
}

void BlockScheduler::WarpgroupCollective(const WarpgroupCollectiveKind& kind, void* payload, SourceLocation where) {
  EmulatedThread& thread = *current_;
  const int group = thread.linear_id / kWarpgroupSize;
  if ((group + 1) * kWarpgroupSize > thread_count_) {
    std::string message = absl::StrFormat(
        "%s (%s) is a warpgroup instruction: warpgroup %d is warps %d-%d (threads %d-%d), but the block has only %d "
        "threads; a warpgroup is 4 consecutive warps whose first warp index is a multiple of 4",
        kind.name, where.ToString(), group, 4 * group, 4 * group + 3, group * kWarpgroupSize,
        group * kWarpgroupSize + kWarpgroupSize - 1, thread_count_);
    FailCurrentThread(std::move(message));
  }
  thread.state = ThreadState::kAtWarpgroupCollective;
  thread.waiting_at = where;
  thread.warpgroup_collective = &kind;
  thread.warpgroup_payload = payload;
  SuspendCurrent();
}

void BlockScheduler::BlockUntil(bool (*ready)(const void*), const void* context,
                                std::string (*describe)(const void*), SourceLocation where) {
  if (ready(context)) return;
  EmulatedThread& thread = *current_;
  thread.state = ThreadState::kBlocked;
  thread.waiting_at = where;
  thread.blocked_ready = ready;
  thread.blocked_context = context;
  thread.blocked_describe = describe;
  SuspendCurrent();
}

int BlockScheduler::current_thread() const { return current_->linear_id; }

void BlockScheduler::WakeReadyThreadsAndYield() {
  for (int id = 0; id < thread_count_; ++id) {
    EmulatedThread& thread = *threads_[id];
    if (thread.state == ThreadState::kBlocked && thread.blocked_ready(thread.blocked_context)) {
      thread.state = ThreadState::kRunnable;
      urgent_.push_back(id);
    }
  }
  if (urgent_.empty()) return;
  std::reverse(urgent_.begin(), urgent_.end());  // popped from the back: lowest thread first
  SuspendCurrent();
}

uint32_t BlockScheduler::SharedAddress(const void* pointer) const {
  return static_cast<uint32_t>(static_cast<const unsigned char*>(pointer) - shared_arena_);
}

unsigned char* BlockScheduler::SharedPointer(uint32_t address, size_t bytes) const {
  if (size_t{address} + bytes > shared_cursor_) return nullptr;
  return shared_arena_ + address;
}

unsigned BlockScheduler::LiveLanesOfCurrentWarp() const {
  const int first_id = current_->warp * kWarpSize;
  const int lanes = std::min(kWarpSize, thread_count_ - first_id);
  unsigned live = 0;
  for (int lane = 0; lane < lanes; ++lane) {
    if (threads_[first_id + lane]->state != ThreadState::kExited) live |= 1u << lane;
  }
  return live;
}

int BlockScheduler::current_lane() const { return current_->lane; }

void BlockScheduler::FailCurrentThread(std::string&& message) {
  {
    const std::string owned = std::move(message);  // leaves the caller's string without heap memory
    failure_ = absl::StrCat("thread ", Coordinates(current_->thread_idx), ": ", owned);
  }
  failed_ = true;
  SuspendCurrent();
  std::abort();  // a failed block is abandoned, never resumed
}

void* BlockScheduler::StaticShared(const void* key, size_t bytes, size_t alignment, SourceLocation where) {
  for (const StaticSlot& slot : static_slots_) {
    if (slot.key == key) return shared_arena_ + slot.offset;
  }
  alignment = std::max<size_t>(alignment, 16);
  // Below the dynamic part when it fits there (always, once the kernel's layout is known), after it otherwise.
  size_t offset = AlignUp(static_cursor_ + kSharedRedzoneBytes, alignment);
  const bool below = dynamic_offset_ == kDynamicUnplaced || offset + bytes + kSharedRedzoneBytes <= dynamic_offset_;
  if (!below) offset = AlignUp(shared_cursor_ + kSharedRedzoneBytes, alignment);
  static_layout_bytes_ = AlignUp(static_layout_bytes_ + kSharedRedzoneBytes, alignment) + bytes;
  if (static_shared_bytes_ + bytes > kMaxStaticSharedBytes) {
    std::string message = absl::StrCat("static shared array at ", where.ToString(), " (", bytes,
                                       " bytes) exceeds the static shared memory limit: ", static_shared_bytes_ + bytes,
                                       " > ", kMaxStaticSharedBytes, " bytes");
    FailCurrentThread(std::move(message));
  }
  if (launch_.dynamic_shared_bytes + static_shared_bytes_ + bytes > kMaxSharedBytesPerBlock ||
      offset + bytes > shared_capacity_) {
    std::string message = absl::StrCat("static shared array at ", where.ToString(), " (", bytes, " bytes) plus ",
                                       launch_.dynamic_shared_bytes, " dynamic bytes exceeds ", kMaxSharedBytesPerBlock,
                                       " bytes of shared memory per block");
    FailCurrentThread(std::move(message));
  }
  UnpoisonForAsan(shared_arena_ + offset, bytes);
  std::memset(shared_arena_ + offset, kSharedPoisonByte, bytes);
  static_slots_.push_back(StaticSlot{key, offset});
  if (below) static_cursor_ = offset + bytes;
  shared_cursor_ = std::max(shared_cursor_, offset + bytes);
  static_shared_bytes_ += bytes;
  return shared_arena_ + offset;
}

void* BlockScheduler::DynamicShared() {
  if (dynamic_offset_ == kDynamicUnplaced) PlaceDynamicShared(DynamicOffsetAfter(static_cursor_));
  return shared_arena_ + dynamic_offset_;
}

bool BlockScheduler::IsShared(const void* address, size_t bytes) const {
  const unsigned char* p = static_cast<const unsigned char*>(address);
  return p >= shared_arena_ && p + bytes <= shared_arena_ + shared_cursor_;
}

std::vector<PendingAsyncCopy>& BlockScheduler::pending_async_copies() { return current_->async_copies; }

int64_t& BlockScheduler::committed_async_groups() { return current_->committed_async_groups; }

}  // namespace convoy::cuda_emulation
