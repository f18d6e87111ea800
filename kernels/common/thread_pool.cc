#include "kernels/common/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>

namespace convoy {

namespace {
thread_local bool t_in_pool_worker = false;
thread_local int t_parallel_depth = 0;  // ParallelFor bodies / RunReserved work running on this (calling) thread
}  // namespace

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

struct ThreadPool::Job {
  const std::function<void(int64_t, int64_t)>* fn;
  int64_t count;
  int64_t chunk;
  std::atomic<int64_t> next{0};
  int active_workers = 0;  // guarded by the pool's mu_
};

ThreadPool::ThreadPool(int num_threads) : num_threads_(std::max(1, num_threads)) {
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    convoy::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (auto& t : workers_) t.join();
}

int ThreadPool::DefaultThreadCount() {
  if (const char* env = std::getenv("CONVOY_CPU_THREADS")) {
    const int n = std::atoi(env);
    if (n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

void ThreadPool::RunChunks(Job* job) {
  for (;;) {
    const int64_t begin = job->next.fetch_add(job->chunk);
    if (begin >= job->count) return;
    (*job->fn)(begin, std::min(job->count, begin + job->chunk));
  }
}

void ThreadPool::WorkerLoop() {
  t_in_pool_worker = true;
  struct WaitState {
    ThreadPool* pool;
    uint64_t seen_generation;
  } state{this, 0};
  for (;;) {
    Job* job = nullptr;
    {
      convoy::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](WaitState* s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return s->pool->stopping_ || (s->pool->job_ != nullptr && s->pool->job_generation_ != s->seen_generation);
          },
          &state));
      if (stopping_) return;
      state.seen_generation = job_generation_;
      job = job_;
      ++job->active_workers;
    }
    RunChunks(job);
    convoy::MutexLock lock(&mu_);
    --job->active_workers;
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
  {
    convoy::MutexLock lock(&mu_);
    job_ = &job;
    ++job_generation_;
  }
  ++t_parallel_depth;
  RunChunks(&job);
  --t_parallel_depth;
  {
    // Retire the job, then wait for workers that picked it up (fn and job live on this stack frame).
    convoy::MutexLock lock(&mu_);
    job_ = nullptr;
    mu_.Await(absl::Condition(
        +[](Job* j) ABSL_NO_THREAD_SAFETY_ANALYSIS { return j->active_workers == 0; }, &job));
  }
  submit_mu_.Unlock();
}

}  // namespace convoy
