// BatchMetricsObserver with a real DynamicBatcher and MetricsRegistry (no HTTP endpoint) on a FakeClock: the
// pending gauge follows the queue, refused, timed-out and cancelled requests land under Triton's reasons, and the
// adaptive policy's estimates appear as the convoy_batcher_* gauges.
#include "server/batching/batch_metrics_observer.h"

#include <atomic>
#include <memory>
#include <random>

#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "server/batching/fake_clock.h"
#include "server/metrics/metrics_registry.h"
#include "server/metrics/testing/scrape.h"

namespace convoy::batching {
namespace {

using ::convoy::metrics::testing::SampleValue;

// A registry read through Scrape() only: no HTTP endpoint, no GPU gauges.
metrics::MetricsRegistry::Options WithoutEndpoint() {
  metrics::MetricsRegistry::Options options;
  options.listen_address = "";
  options.gpu_metrics = false;
  return options;
}

class NoopExecutor : public BatchExecutor {
 public:
  absl::Status ExecuteBatch(Batch&, int) override { return absl::OkStatus(); }
};

TEST(BatchMetricsObserverTest, PendingGaugeAndFailureReasonsFollowTheBatcher) {
  std::mt19937 rng(std::random_device{}());
  CONVOY_ASSERT_OK_AND_ASSIGN(auto registry, metrics::MetricsRegistry::Create(WithoutEndpoint()));
  std::unique_ptr<metrics::ModelMetricsReporter> reporter = registry->ForModel("resnet", "1");
  BatchMetricsObserver observer(reporter.get());
  FakeClock clock;
  NoopExecutor executor;

  const int limit = 2 + rng() % 5;
  DynamicBatcher::Options options;
  options.policy.model_name = "resnet";
  options.policy.max_batch_size = 64;
  options.policy.max_queue_delay = absl::Hours(1);
  options.policy.default_queue_policy.max_queue_size = limit;
  options.policy.default_queue_policy.default_timeout = absl::Milliseconds(1);
  options.executor = &executor;
  options.clock = &clock;
  options.observer = &observer;
  CONVOY_ASSERT_OK_AND_ASSIGN(auto batcher, DynamicBatcher::Create(options));

  std::atomic<bool> cancelled{false};
  std::atomic<int> completed{0};
  const auto make_request = [&](bool cancellable) {
    BatchRequest::Spec spec;
    if (cancellable) spec.is_cancelled = [&cancelled] { return cancelled.load(); };
    return std::make_unique<BatchRequest>(std::move(spec), nullptr, [&](absl::Status) { ++completed; });
  };
  for (int i = 0; i < limit; ++i) {
    auto request = make_request(/*cancellable=*/i == 0);
    ASSERT_THAT(batcher->Enqueue(request), ::convoy::testing::IsOk());
  }
  const std::map<std::string, std::string> model = {{"model", "resnet"}, {"version", "1"}};
  EXPECT_EQ(SampleValue(registry->Scrape(), "nv_inference_pending_request_count", model), limit);

  auto refused = make_request(false);
  EXPECT_FALSE(batcher->Enqueue(refused).ok());  // queue full
  clock.BlockUntilSettled(1);
  cancelled = true;
  clock.Advance(absl::Milliseconds(1));  // request 0 is cancelled, the others time out
  clock.BlockUntilSettled(1);            // the instance thread completed them and waits again
  ASSERT_EQ(completed.load(), limit);
  batcher.reset();

  const std::string page = registry->Scrape();
  auto failures = [&](const char* reason) {
    std::map<std::string, std::string> labels = model;
    labels["reason"] = reason;
    return SampleValue(page, "nv_inference_request_failure", labels);
  };
  EXPECT_EQ(failures("REJECTED"), 1 + (limit - 1));  // the refused one and the timed-out ones
  EXPECT_EQ(failures("CANCELED"), 1);
  EXPECT_EQ(SampleValue(page, "nv_inference_pending_request_count", model), 0);
}

// Every batch takes `per_batch` on the fake clock.
class TimedExecutor : public BatchExecutor {
 public:
  TimedExecutor(FakeClock* clock, absl::Duration per_batch) : clock_(clock), per_batch_(per_batch) {}
  absl::Status ExecuteBatch(Batch&, int) override {
    clock_->Advance(per_batch_);
    return absl::OkStatus();
  }

