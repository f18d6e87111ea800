// BatchRequest: one inference request as the dynamic batcher sees it. The gRPC layer builds one per ModelInfer
// call, hands it to DynamicBatcher::Enqueue (which takes ownership on success), and learns the outcome through the
// completion callback. The batcher knows nothing of tensors: they travel in the opaque payload, which the batch
// executor (the model runtime's adapter) downcasts, reads inputs from and writes outputs into.
//
//   BatchRequest::Spec spec;
//   spec.batch_size = 4;                                  // the request's batch dimension
//   spec.shape_key = "images:3x224x224|out:logits";       // equal keys may share a batch
//   spec.priority = 2;
//   spec.is_cancelled = [ctx] { return ctx->IsCancelled(); };
//   auto request = std::make_unique<BatchRequest>(std::move(spec), std::move(payload),
//                                                 [done](absl::Status s) { done(s); });
//   absl::Status enqueued = batcher->Enqueue(std::move(request));   // on error `request` is still ours
#ifndef CONVOY_SERVER_BATCHING_BATCH_REQUEST_H_
#define CONVOY_SERVER_BATCHING_BATCH_REQUEST_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace convoy::batching {

// What the executor needs to run a request (its input tensors, where its outputs go). Subclassed by the gRPC layer.
class BatchPayload {
 public:
  virtual ~BatchPayload() = default;
};

class BatchRequest {
 public:
  // What the caller states about the request.
  struct Spec {
    // Elements along the batch dimension (>= 1). Batches are formed so that their requests' sizes sum to at most
    // the model's max_batch_size.
    int64_t batch_size = 1;
    // Identifies everything that must be equal for requests to share a batch: the non-batch dimensions of every
    // input, their types, and the requested outputs. The batcher only compares keys.
    std::string shape_key;
    // 1 is the highest; 0 means the model's default level.
    uint64_t priority = 0;
    // Zero: the queue's default timeout. Otherwise honoured only where the queue policy allows overrides, and only
    // to shorten the default.
    absl::Duration timeout = absl::ZeroDuration();
    // Polled while the request waits; true means the client is gone and the request must not run. May be empty.
    std::function<bool()> is_cancelled;
  };

  // Called exactly once if Enqueue succeeded, never otherwise: OK after a successful execution (outputs are in the
  // payload), or the error. It runs on a batcher thread while the request and its payload are still alive, and
  // must not block for long; it may call Enqueue again.
  using CompletionCallback = std::function<void(absl::Status)>;

  BatchRequest(Spec spec, std::unique_ptr<BatchPayload> payload, CompletionCallback on_complete);
  BatchRequest(const BatchRequest&) = delete;
  BatchRequest& operator=(const BatchRequest&) = delete;

  const Spec& spec() const { return spec_; }
  int64_t batch_size() const { return spec_.batch_size; }
  const std::string& shape_key() const { return spec_.shape_key; }

  BatchPayload* payload() const { return payload_.get(); }
  // The payload as the type the caller built it with.
  template <typename T>
  T* payload_as() const {
    return static_cast<T*>(payload_.get());
  }

  // Set by the batcher: when the request entered the queue, when it must leave it (InfiniteFuture: never), and when
  // it left it in a batch. Queue time is dispatch_time() - enqueue_time().
  absl::Time enqueue_time() const { return enqueue_time_; }
  absl::Time deadline() const { return deadline_; }
  absl::Time dispatch_time() const { return dispatch_time_; }
  // The level (1-based) the request was queued at.
  uint64_t priority_level() const { return priority_level_; }
  // Whether the batcher's load estimator took this request for the next one of a client it answered before
  // (load_estimator.h); reported back with the request's response.
  bool from_returning_client() const { return from_returning_client_; }

  // For the executor: this one request failed although its batch ran (e.g. its output could not be encoded). The
  // batcher completes it with this status instead of the batch's.
  void SetExecutionStatus(absl::Status status) { execution_status_ = std::move(status); }
  const absl::Status& execution_status() const { return execution_status_; }

  // True when the cancellation check says the client is gone.
  bool IsCancelled() const { return spec_.is_cancelled && spec_.is_cancelled(); }

  // Calls the completion callback; only the batcher calls this, exactly once per request.
  void Complete(absl::Status status);
  bool completed() const { return completed_; }

 private:
  friend class BatchQueue;

  Spec spec_;
  std::unique_ptr<BatchPayload> payload_;
  CompletionCallback on_complete_;
  absl::Status execution_status_;
  bool completed_ = false;
  absl::Time enqueue_time_ = absl::InfinitePast();
  absl::Time deadline_ = absl::InfiniteFuture();
  absl::Time dispatch_time_ = absl::InfinitePast();
  uint64_t priority_level_ = 0;
  bool delayed_ = false;  // timed out under TimeoutAction::kDelay: waits behind the requests still in time
  bool from_returning_client_ = false;
};

}  // namespace convoy::batching

#endif  // CONVOY_SERVER_BATCHING_BATCH_REQUEST_H_
