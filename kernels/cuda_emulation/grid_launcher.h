// Launching an emulated kernel: validates the launch like the CUDA runtime does, then runs every block of the grid
// (each on one OS thread, its threads as fibers, see block_scheduler.h) over a small pool of worker threads plus the
// calling thread. The launch is synchronous: when it returns, the grid has finished (unless its stream is capturing
// a CUDA graph: then it runs when the graph is launched).
//
// Kernel sources do not call this directly: they use convoy::cuda::LaunchKernel / CONVOY_LAUNCH_KERNEL from
// cuda_compat.cuh, which maps here in emulation and to <<<...>>> under nvcc.
//
// Knobs (environment, read once): CONVOY_EMULATION_WORKERS = OS threads that run blocks (default: the hardware's
// thread count, at most 8; 1 runs every block on the calling thread). CONVOY_EMULATION_SCHEDULE: see schedule.h.
#ifndef CONVOY_KERNELS_CUDA_EMULATION_GRID_LAUNCHER_H_
#define CONVOY_KERNELS_CUDA_EMULATION_GRID_LAUNCHER_H_

#include <cstddef>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "kernels/cuda_emulation/block_scheduler.h"
#include "kernels/cuda_emulation/host_runtime.h"
#include "kernels/cuda_emulation/vector_types.h"

namespace convoy::cuda_emulation {

struct GridLaunch {
  const void* kernel = nullptr;  // identity, for cudaFuncSetAttribute limits and messages
  dim3 grid_dim;
  dim3 block_dim;
  size_t dynamic_shared_bytes = 0;
  KernelBody body;
  std::shared_ptr<const void> owner;  // keeps body.closure alive while a captured graph holds the launch
};

// Runs the grid; the first failing block stops the launch and its error is returned.
absl::Status RunGrid(const GridLaunch& launch);

// RunGrid as the CUDA runtime reports it: the cudaError_t, recorded as last error with its detail on failure.
cudaError_t LaunchGrid(const GridLaunch& launch);

// A launch queued on `stream`: the configuration is checked now (as CUDA does at launch), then the grid runs now, or
// is recorded while the stream captures a graph (see SubmitToStream in host_runtime.h).
cudaError_t LaunchGridOnStream(GridLaunch launch, cudaStream_t stream);

// Number of OS threads that run blocks (the calling thread included).
int BlockWorkerCount();

// Emulated `kernel<<<grid, block, dynamic_shared_bytes, stream>>>(args...); return cudaGetLastError();`. Arguments are converted to the kernel's
// parameter types once, as CUDA copies them into the launch, and every thread gets its own by-value copy.
template <typename... Params, typename... Args>
cudaError_t LaunchKernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t dynamic_shared_bytes,
                         cudaStream_t stream, Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "kernel launched with the wrong number of arguments");
  struct Closure {
    void (*kernel)(Params...);
    std::tuple<std::decay_t<Params>...> params;
  };
  auto closure =
      std::make_shared<const Closure>(Closure{kernel, std::tuple<std::decay_t<Params>...>(std::forward<Args>(args)...)});
  GridLaunch launch;
  launch.kernel = reinterpret_cast<const void*>(kernel);
  launch.grid_dim = grid;
  launch.block_dim = block;
  launch.dynamic_shared_bytes = dynamic_shared_bytes;
  launch.body.closure = closure.get();
  launch.body.invoke = [](const void* opaque) {
    const Closure& c = *static_cast<const Closure*>(opaque);
    std::apply(c.kernel, c.params);
  };
  launch.owner = std::move(closure);
  const cudaError_t launched = LaunchGridOnStream(std::move(launch), stream);
  if (launched != cudaSuccess) return launched;  // also left as the last error, with its detail
  // As kernel<<<...>>> followed by cudaGetLastError() on a GPU: an error an earlier runtime call left unread (a
  // failed cudaMalloc nobody cleared, say) comes back from this launch.
  return TakeUnreadCallError();
}

}  // namespace convoy::cuda_emulation

#endif  // CONVOY_KERNELS_CUDA_EMULATION_GRID_LAUNCHER_H_
