// DynamicBatcher: instance threads, completion, ordered delivery and graceful drain. See dynamic_batcher.h.
#include "server/batching/dynamic_batcher.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"

namespace convoy::batching {

absl::StatusOr<std::unique_ptr<DynamicBatcher>> DynamicBatcher::Create(const Options& options) {
  const std::string model = absl::StrCat("model '", options.policy.model_name, "': ");
  if (options.executor == nullptr) return absl::InvalidArgumentError(absl::StrCat(model, "no batch executor"));
  if (options.clock == nullptr) return absl::InvalidArgumentError(absl::StrCat(model, "no clock"));
  if (options.instance_count < 1) {
    return absl::InvalidArgumentError(absl::StrCat(model, "instance_count must be >= 1, got ",
                                                   options.instance_count));
  }
  CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<BatchQueue> queue,
                          BatchQueue::Create(options.policy, options.instance_count));
  std::unique_ptr<DynamicBatcher> batcher(new DynamicBatcher(options, std::move(queue)));
  if (batcher->observer_ != nullptr) {
    convoy::MutexLock lock(&batcher->mu_);
    batcher->observer_->OnEstimatesChanged(batcher->queue_->Estimates());
  }
  for (int instance = 0; instance < options.instance_count; ++instance) {
    batcher->threads_.emplace_back([raw = batcher.get(), instance] { raw->RunInstance(instance); });
  }
  return batcher;
}

DynamicBatcher::DynamicBatcher(const Options& options, std::unique_ptr<BatchQueue> queue)
    : executor_(options.executor),
      clock_(*options.clock),
      observer_(options.observer),
      preserve_ordering_(options.policy.preserve_ordering),
      model_name_(options.policy.model_name),
      queue_(std::move(queue)) {}

DynamicBatcher::~DynamicBatcher() {
  Shutdown(absl::InfinitePast()).IgnoreError();  // a no-op when Shutdown already ran
  for (std::thread& thread : threads_) thread.join();
}

absl::Status DynamicBatcher::Enqueue(std::unique_ptr<BatchRequest>& request) {
  if (request == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("model '", model_name_, "': null request"));
  }
  absl::Status status;
  {
    convoy::MutexLock lock(&mu_);
    if (!accepting_) {
      status = absl::UnavailableError(absl::StrCat("model '", model_name_, "' is shutting down"));
    } else {
      status = queue_->Add(request, clock_.Now());
    }
    if (status.ok()) {
      ++generation_;
      PublishPendingCount();
    }
  }
  if (!status.ok() && observer_ != nullptr) observer_->OnEnqueueRejected(*request, status);
  return status;
}

absl::Status DynamicBatcher::Shutdown(absl::Time deadline) {
  std::vector<std::unique_ptr<BatchRequest>> leftovers;
  int64_t running = 0;
  {
    convoy::MutexLock lock(&mu_);
    if (!accepting_) return absl::OkStatus();
    accepting_ = false;
    draining_ = clock_.Now() < deadline;  // with no time left, nothing more is started
    ++generation_;
  }
  // Two critical sections on purpose: convoy::Mutex wakes waiters when the mutex is unlocked, not when Await below
  // releases it, and idle instance threads must see draining_ to flush partial batches.
  {
    convoy::MutexLock lock(&mu_);
    const auto drained = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return Drained(); };
    clock_.AwaitWithDeadline(&mu_, absl::Condition(&drained), deadline);
    leftovers = queue_->TakeAll();
    running = stats_.running_batches;
    stopping_ = true;
    ++generation_;
    PublishPendingCount();
  }
  for (std::unique_ptr<BatchRequest>& request : leftovers) {
    Complete(*request, absl::UnavailableError(absl::StrCat("model '", model_name_,
                                                           "' shut down before the request ran")));
  }
  if (leftovers.empty() && running == 0) return absl::OkStatus();
  return absl::DeadlineExceededError(absl::StrCat("model '", model_name_, "': drain deadline passed with ",
                                                  leftovers.size(), " requests still queued (failed with "
                                                  "UNAVAILABLE) and ", running, " batches still running"));
}

BatcherStats DynamicBatcher::stats() const {
  convoy::MutexLock lock(&mu_);
  BatcherStats stats = stats_;
  stats.pending_requests = queue_->size();
  stats.estimates = queue_->Estimates();
  return stats;
}

bool DynamicBatcher::Drained() const { return queue_->empty() && stats_.running_batches == 0; }

void DynamicBatcher::PublishPendingCount() {
  stats_.pending_requests = queue_->size();
  if (observer_ != nullptr) observer_->OnPendingCountChanged(stats_.pending_requests);
}

void DynamicBatcher::FinishRunning(int64_t batches, int64_t requests) {
  stats_.running_batches -= batches;
  stats_.running_requests -= requests;
  if (observer_ != nullptr) observer_->OnRunningCountChanged(stats_.running_requests);
}

