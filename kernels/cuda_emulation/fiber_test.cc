// Tests for Fiber and FiberStackPool: switching order, reuse of stacks across computations, abandoning a suspended
// fiber, and many fibers at once.
#include "kernels/cuda_emulation/fiber.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"

namespace convoy::cuda_emulation {
namespace {

struct Recorder {
  Fiber* fiber;
  std::vector<std::string>* log;
  std::string name;
  int suspensions;
};

void RecordAndSuspend(void* argument) {
  Recorder* recorder = static_cast<Recorder*>(argument);
  for (int i = 0; i < recorder->suspensions; ++i) {
    recorder->log->push_back(recorder->name + std::to_string(i));
    recorder->fiber->SuspendToOwner();
  }
  recorder->log->push_back(recorder->name + "-done");
}

TEST(FiberTest, ResumeRunsUntilTheNextSuspension) {
  FiberStackPool pool(DefaultFiberStackBytes());
  CONVOY_ASSERT_OK(pool.Reserve(2));
  std::vector<std::string> log;
  Fiber a, b;
  Recorder ra{&a, &log, "a", 2}, rb{&b, &log, "b", 1};
  a.Start(&pool.stack(0), &RecordAndSuspend, &ra);
  b.Start(&pool.stack(1), &RecordAndSuspend, &rb);
  a.Resume();
  b.Resume();
  a.Resume();
  EXPECT_FALSE(a.finished());
  b.Resume();
  EXPECT_TRUE(b.finished());
  a.Resume();
  EXPECT_TRUE(a.finished());
  EXPECT_EQ(log, (std::vector<std::string>{"a0", "b0", "a1", "b-done", "a-done"}));
}

TEST(FiberTest, StacksAreReusedAfterFinishingAndAfterAbandoning) {
  FiberStackPool pool(DefaultFiberStackBytes());
  CONVOY_ASSERT_OK(pool.Reserve(1));
  std::vector<std::string> log;
  Fiber fiber;
  Recorder abandoned{&fiber, &log, "x", 5};
  fiber.Start(&pool.stack(0), &RecordAndSuspend, &abandoned);
  fiber.Resume();  // suspended in the middle, never finished
  Recorder second{&fiber, &log, "y", 1};
  fiber.Start(&pool.stack(0), &RecordAndSuspend, &second);
  while (!fiber.finished()) fiber.Resume();
  EXPECT_EQ(log, (std::vector<std::string>{"x0", "y0", "y-done"}));
}

void CountTo(void* argument) {
  auto* state = static_cast<std::pair<Fiber*, int>*>(argument);
  for (int i = 0; i < 10; ++i) {
    ++state->second;
    state->first->SuspendToOwner();
  }
}

TEST(FiberTest, ThousandFibersInterleave) {
  constexpr int kFibers = 1024;
  FiberStackPool pool(DefaultFiberStackBytes());
  CONVOY_ASSERT_OK(pool.Reserve(kFibers));
  std::vector<Fiber> fibers(kFibers);
  std::vector<std::pair<Fiber*, int>> states(kFibers);
  for (int i = 0; i < kFibers; ++i) {
    states[i] = {&fibers[i], 0};
    fibers[i].Start(&pool.stack(i), &CountTo, &states[i]);
  }
  for (int round = 1; round <= 11; ++round) {
    for (int i = 0; i < kFibers; ++i) {
      if (!fibers[i].finished()) fibers[i].Resume();
      EXPECT_EQ(states[i].second, std::min(round, 10)) << "fiber " << i;
    }
  }
  for (const Fiber& fiber : fibers) EXPECT_TRUE(fiber.finished());
}

TEST(FiberStackTest, StackSizeIsRoundedToPages) {
  CONVOY_ASSERT_OK_AND_ASSIGN(FiberStack stack, FiberStack::Create(10000));
  EXPECT_GE(stack.size(), 10000u);
  EXPECT_EQ(stack.top() - stack.bottom(), static_cast<std::ptrdiff_t>(stack.size()));
  stack.bottom()[0] = 1;  // usable down to the bottom (the guard page is below it)
  stack.top()[-1] = 1;
}

}  // namespace
}  // namespace convoy::cuda_emulation
