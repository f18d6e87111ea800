// MetricsRegistry: families, collectors and the HTTP endpoint. See metrics_registry.h.
#include "server/metrics/metrics_registry.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/text_serializer.h"

namespace convoy::metrics {
namespace {

template <typename Builder>
auto* Register(Builder builder, const char* name, const char* help, prometheus::Registry& registry) {
  return &builder.Name(name).Help(help).Register(registry);
}

}  // namespace

MetricsRegistry::MetricsRegistry()
    : registry_(std::make_shared<prometheus::Registry>()),
      cache_collector_(std::make_shared<AlgorithmCacheCollector>()) {
  RegisterFamilies();
}

void MetricsRegistry::RegisterFamilies() {
  prometheus::Registry& r = *registry_;
  using prometheus::BuildCounter;
  using prometheus::BuildGauge;
  using prometheus::BuildHistogram;
  families_.request_success = Register(BuildCounter(), "nv_inference_request_success",
                                       "Number of successful inference requests, all batch sizes", r);
  families_.request_failure = Register(BuildCounter(), "nv_inference_request_failure",
                                       "Number of failed inference requests, all batch sizes, by reason", r);
  families_.inference_count = Register(BuildCounter(), "nv_inference_count",
                                       "Number of inferences performed (a batch-4 request counts 4)", r);
  families_.exec_count = Register(BuildCounter(), "nv_inference_exec_count",
                                  "Number of model executions performed (batches)", r);
  families_.request_duration_us = Register(BuildCounter(), "nv_inference_request_duration_us",
                                           "Cumulative inference request duration in microseconds", r);
  families_.queue_duration_us = Register(BuildCounter(), "nv_inference_queue_duration_us",
                                         "Cumulative inference queuing duration in microseconds", r);
  families_.compute_input_duration_us = Register(BuildCounter(), "nv_inference_compute_input_duration_us",
                                                 "Cumulative compute input duration in microseconds", r);
  families_.compute_infer_duration_us = Register(BuildCounter(), "nv_inference_compute_infer_duration_us",
                                                 "Cumulative compute inference duration in microseconds", r);
  families_.compute_output_duration_us = Register(BuildCounter(), "nv_inference_compute_output_duration_us",
                                                  "Cumulative compute output duration in microseconds", r);
  families_.pending_requests = Register(BuildGauge(), "nv_inference_pending_request_count",
                                        "Instantaneous number of requests waiting in the batcher queue", r);
  families_.running_requests = Register(BuildGauge(), "convoy_batcher_running_requests",
                                        "Requests in the batches the model's instances are executing now", r);
  families_.request_latency = Register(BuildHistogram(), "convoy_request_duration_seconds",
                                       "Successful request latency from arrival to response, seconds", r);
  families_.queue_latency = Register(BuildHistogram(), "convoy_queue_duration_seconds",
                                     "Time successful requests waited in the batcher queue, seconds", r);
  families_.compute_latency = Register(BuildHistogram(), "convoy_compute_duration_seconds",
                                       "Model execution time per batch (input + infer + output), seconds", r);
  families_.batch_size = Register(BuildHistogram(), "convoy_batch_size",
                                  "Batch size of each model execution (sum of its requests' batch sizes)", r);
  families_.load_duration = Register(BuildHistogram(), "convoy_model_load_duration_seconds",
                                     "Time to load a model version (import, optimize, plan, tune), seconds", r);
  families_.batcher_policy = Register(BuildGauge(), "convoy_batcher_policy",
                                      "1 for the dynamic batching policy of the version: fixed, adaptive or none", r);
  families_.batcher_target_latency = Register(BuildGauge(), "convoy_batcher_target_latency_seconds",
                                              "The adaptive policy's p99 queue + compute target, seconds (0: none)", r);
  families_.batcher_wait = Register(BuildGauge(), "convoy_batcher_wait_seconds",
                                    "How long the policy held the latest batch open for more requests, seconds", r);
  families_.batcher_arrivals = Register(BuildGauge(), "convoy_batcher_arrivals_per_second",
                                        "Request arrival rate over the last 64 arrivals, requests per second", r);
  families_.batcher_clients = Register(BuildGauge(), "convoy_batcher_clients",
                                       "Estimated concurrent clients: requests queued or running plus clients "
                                       "answered and expected back", r);
  families_.batcher_return_time = Register(BuildGauge(), "convoy_batcher_return_seconds",
                                           "Mean time from a response to that client's next request, seconds", r);
  families_.batcher_batch_limit = Register(BuildGauge(), "convoy_batcher_batch_limit",
                                           "Largest batch the latency target allows now (max_batch_size without one)",
                                           r);
  families_.batcher_closed_loop_batch_size =
      Register(BuildGauge(), "convoy_batcher_closed_loop_batch_size",
               "Batch size the adaptive policy splits a closed loop of clients into (0: not split)", r);
  families_.batcher_execution = Register(BuildGauge(), "convoy_batcher_execution_seconds",
                                         "Estimated execution time of a batch, by measured batch size, seconds", r);
  families_.batcher_batches = Register(BuildCounter(), "convoy_batcher_batches_total",
                                       "Batches the adaptive policy sent, by why they went when they did", r);
  families_.edge_duration_us = Register(
      BuildCounter(), "convoy_edge_duration_us",
      "Cumulative protocol-edge time of successful requests, by protocol and phase (receive: first byte to "
      "whole request, HTTP only; decode: whole request to batcher queue; encode: output buffers to response; "
      "send: response handed over to written), microseconds", r);
  families_.edge_requests = Register(BuildCounter(), "convoy_edge_requests_total",
                                     "Successful requests timed by convoy_edge_duration_us, by protocol", r);
}

absl::StatusOr<std::unique_ptr<MetricsRegistry>> MetricsRegistry::Create(const Options& options) {
  std::unique_ptr<MetricsRegistry> metrics(new MetricsRegistry());
  if (options.gpu_metrics) metrics->gpu_collector_ = NvmlGpuCollector::Open(options.nvml_library);
  if (options.listen_address.empty()) return metrics;
  MetricsRegistry* raw = metrics.get();
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> endpoint =
      MetricsHttpServer::Create({options.listen_address, options.path, [raw] { return raw->Scrape(); }});
  if (!endpoint.ok()) return endpoint.status();
  metrics->endpoint_ = std::move(endpoint).value();
  metrics->port_ = metrics->endpoint_->port();
  return metrics;
}

// The endpoint goes first: it must stop serving before the collectables it reads are destroyed.
MetricsRegistry::~MetricsRegistry() { endpoint_.reset(); }

std::unique_ptr<ModelMetricsReporter> MetricsRegistry::ForModel(const std::string& model,
                                                                const std::string& version) {
  return std::make_unique<ModelMetricsReporter>(families_, model, version);
}

void MetricsRegistry::SetAlgorithmCacheSource(std::function<AlgorithmCacheCounters()> source) {
  cache_collector_->SetSource(std::move(source));
}

std::string MetricsRegistry::Scrape() const {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  for (prometheus::MetricFamily& family : cache_collector_->Collect()) families.push_back(std::move(family));
  if (gpu_collector_ != nullptr) {
    for (prometheus::MetricFamily& family : gpu_collector_->Collect()) families.push_back(std::move(family));
  }
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace convoy::metrics
