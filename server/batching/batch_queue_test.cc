// Deterministic tests of batch formation, priorities, timeouts, queue limits and cancellation: BatchQueue is driven
// with explicit times, no threads.
#include "server/batching/batch_queue.h"

#include <atomic>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"

namespace convoy::batching {
namespace {

using ::convoy::testing::IsOk;
using ::convoy::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const absl::Time kStart = absl::FromUnixSeconds(1'000'000);

// A request whose id travels in the payload so tests can tell requests apart after they leave the queue.
struct IdPayload : BatchPayload {
  explicit IdPayload(int id) : id(id) {}
  int id;
};

struct RequestOptions {
  int64_t batch_size = 1;
  std::string key = "k";
  uint64_t priority = 0;
  absl::Duration timeout = absl::ZeroDuration();
  const std::atomic<bool>* cancelled = nullptr;
};

std::unique_ptr<BatchRequest> MakeRequest(int id, const RequestOptions& options = {}) {
  BatchRequest::Spec spec;
  spec.batch_size = options.batch_size;
  spec.shape_key = options.key;
  spec.priority = options.priority;
  spec.timeout = options.timeout;
  if (options.cancelled != nullptr) spec.is_cancelled = [flag = options.cancelled] { return flag->load(); };
  // The queue never completes requests; the batcher does.
  return std::make_unique<BatchRequest>(std::move(spec), std::make_unique<IdPayload>(id),
                                        [](absl::Status) { ADD_FAILURE() << "BatchQueue completed a request"; });
}

std::vector<int> Ids(const std::vector<std::unique_ptr<BatchRequest>>& batch) {
  std::vector<int> ids;
  for (const auto& request : batch) ids.push_back(request->payload_as<IdPayload>()->id);
  return ids;
}

std::unique_ptr<BatchQueue> MakeQueue(const BatchingPolicy& policy) {
  auto queue = BatchQueue::Create(policy);
  EXPECT_THAT(queue, IsOk());
  return queue.ok() ? std::move(queue).value() : nullptr;
}

BatchingPolicy Policy(int64_t max_batch_size, absl::Duration delay) {
  BatchingPolicy policy;
  policy.model_name = "resnet";
  policy.max_batch_size = max_batch_size;
  policy.max_queue_delay = delay;
  return policy;
}

void Add(BatchQueue& queue, std::unique_ptr<BatchRequest> request, absl::Time now = kStart) {
  ASSERT_THAT(queue.Add(request, now), IsOk());
  EXPECT_EQ(request, nullptr);
}

class BatchQueueTest : public ::testing::Test {
 protected:
  std::mt19937 rng_{std::random_device{}()};
  int Uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
};

TEST_F(BatchQueueTest, SendsAFullBatchAtOnceWithoutWaitingForTheDelay) {
  const int max_batch = Uniform(2, 32);
  auto queue = MakeQueue(Policy(max_batch, absl::Seconds(1)));
  int remaining = max_batch, id = 0;
  while (remaining > 0) {  // random request sizes summing exactly to max_batch
    const int size = Uniform(1, remaining);
    Add(*queue, MakeRequest(id++, {.batch_size = size}));
    remaining -= size;
  }
  BatchQueue::Decision decision = queue->TakeBatch(kStart, /*flush=*/false);
  std::vector<int> expected(id);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(Ids(decision.batch), expected);
  EXPECT_TRUE(queue->empty());
}

TEST_F(BatchQueueTest, PartialBatchWaitsForTheQueueDelayThenRuns) {
  const absl::Duration delay = absl::Microseconds(Uniform(10, 1000));
  const int count = Uniform(1, 7);
  auto queue = MakeQueue(Policy(8, delay));
  for (int i = 0; i < count; ++i) Add(*queue, MakeRequest(i), kStart + absl::Microseconds(i));

  BatchQueue::Decision early = queue->TakeBatch(kStart + delay - absl::Nanoseconds(1), false);
  EXPECT_TRUE(early.batch.empty());
  EXPECT_EQ(early.next_check, kStart + delay);  // measured from the oldest request
  EXPECT_EQ(queue->size(), count);

  BatchQueue::Decision on_time = queue->TakeBatch(kStart + delay, false);
  EXPECT_EQ(on_time.batch.size(), static_cast<size_t>(count));
  for (const auto& request : on_time.batch) EXPECT_EQ(request->dispatch_time(), kStart + delay);
}

TEST_F(BatchQueueTest, ZeroDelaySendsWhateverIsQueued) {
  auto queue = MakeQueue(Policy(8, absl::ZeroDuration()));
  const int count = Uniform(1, 7);
  for (int i = 0; i < count; ++i) Add(*queue, MakeRequest(i));
  EXPECT_EQ(queue->TakeBatch(kStart, false).batch.size(), static_cast<size_t>(count));
}

TEST_F(BatchQueueTest, ReachingTheLargestPreferredSizeSendsAtOnce) {
  BatchingPolicy policy = Policy(16, absl::Seconds(1));
  const int preferred = Uniform(2, 8);
  policy.preferred_batch_sizes = {1, preferred};
  auto queue = MakeQueue(policy);
  for (int i = 0; i < preferred - 1; ++i) Add(*queue, MakeRequest(i));
  EXPECT_TRUE(queue->TakeBatch(kStart, false).batch.empty()) << "below the largest preferred size: waits";
  Add(*queue, MakeRequest(preferred - 1));
  EXPECT_EQ(queue->TakeBatch(kStart, false).batch.size(), static_cast<size_t>(preferred));
}

TEST_F(BatchQueueTest, AtTheDelayTheBatchIsCutToTheLargestPreferredPrefix) {
  BatchingPolicy policy = Policy(16, absl::Microseconds(100));
  policy.preferred_batch_sizes = {2, 8};
  auto queue = MakeQueue(policy);
  const int count = Uniform(3, 7);  // 2 is reachable, 8 is not
  for (int i = 0; i < count; ++i) Add(*queue, MakeRequest(i));
  BatchQueue::Decision decision = queue->TakeBatch(kStart + absl::Microseconds(100), false);
  EXPECT_THAT(Ids(decision.batch), ElementsAre(0, 1));
  EXPECT_EQ(queue->size(), count - 2);
}

TEST_F(BatchQueueTest, RequestsWithABatchDimensionMergeUpToMaxBatchSize) {
  for (int trial = 0; trial < 20; ++trial) {
    const int max_batch = Uniform(1, 16);
    auto queue = MakeQueue(Policy(max_batch, absl::ZeroDuration()));
    std::vector<int> sizes(Uniform(1, 30));
    for (size_t i = 0; i < sizes.size(); ++i) {
      sizes[i] = Uniform(1, max_batch);
      Add(*queue, MakeRequest(static_cast<int>(i), {.batch_size = sizes[i]}));
    }
    // Batches are consecutive runs of requests; each ends exactly where the next request would overflow.
    size_t next = 0;
    while (!queue->empty()) {
      BatchQueue::Decision decision = queue->TakeBatch(kStart, false);
      ASSERT_FALSE(decision.batch.empty());
      int total = 0;
      for (const auto& request : decision.batch) {
        EXPECT_EQ(request->payload_as<IdPayload>()->id, static_cast<int>(next++));
        total += static_cast<int>(request->batch_size());
      }
      EXPECT_LE(total, max_batch);
      if (next < sizes.size()) {
        EXPECT_GT(total + sizes[next], max_batch);
      }
    }
    EXPECT_EQ(next, sizes.size());
  }
}

TEST_F(BatchQueueTest, DifferentShapeKeysNeverShareABatch) {
  auto queue = MakeQueue(Policy(64, absl::ZeroDuration()));
  std::vector<int> expected_a, expected_b;
  const int count = Uniform(4, 20);
  for (int i = 0; i < count; ++i) {
    const bool a = i == 0 || Uniform(0, 1) == 1;
    (a ? expected_a : expected_b).push_back(i);
    Add(*queue, MakeRequest(i, {.key = a ? "images:3x224x224" : "images:3x320x320"}));
  }
  EXPECT_EQ(Ids(queue->TakeBatch(kStart, false).batch), expected_a);  // the head's key first, others skipped
  EXPECT_EQ(Ids(queue->TakeBatch(kStart, false).batch), expected_b);
  EXPECT_TRUE(queue->empty());
}

TEST_F(BatchQueueTest, HigherPriorityLevelsGoFirstAndTheDefaultLevelApplies) {
  BatchingPolicy policy = Policy(1, absl::ZeroDuration());
  policy.priority_levels = 3;
  policy.default_priority_level = 2;
  auto queue = MakeQueue(policy);
  Add(*queue, MakeRequest(30, {.priority = 3}));
  Add(*queue, MakeRequest(20, {.priority = 0}));  // default level 2
  Add(*queue, MakeRequest(10, {.priority = 1}));
  Add(*queue, MakeRequest(11, {.priority = 1}));
  std::vector<int> order;
  while (!queue->empty()) {
    for (int id : Ids(queue->TakeBatch(kStart, false).batch)) order.push_back(id);
  }
  EXPECT_THAT(order, ElementsAre(10, 11, 20, 30));
}

TEST_F(BatchQueueTest, PriorityOutsideTheLevelsIsRejectedAndIgnoredWithoutLevels) {
  BatchingPolicy policy = Policy(4, absl::ZeroDuration());
  policy.priority_levels = 2;
  policy.default_priority_level = 1;
  auto queue = MakeQueue(policy);
  auto request = MakeRequest(0, {.priority = 3});
  EXPECT_THAT(queue->Add(request, kStart),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("priority 3 is outside 1..2")));
  EXPECT_NE(request, nullptr) << "the caller keeps a rejected request";

