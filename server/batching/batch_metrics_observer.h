// BatchMetricsObserver: connects a DynamicBatcher to a model version's ModelMetricsReporter. It feeds the pending
// gauge and the policy's estimates (convoy_batcher_*), and counts every request the batcher refuses or fails (queue
// full, timeout, cancellation, shutdown, a failed batch) under Triton's failure reasons. Successes carry compute
// timings only the executor knows, so the executor (or the gRPC layer) records them with
// ModelMetricsReporter::RecordSuccess and RecordBatchExecution.
//
//   BatchMetricsObserver observer(reporter.get());   // outlives the batcher
//   options.observer = &observer;
#ifndef CONVOY_SERVER_BATCHING_BATCH_METRICS_OBSERVER_H_
#define CONVOY_SERVER_BATCHING_BATCH_METRICS_OBSERVER_H_

#include "server/batching/dynamic_batcher.h"
#include "server/metrics/model_metrics_reporter.h"

namespace convoy::batching {

class BatchMetricsObserver final : public BatchObserver {
 public:
  // `reporter` is not owned and must outlive the observer.
  explicit BatchMetricsObserver(metrics::ModelMetricsReporter* reporter) : reporter_(reporter) {}

  void OnPendingCountChanged(int64_t pending_requests) override;
  void OnRunningCountChanged(int64_t running_requests) override;
  void OnEnqueueRejected(const BatchRequest& request, const absl::Status& status) override;
  void OnRequestCompleted(const BatchRequest& request, const absl::Status& status) override;
  void OnEstimatesChanged(const BatcherEstimates& estimates) override;

 private:
  metrics::ModelMetricsReporter* const reporter_;
};

}  // namespace convoy::batching

#endif  // CONVOY_SERVER_BATCHING_BATCH_METRICS_OBSERVER_H_
