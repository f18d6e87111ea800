#include "server/http/worker_pool.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace convoy::http {

absl::StatusOr<std::unique_ptr<WorkerPool>> WorkerPool::Create(const Options& options) {
  if (options.threads < 1) {
    return absl::InvalidArgumentError(absl::StrCat(options.name, ": threads must be >= 1, got ", options.threads));
  }
  if (options.max_queued < 1) {
    return absl::InvalidArgumentError(absl::StrCat(options.name, ": max_queued must be >= 1, got 0"));
  }
  std::unique_ptr<WorkerPool> pool(new WorkerPool(options));
  for (int i = 0; i < options.threads; ++i) pool->threads_.emplace_back([p = pool.get()] { p->Work(); });
  return pool;
}

WorkerPool::~WorkerPool() {
  std::deque<std::function<void()>> dropped;
  {
    convoy::MutexLock lock(&mu_);
    stopping_ = true;
    dropped.swap(queue_);
  }
  for (std::thread& t : threads_) t.join();
  // `dropped` goes out of scope here, after the threads: its tasks' captures are destroyed on this thread.
}

absl::Status WorkerPool::Submit(std::function<void()> task) {
  {
    convoy::MutexLock lock(&mu_);
    if (!stopping_ && queue_.size() < options_.max_queued) {
      queue_.push_back(std::move(task));
      return absl::OkStatus();
    }
    if (stopping_) return absl::UnavailableError(absl::StrCat(options_.name, " is shutting down"));
  }
  const size_t queued = options_.max_queued;
  return absl::UnavailableError(absl::StrCat(
      options_.name, " is busy: ", queued, " ", options_.item, queued == 1 ? " waits" : "s wait", " for its ",
      options_.threads, options_.threads == 1 ? " thread" : " threads", " (the limit",
      options_.limit_flag.empty() ? "" : absl::StrCat(", ", options_.limit_flag), "); try again"));
}

void WorkerPool::Work() {
  for (;;) {
    std::function<void()> task;
    {
      convoy::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &WorkerPool::HasWorkOrStopping));
      if (stopping_) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

}  // namespace convoy::http
