// Tests for the liveness-based arena planner: a property test over random DAGs, reuse on a chain, aliases, external
// buffers and malformed input.
#include "server/runtime/memory_planner.h"

#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"

namespace convoy::runtime {
namespace {

using ::convoy::testing::IsOk;
using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;

// A random DAG of `steps` steps: step s writes buffer s+1 and reads 1-3 earlier buffers; buffer 0 is the graph input,
// the last buffer a graph output; some buffers are aliases of earlier ones.
std::vector<BufferUse> RandomDagUses(std::mt19937& rng, int steps) {
  std::vector<BufferUse> uses(steps + 1);
  std::uniform_int_distribution<size_t> bytes(1, 5000);
  uses[0] = {bytes(rng), -1, false, -1, -1};
  for (int s = 0; s < steps; ++s) {
    BufferUse& u = uses[s + 1];
    u.bytes = bytes(rng);
    u.first_step = s;
    u.last_step = s;
    const int reads = 1 + static_cast<int>(rng() % 3);
    for (int r = 0; r < reads; ++r) {
      const int read = static_cast<int>(rng() % (s + 1));  // buffer written before step s
      uses[read].last_step = std::max(uses[read].last_step, s);
    }
    if (s > 0 && rng() % 5 == 0) {  // a view of an earlier buffer, made at that buffer's step
      u.alias_of = static_cast<int>(1 + rng() % s);
      u.first_step = uses[u.alias_of].first_step;
      u.last_step = std::max(u.last_step, u.first_step);
    }
  }
  uses.back().last_step = steps;
  return uses;
}

TEST(MemoryPlannerTest, RandomDagsNeverOverlapLiveBuffers) {
  std::mt19937 rng(std::random_device{}());
  for (int trial = 0; trial < 200; ++trial) {
    const int steps = 2 + static_cast<int>(rng() % 40);
    const std::vector<BufferUse> uses = RandomDagUses(rng, steps);
    CONVOY_ASSERT_OK_AND_ASSIGN(MemoryPlan plan, PlanActivationMemory(uses, 64));
    ASSERT_THAT(VerifyMemoryPlan(uses, plan), IsOk()) << "trial " << trial;
    EXPECT_LE(plan.arena_bytes, plan.no_reuse_bytes);
    for (size_t i = 0; i < uses.size(); ++i) {
      EXPECT_EQ(plan.offsets[i] % 64, 0);
      if (uses[i].alias_of >= 0) {
        EXPECT_EQ(plan.offsets[i], plan.offsets[plan.roots[i]]);
      }
    }
  }
}

TEST(MemoryPlannerTest, VerifyCatchesOverlap) {
  std::vector<BufferUse> uses = {{100, -1, false, 0, 1}, {100, -1, false, 1, 2}};
  CONVOY_ASSERT_OK_AND_ASSIGN(MemoryPlan plan, PlanActivationMemory(uses, 64));
  ASSERT_NE(plan.offsets[0], plan.offsets[1]);  // live together at step 1
  plan.offsets[1] = plan.offsets[0];
  EXPECT_THAT(VerifyMemoryPlan(uses, plan), StatusIs(absl::StatusCode::kInternal, HasSubstr("overlap")));
}

TEST(MemoryPlannerTest, ChainReusesBuffers) {
  // x -> a -> b -> c -> d -> y: each buffer is live for two steps, so two slots suffice however long the chain.
  std::uniform_int_distribution<size_t> dist(1000, 2000);
  std::mt19937 rng(std::random_device{}());
  const size_t bytes = dist(rng) * 64;
  std::vector<BufferUse> uses;
  const int length = 8;
  for (int i = 0; i < length; ++i) uses.push_back({bytes, -1, false, i - 1, i == length - 1 ? length : i});
  CONVOY_ASSERT_OK_AND_ASSIGN(MemoryPlan plan, PlanActivationMemory(uses, 64));
  EXPECT_THAT(VerifyMemoryPlan(uses, plan), IsOk());
  EXPECT_EQ(plan.no_reuse_bytes, bytes * length);
  EXPECT_EQ(plan.arena_bytes, bytes * 2);
}

TEST(MemoryPlannerTest, BestFitPicksTheSmallestGapThatFits) {
  // Placed largest first: A [0,1024), B [1024,2048), C [2048,3072), D [3072,3584), E [3584,4096). B and D die at
  // step 1, so F (born at step 5) sees two gaps: B's 1024 bytes and D's 512. Best fit takes D's; first fit would
  // take B's.
  std::vector<BufferUse> uses = {
      {1024, -1, false, 0, 9}, {1024, -1, false, 0, 1}, {1024, -1, false, 0, 9},
      {512, -1, false, 0, 1},  {512, -1, false, 0, 9},  {256, -1, false, 5, 9},
  };
  CONVOY_ASSERT_OK_AND_ASSIGN(MemoryPlan plan, PlanActivationMemory(uses, 64));
  EXPECT_THAT(VerifyMemoryPlan(uses, plan), IsOk());
  EXPECT_EQ(plan.offsets[1], 1024);
  EXPECT_EQ(plan.offsets[3], 3072);
  EXPECT_EQ(plan.offsets[5], 3072);
  EXPECT_EQ(plan.arena_bytes, 4096u);
}

TEST(MemoryPlannerTest, AliasesExtendTheirSourceLifetime) {
  // 1 is a view of 0 read at step 3: 0 must stay intact until then, so 2 (born at step 1) cannot take its place.
  std::vector<BufferUse> uses = {{512, -1, false, 0, 0}, {512, 0, false, 0, 3}, {512, -1, false, 1, 3}};
  CONVOY_ASSERT_OK_AND_ASSIGN(MemoryPlan plan, PlanActivationMemory(uses, 64));
  EXPECT_THAT(VerifyMemoryPlan(uses, plan), IsOk());
  EXPECT_EQ(plan.offsets[1], plan.offsets[0]);
  EXPECT_NE(plan.offsets[2], plan.offsets[0]);
  EXPECT_EQ(plan.arena_bytes, 1024u);
}

TEST(MemoryPlannerTest, ExternalBuffersTakeNoArenaSpace) {
  std::vector<BufferUse> uses = {{4096, -1, true, -1, 0}, {4096, 0, false, -1, 1}, {128, -1, false, 0, 1}};
  CONVOY_ASSERT_OK_AND_ASSIGN(MemoryPlan plan, PlanActivationMemory(uses, 64));
  EXPECT_EQ(plan.offsets[0], -1);
  EXPECT_EQ(plan.offsets[1], -1);
  EXPECT_EQ(plan.arena_bytes, 128u);
}

TEST(MemoryPlannerTest, RejectsMalformedUses) {
  EXPECT_THAT(PlanActivationMemory({{8, 1, false, 0, 0}, {8, 0, false, 0, 0}}, 64),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cyclic")));
  EXPECT_THAT(PlanActivationMemory({{8, 5, false, 0, 0}}, 64),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("alias_of 5")));
  EXPECT_THAT(PlanActivationMemory({{8, -1, false, 3, 1}}, 64),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("written at step 3 after its last read at step 1")));
  EXPECT_THAT(PlanActivationMemory({}, 48), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("power of two")));
}

}  // namespace
}  // namespace convoy::runtime
