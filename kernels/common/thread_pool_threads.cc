// ThreadPool's std::thread team: num_threads - 1 workers that sleep on a condition variable between jobs (no
// spinning, so they never take a core from anything else). The build under ThreadSanitizer, and any build with
// --define=convoy_thread_pool=threads; see thread_pool.h.
#include <algorithm>
#include <memory>
#include <thread>
#include <vector>

#include "kernels/common/thread_pool.h"

namespace convoy {

struct ThreadPool::Team {
  convoy::Mutex mu;
  Job* job ABSL_GUARDED_BY(mu) = nullptr;
  uint64_t job_generation ABSL_GUARDED_BY(mu) = 0;
  int active_workers ABSL_GUARDED_BY(mu) = 0;  // workers inside the current job
  bool stopping ABSL_GUARDED_BY(mu) = false;
  std::vector<std::thread> workers;

  void WorkerLoop();
};

const char* ThreadPool::RuntimeName() { return "std::thread"; }

ThreadPool::ThreadPool(int num_threads) : num_threads_(std::max(1, num_threads)), team_(std::make_unique<Team>()) {
  for (int i = 1; i < num_threads_; ++i) team_->workers.emplace_back([team = team_.get()] { team->WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    convoy::MutexLock lock(&team_->mu);
    team_->stopping = true;
  }
  for (auto& t : team_->workers) t.join();
}

void ThreadPool::Team::WorkerLoop() {
  MarkPoolWorker();
  struct WaitState {
    Team* team;
    uint64_t seen_generation;
  } state{this, 0};
  for (;;) {
    Job* current = nullptr;
    {
      convoy::MutexLock lock(&mu);
      mu.Await(absl::Condition(
          +[](WaitState* s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return s->team->stopping || (s->team->job != nullptr && s->team->job_generation != s->seen_generation);
          },
          &state));
      if (stopping) return;
      state.seen_generation = job_generation;
      current = job;
      ++active_workers;
    }
    RunChunks(current);
    convoy::MutexLock lock(&mu);
    --active_workers;
  }
}

void ThreadPool::RunOnTeam(Job* job) {
  Team& team = *team_;
  {
    convoy::MutexLock lock(&team.mu);
    team.job = job;
    ++team.job_generation;
  }
  RunChunks(job);
  // Retire the job, then wait for workers that picked it up (fn and job live on the caller's stack frame).
  convoy::MutexLock lock(&team.mu);
  team.job = nullptr;
  team.mu.Await(absl::Condition(
      +[](Team* t) ABSL_NO_THREAD_SAFETY_ANALYSIS { return t->active_workers == 0; }, &team));
}

}  // namespace convoy
