// DynamicBatcher: one model's request queue and the threads that feed its instances. The gRPC layer enqueues
// BatchRequests; each model instance has a thread that takes the next batch when the instance is free (BatchQueue
// decides what a batch is) and runs it through the injected BatchExecutor; every request is then completed
// exactly once. The batcher knows nothing of gRPC, tensors or models.
//
//   DynamicBatcher::Options options;
//   options.policy = policy;              // batching_policy.h
//   options.instance_count = 2;
//   options.executor = &runtime_adapter;  // must outlive the batcher
//   CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<DynamicBatcher> batcher, DynamicBatcher::Create(options));
//   CONVOY_RETURN_IF_ERROR(batcher->Enqueue(request));   // request is moved from only on success
//   ...
//   batcher->Shutdown(absl::Now() + absl::Seconds(30));  // drain, then fail what is left
//
// Cancelled and timed-out requests leave the queue when an instance thread next looks at it (on every enqueue,
// at every queue-delay or timeout deadline, and whenever an instance frees up); they never run.
//
// Each instance thread measures, with the injected clock, how long its instance was busy with a batch (execution and
// delivery of the responses) and reports it to the queue when it comes back for work, so the adaptive policy's
// execution-time estimates and its view of which clients are out follow what the instances actually do.
#ifndef CONVOY_SERVER_BATCHING_DYNAMIC_BATCHER_H_
#define CONVOY_SERVER_BATCHING_DYNAMIC_BATCHER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"  // absl::Condition
#include "kernels/common/mutex.h"
#include "absl/time/time.h"
#include "server/batching/batch_queue.h"
#include "server/batching/batch_request.h"
#include "server/batching/batching_policy.h"
#include "server/batching/clock.h"

namespace convoy::batching {

using Batch = std::vector<std::unique_ptr<BatchRequest>>;

// Runs batches on a model instance. Implemented by the runtime's adapter: it concatenates the requests' inputs
// (from their payloads) along the batch dimension, runs the model, and splits the outputs back into each
// request's payload. Splitting responses is the executor's job; completing requests is the batcher's.
class BatchExecutor {
 public:
  virtual ~BatchExecutor() = default;

  // Runs `batch` (requests in batch order; their batch sizes sum to at most max_batch_size and they share one
  // shape key) on instance `instance` (0 .. instance_count-1). Called on that instance's thread: calls for one
  // instance never overlap, calls for different instances run concurrently. The batcher keeps ownership: the
  // executor must not keep pointers to the requests after returning, and must not complete them. A non-OK status
  // fails every request of the batch; BatchRequest::SetExecutionStatus fails one request alone.
  virtual absl::Status ExecuteBatch(Batch& batch, int instance) = 0;
};

// Hooks for metrics. All optional; called on batcher threads (and on the enqueuing thread for Enqueue outcomes).
class BatchObserver {
 public:
  virtual ~BatchObserver() = default;
  // The number of queued requests changed. Called under the batcher's lock so values arrive in order: must be
  // cheap and must not call the batcher.
  virtual void OnPendingCountChanged(int64_t pending_requests) {}
  // The number of requests in batches taken from the queue and not yet completed changed. Called under the batcher's
  // lock, like OnPendingCountChanged.
  virtual void OnRunningCountChanged(int64_t running_requests) {}
  // Enqueue refused a request (queue full, bad batch size or priority, shutting down).
  virtual void OnEnqueueRejected(const BatchRequest& request, const absl::Status& status) {}
  // A batch leaves the queue for `instance`; each request's queue time is dispatch_time() - enqueue_time().
  virtual void OnBatchStarted(const Batch& batch, int instance) {}
  // A request is about to be completed with `status`: after running, or after leaving the queue without running
  // (cancelled, timed out, shut down).
  virtual void OnRequestCompleted(const BatchRequest& request, const absl::Status& status) {}
  // The policy's estimates after an instance finished a batch (and once at start). Called under the batcher's lock,
  // like OnPendingCountChanged: must be cheap and must not call the batcher.
  virtual void OnEstimatesChanged(const BatcherEstimates& estimates) {}
};

// Counters since the batcher started.
struct BatcherStats {
  int64_t pending_requests = 0;    // queued now
  int64_t running_batches = 0;     // taken from the queue, not yet completed
  int64_t running_requests = 0;    // the requests of those batches
  int64_t dispatched_batches = 0;  // handed to an instance
  int64_t dispatched_requests = 0;
  std::map<int64_t, int64_t> batches_by_size;  // batch size (sum of request batch sizes) -> batches dispatched
  absl::Duration total_queue_time = absl::ZeroDuration();  // summed over dispatched requests
  BatcherEstimates estimates;  // the policy's view of the load now
};

class DynamicBatcher {
 public:
  struct Options {
    BatchingPolicy policy;
    // Model instances; each gets a thread and executes one batch at a time.
    int instance_count = 1;
    BatchExecutor* executor = nullptr;            // required; not owned
    const Clock* clock = &Clock::Real();          // not owned
    BatchObserver* observer = nullptr;            // optional; not owned
  };

