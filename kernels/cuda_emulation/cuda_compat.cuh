// The one header Convoy's .cu kernel files include. Under nvcc it brings the real CUDA headers; compiled as C++ it
// brings the CUDA emulation (cuda_emulation.h), so the same source runs on a GPU and, for tests, on any CPU.
//
// Beyond CUDA itself it defines what must be spelled differently to work in both modes:
//   convoy::cuda::LaunchKernel(kernel, grid, block, dynamic_smem_bytes, stream, args...) -> cudaError_t
//   CONVOY_LAUNCH_KERNEL(kernel, grid, block, dynamic_smem_bytes, stream, args...)   (same; wrap a template kernel
//       name in parentheses: CONVOY_LAUNCH_KERNEL((Gemm<float, 128>), ...))
//   CONVOY_SHARED_ARRAY(float, tile, [32][33]);   a static __shared__ array (poisoned per block in emulation)
//   CONVOY_SHARED_VAR(int, count);                a static __shared__ scalar
//   CONVOY_DYNAMIC_SHARED(float, smem);           float* smem = the dynamic shared memory (extern __shared__)
// and includes tensor_core.cuh (mma.sync, ldmatrix, cp.async wrappers). See docs/cuda_emulation.md.
#ifndef CONVOY_KERNELS_CUDA_EMULATION_CUDA_COMPAT_CUH_
#define CONVOY_KERNELS_CUDA_EMULATION_CUDA_COMPAT_CUH_

#include <cstddef>
#include <cstdint>
#include <utility>

#if defined(__CUDACC__)
#define CONVOY_CUDA_REAL 1
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#else
#include "kernels/cuda_emulation/cuda_emulation.h"
#endif

namespace convoy::cuda {

#if defined(CONVOY_CUDA_REAL)
// kernel<<<grid, block, dynamic_shared_bytes, stream>>>(args...), then the launch error (not the kernel's outcome:
// that shows at the next synchronisation).
template <typename... Params, typename... Args>
cudaError_t LaunchKernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t dynamic_shared_bytes,
                         cudaStream_t stream, Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "kernel launched with the wrong number of arguments");
  kernel<<<grid, block, dynamic_shared_bytes, stream>>>(std::forward<Args>(args)...);
  return cudaGetLastError();
}
#else
// Runs the whole grid before returning; a bug the emulation catches comes back as the error (with a detailed
// message in convoy::cuda_emulation::LastErrorDetail()).
using ::convoy::cuda_emulation::LaunchKernel;
#endif

}  // namespace convoy::cuda

#define CONVOY_LAUNCH_KERNEL(kernel, grid, block, dynamic_shared_bytes, stream, ...) \
  ::convoy::cuda::LaunchKernel(kernel, grid, block, dynamic_shared_bytes, stream, ##__VA_ARGS__)

#if defined(CONVOY_CUDA_REAL)
#define CONVOY_SHARED_ARRAY(T, name, ...) __shared__ __align__(16) T name __VA_ARGS__
#define CONVOY_SHARED_VAR(T, name) __shared__ T name
#define CONVOY_DYNAMIC_SHARED(T, name)                                    \
  extern __shared__ __align__(16) unsigned char convoy_dynamic_shared_[]; \
  T* name = reinterpret_cast<T*>(convoy_dynamic_shared_)
#else
#define CONVOY_SHARED_ARRAY(T, name, ...)                                                     \
  static const char name##_convoy_shared_key_ = 0;                                            \
  T(&name)                                                                                    \
  __VA_ARGS__ = *static_cast<T(*) __VA_ARGS__>(::convoy::cuda_emulation::StaticSharedStorage( \
      &name##_convoy_shared_key_, sizeof(T __VA_ARGS__), alignof(T), __FILE__, __LINE__))
#define CONVOY_SHARED_VAR(T, name)                                                                                \
  static const char name##_convoy_shared_key_ = 0;                                                                \
  T& name = *static_cast<T*>(::convoy::cuda_emulation::StaticSharedStorage(&name##_convoy_shared_key_, sizeof(T), \
                                                                           alignof(T), __FILE__, __LINE__))
#define CONVOY_DYNAMIC_SHARED(T, name) T* name = static_cast<T*>(::convoy::cuda_emulation::DynamicSharedStorage())
#endif

#include "kernels/cuda_emulation/tensor_core.cuh"

#endif  // CONVOY_KERNELS_CUDA_EMULATION_CUDA_COMPAT_CUH_
