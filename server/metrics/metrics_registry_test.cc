// MetricsRegistry and ModelMetricsReporter, checked through what a Prometheus server would see: the /metrics page
// fetched over HTTP from an ephemeral loopback port, after recording random known events.
#include "server/metrics/metrics_registry.h"

#include <atomic>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "server/metrics/buckets.h"
#include "server/metrics/testing/scrape.h"

namespace convoy::metrics {
namespace {

using ::convoy::metrics::testing::FamilyType;
using ::convoy::metrics::testing::HttpGet;
using ::convoy::metrics::testing::SampleValue;
using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::Optional;

using Labels = std::map<std::string, std::string>;

// Counters are doubles printed with enough digits to round-trip; sums of microseconds stay exact well below 2^53.
constexpr double kRelativeTolerance = 1e-9;

MetricsRegistry::Options Loopback() {
  MetricsRegistry::Options options;
  options.listen_address = "127.0.0.1:0";
  options.gpu_metrics = false;
  return options;
}

void ExpectNear(const std::optional<double>& actual, double expected, const std::string& what) {
  ASSERT_TRUE(actual.has_value()) << what << " missing from the scrape";
  EXPECT_NEAR(*actual, expected, std::abs(expected) * kRelativeTolerance + 1e-9) << what;
}

class MetricsRegistryTest : public ::testing::Test {
 protected:
  absl::Duration RandomDuration(int max_us) {
    return absl::Microseconds(std::uniform_int_distribution<int>(1, max_us)(rng_));
  }
  int Uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  std::mt19937 rng_{std::random_device{}()};
};

TEST_F(MetricsRegistryTest, ScrapeShowsTritonCountersForRecordedRequests) {
  CONVOY_ASSERT_OK_AND_ASSIGN(auto metrics, MetricsRegistry::Create(Loopback()));
  ASSERT_GT(metrics->port(), 0);
  std::unique_ptr<ModelMetricsReporter> reporter = metrics->ForModel("resnet50", "3");

  const int successes = Uniform(1, 50);
  double inferences = 0, request_us = 0, queue_us = 0, input_us = 0, infer_us = 0, output_us = 0;
  for (int i = 0; i < successes; ++i) {
    RequestTimings timings;
    timings.batch_size = Uniform(1, 8);
    timings.queue = RandomDuration(5000);
    timings.compute_input = RandomDuration(1000);
    timings.compute_infer = RandomDuration(20000);
    timings.compute_output = RandomDuration(1000);
    timings.request = timings.queue + timings.compute_input + timings.compute_infer + timings.compute_output +
                      RandomDuration(500);
    reporter->RecordSuccess(timings);
    inferences += static_cast<double>(timings.batch_size);
    request_us += absl::ToDoubleMicroseconds(timings.request);
    queue_us += absl::ToDoubleMicroseconds(timings.queue);
    input_us += absl::ToDoubleMicroseconds(timings.compute_input);
    infer_us += absl::ToDoubleMicroseconds(timings.compute_infer);
    output_us += absl::ToDoubleMicroseconds(timings.compute_output);
  }
  std::map<std::string, int> failures;
  for (int i = Uniform(0, 20); i > 0; --i) {
    const auto reason = static_cast<FailureReason>(Uniform(0, 3));
    reporter->RecordFailure(reason);
    ++failures[FailureReasonLabel(reason)];
  }
  const int pending = Uniform(0, 1000);
  reporter->SetPendingRequests(pending);
  const int running = Uniform(0, 1000);
  reporter->SetRunningRequests(running);

  CONVOY_ASSERT_OK_AND_ASSIGN(const std::string page, HttpGet(metrics->port(), "/metrics"));
  const Labels model = {{"model", "resnet50"}, {"version", "3"}};
  ExpectNear(SampleValue(page, "nv_inference_request_success", model), successes, "success");
  ExpectNear(SampleValue(page, "nv_inference_count", model), inferences, "inference count");
  ExpectNear(SampleValue(page, "nv_inference_request_duration_us", model), request_us, "request us");
  ExpectNear(SampleValue(page, "nv_inference_queue_duration_us", model), queue_us, "queue us");
  ExpectNear(SampleValue(page, "nv_inference_compute_input_duration_us", model), input_us, "input us");
  ExpectNear(SampleValue(page, "nv_inference_compute_infer_duration_us", model), infer_us, "infer us");
  ExpectNear(SampleValue(page, "nv_inference_compute_output_duration_us", model), output_us, "output us");
  ExpectNear(SampleValue(page, "nv_inference_pending_request_count", model), pending, "pending");
  ExpectNear(SampleValue(page, "convoy_batcher_running_requests", model), running, "running");
  for (const char* reason : {"REJECTED", "CANCELED", "BACKEND", "OTHER"}) {
    Labels labels = model;
    labels["reason"] = reason;
    ExpectNear(SampleValue(page, "nv_inference_request_failure", labels), failures[reason], reason);
  }
  ExpectNear(SampleValue(page, "convoy_request_duration_seconds_count", model), successes, "latency count");
  ExpectNear(SampleValue(page, "convoy_request_duration_seconds_sum", model), request_us / 1e6, "latency sum");
  ExpectNear(SampleValue(page, "convoy_queue_duration_seconds_sum", model), queue_us / 1e6, "queue sum");
  EXPECT_EQ(FamilyType(page, "nv_inference_request_success"), "counter");
  EXPECT_EQ(FamilyType(page, "nv_inference_pending_request_count"), "gauge");
  EXPECT_EQ(FamilyType(page, "convoy_batcher_running_requests"), "gauge");
  EXPECT_EQ(FamilyType(page, "convoy_request_duration_seconds"), "histogram");
}

TEST_F(MetricsRegistryTest, EdgePhasesAreCountedByProtocolAndPhase) {
  CONVOY_ASSERT_OK_AND_ASSIGN(auto metrics, MetricsRegistry::Create(Loopback()));
  std::unique_ptr<ModelMetricsReporter> reporter = metrics->ForModel("resnet50", "2");
  double receive_us = 0, decode_us[2] = {0, 0}, encode_us[2] = {0, 0}, send_us[2] = {0, 0};
  int requests[2] = {0, 0};
  for (int i = Uniform(1, 60); i > 0; --i) {
    const int protocol = Uniform(0, 1);
    EdgeTimes times;
    times.receive = RandomDuration(2000);  // counted for HTTP only
    times.decode = RandomDuration(3000);
    times.encode = RandomDuration(800);
    reporter->RecordEdge(static_cast<EdgeProtocol>(protocol), times);
    const absl::Duration send = RandomDuration(500);
    reporter->RecordEdgeSend(static_cast<EdgeProtocol>(protocol), send);
    send_us[protocol] += absl::ToDoubleMicroseconds(send);
    if (protocol == 1) receive_us += absl::ToDoubleMicroseconds(*times.receive);
    decode_us[protocol] += absl::ToDoubleMicroseconds(times.decode);
    encode_us[protocol] += absl::ToDoubleMicroseconds(times.encode);
    ++requests[protocol];
  }
  CONVOY_ASSERT_OK_AND_ASSIGN(const std::string page, HttpGet(metrics->port(), "/metrics"));
  for (int protocol : {0, 1}) {
    const std::string name = protocol == 0 ? "grpc" : "http";
    const Labels labels = {{"model", "resnet50"}, {"version", "2"}, {"protocol", name}};
    Labels decode = labels, encode = labels, send = labels;
    decode["phase"] = "decode";
    encode["phase"] = "encode";
    send["phase"] = "send";
    ExpectNear(SampleValue(page, "convoy_edge_duration_us", send), send_us[protocol], name + " send us");
    ExpectNear(SampleValue(page, "convoy_edge_requests_total", labels), requests[protocol], name + " requests");
    ExpectNear(SampleValue(page, "convoy_edge_duration_us", decode), decode_us[protocol], name + " decode us");
    ExpectNear(SampleValue(page, "convoy_edge_duration_us", encode), encode_us[protocol], name + " encode us");
  }
  Labels receive = {{"model", "resnet50"}, {"version", "2"}, {"protocol", "http"}, {"phase", "receive"}};
  ExpectNear(SampleValue(page, "convoy_edge_duration_us", receive), receive_us, "http receive us");
  for (absl::string_view line : absl::StrSplit(page, '\n')) {  // gRPC shows no first byte: no receive series
    EXPECT_FALSE(absl::StrContains(line, "phase=\"receive\"") && absl::StrContains(line, "protocol=\"grpc\""))
        << line;
  }
  EXPECT_EQ(FamilyType(page, "convoy_edge_duration_us"), "counter");
}

TEST_F(MetricsRegistryTest, BatchExecutionsFillExecCountBatchSizeAndComputeHistograms) {
  CONVOY_ASSERT_OK_AND_ASSIGN(auto metrics, MetricsRegistry::Create(Loopback()));
  std::unique_ptr<ModelMetricsReporter> reporter = metrics->ForModel("mobilenet", "1");
  const std::vector<double> bounds = BatchSizeBuckets();
  std::vector<int> at_or_below(bounds.size(), 0);
  const int batches = Uniform(1, 40);
  double compute_seconds = 0;
  for (int i = 0; i < batches; ++i) {
    const int size = Uniform(1, 64);
    const absl::Duration compute = RandomDuration(50000);
    reporter->RecordBatchExecution(size, compute);
    compute_seconds += absl::ToDoubleSeconds(compute);
    for (size_t b = 0; b < bounds.size(); ++b) at_or_below[b] += size <= bounds[b] ? 1 : 0;
  }
  const absl::Duration load = RandomDuration(10'000'000);
  reporter->RecordModelLoad(load);

  CONVOY_ASSERT_OK_AND_ASSIGN(const std::string page, HttpGet(metrics->port(), "/metrics"));
  const Labels model = {{"model", "mobilenet"}, {"version", "1"}};
  ExpectNear(SampleValue(page, "nv_inference_exec_count", model), batches, "exec count");
  for (size_t b = 0; b < bounds.size(); ++b) {
    Labels bucket = model;
    bucket["le"] = absl::StrCat(bounds[b]);
    ExpectNear(SampleValue(page, "convoy_batch_size_bucket", bucket), at_or_below[b], "le=" + bucket["le"]);
  }
  ExpectNear(SampleValue(page, "convoy_compute_duration_seconds_sum", model), compute_seconds, "compute sum");
  ExpectNear(SampleValue(page, "convoy_model_load_duration_seconds_sum", model), absl::ToDoubleSeconds(load),
             "load time");
  ExpectNear(SampleValue(page, "convoy_model_load_duration_seconds_count", model), 1, "loads");
}

TEST_F(MetricsRegistryTest, NewSeriesStartAtZeroAndModelsStaySeparate) {
  CONVOY_ASSERT_OK_AND_ASSIGN(auto metrics, MetricsRegistry::Create(Loopback()));
  std::unique_ptr<ModelMetricsReporter> busy = metrics->ForModel("busy", "1");
  std::unique_ptr<ModelMetricsReporter> idle = metrics->ForModel("idle", "2");
  const int count = Uniform(1, 9);
  for (int i = 0; i < count; ++i) busy->RecordSuccess(RequestTimings{});
  const std::string page = metrics->Scrape();
  EXPECT_THAT(SampleValue(page, "nv_inference_request_success", {{"model", "busy"}, {"version", "1"}}),
              Optional(static_cast<double>(count)));
  EXPECT_THAT(SampleValue(page, "nv_inference_request_success", {{"model", "idle"}, {"version", "2"}}),
              Optional(0.0));
  EXPECT_THAT(SampleValue(page, "nv_inference_request_failure",
                          {{"model", "idle"}, {"version", "2"}, {"reason", "CANCELED"}}),
              Optional(0.0));
  idle.reset();  // an unloaded model's pending gauge drops to zero
  EXPECT_THAT(SampleValue(metrics->Scrape(), "nv_inference_pending_request_count",
                          {{"model", "idle"}, {"version", "2"}}),
              Optional(0.0));
}

TEST_F(MetricsRegistryTest, AlgorithmCacheCountersAreReadAtScrapeTime) {
  CONVOY_ASSERT_OK_AND_ASSIGN(auto metrics, MetricsRegistry::Create(Loopback()));
  EXPECT_FALSE(SampleValue(metrics->Scrape(), "convoy_algorithm_cache_hits_total", {}).has_value())
      << "no source, no series";
  std::atomic<uint64_t> hits{static_cast<uint64_t>(Uniform(0, 100000))};
  const uint64_t misses = Uniform(0, 1000);
  const double tuning = Uniform(0, 100000) / 1000.0;
  metrics->SetAlgorithmCacheSource([&] { return AlgorithmCacheCounters{hits.load(), misses, tuning}; });
  CONVOY_ASSERT_OK_AND_ASSIGN(std::string page, HttpGet(metrics->port(), "/metrics"));
  ExpectNear(SampleValue(page, "convoy_algorithm_cache_hits_total", {}), hits.load(), "hits");
  ExpectNear(SampleValue(page, "convoy_algorithm_cache_misses_total", {}), misses, "misses");
  ExpectNear(SampleValue(page, "convoy_algorithm_tuning_seconds_total", {}), tuning, "tuning seconds");
  EXPECT_EQ(FamilyType(page, "convoy_algorithm_cache_hits_total"), "counter");
  hits += Uniform(1, 100);
  CONVOY_ASSERT_OK_AND_ASSIGN(page, HttpGet(metrics->port(), "/metrics"));
  ExpectNear(SampleValue(page, "convoy_algorithm_cache_hits_total", {}), hits.load(), "hits after more lookups");
}

// Rejections by on-device verification: one labelled sample per (algorithm, reason).
TEST_F(MetricsRegistryTest, AlgorithmRejectionsAreLabelledCounters) {
  CONVOY_ASSERT_OK_AND_ASSIGN(auto metrics, MetricsRegistry::Create(Loopback()));
  const uint64_t mismatches = Uniform(1, 1000), failures = Uniform(1, 1000);
  metrics->SetAlgorithmCacheSource([&] {
    AlgorithmCacheCounters counters;
    counters.rejections = {{"cuda.conv2d.implicit_gemm_64x64_splitk4", "mismatch", mismatches},
                           {"cuda.gemm.tensor_core_64x64", "run_failed", failures}};
    return counters;
  });
  CONVOY_ASSERT_OK_AND_ASSIGN(std::string page, HttpGet(metrics->port(), "/metrics"));
  EXPECT_EQ(FamilyType(page, "convoy_algorithm_rejected_total"), "counter");
  ExpectNear(SampleValue(page, "convoy_algorithm_rejected_total",
                         {{"algorithm", "cuda.conv2d.implicit_gemm_64x64_splitk4"}, {"reason", "mismatch"}}),
             mismatches, "mismatches");
  ExpectNear(SampleValue(page, "convoy_algorithm_rejected_total",
                         {{"algorithm", "cuda.gemm.tensor_core_64x64"}, {"reason", "run_failed"}}),
             failures, "run failures");
}

TEST_F(MetricsRegistryTest, PortInUseIsUnavailableNamingTheAddress) {
  CONVOY_ASSERT_OK_AND_ASSIGN(auto first, MetricsRegistry::Create(Loopback()));
  MetricsRegistry::Options same_port = Loopback();
  same_port.listen_address = absl::StrCat("127.0.0.1:", first->port());
  EXPECT_THAT(MetricsRegistry::Create(same_port),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr(same_port.listen_address)));
}

TEST_F(MetricsRegistryTest, WithoutAnEndpointMetricsStillRecord) {
  MetricsRegistry::Options options = Loopback();
  options.listen_address = "";
  CONVOY_ASSERT_OK_AND_ASSIGN(auto metrics, MetricsRegistry::Create(options));
  EXPECT_EQ(metrics->port(), 0);
  std::unique_ptr<ModelMetricsReporter> reporter = metrics->ForModel("m", "1");
  reporter->RecordFailure(FailureReason::kBackend);
  EXPECT_THAT(SampleValue(metrics->Scrape(), "nv_inference_request_failure",
                          {{"model", "m"}, {"version", "1"}, {"reason", "BACKEND"}}),
              Optional(1.0));
}

TEST(FailureReasonTest, StatusCodesMapToTritonReasons) {
  EXPECT_EQ(FailureReasonFromStatus(absl::UnavailableError("queue full")), FailureReason::kRejected);
  EXPECT_EQ(FailureReasonFromStatus(absl::DeadlineExceededError("timed out")), FailureReason::kRejected);
  EXPECT_EQ(FailureReasonFromStatus(absl::CancelledError("gone")), FailureReason::kCanceled);
  EXPECT_EQ(FailureReasonFromStatus(absl::InternalError("kernel")), FailureReason::kBackend);
  EXPECT_EQ(FailureReasonFromStatus(absl::InvalidArgumentError("shape")), FailureReason::kOther);
  EXPECT_STREQ(FailureReasonLabel(FailureReason::kCanceled), "CANCELED");
}

}  // namespace
}  // namespace convoy::metrics
