// ModelMetricsReporter: one model version's series in the registry. See model_metrics_reporter.h.
#include "server/metrics/model_metrics_reporter.h"

#include <utility>

#include "server/metrics/buckets.h"

namespace convoy::metrics {
namespace {

double Microseconds(absl::Duration duration) { return absl::ToDoubleMicroseconds(duration); }
double Seconds(absl::Duration duration) { return absl::ToDoubleSeconds(duration); }

prometheus::Labels FailureLabels(const std::string& model, const std::string& version, FailureReason reason) {
  return {{"model", model}, {"version", version}, {"reason", FailureReasonLabel(reason)}};
}

}  // namespace

const char* FailureReasonLabel(FailureReason reason) {
  switch (reason) {
    case FailureReason::kRejected:
      return "REJECTED";
    case FailureReason::kCanceled:
      return "CANCELED";
    case FailureReason::kBackend:
      return "BACKEND";
    case FailureReason::kOther:
      return "OTHER";
  }
  return "OTHER";
}

FailureReason FailureReasonFromStatus(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kDeadlineExceeded:
      return FailureReason::kRejected;
    case absl::StatusCode::kCancelled:
      return FailureReason::kCanceled;
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kDataLoss:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kAborted:
      return FailureReason::kBackend;
    default:
      return FailureReason::kOther;
  }
}

ModelMetricsReporter::ModelMetricsReporter(const ModelMetricFamilies& families, std::string model,
                                           std::string version)
    : model_(std::move(model)),
      version_(std::move(version)),
      request_success_(families.request_success->Add({{"model", model_}, {"version", version_}})),
      failure_rejected_(families.request_failure->Add(FailureLabels(model_, version_, FailureReason::kRejected))),
      failure_canceled_(families.request_failure->Add(FailureLabels(model_, version_, FailureReason::kCanceled))),
      failure_backend_(families.request_failure->Add(FailureLabels(model_, version_, FailureReason::kBackend))),
      failure_other_(families.request_failure->Add(FailureLabels(model_, version_, FailureReason::kOther))),
      inference_count_(families.inference_count->Add({{"model", model_}, {"version", version_}})),
      exec_count_(families.exec_count->Add({{"model", model_}, {"version", version_}})),
      request_duration_us_(families.request_duration_us->Add({{"model", model_}, {"version", version_}})),
      queue_duration_us_(families.queue_duration_us->Add({{"model", model_}, {"version", version_}})),
      compute_input_duration_us_(
          families.compute_input_duration_us->Add({{"model", model_}, {"version", version_}})),
      compute_infer_duration_us_(
          families.compute_infer_duration_us->Add({{"model", model_}, {"version", version_}})),
      compute_output_duration_us_(
          families.compute_output_duration_us->Add({{"model", model_}, {"version", version_}})),
      pending_requests_(families.pending_requests->Add({{"model", model_}, {"version", version_}})),
      running_requests_(families.running_requests->Add({{"model", model_}, {"version", version_}})),
      request_latency_(
          families.request_latency->Add({{"model", model_}, {"version", version_}}, LatencyBucketsSeconds())),
      queue_latency_(
          families.queue_latency->Add({{"model", model_}, {"version", version_}}, LatencyBucketsSeconds())),
      compute_latency_(
          families.compute_latency->Add({{"model", model_}, {"version", version_}}, LatencyBucketsSeconds())),
      batch_size_(families.batch_size->Add({{"model", model_}, {"version", version_}}, BatchSizeBuckets())),
      load_duration_(
          families.load_duration->Add({{"model", model_}, {"version", version_}}, LoadTimeBucketsSeconds())),
      batcher_policy_family_(families.batcher_policy),
      batcher_execution_family_(families.batcher_execution),
      batcher_batches_family_(families.batcher_batches),
      batcher_target_latency_(families.batcher_target_latency->Add({{"model", model_}, {"version", version_}})),
      batcher_wait_(families.batcher_wait->Add({{"model", model_}, {"version", version_}})),
      batcher_arrivals_(families.batcher_arrivals->Add({{"model", model_}, {"version", version_}})),
      batcher_clients_(families.batcher_clients->Add({{"model", model_}, {"version", version_}})),
      batcher_return_time_(families.batcher_return_time->Add({{"model", model_}, {"version", version_}})),
      batcher_batch_limit_(families.batcher_batch_limit->Add({{"model", model_}, {"version", version_}})),
      batcher_closed_loop_batch_size_(
          families.batcher_closed_loop_batch_size->Add({{"model", model_}, {"version", version_}})) {
  for (EdgeProtocol protocol : {EdgeProtocol::kGrpc, EdgeProtocol::kHttp}) {
    const std::string name = protocol == EdgeProtocol::kGrpc ? "grpc" : "http";
    EdgeCounters& edge = edge_[static_cast<int>(protocol)];
    edge.decode_us = &families.edge_duration_us->Add(
        {{"model", model_}, {"version", version_}, {"protocol", name}, {"phase", "decode"}});
    edge.encode_us = &families.edge_duration_us->Add(
        {{"model", model_}, {"version", version_}, {"protocol", name}, {"phase", "encode"}});
    edge.send_us = &families.edge_duration_us->Add(
        {{"model", model_}, {"version", version_}, {"protocol", name}, {"phase", "send"}});
    if (protocol == EdgeProtocol::kHttp) {
      edge.receive_us = &families.edge_duration_us->Add(
          {{"model", model_}, {"version", version_}, {"protocol", name}, {"phase", "receive"}});
    }
    edge.requests = &families.edge_requests->Add({{"model", model_}, {"version", version_}, {"protocol", name}});
  }
}

