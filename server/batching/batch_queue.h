// BatchQueue: the decisions of dynamic batching, without threads or clocks: which requests wait at which priority
// level, which leave because they were cancelled or timed out, and which form the next batch at a given time.
// DynamicBatcher (dynamic_batcher.h) drives it from its instance threads under its own mutex; tests drive it
// directly with explicit times. Not thread-safe.
//
// Batch formation, at time `now`:
//  - Candidates are visited in priority order: level 1 first; within a level, requests still in time in arrival
//    order, then the ones delayed by a DELAY timeout in the order they timed out.
//  - The first candidate (the head) fixes the batch's shape key. Later candidates with the same key join in order
//    while the sum of batch sizes stays within max_batch_size; the first same-key request that does not fit ends
//    the batch. Requests with other keys are skipped, never mixed in; they wait for a batch of their own.
//  - The batch runs now when it is full (max_batch_size, or the largest preferred size, or the next request does
//    not fit), when its oldest request has waited max_queue_delay, or when flushing (shutdown drain). It is then
//    cut to the longest prefix whose size is a preferred size or max_batch_size, when there is one.
//  - Otherwise nothing runs and the queue says when to look again: when the oldest request of that batch reaches
//    the queue delay, or when the first queued request times out, whichever is first. Requests with another key
//    wait behind the head's batch (bounded by max_queue_delay).
//  - With the adaptive formation (BatchFormation::kAdaptive) the two steps above are AdaptiveBatchPolicy's: it
//    decides from the LoadEstimator whether the head's batch runs now (and how much of it) or is held, and until
//    when. A flush sends everything that fits, as above.
//
// Whatever the formation, the queue keeps a LoadEstimator up to date: arrivals (Add), responses (requests that left
// without running, and RecordBatchDone) and the execution time of each batch (RecordBatchDone, reported by the
// batcher once the instance is free again). Estimates() reads it, with the hold of the last batch, for metrics.
#ifndef CONVOY_SERVER_BATCHING_BATCH_QUEUE_H_
#define CONVOY_SERVER_BATCHING_BATCH_QUEUE_H_

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/batching/adaptive_batch_policy.h"
#include "server/batching/batch_request.h"
#include "server/batching/batching_policy.h"
#include "server/batching/load_estimator.h"

namespace convoy::batching {

// What the batcher has learned about its model's load, for metrics (docs/metrics.md, convoy_batcher_*).
struct BatcherEstimates {
  double arrivals_per_second = 0;  // all arrivals, over the last 64
  int64_t clients = 0;             // requests queued or running plus clients out expected back
  std::optional<absl::Duration> return_time;  // mean time from a response to that client's next request
  absl::Duration last_wait = absl::ZeroDuration();  // how long the policy held the latest batch for company
  int64_t batch_limit = 0;         // the largest batch the latency target allows (max_batch_size without one)
  int64_t closed_loop_batch_size = 0;  // adaptive policy: the batch size a closed loop is split into; 0: not split
  std::map<int64_t, absl::Duration> execution_time;  // measured batch sizes -> estimated execution time
  // Adaptive policy: batches sent so far by why they went when they did (AdaptiveBatchPolicy::SendReasonName).
  std::map<std::string, int64_t> batches_by_reason;
};

class BatchQueue {
 public:
  // InvalidArgument when the policy does not validate (ValidateBatchingPolicy) or instances < 1. `instances`: how
  // many model instances take batches from this queue (the adaptive policy holds a batch only when no other is free).
  static absl::StatusOr<std::unique_ptr<BatchQueue>> Create(BatchingPolicy policy, int instances = 1);

  // Queues `request` at time `now`, fixing its level, enqueue time and deadline. On success `request` is moved
  // from (null); on failure it is untouched and the caller still owns it. Errors: InvalidArgument for a batch size
  // below 1 or above max_batch_size, or a priority outside 1..priority_levels (a priority is ignored when the model
  // has no priority levels); Unavailable when the level's queue holds max_queue_size requests already.
  absl::Status Add(std::unique_ptr<BatchRequest>& request, absl::Time now);

  // A request that left the queue without running, and the status to complete it with.
  struct Removed {
    std::unique_ptr<BatchRequest> request;
    absl::Status status;
  };
  // Takes out requests whose client is gone (CANCELLED) and requests past their deadline under REJECT
  // (DEADLINE_EXCEEDED); moves requests past their deadline under DELAY behind their level's requests in time.
  std::vector<Removed> RemoveCancelledAndExpired(absl::Time now);

