// BatchMetricsObserver with a real DynamicBatcher and MetricsRegistry (no HTTP endpoint) on a FakeClock: the
// pending gauge follows the queue, and refused, timed-out and cancelled requests land under Triton's reasons.
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

class NoopExecutor : public BatchExecutor {
 public:
  absl::Status ExecuteBatch(Batch&, int) override { return absl::OkStatus(); }
};

TEST(BatchMetricsObserverTest, PendingGaugeAndFailureReasonsFollowTheBatcher) {
  std::mt19937 rng(std::random_device{}());
  metrics::MetricsRegistry::Options metrics_options;
  metrics_options.listen_address = "";
  metrics_options.gpu_metrics = false;
  CONVOY_ASSERT_OK_AND_ASSIGN(auto registry, metrics::MetricsRegistry::Create(metrics_options));
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

}  // namespace
}  // namespace convoy::batching