  auto flat = MakeQueue(Policy(4, absl::ZeroDuration()));
  Add(*flat, MakeRequest(0, {.priority = static_cast<uint64_t>(Uniform(1, 100))}));
  EXPECT_EQ(flat->size_at_level(1), 1);
}

TEST_F(BatchQueueTest, FullQueueRejectsAtOnceNamingModelSizeAndLimit) {
  BatchingPolicy policy = Policy(8, absl::Seconds(1));
  policy.priority_levels = 2;
  policy.default_priority_level = 2;
  const int limit = Uniform(1, 5);
  policy.priority_queue_policy[1].max_queue_size = limit;
  auto queue = MakeQueue(policy);
  for (int i = 0; i < limit; ++i) Add(*queue, MakeRequest(i, {.priority = 1}));
  auto rejected = MakeRequest(99, {.priority = 1});
  EXPECT_THAT(queue->Add(rejected, kStart),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr(absl::StrCat("model 'resnet': priority 1 queue is full (", limit, " of ", limit))));
  EXPECT_NE(rejected, nullptr);
  Add(*queue, MakeRequest(100, {.priority = 2}));  // level 2 is unbounded
  EXPECT_EQ(queue->size(), limit + 1);
}

TEST_F(BatchQueueTest, BatchSizeOutsideOneToMaxIsRejected) {
  const int max_batch = Uniform(1, 16);
  auto queue = MakeQueue(Policy(max_batch, absl::ZeroDuration()));
  auto too_big = MakeRequest(0, {.batch_size = max_batch + 1});
  EXPECT_THAT(queue->Add(too_big, kStart),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(absl::StrCat("batch size ", max_batch + 1, " is outside 1..", max_batch))));
  auto empty = MakeRequest(1, {.batch_size = 0});
  EXPECT_THAT(queue->Add(empty, kStart), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("batch size 0")));
  EXPECT_TRUE(queue->empty());
}

