// What both builds of ThreadPool share: chunking, the inline cases, reservation. The team itself lives in
// thread_pool_openmp.cc or thread_pool_threads.cc.
#include "kernels/common/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <thread>

namespace convoy {

namespace {
thread_local bool t_in_pool_worker = false;
thread_local int t_parallel_depth = 0;  // ParallelFor bodies / RunReserved work running on this (calling) thread
}  // namespace

struct ThreadPool::Job {
  const std::function<void(int64_t, int64_t)>* fn;
  int64_t count;
  int64_t chunk;
  std::atomic<int64_t> next{0};
};

void ThreadPool::MarkPoolWorker() { t_in_pool_worker = true; }

int ThreadPool::DefaultThreadCount() {
  if (const char* env = std::getenv("CONVOY_CPU_THREADS")) {
    const int n = std::atoi(env);
    if (n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

void ThreadPool::RunReserved(absl::FunctionRef<void(int threads)> fn) {
  if (num_threads_ == 1 || t_in_pool_worker || t_parallel_depth > 0) {
    fn(1);
    return;
  }
  submit_mu_.Lock();
  ++t_parallel_depth;
  fn(num_threads_);
  --t_parallel_depth;
  submit_mu_.Unlock();
}

void ThreadPool::RunChunks(Job* job) {
  for (;;) {
    const int64_t begin = job->next.fetch_add(job->chunk, std::memory_order_relaxed);
    if (begin >= job->count) return;
    (*job->fn)(begin, std::min(job->count, begin + job->chunk));
  }
}

void ThreadPool::ParallelFor(int64_t count, const std::function<void(int64_t, int64_t)>& fn, int64_t min_chunk) {
  if (count <= 0) return;
  const int64_t target_chunks = int64_t{num_threads_} * 4;
  const int64_t chunk = std::max<int64_t>(std::max<int64_t>(1, min_chunk), (count + target_chunks - 1) / target_chunks);
  if (num_threads_ == 1 || t_in_pool_worker || t_parallel_depth > 0 || count <= chunk || !submit_mu_.TryLock()) {
    ++t_parallel_depth;
    fn(0, count);
    --t_parallel_depth;
    return;
  }
  Job job;
  job.fn = &fn;
  job.count = count;
  job.chunk = chunk;
  ++t_parallel_depth;
  RunOnTeam(&job);
  --t_parallel_depth;
  submit_mu_.Unlock();
}

}  // namespace convoy
