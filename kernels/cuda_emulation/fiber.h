// Cheap user-space context switching for the CUDA emulation: every emulated GPU thread of a block is a Fiber, and one
// OS thread (a BlockScheduler) switches between them at barriers and warp collectives.
//
// A switch is one Boost.Context `jump_fcontext` (a few dozen nanoseconds: callee-saved registers and the stack
// pointer, no signal mask, no syscall). Stacks come from a FiberStackPool that keeps them for reuse across blocks and
// launches, so running a block allocates nothing after the first one. Each stack has a PROT_NONE guard page below it:
// a stack overflow is a clean SIGSEGV, never silent corruption.
//
// Sanitizers: under AddressSanitizer every switch is announced with __sanitizer_start/finish_switch_fiber so ASAN
// tracks the right stack; under ThreadSanitizer each stack slot owns a TSAN fiber. Nothing here is thread-safe: a
// pool, its fibers and the scheduler that resumes them all belong to one OS thread.
#ifndef CONVOY_KERNELS_CUDA_EMULATION_FIBER_H_
#define CONVOY_KERNELS_CUDA_EMULATION_FIBER_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"

namespace convoy::cuda_emulation {

// One mmap'd stack with a guard page below it. Move-only; unmaps on destruction.
class FiberStack {
 public:
  static absl::StatusOr<FiberStack> Create(size_t usable_bytes);
  FiberStack(FiberStack&& other) noexcept;
  FiberStack& operator=(FiberStack&& other) noexcept;
  FiberStack(const FiberStack&) = delete;
  FiberStack& operator=(const FiberStack&) = delete;
  ~FiberStack();

  char* bottom() const { return usable_; }               // lowest usable address
  char* top() const { return usable_ + usable_bytes_; }  // stacks grow down from here
  size_t size() const { return usable_bytes_; }
  void* tsan_fiber() const { return tsan_fiber_; }

 private:
  FiberStack(char* mapping, size_t mapping_bytes, size_t usable_bytes);
  void Release();

  char* mapping_ = nullptr;
  size_t mapping_bytes_ = 0;
  char* usable_ = nullptr;
  size_t usable_bytes_ = 0;
  void* tsan_fiber_ = nullptr;
};

// A growing set of equally sized stacks, reused for ever (one pool per OS thread that runs blocks).
class FiberStackPool {
 public:
  explicit FiberStackPool(size_t stack_bytes) : stack_bytes_(stack_bytes) {}
  size_t stack_bytes() const { return stack_bytes_; }
  // Makes sure at least `count` stacks exist and returns stack `index` (< count).
  absl::Status Reserve(size_t count);
  FiberStack& stack(size_t index) { return stacks_[index]; }

 private:
  size_t stack_bytes_;
  std::vector<FiberStack> stacks_;
};

// The default usable size of a fiber stack: 64 KiB, 256 KiB under ASAN (instrumented frames are larger), or
// CONVOY_EMULATION_STACK_KIB from the environment.
size_t DefaultFiberStackBytes();

// A suspended computation on a FiberStack. The owner (a scheduler running on the OS thread's own stack) calls
// Resume(); the fiber runs until it calls SuspendToOwner() or its entry function returns.
class Fiber {
 public:
  using Entry = void (*)(void* argument);

  Fiber() = default;
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // Prepares the fiber to run entry(argument) on `stack` at the next Resume(). Any earlier computation on that stack
  // is abandoned (its frames are never unwound: emulated kernel threads hold no resources that need destructors).
  void Start(FiberStack* stack, Entry entry, void* argument);
  // Runs the fiber until it suspends or finishes. Must not be called from a fiber.
  void Resume();
  // Called on the fiber: goes back to the Resume() that is running it.
  void SuspendToOwner();
  bool finished() const { return finished_; }

 private:
  friend struct FiberEntryAccess;  // the fcontext entry point (fiber.cc)
  void SwitchToOwner(bool final_switch);

  void* context_ = nullptr;        // fcontext of the suspended fiber
  void* owner_context_ = nullptr;  // fcontext of the owner while the fiber runs
  FiberStack* stack_ = nullptr;
  Entry entry_ = nullptr;
  void* argument_ = nullptr;
  bool finished_ = true;
  // Sanitizer bookkeeping.
  void* fake_stack_ = nullptr;
  const void* owner_stack_bottom_ = nullptr;
  size_t owner_stack_size_ = 0;
  void* owner_tsan_fiber_ = nullptr;
};

}  // namespace convoy::cuda_emulation

#endif  // CONVOY_KERNELS_CUDA_EMULATION_FIBER_H_