  // InvalidArgument for an invalid policy, no executor or instance_count < 1. Starts the instance threads.
  static absl::StatusOr<std::unique_ptr<DynamicBatcher>> Create(const Options& options);

  // Shuts down with an immediate deadline if Shutdown was not called (queued requests fail with UNAVAILABLE),
  // then waits for running batches to return.
  ~DynamicBatcher();

  DynamicBatcher(const DynamicBatcher&) = delete;
  DynamicBatcher& operator=(const DynamicBatcher&) = delete;

  // Queues a request. On success the batcher owns it (`request` becomes null) and will call its completion exactly
  // once. On failure `request` is untouched, the caller still owns it and its completion is never called: the
  // caller reports the returned error. Errors: UNAVAILABLE when shutting down or the priority level's queue is
  // full; INVALID_ARGUMENT for a batch size or priority the model does not accept.
  absl::Status Enqueue(std::unique_ptr<BatchRequest>& request);

  // Graceful drain: refuses new requests at once (UNAVAILABLE "model '<name>' is shutting down"), runs queued
  // requests without waiting for the queue delay, and waits until the queue is empty and no batch is running, or
  // until `deadline`. Requests still queued then complete with UNAVAILABLE; batches already running finish and
  // complete normally (the destructor waits for them). Returns OK when everything drained, DEADLINE_EXCEEDED
  // (with the counts) otherwise. Later calls return OK at once.
  absl::Status Shutdown(absl::Time deadline);

  BatcherStats stats() const;
  const BatchingPolicy& policy() const { return queue_->policy(); }

 private:
  // A batch taken from the queue, in the order batches were formed.
  struct Dispatched {
    uint64_t ticket = 0;
    Batch batch;
    std::vector<absl::Status> statuses;  // filled after execution, one per request
  };
  // What an instance thread does next.
  struct Work {
    std::vector<BatchQueue::Removed> removed;  // complete these without running them
    Dispatched dispatched;                     // run this batch, if not empty
    bool stop = false;
  };

  DynamicBatcher(const Options& options, std::unique_ptr<BatchQueue> queue);

  void RunInstance(int instance);
  // Reports a batch this instance finished to the queue's estimator and the observer.
  void RecordFinished(const BatchQueue::FinishedBatch& finished) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits until there is something to do; under mu_.
  Work NextWork() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Execute(Dispatched& dispatched, int instance);
  // Completes an executed batch; with preserve_ordering, only after every batch formed before it.
  void Deliver(Dispatched dispatched);
  void CompleteBatch(Dispatched& dispatched);
  void CompleteRemoved(std::vector<BatchQueue::Removed>& removed);
  void Complete(BatchRequest& request, absl::Status status);
  void PublishPendingCount() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `batches` batches of `requests` requests in all were completed: the running counts go down and are published.
  void FinishRunning(int64_t batches, int64_t requests) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Drained() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  BatchExecutor* const executor_;
  const Clock& clock_;
  BatchObserver* const observer_;
  const bool preserve_ordering_;
  const std::string model_name_;

  mutable convoy::Mutex mu_;
  const std::unique_ptr<BatchQueue> queue_ ABSL_PT_GUARDED_BY(mu_);
  // Bumped on every change an idle instance thread must look at (enqueue, shutdown).
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  bool accepting_ ABSL_GUARDED_BY(mu_) = true;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;  // Shutdown called: send partial batches at once
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;  // the queue was emptied for good: threads exit
  uint64_t next_ticket_ ABSL_GUARDED_BY(mu_) = 0;
  // preserve_ordering: executed batches waiting for earlier ones, by ticket.
  std::map<uint64_t, Dispatched> executed_ ABSL_GUARDED_BY(mu_);
  uint64_t next_ticket_to_deliver_ ABSL_GUARDED_BY(mu_) = 0;
  bool delivering_ ABSL_GUARDED_BY(mu_) = false;
  BatcherStats stats_ ABSL_GUARDED_BY(mu_);

  std::vector<std::thread> threads_;
};

}  // namespace convoy::batching

#endif  // CONVOY_SERVER_BATCHING_DYNAMIC_BATCHER_H_
