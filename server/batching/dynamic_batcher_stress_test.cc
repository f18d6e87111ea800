// Many producers, two instances, the real clock, the fixed and the adaptive policy: every accepted request completes
// exactly once, rejected ones never do, batches respect max_batch_size and shape keys, and an instance never runs
// two batches at once. Meant to be run under --config=tsan as well.
#include <atomic>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "server/batching/dynamic_batcher.h"

namespace convoy::batching {
namespace {

constexpr int kProducers = 6;
constexpr int kRequestsPerProducer = 300;
constexpr int kInstances = 2;
constexpr int kMaxBatch = 8;

struct IdPayload : BatchPayload {
  explicit IdPayload(int id) : id(id) {}
  int id;
};

class CheckingExecutor : public BatchExecutor {
 public:
  absl::Status ExecuteBatch(Batch& batch, int instance) override {
    EXPECT_FALSE(busy_[instance].exchange(true)) << "instance " << instance << " runs two batches at once";
    int64_t total = 0;
    for (const auto& request : batch) {
      total += request->batch_size();
      EXPECT_EQ(request->shape_key(), batch.front()->shape_key());
    }
    EXPECT_LE(total, kMaxBatch);
    executed_requests_ += static_cast<int>(batch.size());
    busy_[instance] = false;
    return absl::OkStatus();
  }
  int executed_requests() const { return executed_requests_; }

 private:
  std::atomic<bool> busy_[kInstances] = {};
  std::atomic<int> executed_requests_{0};
};

// (preserve_ordering, formation)
class DynamicBatcherStressTest : public ::testing::TestWithParam<std::tuple<bool, BatchFormation>> {};

TEST_P(DynamicBatcherStressTest, EveryAcceptedRequestCompletesExactlyOnce) {
  BatchingPolicy policy;
  policy.model_name = "stress";
  policy.max_batch_size = kMaxBatch;
  policy.formation = std::get<1>(GetParam());
  if (policy.formation == BatchFormation::kFixedDelay) policy.preferred_batch_sizes = {4, kMaxBatch};
  policy.max_queue_delay = absl::Microseconds(200);  // with the adaptive policy: the cap on its holds
  policy.preserve_ordering = std::get<0>(GetParam());
  policy.priority_levels = 2;
  policy.default_priority_level = 2;
  policy.priority_queue_policy[1].max_queue_size = 16;  // some high-priority requests are turned away
  policy.default_queue_policy.default_timeout = absl::Milliseconds(500);
  policy.default_queue_policy.allow_timeout_override = true;

  CheckingExecutor executor;
  DynamicBatcher::Options options;
  options.policy = policy;
  options.instance_count = kInstances;
  options.executor = &executor;
  CONVOY_ASSERT_OK_AND_ASSIGN(std::unique_ptr<DynamicBatcher> batcher, DynamicBatcher::Create(options));

  constexpr int kTotal = kProducers * kRequestsPerProducer;
  std::vector<std::atomic<int>> completions(kTotal);
  std::vector<std::atomic<bool>> cancelled(kTotal);
  std::atomic<int> accepted{0}, succeeded{0};
  std::vector<std::thread> producers;
  const unsigned seed = std::random_device{}();
  for (int producer = 0; producer < kProducers; ++producer) {
    producers.emplace_back([&, producer] {
      std::mt19937 rng(seed + producer);
      for (int i = 0; i < kRequestsPerProducer; ++i) {
        const int id = producer * kRequestsPerProducer + i;
        BatchRequest::Spec spec;
        spec.batch_size = 1 + rng() % 4;
        spec.shape_key = "shape" + std::to_string(rng() % 3);
        spec.priority = rng() % 3;
        if (rng() % 10 == 0) spec.timeout = absl::Microseconds(1 + rng() % 100);
        spec.is_cancelled = [&cancelled, id] { return cancelled[id].load(); };
        auto request = std::make_unique<BatchRequest>(
            std::move(spec), std::make_unique<IdPayload>(id), [&, id](absl::Status status) {
              completions[id].fetch_add(1);
              if (status.ok()) succeeded.fetch_add(1);
            });
        if (batcher->Enqueue(request).ok()) {
          accepted.fetch_add(1);
          if (rng() % 10 == 0) cancelled[id] = true;
        } else {
          EXPECT_NE(request, nullptr);
        }
      }
    });
  }
  for (std::thread& thread : producers) thread.join();
  EXPECT_THAT(batcher->Shutdown(absl::Now() + absl::Seconds(60)), ::convoy::testing::IsOk());
  batcher.reset();

  int completed = 0;
  for (int id = 0; id < kTotal; ++id) {
    ASSERT_LE(completions[id].load(), 1) << "request " << id << " completed twice";
    completed += completions[id].load();
  }
  EXPECT_EQ(completed, accepted.load()) << "accepted requests that never completed";
  EXPECT_EQ(succeeded.load(), executor.executed_requests());
  EXPECT_GT(succeeded.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(PreserveOrderingAndFormation, DynamicBatcherStressTest,
                         ::testing::Combine(::testing::Bool(), ::testing::Values(BatchFormation::kFixedDelay,
                                                                                BatchFormation::kAdaptive)));

}  // namespace
}  // namespace convoy::batching
