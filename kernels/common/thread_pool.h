// A fixed-size thread pool with a blocking ParallelFor, the "stream" CPU kernels run on.
//
// Kernels split their work with ParallelFor(count, fn): fn(begin, end) is called on disjoint ranges covering
// [0, count), by the pool's workers and the calling thread, and ParallelFor returns when all are done. A pool of
// size 1 runs everything inline. Nested ParallelFor calls from inside a worker run inline (no deadlock).
#ifndef CONVOY_KERNELS_COMMON_THREAD_POOL_H_
#define CONVOY_KERNELS_COMMON_THREAD_POOL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "kernels/common/mutex.h"

namespace convoy {

class ThreadPool {
 public:
  // num_threads counts the calling thread: a pool of 2 starts one worker.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Calls fn(begin, end) over chunks of [0, count); at least `min_chunk` items per chunk.
  void ParallelFor(int64_t count, const std::function<void(int64_t, int64_t)>& fn, int64_t min_chunk = 1);

  // Threads in the process-wide default pool: CONVOY_CPU_THREADS if set, else the hardware concurrency.
  static int DefaultThreadCount();

  // Runs fn(threads) while the pool's workers are reserved for it, for work that brings its own threads (a oneDNN
  // primitive on its OpenMP team): `threads` is num_threads() and no ParallelFor of this pool runs meanwhile (one
  // that starts runs inline on its caller), so the process never runs more compute threads than the pool has.
  // Waits while another caller holds the pool. From inside a pool worker or a ParallelFor, fn(1) runs at once.
  void RunReserved(absl::FunctionRef<void(int threads)> fn);

 private:
  struct Job;
  void WorkerLoop();
  static void RunChunks(Job* job);

  const int num_threads_;
  convoy::Mutex mu_;
  Job* job_ ABSL_GUARDED_BY(mu_) = nullptr;
  uint64_t job_generation_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  convoy::Mutex submit_mu_;  // one ParallelFor at a time uses the workers; others run inline
  std::vector<std::thread> workers_;
};

}  // namespace convoy

#endif  // CONVOY_KERNELS_COMMON_THREAD_POOL_H_
