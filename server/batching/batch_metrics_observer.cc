// BatchMetricsObserver: batcher events into a model's metrics. See batch_metrics_observer.h.
#include "server/batching/batch_metrics_observer.h"

namespace convoy::batching {

void BatchMetricsObserver::OnPendingCountChanged(int64_t pending_requests) {
  reporter_->SetPendingRequests(pending_requests);
}

void BatchMetricsObserver::OnEnqueueRejected(const BatchRequest& request, const absl::Status& status) {
  reporter_->RecordFailure(metrics::FailureReasonFromStatus(status));
}

void BatchMetricsObserver::OnRequestCompleted(const BatchRequest& request, const absl::Status& status) {
  if (!status.ok()) reporter_->RecordFailure(metrics::FailureReasonFromStatus(status));
}

}  // namespace convoy::batching
