// ThreadPool's OpenMP team: a ParallelFor is one `omp parallel` region on the calling thread's libgomp team, the
// same threads oneDNN's primitives run on (see thread_pool.h). libgomp keeps one team per calling thread; between
// regions its workers spin for GOMP_SPINCOUNT rounds (libgomp's default when OMP_WAIT_POLICY is unset, fewer when a
// process has more OpenMP threads than CPUs), then sleep on a futex: back-to-back steps find them awake, an idle
// server's threads sleep. The default build; thread_pool_threads.cc is the other one.
#include <omp.h>

#include <algorithm>
#include <memory>

#include "kernels/common/thread_pool.h"

namespace convoy {

struct ThreadPool::Team {};  // the team is libgomp's, per calling thread

const char* ThreadPool::RuntimeName() { return "openmp"; }

ThreadPool::ThreadPool(int num_threads) : num_threads_(std::max(1, num_threads)), team_(std::make_unique<Team>()) {}

ThreadPool::~ThreadPool() = default;

void ThreadPool::RunOnTeam(Job* job) {
  // Every thread of the team takes chunks until none is left; the region's closing barrier is the join. A team
  // smaller than asked (omp_set_dynamic, a nested region) still covers every chunk.
#pragma omp parallel num_threads(num_threads_)
  {
    if (omp_get_thread_num() != 0) MarkPoolWorker();
    RunChunks(job);
  }
}

}  // namespace convoy
