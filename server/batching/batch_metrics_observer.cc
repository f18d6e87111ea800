// BatchMetricsObserver: batcher events into a model's metrics. See batch_metrics_observer.h.
#include "server/batching/batch_metrics_observer.h"

namespace convoy::batching {

void BatchMetricsObserver::OnPendingCountChanged(int64_t pending_requests) {
  reporter_->SetPendingRequests(pending_requests);
}

void BatchMetricsObserver::OnRunningCountChanged(int64_t running_requests) {
  reporter_->SetRunningRequests(running_requests);
}

void BatchMetricsObserver::OnEnqueueRejected(const BatchRequest& request, const absl::Status& status) {
  reporter_->RecordFailure(metrics::FailureReasonFromStatus(status));
}

void BatchMetricsObserver::OnRequestCompleted(const BatchRequest& request, const absl::Status& status) {
  if (!status.ok()) reporter_->RecordFailure(metrics::FailureReasonFromStatus(status));
}

void BatchMetricsObserver::OnEstimatesChanged(const BatcherEstimates& estimates) {
  metrics::BatcherEstimateValues values;
  values.arrivals_per_second = estimates.arrivals_per_second;
  values.clients = static_cast<double>(estimates.clients);
  values.return_time = estimates.return_time;
  values.wait = estimates.last_wait;
  values.batch_limit = estimates.batch_limit;
  values.closed_loop_batch_size = estimates.closed_loop_batch_size;
  values.execution_time = estimates.execution_time;
  values.batches_by_reason = estimates.batches_by_reason;
  reporter_->SetBatcherEstimates(values);
}
}  // namespace convoy::batching
