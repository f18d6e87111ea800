// ModelMetricsReporter: what one model version records at each hop of a request (queue, compute input, compute
// infer, compute output), as Triton's nv_inference_* counters plus Convoy's latency and batch-size histograms.
// Get one from MetricsRegistry::ForModel (metrics_registry.h); docs/metrics.md lists every metric it feeds.
//
//   reporter->RecordSuccess({.batch_size = 4, .request = total, .queue = queued, .compute_infer = infer});
//   reporter->RecordBatchExecution(/*batch_size=*/16, input + infer + output);
//   reporter->RecordFailure(FailureReasonFromStatus(status));
//   reporter->SetBatchingPolicy("adaptive", absl::Milliseconds(50));   // once, when the batcher starts
//   reporter->SetBatcherEstimates({.arrivals_per_second = 180, .clients = 16, ...});  // after each batch
//
// Thread-safe (prometheus-cpp metrics are). A reporter must not outlive the MetricsRegistry it came from.
#ifndef CONVOY_SERVER_METRICS_MODEL_METRICS_REPORTER_H_
#define CONVOY_SERVER_METRICS_MODEL_METRICS_REPORTER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "kernels/common/mutex.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"

namespace convoy::metrics {

// Why a request failed, as Triton's nv_inference_request_failure `reason` label spells it.
enum class FailureReason {
  kRejected,  // "REJECTED": refused before running (queue full, queue timeout, shutting down)
  kCanceled,  // "CANCELED": the client went away
  kBackend,   // "BACKEND": the model failed while running
  kOther,     // "OTHER": anything else (invalid input, ...)
};

const char* FailureReasonLabel(FailureReason reason);
// UNAVAILABLE, RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED -> REJECTED; CANCELLED -> CANCELED; INTERNAL, DATA_LOSS,
// UNKNOWN, ABORTED -> BACKEND; everything else -> OTHER.
FailureReason FailureReasonFromStatus(const absl::Status& status);

// Timings of one successful request. Compute phases are those of the batch the request ran in (every request of
// a batch is charged the batch's compute time, as Triton does).
struct RequestTimings {
  int64_t batch_size = 1;                               // inferences in this request
  absl::Duration request = absl::ZeroDuration();        // arrival to response
  absl::Duration queue = absl::ZeroDuration();          // waiting in the batcher
  absl::Duration compute_input = absl::ZeroDuration();  // gathering and copying inputs
  absl::Duration compute_infer = absl::ZeroDuration();  // running the model
  absl::Duration compute_output = absl::ZeroDuration(); // splitting and copying outputs
};

// What the dynamic batcher's policy has learned about the load (server/batching/batch_queue.h, BatcherEstimates),
// in the metrics' terms.
struct BatcherEstimateValues {
  double arrivals_per_second = 0;
  double clients = 0;                                 // queued or running, plus clients out expected back
  std::optional<absl::Duration> return_time;          // response to that client's next request; unknown at first
  absl::Duration wait = absl::ZeroDuration();         // how long the policy held the latest batch for company
  int64_t batch_limit = 0;                            // the largest batch the latency target allows now
  int64_t closed_loop_batch_size = 0;                 // the batch size a closed loop is split into; 0: not split
  std::map<int64_t, absl::Duration> execution_time;   // by measured batch size
  std::map<std::string, int64_t> batches_by_reason;   // adaptive policy: batches sent so far, by reason
};

// The metric families a reporter writes into; owned by MetricsRegistry.
struct ModelMetricFamilies {
  prometheus::Family<prometheus::Counter>* request_success;
  prometheus::Family<prometheus::Counter>* request_failure;
  prometheus::Family<prometheus::Counter>* inference_count;
  prometheus::Family<prometheus::Counter>* exec_count;
  prometheus::Family<prometheus::Counter>* request_duration_us;
  prometheus::Family<prometheus::Counter>* queue_duration_us;
  prometheus::Family<prometheus::Counter>* compute_input_duration_us;
  prometheus::Family<prometheus::Counter>* compute_infer_duration_us;
  prometheus::Family<prometheus::Counter>* compute_output_duration_us;
  prometheus::Family<prometheus::Gauge>* pending_requests;
  prometheus::Family<prometheus::Gauge>* running_requests;
  prometheus::Family<prometheus::Histogram>* request_latency;
  prometheus::Family<prometheus::Histogram>* queue_latency;
  prometheus::Family<prometheus::Histogram>* compute_latency;
  prometheus::Family<prometheus::Histogram>* batch_size;
  prometheus::Family<prometheus::Histogram>* load_duration;
  prometheus::Family<prometheus::Gauge>* batcher_policy;
  prometheus::Family<prometheus::Gauge>* batcher_target_latency;
  prometheus::Family<prometheus::Gauge>* batcher_wait;
  prometheus::Family<prometheus::Gauge>* batcher_arrivals;
  prometheus::Family<prometheus::Gauge>* batcher_clients;
  prometheus::Family<prometheus::Gauge>* batcher_return_time;
  prometheus::Family<prometheus::Gauge>* batcher_batch_limit;
  prometheus::Family<prometheus::Gauge>* batcher_closed_loop_batch_size;
  prometheus::Family<prometheus::Gauge>* batcher_execution;
  prometheus::Family<prometheus::Counter>* batcher_batches;
  prometheus::Family<prometheus::Counter>* edge_duration_us;
  prometheus::Family<prometheus::Counter>* edge_requests;
};

// The protocol a request came in by (the `protocol` label of the edge metrics).
enum class EdgeProtocol { kGrpc = 0, kHttp = 1 };

// What the protocol edge spent on one successful request outside the batcher, by phase (the `phase` label).
struct EdgeTimes {
  // `receive`: the request's first byte to the whole request in hand (HTTP: the first bytes of the request on its
  // connection to the body read); absent where the protocol does not show the first byte (gRPC's callback API
  // hands a message over whole, so its request clock starts there).
  std::optional<absl::Duration> receive;
  // `decode`: from the whole request in hand to the request queued in the batcher (parsing, the hand-off to a
  // decode thread, validation, the copy into the batch's input buffers).
  absl::Duration decode;
  // `encode`: the response built from the output buffers (serialization, classification, compression).
  absl::Duration encode;
};

class ModelMetricsReporter {
 public:
  // Creates (or finds) every series of `model`/`version` in `families`, so they show as zero before any traffic.
  ModelMetricsReporter(const ModelMetricFamilies& families, std::string model, std::string version);
  // Sets the pending and running gauges to zero: an unloaded model has nothing queued or running.
  ~ModelMetricsReporter();
  ModelMetricsReporter(const ModelMetricsReporter&) = delete;
  ModelMetricsReporter& operator=(const ModelMetricsReporter&) = delete;