TEST_F(BatchQueueTest, WithoutBatchingEveryRequestRunsAlone) {
  auto queue = MakeQueue(Policy(0, absl::Seconds(1)));
  const int count = Uniform(2, 6);
  for (int i = 0; i < count; ++i) Add(*queue, MakeRequest(i));
  for (int i = 0; i < count; ++i) EXPECT_THAT(Ids(queue->TakeBatch(kStart, false).batch), ElementsAre(i));
}

// A model with a batch dimension but no dynamic_batching block (Triton's default scheduler): requests of up to
// max_batch_size elements each, never merged, each sent at once.
TEST_F(BatchQueueTest, WithoutDynamicBatchingRequestsRunAloneAtOnceUpToMaxBatchSize) {
  BatchingPolicy policy = Policy(8, absl::ZeroDuration());
  policy.dynamic_batching = false;
  auto queue = MakeQueue(policy);
  const int count = Uniform(2, 6);
  for (int i = 0; i < count; ++i) Add(*queue, MakeRequest(i, {.batch_size = 1 + i % 2}));
  for (int i = 0; i < count; ++i) {
    BatchQueue::Decision decision = queue->TakeBatch(kStart, false);
    EXPECT_THAT(Ids(decision.batch), ElementsAre(i));
  }
  EXPECT_TRUE(queue->TakeBatch(kStart, false).batch.empty());
  std::unique_ptr<BatchRequest> too_big = MakeRequest(99, {.batch_size = 9});
  EXPECT_THAT(queue->Add(too_big, kStart), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("1..8")));
}

