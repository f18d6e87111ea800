// Fibers on Boost.Context's fcontext with ASAN/TSAN switch annotations (see fiber.h).
#include "kernels/cuda_emulation/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "boost/context/detail/fcontext.hpp"
#include "kernels/cuda_emulation/sanitizers.h"

#if CONVOY_EMULATION_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#if CONVOY_EMULATION_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace convoy::cuda_emulation {
namespace {

namespace fctx = boost::context::detail;

size_t PageBytes() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------- FiberStack

absl::StatusOr<FiberStack> FiberStack::Create(size_t usable_bytes) {
  const size_t page = PageBytes();
  usable_bytes = (usable_bytes + page - 1) / page * page;
  const size_t mapping_bytes = usable_bytes + page;  // + one guard page below
  void* mapping =
      mmap(nullptr, mapping_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapping == MAP_FAILED) {
    return absl::ResourceExhaustedError(absl::StrCat("fiber stack: mmap of ", mapping_bytes, " bytes failed"));
  }
  if (mprotect(mapping, page, PROT_NONE) != 0) {
    munmap(mapping, mapping_bytes);
    return absl::InternalError("fiber stack: mprotect of the guard page failed");
  }
  return FiberStack(static_cast<char*>(mapping), mapping_bytes, usable_bytes);
}

FiberStack::FiberStack(char* mapping, size_t mapping_bytes, size_t usable_bytes)
    : mapping_(mapping), mapping_bytes_(mapping_bytes), usable_(mapping + PageBytes()), usable_bytes_(usable_bytes) {
#if CONVOY_EMULATION_TSAN
  tsan_fiber_ = __tsan_create_fiber(0);
#endif
}

FiberStack::FiberStack(FiberStack&& other) noexcept { *this = std::move(other); }

FiberStack& FiberStack::operator=(FiberStack&& other) noexcept {
  if (this != &other) {
    Release();
    mapping_ = std::exchange(other.mapping_, nullptr);
    mapping_bytes_ = std::exchange(other.mapping_bytes_, 0);
    usable_ = std::exchange(other.usable_, nullptr);
    usable_bytes_ = std::exchange(other.usable_bytes_, 0);
    tsan_fiber_ = std::exchange(other.tsan_fiber_, nullptr);
  }
  return *this;
}

FiberStack::~FiberStack() { Release(); }

void FiberStack::Release() {
#if CONVOY_EMULATION_TSAN
  if (tsan_fiber_ != nullptr) __tsan_destroy_fiber(tsan_fiber_);
#endif
  tsan_fiber_ = nullptr;
  if (mapping_ != nullptr) munmap(mapping_, mapping_bytes_);
  mapping_ = nullptr;
}

absl::Status FiberStackPool::Reserve(size_t count) {
  while (stacks_.size() < count) {
    absl::StatusOr<FiberStack> stack = FiberStack::Create(stack_bytes_);
    if (!stack.ok()) return stack.status();
    stacks_.push_back(std::move(stack).value());
  }
  return absl::OkStatus();
}

size_t DefaultFiberStackBytes() {
  if (const char* env = std::getenv("CONVOY_EMULATION_STACK_KIB"); env != nullptr && std::atoi(env) > 0) {
    return static_cast<size_t>(std::atoi(env)) * 1024;
  }
  return CONVOY_EMULATION_ASAN ? 256 * 1024 : 64 * 1024;
}

// ---------------------------------------------------------------------------------------------------- Fiber

struct FiberEntryAccess {
  // First code a fiber runs. `transfer.data` is the Fiber; `transfer.fctx` the owner suspended in Resume().
  static void Main(fctx::transfer_t transfer) {
    Fiber* fiber = static_cast<Fiber*>(transfer.data);
    fiber->owner_context_ = transfer.fctx;
#if CONVOY_EMULATION_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &fiber->owner_stack_bottom_, &fiber->owner_stack_size_);
#endif
    fiber->entry_(fiber->argument_);
    fiber->finished_ = true;
    fiber->SwitchToOwner(/*final_switch=*/true);
    std::abort();  // a finished fiber is never resumed
  }
};

void Fiber::Start(FiberStack* stack, Entry entry, void* argument) {
#if CONVOY_EMULATION_ASAN
  // An abandoned computation may have left poisoned frames (redzones) on this stack.
  if (!finished_ && stack_ == stack) __asan_unpoison_memory_region(stack->bottom(), stack->size());
#endif
  stack_ = stack;
  entry_ = entry;
  argument_ = argument;
  finished_ = false;
  fake_stack_ = nullptr;
  context_ = fctx::make_fcontext(stack->top(), stack->size(), &FiberEntryAccess::Main);
}

void Fiber::Resume() {
#if CONVOY_EMULATION_ASAN
  void* owner_fake_stack = nullptr;
  __sanitizer_start_switch_fiber(&owner_fake_stack, stack_->bottom(), stack_->size());
#endif
#if CONVOY_EMULATION_TSAN
  owner_tsan_fiber_ = __tsan_get_current_fiber();
  __tsan_switch_to_fiber(stack_->tsan_fiber(), 0);
#endif
  fctx::transfer_t back = fctx::jump_fcontext(context_, this);
#if CONVOY_EMULATION_ASAN
  __sanitizer_finish_switch_fiber(owner_fake_stack, nullptr, nullptr);
#endif
  context_ = back.fctx;
}

void Fiber::SuspendToOwner() { SwitchToOwner(/*final_switch=*/false); }

void Fiber::SwitchToOwner(bool final_switch) {
#if CONVOY_EMULATION_ASAN
  __sanitizer_start_switch_fiber(final_switch ? nullptr : &fake_stack_, owner_stack_bottom_, owner_stack_size_);
#endif
#if CONVOY_EMULATION_TSAN
  __tsan_switch_to_fiber(owner_tsan_fiber_, 0);
#endif
  (void)final_switch;
  fctx::transfer_t back = fctx::jump_fcontext(owner_context_, nullptr);
#if CONVOY_EMULATION_ASAN
  __sanitizer_finish_switch_fiber(fake_stack_, &owner_stack_bottom_, &owner_stack_size_);
#endif
  owner_context_ = back.fctx;
}

}  // namespace convoy::cuda_emulation