  const std::string& model() const { return model_; }
  const std::string& version() const { return version_; }

  void RecordSuccess(const RequestTimings& timings);
  // Triton counts failures without timing them.
  void RecordFailure(FailureReason reason);
  // One model execution of `batch_size` inferences taking `compute` (input + infer + output).
  void RecordBatchExecution(int64_t batch_size, absl::Duration compute);
  void SetPendingRequests(int64_t pending);
  // Requests in the batches the model's instances are executing now (taken from the queue, not yet answered).
  void SetRunningRequests(int64_t running);
  void RecordModelLoad(absl::Duration load_time);
  // The batching policy of this version ("fixed", "adaptive", or "none" without dynamic batching) and its latency
  // target (zero: none): convoy_batcher_policy{policy=...} is 1 for it.
  void SetBatchingPolicy(const std::string& policy, absl::Duration target_latency);
  // The policy's estimates now; an execution series appears for each batch size once it was measured.
  void SetBatcherEstimates(const BatcherEstimateValues& estimates);
  // What the protocol edge spent on one successful request outside the batcher (EdgeTimes).
  void RecordEdge(EdgeProtocol protocol, const EdgeTimes& times);
  // `send` (the `send` phase): from the response handed to the protocol to its last byte written to the socket
  // (gRPC: Finish to the call's completion; HTTP: the reply handed to the event loop to libevent's write done).
  // Recorded when the write completes, so a little after RecordEdge of the same request.
  void RecordEdgeSend(EdgeProtocol protocol, absl::Duration send);

 private:
  const std::string model_;
  const std::string version_;
  prometheus::Counter& request_success_;
  prometheus::Counter& failure_rejected_;
  prometheus::Counter& failure_canceled_;
  prometheus::Counter& failure_backend_;
  prometheus::Counter& failure_other_;
  prometheus::Counter& inference_count_;
  prometheus::Counter& exec_count_;
  prometheus::Counter& request_duration_us_;
  prometheus::Counter& queue_duration_us_;
  prometheus::Counter& compute_input_duration_us_;
  prometheus::Counter& compute_infer_duration_us_;
  prometheus::Counter& compute_output_duration_us_;
  struct EdgeCounters {
    prometheus::Counter* receive_us = nullptr;  // HTTP only
    prometheus::Counter* decode_us;
    prometheus::Counter* encode_us;
    prometheus::Counter* send_us;
    prometheus::Counter* requests;
  };
  EdgeCounters edge_[2];  // by EdgeProtocol
  prometheus::Gauge& pending_requests_;
  prometheus::Gauge& running_requests_;
  prometheus::Histogram& request_latency_;
  prometheus::Histogram& queue_latency_;
  prometheus::Histogram& compute_latency_;
  prometheus::Histogram& batch_size_;
  prometheus::Histogram& load_duration_;
  prometheus::Family<prometheus::Gauge>* const batcher_policy_family_;
  prometheus::Family<prometheus::Gauge>* const batcher_execution_family_;
  prometheus::Family<prometheus::Counter>* const batcher_batches_family_;
  prometheus::Gauge& batcher_target_latency_;
  prometheus::Gauge& batcher_wait_;
  prometheus::Gauge& batcher_arrivals_;
  prometheus::Gauge& batcher_clients_;
  prometheus::Gauge& batcher_return_time_;
  prometheus::Gauge& batcher_batch_limit_;
  prometheus::Gauge& batcher_closed_loop_batch_size_;
  convoy::Mutex execution_mu_;
  std::map<int64_t, prometheus::Gauge*> batcher_execution_ ABSL_GUARDED_BY(execution_mu_);  // by batch size
  struct ReasonCounter {
    prometheus::Counter* counter = nullptr;
    int64_t reported = 0;  // the batcher's count when last added
  };
  std::map<std::string, ReasonCounter> batcher_batches_ ABSL_GUARDED_BY(execution_mu_);  // by reason
};

}  // namespace convoy::metrics

#endif  // CONVOY_SERVER_METRICS_MODEL_METRICS_REPORTER_H_
