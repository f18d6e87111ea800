// WorkerPool: a fixed set of threads running submitted tasks in FIFO order from a bounded queue. The HTTP edge
// decodes request bodies on it (JSON parsing, photo decoding and resizing, the copy into the batch's input buffers),
// so its single event-loop thread keeps reading, answering health checks and writing replies meanwhile.
//
//   WorkerPool::Options options;
//   options.threads = 2;
//   options.max_queued = 64;
//   CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<WorkerPool> pool, WorkerPool::Create(options));
//   absl::Status queued = pool->Submit([] { ... });   // UNAVAILABLE when 64 tasks already wait
//
// Knobs:
//  - `threads`: how many tasks run at once. Decoding is CPU work, so more threads than cores buys nothing; one
//    thread already takes the work off the loop, two let a small request pass a large photo being decoded.
//  - `max_queued`: tasks waiting for a thread beyond this are refused at once (UNAVAILABLE, which HTTP answers
//    503) instead of piling up: each waiting HTTP request holds its whole body in memory.
#ifndef CONVOY_SERVER_HTTP_WORKER_POOL_H_
#define CONVOY_SERVER_HTTP_WORKER_POOL_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/common/mutex.h"

namespace convoy::http {

class WorkerPool {
 public:
  struct Options {
    int threads = 2;                       // >= 1
    size_t max_queued = 64;                // >= 1: tasks waiting for a thread (running ones not counted)
    // The UNAVAILABLE message of a full queue: "<name> is busy: 64 <item>s wait for its 2 threads (the limit,
    // <limit_flag>); try again".
    std::string name = "worker pool";
    std::string item = "task";
    std::string limit_flag;  // the flag that sets max_queued; omitted from the message when empty
  };

  // INVALID_ARGUMENT naming the field when threads or max_queued is below 1.
  static absl::StatusOr<std::unique_ptr<WorkerPool>> Create(const Options& options);

  // Waits for the running tasks; tasks still queued are dropped without running (their captures destroyed).
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Queues `task` to run on a pool thread. UNAVAILABLE when max_queued tasks already wait (the task is destroyed
  // without running, on the caller's thread).
  absl::Status Submit(std::function<void()> task);

  int threads() const { return options_.threads; }

 private:
  explicit WorkerPool(const Options& options) : options_(options) {}
  void Work();
  bool HasWorkOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !queue_.empty(); }

  const Options options_;
  convoy::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace convoy::http

#endif  // CONVOY_SERVER_HTTP_WORKER_POOL_H_