 private:
  FakeClock* const clock_;
  const absl::Duration per_batch_;
};

TEST(BatchMetricsObserverTest, AdaptiveEstimatesAppearAsBatcherGauges) {
  std::mt19937 rng(std::random_device{}());
  CONVOY_ASSERT_OK_AND_ASSIGN(auto registry, metrics::MetricsRegistry::Create(WithoutEndpoint()));
  std::unique_ptr<metrics::ModelMetricsReporter> reporter = registry->ForModel("resnet", "2");
  const absl::Duration target = absl::Milliseconds(50);
  reporter->SetBatchingPolicy("adaptive", target);  // what ServedModel does when it starts the batcher
  BatchMetricsObserver observer(reporter.get());
  FakeClock clock;
  const absl::Duration per_batch = absl::Milliseconds(3 + rng() % 8);
  TimedExecutor executor(&clock, per_batch);
  DynamicBatcher::Options options;
  options.policy.model_name = "resnet";
  options.policy.max_batch_size = 16;
  options.policy.formation = BatchFormation::kAdaptive;
  options.policy.max_queue_delay = absl::InfiniteDuration();
  options.policy.target_latency = target;
  options.executor = &executor;
  options.clock = &clock;
  options.observer = &observer;
  CONVOY_ASSERT_OK_AND_ASSIGN(auto batcher, DynamicBatcher::Create(options));
  std::atomic<int> completed{0};
  const int requests = 3 + rng() % 6;
  for (int i = 0; i < requests; ++i) {  // a lone client: each request after the previous answer
    auto request = std::make_unique<BatchRequest>(BatchRequest::Spec{}, nullptr, [&](absl::Status) { ++completed; });
    ASSERT_THAT(batcher->Enqueue(request), ::convoy::testing::IsOk());
    clock.BlockUntilSettled(1);  // executed, answered, reported to the estimator
    ASSERT_EQ(completed.load(), i + 1);
  }
  const std::string page = registry->Scrape();
  const std::map<std::string, std::string> model = {{"model", "resnet"}, {"version", "2"}};
  EXPECT_EQ(SampleValue(page, "convoy_batcher_policy", {{"model", "resnet"}, {"version", "2"}, {"policy", "adaptive"}}),
            1);
  EXPECT_EQ(SampleValue(page, "convoy_batcher_target_latency_seconds", model), 0.05);
  // Gauges are doubles of exactly computed values; 1e-9 allows the text format's rounding.
  EXPECT_NEAR(*SampleValue(page, "convoy_batcher_execution_seconds",
                           {{"model", "resnet"}, {"version", "2"}, {"batch_size", "1"}}),
              absl::ToDoubleSeconds(per_batch), 1e-9);
  EXPECT_FALSE(SampleValue(page, "convoy_batcher_execution_seconds",
                           {{"model", "resnet"}, {"version", "2"}, {"batch_size", "2"}}).has_value())
      << "only measured sizes are exported";
  EXPECT_NEAR(*SampleValue(page, "convoy_batcher_arrivals_per_second", model), 1 / absl::ToDoubleSeconds(per_batch),
              1e-6);
  EXPECT_EQ(SampleValue(page, "convoy_batcher_clients", model), 1);
  EXPECT_EQ(SampleValue(page, "convoy_batcher_wait_seconds", model), 0);
  EXPECT_EQ(SampleValue(page, "convoy_batcher_return_seconds", model), 0);  // the client came back at once
  // Only size 1 was measured: b elements take b times as long (no gain assumed), p99 bound 10 % above. The limit
  // is the largest b whose bound fits the 50 ms target for a request that has not waited.
  const int64_t limit = static_cast<int64_t>(0.05 / (1.1 * absl::ToDoubleSeconds(per_batch)));
  EXPECT_EQ(SampleValue(page, "convoy_batcher_batch_limit", model), static_cast<double>(limit));
  EXPECT_EQ(SampleValue(page, "convoy_batcher_closed_loop_batch_size", model), 0) << "one client is not split";
  batcher.reset();
}

}  // namespace
}  // namespace convoy::batching