void DynamicBatcher::RunInstance(int instance) {
  std::optional<BatchQueue::FinishedBatch> finished;
  while (true) {
    Work work;
    {
      convoy::MutexLock lock(&mu_);
      if (finished) RecordFinished(*finished);
      finished.reset();
      work = NextWork();
    }
    CompleteRemoved(work.removed);
    if (!work.dispatched.batch.empty()) {
      BatchQueue::FinishedBatch batch = BatchQueue::Summarize(work.dispatched.batch);
      Execute(work.dispatched, instance);
      {
        // Its clients are out from now on: recorded before they get their responses, so one that sends its next
        // request at once is matched as a returning client (batch_queue.h).
        convoy::MutexLock lock(&mu_);
        queue_->RecordResponsesSent(batch, clock_.Now());
        ++generation_;  // clients are out again: an instance holding a batch reconsiders
      }
      Deliver(std::move(work.dispatched));
      batch.done = clock_.Now();
      finished = batch;
    }
    if (work.stop) return;  // NextWork stops only when it hands out nothing, so `finished` is empty
  }
}

void DynamicBatcher::RecordFinished(const BatchQueue::FinishedBatch& finished) {
  queue_->RecordBatchDone(finished);
  ++generation_;  // an instance is free again: an instance holding a batch reconsiders
  if (observer_ != nullptr) observer_->OnEstimatesChanged(queue_->Estimates());
}

DynamicBatcher::Work DynamicBatcher::NextWork() {
  while (true) {
    const absl::Time now = clock_.Now();
    Work work;
    work.removed = queue_->RemoveCancelledAndExpired(now);
    BatchQueue::Decision decision = queue_->TakeBatch(now, /*flush=*/draining_);
    if (!decision.batch.empty()) {
      work.dispatched.ticket = next_ticket_++;
      ++stats_.running_batches;
      ++stats_.dispatched_batches;
      int64_t batch_size = 0;
      for (const auto& request : decision.batch) {
        batch_size += request->batch_size();
        stats_.total_queue_time += request->dispatch_time() - request->enqueue_time();
      }
      stats_.dispatched_requests += static_cast<int64_t>(decision.batch.size());
      stats_.running_requests += static_cast<int64_t>(decision.batch.size());
      ++stats_.batches_by_size[batch_size];
      work.dispatched.batch = std::move(decision.batch);
    }
    if (!work.removed.empty() || !work.dispatched.batch.empty()) {
      ++generation_;  // the queue changed: idle instances recompute when to look again
      PublishPendingCount();
      if (!work.dispatched.batch.empty() && observer_ != nullptr) {
        observer_->OnRunningCountChanged(stats_.running_requests);
      }
      return work;
    }
    if (stopping_) {
      work.stop = true;
      return work;
    }
    const uint64_t seen = generation_;
    const auto changed = [this, seen]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return generation_ != seen; };
    clock_.AwaitWithDeadline(&mu_, absl::Condition(&changed), decision.next_check);
  }
}

void DynamicBatcher::Execute(Dispatched& dispatched, int instance) {
  if (observer_ != nullptr) observer_->OnBatchStarted(dispatched.batch, instance);
  const absl::Status status = executor_->ExecuteBatch(dispatched.batch, instance);
  dispatched.statuses.reserve(dispatched.batch.size());
  for (const auto& request : dispatched.batch) {
    dispatched.statuses.push_back(status.ok() ? request->execution_status() : status);
  }
}

void DynamicBatcher::Deliver(Dispatched dispatched) {
  if (!preserve_ordering_) {
    const int64_t requests = static_cast<int64_t>(dispatched.batch.size());
    CompleteBatch(dispatched);
    convoy::MutexLock lock(&mu_);
    FinishRunning(1, requests);
    return;
  }
  // Whichever thread finds the next ticket in order delivers every consecutive executed batch; the others leave
  // theirs in executed_. One deliverer at a time keeps completions in ticket order.
  mu_.Lock();
  executed_.emplace(dispatched.ticket, std::move(dispatched));
  if (delivering_) {
    mu_.Unlock();
    return;
  }
  delivering_ = true;
  while (true) {
    std::vector<Dispatched> ready;
    for (auto it = executed_.find(next_ticket_to_deliver_); it != executed_.end();
         it = executed_.find(next_ticket_to_deliver_)) {
      ready.push_back(std::move(it->second));
      executed_.erase(it);
      ++next_ticket_to_deliver_;
    }
    if (ready.empty()) break;
    int64_t requests = 0;
    for (const Dispatched& batch : ready) requests += static_cast<int64_t>(batch.batch.size());
    mu_.Unlock();
    for (Dispatched& batch : ready) CompleteBatch(batch);
    mu_.Lock();
    FinishRunning(static_cast<int64_t>(ready.size()), requests);
  }
  delivering_ = false;
  mu_.Unlock();
}

void DynamicBatcher::CompleteBatch(Dispatched& dispatched) {
  for (size_t i = 0; i < dispatched.batch.size(); ++i) Complete(*dispatched.batch[i], dispatched.statuses[i]);
  dispatched.batch.clear();
}

void DynamicBatcher::CompleteRemoved(std::vector<BatchQueue::Removed>& removed) {
  for (BatchQueue::Removed& entry : removed) Complete(*entry.request, std::move(entry.status));
  removed.clear();
}

void DynamicBatcher::Complete(BatchRequest& request, absl::Status status) {
  if (observer_ != nullptr) observer_->OnRequestCompleted(request, status);
  request.Complete(std::move(status));
}

}  // namespace convoy::batching