ModelMetricsReporter::~ModelMetricsReporter() {
  pending_requests_.Set(0);
  running_requests_.Set(0);
}

void ModelMetricsReporter::RecordSuccess(const RequestTimings& timings) {
  request_success_.Increment();
  inference_count_.Increment(static_cast<double>(timings.batch_size));
  request_duration_us_.Increment(Microseconds(timings.request));
  queue_duration_us_.Increment(Microseconds(timings.queue));
  compute_input_duration_us_.Increment(Microseconds(timings.compute_input));
  compute_infer_duration_us_.Increment(Microseconds(timings.compute_infer));
  compute_output_duration_us_.Increment(Microseconds(timings.compute_output));
  request_latency_.Observe(Seconds(timings.request));
  queue_latency_.Observe(Seconds(timings.queue));
}

void ModelMetricsReporter::RecordFailure(FailureReason reason) {
  switch (reason) {
    case FailureReason::kRejected:
      failure_rejected_.Increment();
      break;
    case FailureReason::kCanceled:
      failure_canceled_.Increment();
      break;
    case FailureReason::kBackend:
      failure_backend_.Increment();
      break;
    case FailureReason::kOther:
      failure_other_.Increment();
      break;
  }
}

void ModelMetricsReporter::RecordBatchExecution(int64_t batch_size, absl::Duration compute) {
  exec_count_.Increment();
  batch_size_.Observe(static_cast<double>(batch_size));
  compute_latency_.Observe(Seconds(compute));
}

void ModelMetricsReporter::SetPendingRequests(int64_t pending) {
  pending_requests_.Set(static_cast<double>(pending));
}

void ModelMetricsReporter::SetRunningRequests(int64_t running) {
  running_requests_.Set(static_cast<double>(running));
}

void ModelMetricsReporter::RecordModelLoad(absl::Duration load_time) { load_duration_.Observe(Seconds(load_time)); }

void ModelMetricsReporter::SetBatchingPolicy(const std::string& policy, absl::Duration target_latency) {
  batcher_policy_family_->Add({{"model", model_}, {"version", version_}, {"policy", policy}}).Set(1);
  batcher_target_latency_.Set(Seconds(target_latency));
}

void ModelMetricsReporter::RecordEdge(EdgeProtocol protocol, const EdgeTimes& times) {
  EdgeCounters& edge = edge_[static_cast<int>(protocol)];
  if (times.receive.has_value() && edge.receive_us != nullptr) edge.receive_us->Increment(Microseconds(*times.receive));
  edge.decode_us->Increment(Microseconds(times.decode));
  edge.encode_us->Increment(Microseconds(times.encode));
  edge.requests->Increment();
}

void ModelMetricsReporter::RecordEdgeSend(EdgeProtocol protocol, absl::Duration send) {
  edge_[static_cast<int>(protocol)].send_us->Increment(Microseconds(send));
}

void ModelMetricsReporter::SetBatcherEstimates(const BatcherEstimateValues& estimates) {
  batcher_arrivals_.Set(estimates.arrivals_per_second);
  batcher_clients_.Set(estimates.clients);
  batcher_return_time_.Set(estimates.return_time ? Seconds(*estimates.return_time) : 0.0);
  batcher_wait_.Set(Seconds(estimates.wait));
  batcher_batch_limit_.Set(static_cast<double>(estimates.batch_limit));
  batcher_closed_loop_batch_size_.Set(static_cast<double>(estimates.closed_loop_batch_size));
  convoy::MutexLock lock(&execution_mu_);
  for (const auto& [batch_size, time] : estimates.execution_time) {
    prometheus::Gauge*& gauge = batcher_execution_[batch_size];
    if (gauge == nullptr) {
      gauge = &batcher_execution_family_->Add(
          {{"model", model_}, {"version", version_}, {"batch_size", std::to_string(batch_size)}});
    }
    gauge->Set(Seconds(time));
  }
  // Cumulative counts from the batcher become counter increments (a batcher that started over counts from zero).
  for (const auto& [reason, count] : estimates.batches_by_reason) {
    ReasonCounter& entry = batcher_batches_[reason];
    if (entry.counter == nullptr) {
      entry.counter = &batcher_batches_family_->Add({{"model", model_}, {"version", version_}, {"reason", reason}});
    }
    if (count < entry.reported) entry.reported = 0;
    entry.counter->Increment(static_cast<double>(count - entry.reported));
    entry.reported = count;
  }
}

}  // namespace convoy::metrics
