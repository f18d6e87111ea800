// A fixed-size thread pool with a blocking ParallelFor, the "stream" CPU kernels run on.
//
// Kernels split their work with ParallelFor(count, fn): fn(begin, end) is called on disjoint ranges covering
// [0, count), by the pool's workers and the calling thread, and ParallelFor returns when all are done. A pool of
// size 1 runs everything inline. Nested ParallelFor calls from inside a worker run inline (no deadlock).
//
// Two builds of the same class (a build-time choice, docs/kernels.md "Threads"):
//   - OpenMP (the default): a ParallelFor is one `omp parallel` region on the calling thread's OpenMP team, the team
//     oneDNN's primitives run on, so a plan that alternates own kernels and oneDNN steps runs every step on one set
//     of threads. libgomp's workers spin for a bounded while after a region (GOMP_SPINCOUNT) and then sleep, so the
//     next step finds them awake and an idle pool uses no CPU.
//   - std::thread (`--define=convoy_thread_pool=threads`, and always under ThreadSanitizer, which cannot see
//     libgomp's uninstrumented barriers): workers of our own that sleep on a condition variable between jobs.
// Both keep the same contract: the same chunking, nested calls inline, one ParallelFor or RunReserved at a time on
// the pool's threads (a concurrent caller runs its ParallelFor inline), never more compute threads than num_threads.
#ifndef CONVOY_KERNELS_COMMON_THREAD_POOL_H_
#define CONVOY_KERNELS_COMMON_THREAD_POOL_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "kernels/common/mutex.h"

namespace convoy {

class ThreadPool {
 public:
  // num_threads counts the calling thread: a pool of 2 runs one thread besides the caller.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Calls fn(begin, end) over chunks of [0, count); at least `min_chunk` items per chunk. Chunks are about
  // count / (4 * num_threads) items, handed out in order to whichever thread asks next.
  void ParallelFor(int64_t count, const std::function<void(int64_t, int64_t)>& fn, int64_t min_chunk = 1);

  // Threads in the process-wide default pool: CONVOY_CPU_THREADS if set, else the hardware concurrency.
  static int DefaultThreadCount();

  // "openmp" or "std::thread": which build of the pool this binary has (thread_pool_test and
  // step_handover_bench print it).
  static const char* RuntimeName();

  // Runs fn(threads) while the pool's threads are reserved for it, for work that brings its own threads (a oneDNN
  // primitive on its OpenMP team): `threads` is num_threads() and no ParallelFor of this pool runs meanwhile (one
  // that starts runs inline on its caller), so the process never runs more compute threads than the pool has.
  // Waits while another caller holds the pool. From inside a pool worker or a ParallelFor, fn(1) runs at once.
  void RunReserved(absl::FunctionRef<void(int threads)> fn);

 private:
  struct Job;
  struct Team;  // the threads besides the caller: thread_pool_openmp.cc or thread_pool_threads.cc

  // Runs job's chunks on the caller and the team; returns when every chunk is done. Holds submit_mu_.
  void RunOnTeam(Job* job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(submit_mu_);
  // Takes chunks of job until none is left (every thread of a team runs this).
  static void RunChunks(Job* job);
  // Marks the current thread as one of a team's workers: a ParallelFor or RunReserved from it runs inline.
  static void MarkPoolWorker();

  const int num_threads_;
  convoy::Mutex submit_mu_;  // one ParallelFor or RunReserved at a time uses the team; other ParallelFors run inline
  std::unique_ptr<Team> team_;
};

}  // namespace convoy

#endif  // CONVOY_KERNELS_COMMON_THREAD_POOL_H_
