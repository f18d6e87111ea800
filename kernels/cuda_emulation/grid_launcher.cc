// Launch validation and the block worker pool (see grid_launcher.h).
#include "kernels/cuda_emulation/grid_launcher.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "kernels/cuda_emulation/schedule.h"

namespace convoy::cuda_emulation {
namespace {

std::string Dims(dim3 d) { return absl::StrCat("(", d.x, ",", d.y, ",", d.z, ")"); }

absl::Status ValidateLaunch(const GridLaunch& launch) {
  const dim3 g = launch.grid_dim, b = launch.block_dim;
  const uint64_t threads = uint64_t{b.x} * b.y * b.z;
  if (b.x == 0 || b.y == 0 || b.z == 0 || threads > kMaxThreadsPerBlock || b.x > 1024 || b.y > 1024 || b.z > 64) {
    return absl::InvalidArgumentError(absl::StrCat("block ", Dims(b), " (", threads,
                                                   " threads): expected 1..1024 threads with x,y <= 1024, z <= 64"));
  }
  if (g.x == 0 || g.y == 0 || g.z == 0 || g.x > 0x7FFFFFFFu || g.y > 65535 || g.z > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("grid ", Dims(g), ": expected x in 1..2^31-1, y and z in 1..65535"));
  }
  const size_t allowed = MaxDynamicSharedBytes(launch.kernel);
  if (launch.dynamic_shared_bytes > allowed) {
    return absl::OutOfRangeError(absl::StrCat(
        "dynamic shared memory: ", launch.dynamic_shared_bytes, " bytes requested, the kernel's limit is ", allowed,
        " bytes (raise it with cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes), at "
        "most ",
        kMaxSharedBytesPerBlock, ")"));
  }
  if (launch.body.invoke == nullptr) return absl::InvalidArgumentError("launch without a kernel body");
  return absl::OkStatus();
}

// One grid being run: workers take block indices from `next_block` until all are taken or one block failed.
struct GridJob {
  const GridLaunch* launch;
  Schedule schedule;
  int64_t block_count;
  std::atomic<int64_t> next_block{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  absl::Status first_error;  // guarded by mu

  void RunBlocks() {
    BlockScheduler& scheduler = BlockScheduler::ForThisThread();
    const dim3 g = launch->grid_dim;
    for (;;) {
      const int64_t index = next_block.fetch_add(1, std::memory_order_relaxed);
      if (index >= block_count || failed.load(std::memory_order_relaxed)) return;
      BlockLaunch block;
      block.kernel = launch->kernel;
      block.grid_dim = g;
      block.block_dim = launch->block_dim;
      block.block_idx = uint3{static_cast<unsigned>(index % g.x), static_cast<unsigned>(index / g.x % g.y),
                              static_cast<unsigned>(index / (uint64_t{g.x} * g.y))};
      block.dynamic_shared_bytes = launch->dynamic_shared_bytes;
      block.schedule = schedule;
      block.body = launch->body;
      absl::Status status = scheduler.RunBlock(block);
      if (!status.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (first_error.ok()) first_error = status;
        failed.store(true, std::memory_order_relaxed);
        return;
      }
    }
  }
};

// Persistent OS threads that help run the blocks of one grid at a time. Leaked on purpose (no shutdown order
// problems); the threads sleep on a condition variable while idle. std::mutex rather than absl::Mutex here: Debian's
// libabsl is not built with ThreadSanitizer, so TSAN cannot see absl::Mutex synchronise and would report races.
class BlockWorkerPool {
 public:
  static BlockWorkerPool& Instance() {
    static BlockWorkerPool* pool = new BlockWorkerPool(WorkerCountFromEnvironment());
    return *pool;
  }

  int worker_count() const { return static_cast<int>(threads_.size()) + 1; }

