// BatchQueue: priority queues, timeouts and batch formation for one model. See batch_queue.h.
#include "server/batching/batch_queue.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"

namespace convoy::batching {

absl::StatusOr<std::unique_ptr<BatchQueue>> BatchQueue::Create(BatchingPolicy policy, int instances) {
  CONVOY_RETURN_IF_ERROR(ValidateBatchingPolicy(policy));
  if (instances < 1) {
    return absl::InvalidArgumentError(absl::StrCat("model '", policy.model_name, "': instances must be >= 1, got ",
                                                   instances));
  }
  return std::unique_ptr<BatchQueue>(new BatchQueue(std::move(policy), instances));
}

BatchQueue::BatchQueue(BatchingPolicy policy, int instances)
    : policy_(std::move(policy)),
      levels_(policy_.level_count()),
      load_(policy_.max_batch_size),
      instances_(instances),
      batch_limit_(std::max<int64_t>(policy_.max_batch_size, 1)) {
  if (policy_.formation == BatchFormation::kAdaptive) {
    AdaptiveBatchPolicy::Options options;
    options.max_batch_size = std::max<int64_t>(policy_.max_batch_size, 1);
    options.target_latency = policy_.target_latency;
    options.max_hold = policy_.max_queue_delay;
    options.instances = instances;
    adaptive_.emplace(options);
  }
}

int64_t BatchQueue::size_at_level(uint64_t level) const {
  if (level < 1 || level > levels_.size()) return 0;
  const Level& queue = levels_[level - 1];
  return static_cast<int64_t>(queue.in_time.size() + queue.delayed.size());
}

absl::StatusOr<uint64_t> BatchQueue::LevelFor(const BatchRequest& request) const {
  if (policy_.priority_levels == 0) return 1;
  const uint64_t priority = request.spec().priority;
  if (priority == 0) return policy_.default_priority_level;
  if (priority > policy_.priority_levels) {
    return absl::InvalidArgumentError(absl::StrCat("model '", policy_.model_name, "': priority ", priority,
                                                   " is outside 1..", policy_.priority_levels));
  }
  return priority;
}

absl::Duration BatchQueue::TimeoutFor(const BatchRequest& request, const QueuePolicy& queue) const {
  const absl::Duration asked = request.spec().timeout;
  const bool shorter = queue.default_timeout == absl::ZeroDuration() || asked < queue.default_timeout;
  if (queue.allow_timeout_override && asked > absl::ZeroDuration() && shorter) return asked;
  return queue.default_timeout;
}

absl::Status BatchQueue::Add(std::unique_ptr<BatchRequest>& request, absl::Time now) {
  const std::string model = absl::StrCat("model '", policy_.model_name, "': ");
  if (request == nullptr) return absl::InvalidArgumentError(absl::StrCat(model, "null request"));
  const int64_t batch_size = request->batch_size();
  const int64_t limit = std::max<int64_t>(policy_.max_batch_size, 1);
  if (batch_size < 1 || batch_size > limit) {
    return absl::InvalidArgumentError(absl::StrCat(model, "request batch size ", batch_size, " is outside 1..",
                                                   limit, " (max_batch_size ", policy_.max_batch_size, ")"));
  }
  CONVOY_ASSIGN_OR_RETURN(const uint64_t level, LevelFor(*request));
  const QueuePolicy& queue = policy_.PolicyForLevel(level);
  const int64_t queued = size_at_level(level);
  if (queue.max_queue_size > 0 && queued >= queue.max_queue_size) {
    return absl::UnavailableError(absl::StrCat(model, "priority ", level, " queue is full (", queued, " of ",
                                               queue.max_queue_size, " requests queued)"));
  }
  const absl::Duration timeout = TimeoutFor(*request, queue);
  request->priority_level_ = level;
  request->enqueue_time_ = now;
  request->deadline_ = timeout > absl::ZeroDuration() ? now + timeout : absl::InfiniteFuture();
  request->from_returning_client_ = load_.RecordArrival(now, batch_size);
  returning_in_system_ += request->from_returning_client_ ? 1 : 0;
  last_change_ = std::max(last_change_, now);
  levels_[level - 1].in_time.push_back(std::move(request));
  ++size_;
  return absl::OkStatus();
}

std::vector<BatchQueue::Removed> BatchQueue::RemoveCancelledAndExpired(absl::Time now) {
  std::vector<Removed> removed;
  for (size_t index = 0; index < levels_.size(); ++index) {
    Level& level = levels_[index];
    const QueuePolicy& queue = policy_.PolicyForLevel(index + 1);
    for (RequestList* list : {&level.in_time, &level.delayed}) {
      for (auto it = list->begin(); it != list->end();) {
        BatchRequest& request = **it;
        absl::Status status;
        if (request.IsCancelled()) {
          status = absl::CancelledError(absl::StrCat("model '", policy_.model_name,
                                                     "': request cancelled by the client while queued"));
        } else if (now >= request.deadline_ && queue.timeout_action == TimeoutAction::kReject) {
          status = absl::DeadlineExceededError(
              absl::StrCat("model '", policy_.model_name, "': request timed out in the priority ", index + 1,
                           " queue after ", absl::FormatDuration(now - request.enqueue_time_), " (timeout ",
                           absl::FormatDuration(request.deadline_ - request.enqueue_time_), ")"));
        } else if (now >= request.deadline_) {  // kDelay: keep it, behind everything still in time
          request.delayed_ = true;
          request.deadline_ = absl::InfiniteFuture();
          level.delayed.splice(level.delayed.end(), *list, it++);
          continue;
        } else {
          ++it;
          continue;
        }
        removed.push_back(Removed{std::move(*it), std::move(status)});
        it = list->erase(it);
        --size_;
      }
    }
  }
  if (!removed.empty()) {  // their clients get an answer now, and the head batch may have changed
    int64_t returning = 0;
    for (const Removed& entry : removed) returning += entry.request->from_returning_client() ? 1 : 0;
    returning_in_system_ -= returning;
    load_.RecordResponses(now, returning, static_cast<int64_t>(removed.size()) - returning);
    last_change_ = std::max(last_change_, now);
  }
  return removed;
}

std::vector<BatchQueue::Position> BatchQueue::Candidates() {
  std::vector<Position> candidates;
  candidates.reserve(size_);
  for (Level& level : levels_) {
    for (RequestList* list : {&level.in_time, &level.delayed}) {
      for (auto it = list->begin(); it != list->end(); ++it) candidates.push_back(Position{list, it});
    }
  }
  return candidates;
}

std::vector<BatchQueue::Position> BatchQueue::GatherBatch(const std::vector<Position>& candidates,
                                                          bool* full) const {
  std::vector<Position> members;
  const std::string& key = (*candidates.front().it)->shape_key();
  const int64_t limit = policy_.max_batch_size;
  const bool merging = policy_.dynamic_batching && limit > 0;
  int64_t total = 0;
  *full = false;
  for (const Position& position : candidates) {
    const BatchRequest& request = **position.it;
    if (request.shape_key() != key) continue;
    if (!merging) {  // every request runs alone, at once
      members.push_back(position);
      *full = true;
      break;
    }
    if (total + request.batch_size() > limit) {  // the next one does not fit
      *full = !members.empty();
      if (members.empty()) members.push_back(position);
      break;
    }
    members.push_back(position);
    total += request.batch_size();
  }
  return members;
}

size_t BatchQueue::ChooseBatchLength(const std::vector<Position>& members) const {
  const std::vector<int64_t>& preferred = policy_.preferred_batch_sizes;
  int64_t total = 0;
  size_t best = 0;
  for (size_t i = 0; i < members.size(); ++i) {
    total += (*members[i].it)->batch_size();
    if (total == policy_.max_batch_size || std::find(preferred.begin(), preferred.end(), total) != preferred.end()) {
      best = i + 1;
    }
  }
  return best == 0 ? members.size() : best;
}

absl::Time BatchQueue::EarliestDeadline() const {
  absl::Time earliest = absl::InfiniteFuture();
  for (const Level& level : levels_) {
    for (const auto& request : level.in_time) earliest = std::min(earliest, request->deadline_);
  }
  return earliest;
}

size_t BatchQueue::FixedDecision(const std::vector<Position>& members, bool full, absl::Time now,
                                 absl::Time* next_check) const {
  int64_t total = 0;
  absl::Time oldest = absl::InfiniteFuture();
  for (const Position& position : members) {
    total += (*position.it)->batch_size();
    oldest = std::min(oldest, (*position.it)->enqueue_time_);
  }
  const std::vector<int64_t>& preferred = policy_.preferred_batch_sizes;
  const int64_t target = preferred.empty() ? policy_.max_batch_size
                                           : *std::max_element(preferred.begin(), preferred.end());
  const absl::Time delay_end = oldest + policy_.max_queue_delay;
  if (!(full || total >= target || now >= delay_end)) {
    *next_check = delay_end;
    return 0;
  }
  return ChooseBatchLength(members);
}

size_t BatchQueue::AdaptiveDecision(const std::vector<Position>& members, bool full, absl::Time now,
                                    absl::Time* next_check) {
  AdaptiveBatchPolicy::HeadBatch head;
  head.full = full;
  head.another_instance_free = instances_ - running_batches_ > 1;
  head.returning_in_system = returning_in_system_;
  head.in_system = size_ + running_requests_;
  for (const Position& position : members) {
    head.sizes.push_back((*position.it)->batch_size());
    head.enqueued.push_back((*position.it)->enqueue_time_);
  }
  const AdaptiveBatchPolicy::Decision decision = adaptive_->Decide(now, last_change_, head, load_);
  batch_limit_ = decision.batch_limit;
  closed_loop_batch_size_ = decision.closed_loop_size;
  if (decision.length > 0) ++batches_by_reason_[AdaptiveBatchPolicy::SendReasonName(decision.reason)];
  *next_check = decision.hold_until;
  return decision.length;
}

BatchQueue::Decision BatchQueue::TakeBatch(absl::Time now, bool flush) {
  Decision decision;
  if (size_ == 0) return decision;
  bool full = false;
  const std::vector<Position> members = GatherBatch(Candidates(), &full);
  absl::Time next_check = absl::InfiniteFuture();
  size_t length = 0;
  if (flush) {
    length = adaptive_ ? members.size() : ChooseBatchLength(members);
  } else if (adaptive_) {
    length = AdaptiveDecision(members, full, now, &next_check);
  } else {
    length = FixedDecision(members, full, now, &next_check);
  }
  if (length == 0) {
    if (!hold_start_) hold_start_ = now;
    decision.next_check = std::min(next_check, EarliestDeadline());
    return decision;
  }
  for (size_t i = 0; i < length; ++i) {
    std::unique_ptr<BatchRequest> request = std::move(*members[i].it);
    members[i].list->erase(members[i].it);
    request->dispatch_time_ = now;
    decision.batch.push_back(std::move(request));
  }
  size_ -= static_cast<int64_t>(length);
  running_requests_ += static_cast<int64_t>(length);
  ++running_batches_;
  last_wait_ = hold_start_ ? now - *hold_start_ : absl::ZeroDuration();
  hold_start_.reset();
  last_change_ = std::max(last_change_, now);
  return decision;
}

void BatchQueue::RecordResponsesSent(const FinishedBatch& batch, absl::Time sent) {
  load_.RecordResponses(sent, batch.returning, batch.requests - batch.returning);
  returning_in_system_ = std::max<int64_t>(returning_in_system_ - batch.returning, 0);
  last_change_ = std::max(last_change_, sent);
}

void BatchQueue::RecordBatchDone(const FinishedBatch& batch) {
  load_.RecordExecution(batch.elements, batch.done - batch.dispatched);
  running_requests_ = std::max<int64_t>(running_requests_ - batch.requests, 0);
  running_batches_ = std::max<int64_t>(running_batches_ - 1, 0);
  last_change_ = std::max(last_change_, batch.done);
}

BatchQueue::FinishedBatch BatchQueue::Summarize(const std::vector<std::unique_ptr<BatchRequest>>& batch) {
  FinishedBatch summary;
  summary.requests = static_cast<int64_t>(batch.size());
  for (const auto& request : batch) {
    summary.elements += request->batch_size();
    summary.returning += request->from_returning_client() ? 1 : 0;
  }
  if (!batch.empty()) summary.dispatched = batch.front()->dispatch_time();
  return summary;
}

BatcherEstimates BatchQueue::Estimates() const {
  BatcherEstimates estimates;
  estimates.arrivals_per_second = load_.arrival_rate();
  estimates.clients = size_ + running_requests_ + load_.ClientsExpected(last_change_);
  estimates.return_time = load_.return_time();
  estimates.last_wait = last_wait_;
  estimates.batch_limit = batch_limit_;
  estimates.closed_loop_batch_size = closed_loop_batch_size_;
  estimates.execution_time = load_.MeasuredExecutionTimes();
  estimates.batches_by_reason = batches_by_reason_;
  return estimates;
}

std::vector<std::unique_ptr<BatchRequest>> BatchQueue::TakeAll() {
  std::vector<std::unique_ptr<BatchRequest>> all;
  for (const Position& position : Candidates()) {
    returning_in_system_ -= (*position.it)->from_returning_client() ? 1 : 0;
    all.push_back(std::move(*position.it));
    position.list->erase(position.it);
  }
  size_ = 0;
  return all;
}

}  // namespace convoy::batching
