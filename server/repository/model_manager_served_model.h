// ServedModel: one READY model version as the server runs it. It owns the ModelRuntime, one ModelInstance per
// instance_group count (each run by its own batcher thread), the DynamicBatcher with the config's batching policy,
// the metrics reporter, the labels of classification outputs, and the statistics ModelStatistics reports.
//
//   auto request = std::make_unique<InferencePayload>();   // inputs decoded and validated by the caller
//   CONVOY_RETURN_IF_ERROR(served->Infer(spec, std::move(request), [](absl::Status s, InferencePayload& p) {...}));
//
// Requests never see the batcher directly: Infer wraps their completion to count statistics and metrics. The
// ModelManager creates ServedModels (Load) and retires them (Drain); a retired model refuses new requests with
// UNAVAILABLE and finishes the ones it accepted. Thread-safe.
#ifndef CONVOY_SERVER_REPOSITORY_MODEL_MANAGER_SERVED_MODEL_H_
#define CONVOY_SERVER_REPOSITORY_MODEL_MANAGER_SERVED_MODEL_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kernels/common/mutex.h"
#include "kernels/common/tensor.h"
#include "kernels/registry/device.h"
#include "server/batching/batch_metrics_observer.h"
#include "server/batching/clock.h"
#include "server/batching/dynamic_batcher.h"
#include "server/metrics/metrics_registry.h"
#include "server/repository/inference_payload.h"
#include "server/repository/model_config.h"
#include "server/runtime/model_runtime.h"

namespace convoy::repository {

// Triton's ModelStatistics in plain C++: counts and summed nanoseconds.
struct DurationStat {
  uint64_t count = 0;
  uint64_t ns = 0;
  void Add(absl::Duration d) {
    ++count;
    ns += static_cast<uint64_t>(absl::ToInt64Nanoseconds(d));
  }
};
struct BatchSizeStat {
  DurationStat compute_input, compute_infer, compute_output;
};
struct ModelStats {
  uint64_t last_inference_ms = 0;  // since the epoch
  uint64_t inference_count = 0;    // batch elements
  uint64_t execution_count = 0;    // batches
  DurationStat success, fail, queue, compute_input, compute_infer, compute_output;
  std::map<int64_t, BatchSizeStat> batch_stats;  // by batch size
};

class ServedModel {
 public:
  struct Options {
    std::string model_name;
    int64_t version = 0;
    std::string model_directory;  // labels files are relative to it
    std::string model_path;
    ModelConfig config;
    Device* device = nullptr;                       // required
    const batching::Clock* clock = &batching::Clock::Real();
    metrics::MetricsRegistry* metrics = nullptr;    // optional
    std::function<void(const std::string&)> load_log;  // optional: the runtime's load progress lines
  };
  // Imports, plans and warms the model, creates its instances and starts its batcher. Errors carry the cause
  // (bad model file, planning failure, unreadable labels file).
  static absl::StatusOr<std::unique_ptr<ServedModel>> Load(const Options& options);
  // Drains with an immediate deadline if Drain was not called.
  ~ServedModel();

  using Done = std::function<void(absl::Status, InferencePayload&)>;
  // Queues a request. On success `done` runs exactly once (on a batcher thread) with the outcome and the payload
  // holding the outputs; on error `done` never runs and the returned status says why (UNAVAILABLE: queue full or
  // draining; INVALID_ARGUMENT: bad priority or batch size). `payload` is taken unless the model is draining
  // (then it is left untouched, so the caller can send it to the version that replaced this one).
  absl::Status Infer(batching::BatchRequest::Spec spec, std::unique_ptr<InferencePayload>& payload, Done done);

  // Counts a request for this version that failed before it reached Infer (e.g. its inputs did not decode
  // against this version's config): a failure in the statistics and in nv_inference_request_failure under the
  // status's reason (INVALID_ARGUMENT -> OTHER), as Triton counts invalid requests against the model.
  void RecordRejectedRequest(const absl::Status& status);
  // The protocol edge's share of a successful request (metrics::ModelMetricsReporter::RecordEdge).
  void RecordEdge(metrics::EdgeProtocol protocol, const metrics::EdgeTimes& times) const;
  void RecordEdgeSend(metrics::EdgeProtocol protocol, absl::Duration send) const;

  // Stops accepting requests and finishes queued ones until `deadline` (see DynamicBatcher::Shutdown).
  // Waits for requests being admitted to reach the batcher first, so none is refused after it was admitted.
  absl::Status Drain(absl::Time deadline);
  bool draining() const;

  const std::string& name() const { return name_; }
  int64_t version() const { return version_; }
  const ModelConfig& config() const { return config_; }
  const runtime::ModelRuntime& runtime() const { return *runtime_; }
  // The served name with the runtime's inputs, outputs and max_batch_size: what requests are decoded against.
  const runtime::ModelSignature& signature() const { return signature_; }
  const batching::BatchingPolicy& policy() const { return batcher_->policy(); }
  // The labels of output `index` (model output order); empty when it has no labels file.
  const std::vector<std::string>& labels(size_t index) const { return labels_[index]; }
  absl::Duration load_time() const { return load_time_; }
  ModelStats stats() const;
  // The batcher's live counters (queued requests, running batches): what tests wait on instead of sleeping.
  batching::BatcherStats batcher_stats() const;

 private:
  class Executor;
  ServedModel() = default;
  absl::Status LoadLabels(const Options& options);
  absl::Status StartBatcher(const Options& options);
  void RecordOutcome(const batching::BatchRequest& request, const absl::Status& status, absl::Time arrival);
  void RecordBatch(int64_t batch_size, absl::Duration input, absl::Duration infer, absl::Duration output);

  std::string name_;
  int64_t version_ = 0;
  ModelConfig config_;
  const batching::Clock* clock_ = nullptr;
  std::unique_ptr<runtime::ModelRuntime> runtime_;
  runtime::ModelSignature signature_;
  std::vector<std::vector<std::string>> labels_;
  absl::Duration load_time_ = absl::ZeroDuration();
  std::unique_ptr<metrics::ModelMetricsReporter> reporter_;
  std::unique_ptr<batching::BatchMetricsObserver> observer_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<batching::DynamicBatcher> batcher_;  // declared last: destroyed first
  mutable convoy::Mutex admit_mu_;
  bool draining_ ABSL_GUARDED_BY(admit_mu_) = false;
  int admitting_ ABSL_GUARDED_BY(admit_mu_) = 0;  // Infer calls between admission and Enqueue

  mutable convoy::Mutex stats_mu_;
  ModelStats stats_ ABSL_GUARDED_BY(stats_mu_);
};

// The batching policy a config asks for (dynamic_batching, or none: every request runs alone at once).
batching::BatchingPolicy PolicyFromConfig(const ModelConfig& config, const std::string& name);

}  // namespace convoy::repository

#endif  // CONVOY_SERVER_REPOSITORY_MODEL_MANAGER_SERVED_MODEL_H_
