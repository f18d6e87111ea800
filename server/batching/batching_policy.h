// BatchingPolicy: how one model's dynamic batcher forms batches and treats waiting requests. It mirrors Triton's
// `dynamic_batching` block (proto/model_config.proto, ModelDynamicBatching and ModelQueuePolicy) in plain C++ types;
// the model repository fills it from a model's config.
//
// The knobs and their trade-offs:
//  - max_batch_size: the largest batch the model can run (sum of the requests' batch sizes). 0 means the model has
//    no batch dimension: every request runs alone.
//  - dynamic_batching: whether queued requests are merged into batches at all. Off is Triton's default scheduler
//    (a model without a `dynamic_batching` block): every request runs alone, as it comes, up to max_batch_size
//    elements each, and the knobs below other than the queue policies do nothing.
//  - preferred_batch_sizes: batch sizes worth waiting for (e.g. sizes with a tuned kernel or a CUDA graph). A batch
//    runs as soon as the largest preferred size (or max_batch_size) is reachable; when the queue delay ends, the
//    batcher sends the largest preferred size it has, else everything that fits. Empty: only max_batch_size counts.
//  - max_queue_delay: how long the oldest request of a partial batch may wait for company. Longer raises
//    throughput under light load at the cost of latency; zero sends whatever is queued at once. With the adaptive
//    formation it only caps the adaptive hold (InfiniteDuration: no cap).
//  - formation: how a partial batch is held. kFixedDelay (the default, Triton's dynamic batcher) holds it until
//    max_queue_delay or a preferred size; kAdaptive (adaptive_batch_policy.h) holds it only while the requests that
//    can still join are worth the wait, from measured arrivals and execution times, and keeps the p99 queue +
//    compute time under target_latency when one is set. Adaptive takes no preferred_batch_sizes: it measures the
//    execution time of every size instead.
//  - preserve_ordering: responses are delivered in the order batches were formed, even when several instances
//    finish out of order. Costs latency when a big batch runs beside a small one.
//  - priority_levels / default_priority_level: levels 1 (highest) .. priority_levels; a request without a priority
//    gets the default level. 0 levels means a single queue.
//  - default_queue_policy / priority_queue_policy: per level, a bounded queue (max_queue_size, 0 = unbounded; a full
//    queue rejects at once with UNAVAILABLE), a default timeout (0 = none), whether a request may ask for a shorter
//    one, and what happens when a request times out in the queue: REJECT fails it with DEADLINE_EXCEEDED, DELAY
//    keeps it but moves it behind every request of its level still in time.
#ifndef CONVOY_SERVER_BATCHING_BATCHING_POLICY_H_
#define CONVOY_SERVER_BATCHING_BATCHING_POLICY_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace convoy::batching {

enum class TimeoutAction { kReject, kDelay };
enum class BatchFormation { kFixedDelay, kAdaptive };

// "fixed" or "adaptive", as config.yaml spells the policy.
const char* BatchFormationName(BatchFormation formation);

struct QueuePolicy {
  TimeoutAction timeout_action = TimeoutAction::kReject;
  absl::Duration default_timeout = absl::ZeroDuration();  // zero: requests wait as long as it takes
  bool allow_timeout_override = false;                    // a request may shorten (never lengthen) the default
  int64_t max_queue_size = 0;                             // requests, not batch elements; 0: unbounded
};

struct BatchingPolicy {
  std::string model_name;  // named in every error message, e.g. "resnet50" or "resnet50:2"
  int64_t max_batch_size = 0;
  bool dynamic_batching = true;  // false: never merge requests
  std::vector<int64_t> preferred_batch_sizes;
  absl::Duration max_queue_delay = absl::ZeroDuration();
  BatchFormation formation = BatchFormation::kFixedDelay;
  absl::Duration target_latency = absl::ZeroDuration();  // kAdaptive only; zero: no target
  bool preserve_ordering = false;
  uint64_t priority_levels = 0;
  uint64_t default_priority_level = 0;
  QueuePolicy default_queue_policy;
  std::map<uint64_t, QueuePolicy> priority_queue_policy;  // level -> policy; levels not listed use the default

  // Number of queues: priority_levels, or 1 when priority levels are off.
  uint64_t level_count() const { return priority_levels == 0 ? 1 : priority_levels; }
  // The queue policy of `level` (1-based).
  const QueuePolicy& PolicyForLevel(uint64_t level) const;
};

// InvalidArgument naming the model and the offending numbers when the policy is inconsistent.
absl::Status ValidateBatchingPolicy(const BatchingPolicy& policy);

}  // namespace convoy::batching

#endif  // CONVOY_SERVER_BATCHING_BATCHING_POLICY_H_