  struct Decision {
    std::vector<std::unique_ptr<BatchRequest>> batch;  // empty: nothing runs now
    absl::Time next_check = absl::InfiniteFuture();    // with an empty batch: when the answer may change
  };
  // The next batch if one should run at `now` (its requests get dispatch time `now`). `flush` runs a partial batch
  // without waiting for the queue delay.
  Decision TakeBatch(absl::Time now, bool flush);

  // A batch TakeBatch gave out. RecordResponsesSent when its instance has executed it and is about to deliver its
  // responses: its clients are out from then on, recorded before any of them can send its next request (which is
  // then matched as a return; recorded after, a client that answers at once would count as a new arrival and leave
  // a phantom client expected back). RecordBatchDone once the instance is done with it (execution and delivery):
  // feeds the execution time of its size and frees the instance.
  struct FinishedBatch {
    int64_t elements = 0;   // sum of its requests' batch sizes
    int64_t requests = 0;
    int64_t returning = 0;  // requests with from_returning_client()
    absl::Time dispatched;  // the requests' dispatch_time()
    absl::Time done;        // when the instance had executed it and delivered every response
  };
  void RecordResponsesSent(const FinishedBatch& batch, absl::Time sent);
  void RecordBatchDone(const FinishedBatch& batch);
  // The summary of `batch` for RecordResponsesSent and RecordBatchDone, all but `done`.
  static FinishedBatch Summarize(const std::vector<std::unique_ptr<BatchRequest>>& batch);

  // Empties the queue (shutdown), in candidate order.
  std::vector<std::unique_ptr<BatchRequest>> TakeAll();

  BatcherEstimates Estimates() const;
  const LoadEstimator& load() const { return load_; }

  int64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Requests queued at `level` (1-based), in time and delayed.
  int64_t size_at_level(uint64_t level) const;
  const BatchingPolicy& policy() const { return policy_; }

 private:
  using RequestList = std::list<std::unique_ptr<BatchRequest>>;
  struct Level {
    RequestList in_time;  // arrival order
    RequestList delayed;  // timed out under DELAY, in the order they timed out
  };
  // A position among the candidates: which list, and where in it.
  struct Position {
    RequestList* list;
    RequestList::iterator it;
  };

  BatchQueue(BatchingPolicy policy, int instances);

  absl::StatusOr<uint64_t> LevelFor(const BatchRequest& request) const;
  absl::Duration TimeoutFor(const BatchRequest& request, const QueuePolicy& queue) const;
  // All requests in candidate order.
  std::vector<Position> Candidates();
  // The head's batch before cutting: same-key candidates in order, while they fit.
  std::vector<Position> GatherBatch(const std::vector<Position>& candidates, bool* full) const;
  // How many of `members` to send: the longest prefix whose size is preferred or max_batch_size, else all.
  size_t ChooseBatchLength(const std::vector<Position>& members) const;
  absl::Time EarliestDeadline() const;
  // The fixed formation: how many of `members` run now (0: hold; then *next_check says until when).
  size_t FixedDecision(const std::vector<Position>& members, bool full, absl::Time now,
                       absl::Time* next_check) const;
  // The adaptive formation's answer for the same question; a batch it sends is counted by its reason.
  size_t AdaptiveDecision(const std::vector<Position>& members, bool full, absl::Time now, absl::Time* next_check);

  const BatchingPolicy policy_;
  std::vector<Level> levels_;  // index = level - 1
  int64_t size_ = 0;
  LoadEstimator load_;
  std::optional<AdaptiveBatchPolicy> adaptive_;  // with BatchFormation::kAdaptive
  const int instances_;
  int64_t running_requests_ = 0;                 // given out by TakeBatch, not yet reported done
  int64_t running_batches_ = 0;
  int64_t returning_in_system_ = 0;              // queued or running requests from returning clients
  absl::Time last_change_ = absl::InfinitePast();  // the latest arrival, response, dispatch or removal
  std::optional<absl::Time> hold_start_;         // the first hold since the latest batch left
  absl::Duration last_wait_ = absl::ZeroDuration();
  int64_t batch_limit_ = 0;
  int64_t closed_loop_batch_size_ = 0;
  std::map<std::string, int64_t> batches_by_reason_;
};

}  // namespace convoy::batching

#endif  // CONVOY_SERVER_BATCHING_BATCH_QUEUE_H_