TEST_F(BatchQueueTest, RejectTimeoutFailsTheRequestWithDeadlineExceeded) {
  BatchingPolicy policy = Policy(8, absl::Seconds(10));
  const absl::Duration timeout = absl::Microseconds(Uniform(1, 1000));
  policy.default_queue_policy.default_timeout = timeout;
  auto queue = MakeQueue(policy);
  Add(*queue, MakeRequest(0));
  EXPECT_EQ(queue->TakeBatch(kStart, false).next_check, kStart + timeout) << "wakes for the timeout first";
  EXPECT_TRUE(queue->RemoveCancelledAndExpired(kStart + timeout - absl::Nanoseconds(1)).empty());
  std::vector<BatchQueue::Removed> removed = queue->RemoveCancelledAndExpired(kStart + timeout);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_THAT(removed[0].status, StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("model 'resnet'")));
  EXPECT_TRUE(queue->empty());
}

TEST_F(BatchQueueTest, TimeoutOverrideMayOnlyShortenTheDefault) {
  BatchingPolicy policy = Policy(8, absl::Seconds(10));
  policy.default_queue_policy.default_timeout = absl::Microseconds(100);
  policy.default_queue_policy.allow_timeout_override = true;
  auto queue = MakeQueue(policy);
  Add(*queue, MakeRequest(0, {.timeout = absl::Microseconds(40)}));
  Add(*queue, MakeRequest(1, {.timeout = absl::Microseconds(500)}));
  auto removed = queue->RemoveCancelledAndExpired(kStart + absl::Microseconds(40));
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0].request->payload_as<IdPayload>()->id, 0);
  EXPECT_TRUE(queue->RemoveCancelledAndExpired(kStart + absl::Microseconds(99)).empty());
  EXPECT_EQ(queue->RemoveCancelledAndExpired(kStart + absl::Microseconds(100)).size(), 1u);

  policy.default_queue_policy.allow_timeout_override = false;
  auto strict = MakeQueue(policy);
  Add(*strict, MakeRequest(2, {.timeout = absl::Microseconds(40)}));
  EXPECT_TRUE(strict->RemoveCancelledAndExpired(kStart + absl::Microseconds(99)).empty());
  EXPECT_EQ(strict->RemoveCancelledAndExpired(kStart + absl::Microseconds(100)).size(), 1u);
}