  absl::Status Run(GridJob& job) {
    std::lock_guard<std::mutex> one_grid_at_a_time(launch_mu_);
    if (!threads_.empty() && job.block_count > 1) {
      std::lock_guard<std::mutex> lock(mu_);
      job_ = &job;
      ++generation_;
      job_posted_.notify_all();
    }
    job.RunBlocks();
    {
      std::unique_lock<std::mutex> lock(mu_);
      job_ = nullptr;  // no worker joins from now on
      workers_idle_.wait(lock, [this] { return busy_ == 0; });
    }
    std::lock_guard<std::mutex> lock(job.mu);
    return job.first_error;
  }

 private:
  explicit BlockWorkerPool(int workers) {
    for (int i = 1; i < workers; ++i) threads_.emplace_back([this] { WorkerLoop(); });
    for (std::thread& thread : threads_) thread.detach();
  }

  static int WorkerCountFromEnvironment() {
    if (const char* env = std::getenv("CONVOY_EMULATION_WORKERS"); env != nullptr && std::atoi(env) > 0) {
      return std::atoi(env);
    }
    return std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, 8);
  }

  void WorkerLoop() {
    uint64_t seen = 0;
    for (;;) {
      GridJob* job = nullptr;
      {
        std::unique_lock<std::mutex> lock(mu_);
        job_posted_.wait(lock, [this, &seen] { return job_ != nullptr && generation_ != seen; });
        seen = generation_;
        job = job_;
        ++busy_;
      }
      job->RunBlocks();
      std::lock_guard<std::mutex> lock(mu_);
      if (--busy_ == 0) workers_idle_.notify_all();
    }
  }

  std::mutex launch_mu_;  // one grid at a time
  std::mutex mu_;
  std::condition_variable job_posted_;
  std::condition_variable workers_idle_;
  GridJob* job_ = nullptr;   // guarded by mu_
  uint64_t generation_ = 0;  // guarded by mu_
  int busy_ = 0;             // guarded by mu_
  std::vector<std::thread> threads_;
};

cudaError_t CudaErrorFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return cudaSuccess;
    case absl::StatusCode::kInvalidArgument:
      return cudaErrorInvalidConfiguration;
    case absl::StatusCode::kOutOfRange:
      return cudaErrorInvalidValue;
    case absl::StatusCode::kResourceExhausted:
      return cudaErrorMemoryAllocation;
    default:
      return cudaErrorLaunchFailure;
  }
}

}  // namespace

int BlockWorkerCount() { return BlockWorkerPool::Instance().worker_count(); }

absl::Status RunGrid(const GridLaunch& launch) {
  CONVOY_RETURN_IF_ERROR(ValidateLaunch(launch));
  GridJob job;
  job.launch = &launch;
  job.schedule = GetSchedule();
  job.block_count = int64_t{launch.grid_dim.x} * launch.grid_dim.y * launch.grid_dim.z;
  return BlockWorkerPool::Instance().Run(job);
}

cudaError_t LaunchGrid(const GridLaunch& launch) {
  absl::Status status = RunGrid(launch);
  if (status.ok()) return cudaSuccess;
  const cudaError_t error = CudaErrorFor(status);
  NoteKernelFailure(error, std::string(status.message()));
  return RecordLaunchError(error, std::string(status.message()));
}

cudaError_t LaunchGridOnStream(GridLaunch launch, cudaStream_t stream) {
  if (cudaError_t e = CheckStickyFault(); e != cudaSuccess) return e;
  if (absl::Status status = ValidateLaunch(launch); !status.ok()) {
    return RecordLaunchError(CudaErrorFor(status), std::string(status.message()));
  }
  int current = 0;
  cudaGetDevice(&current);
  if (const int owner = StreamDevice(stream); owner != current) {
    return RecordLaunchError(cudaErrorInvalidResourceHandle,
                       absl::StrCat("kernel launch into a stream of device ", owner, " while device ", current,
                                    " is current (set the stream's device first, e.g. with ScopedCudaDevice)"));
  }
  NoteKernelLaunch(launch.kernel, stream);
  return SubmitToStream(stream, "kernel launch", [launch = std::move(launch)] { return LaunchGrid(launch); });
}

}  // namespace convoy::cuda_emulation