TEST_F(BatchQueueTest, DelayTimeoutKeepsTheRequestButBehindTheOnesInTime) {
  BatchingPolicy policy = Policy(1, absl::ZeroDuration());
  policy.default_queue_policy.timeout_action = TimeoutAction::kDelay;
  policy.default_queue_policy.default_timeout = absl::Microseconds(100);
  auto queue = MakeQueue(policy);
  Add(*queue, MakeRequest(0));
  Add(*queue, MakeRequest(1), kStart + absl::Microseconds(60));
  Add(*queue, MakeRequest(2), kStart + absl::Microseconds(70));
  const absl::Time later = kStart + absl::Microseconds(150);
  EXPECT_TRUE(queue->RemoveCancelledAndExpired(later).empty()) << "DELAY never fails a request";
  EXPECT_EQ(queue->size(), 3);
  std::vector<int> order;
  while (!queue->empty()) {
    for (int id : Ids(queue->TakeBatch(later, false).batch)) order.push_back(id);
  }
  EXPECT_THAT(order, ElementsAre(1, 2, 0));
}

TEST_F(BatchQueueTest, CancelledRequestsLeaveWithCancelled) {
  auto queue = MakeQueue(Policy(8, absl::Seconds(1)));
  const int count = Uniform(2, 7);
  std::vector<std::atomic<bool>> cancelled(count);
  for (int i = 0; i < count; ++i) Add(*queue, MakeRequest(i, {.cancelled = &cancelled[i]}));
  const int victim = Uniform(0, count - 1);
  cancelled[victim] = true;
  std::vector<BatchQueue::Removed> removed = queue->RemoveCancelledAndExpired(kStart);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0].request->payload_as<IdPayload>()->id, victim);
  EXPECT_THAT(removed[0].status, StatusIs(absl::StatusCode::kCancelled, HasSubstr("cancelled")));
  EXPECT_EQ(queue->size(), count - 1);
  for (int id : Ids(queue->TakeBatch(kStart, /*flush=*/true).batch)) EXPECT_NE(id, victim);
}

TEST_F(BatchQueueTest, TakeAllEmptiesEveryLevel) {
  BatchingPolicy policy = Policy(8, absl::Seconds(1));
  policy.priority_levels = 2;
  policy.default_priority_level = 1;
  auto queue = MakeQueue(policy);
  Add(*queue, MakeRequest(0, {.priority = 2}));
  Add(*queue, MakeRequest(1, {.priority = 1}));
  EXPECT_THAT(Ids(queue->TakeAll()), ElementsAre(1, 0));
  EXPECT_TRUE(queue->empty());
}

TEST_F(BatchQueueTest, InvalidPoliciesAreRejected) {
  BatchingPolicy preferred_too_big = Policy(8, absl::ZeroDuration());
  preferred_too_big.preferred_batch_sizes = {16};
  EXPECT_THAT(BatchQueue::Create(preferred_too_big),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("preferred batch size 16 is outside 1..8")));
  BatchingPolicy bad_default = Policy(8, absl::ZeroDuration());
  bad_default.priority_levels = 2;
  bad_default.default_priority_level = 3;
  EXPECT_THAT(BatchQueue::Create(bad_default),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("default_priority_level must be in 1..2")));
  BatchingPolicy bad_level = Policy(8, absl::ZeroDuration());
  bad_level.priority_queue_policy[1].max_queue_size = 4;  // levels are off: only level 1 exists, so this is fine
  EXPECT_THAT(BatchQueue::Create(bad_level), IsOk());
  bad_level.priority_queue_policy[2].max_queue_size = 4;
  EXPECT_THAT(BatchQueue::Create(bad_level),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("level 2 but levels are 1..1")));
}

}  // namespace
}  // namespace convoy::batching
