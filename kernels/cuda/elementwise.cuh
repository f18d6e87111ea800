// Device and launcher helpers shared by the CUDA element-wise and data-movement ops (pool2d, batch_norm, activation,
// binary, concat, split, channel_shuffle, softmax, pad, convert, preprocess), under nvcc and under the emulation:
//
//   ElementToFloat(p[i]) / FloatToElement<T>(f)   FP32 / FP16 / BF16 <-> float (element_conversion.cuh)
//   Pack4<T>                       four elements in one aligned 8- or 16-byte load/store
//   IsPack4Aligned(pointers...)    run-time check that every pointer allows Pack4 access
//   GridStrideBlocks(work)         blocks for a grid-stride loop over `work` items
//   LaunchPackedOrScalar(packed, count, Kernel<T, true>, Kernel<T, false>, stream, args...)   the launch of a
//                                  grid-stride kernel with a Pack4 variant (the one every flat element-wise op makes)
//   DispatchElementSize(dtype, fn)  calls fn(U{}) with U = uint8_t .. uint64_t of the dtype's size (copies)
//   DispatchFloatType(dtype, fn)   calls fn(T{}) with T = float, __half or __nv_bfloat16 (the dtype is read once per
//                                  Run, kernels are templated on the element type)
//   StreamOf(context)              the context's cudaStream_t
//   CheckArgs(problem, {{"x", x}, ...})   the problem's Validate() error, or INVALID_ARGUMENT naming a null pointer
#ifndef CONVOY_KERNELS_CUDA_ELEMENTWISE_CUH_
#define CONVOY_KERNELS_CUDA_ELEMENTWISE_CUH_

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "kernels/common/dtype.h"
#include "kernels/registry/algorithm.h"
#include "kernels/cuda/element_conversion.cuh"
#include "kernels/cuda_emulation/cuda_compat.cuh"
#include "kernels/cuda_emulation/cuda_status.h"

namespace convoy::cuda {

// Four consecutive elements moved with one vector instruction (16 bytes for FP32, 8 for FP16/BF16).
template <typename T>
struct alignas(4 * sizeof(T)) Pack4 {
  T v[4];
};

inline constexpr int kElementwiseThreads = 256;
// Enough blocks to fill an H200 several times over; larger problems loop (grid-stride).
inline constexpr int64_t kMaxGridStrideBlocks = 8192;

inline unsigned GridStrideBlocks(int64_t work, int threads = kElementwiseThreads) {
  const int64_t blocks = (work + threads - 1) / threads;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(blocks, kMaxGridStrideBlocks)));
}

template <typename T>
bool IsPack4Aligned(std::initializer_list<const void*> pointers) {
  for (const void* p : pointers) {
    if (reinterpret_cast<uintptr_t>(p) % sizeof(Pack4<T>) != 0) return false;
  }
  return true;
}

// Launches the Pack4 variant of a grid-stride kernel when `packed` (every pointer passed IsPack4Aligned), else the
// scalar one, with kElementwiseThreads-thread blocks for `count` elements (count / 4 packs plus the scalar tail).
template <typename... Params, typename... Args>
cudaError_t LaunchPackedOrScalar(bool packed, int64_t count, void (*packed_kernel)(Params...),
                                 void (*scalar_kernel)(Params...), cudaStream_t stream, Args&&... args) {
  const unsigned blocks = GridStrideBlocks(packed ? count / 4 + 3 : count);
  return CONVOY_LAUNCH_KERNEL(packed ? packed_kernel : scalar_kernel, dim3(blocks), dim3(kElementwiseThreads), 0,
                              stream, std::forward<Args>(args)...);
}

template <typename Fn>
absl::Status DispatchFloatType(DataType dtype, Fn&& fn) {
  switch (dtype) {
    case DataType::kFloat32:
      return fn(float{});
    case DataType::kFloat16:
      return fn(__half{});
    case DataType::kBFloat16:
      return fn(__nv_bfloat16{});
    default:
      return absl::UnimplementedError(absl::StrCat("no CUDA kernel for dtype ", DataTypeName(dtype)));
  }
}

// For data movement that never looks at values: fn(U{}) with U an unsigned integer of the dtype's size.
template <typename Fn>
absl::Status DispatchElementSize(DataType dtype, Fn&& fn) {
  switch (DataTypeSize(dtype)) {
    case 1:
      return fn(uint8_t{});
    case 2:
      return fn(uint16_t{});
    case 4:
      return fn(uint32_t{});
    case 8:
      return fn(uint64_t{});
    default:
      return absl::UnimplementedError(absl::StrCat("no CUDA copy kernel for dtype ", DataTypeName(dtype)));
  }
}

inline cudaStream_t StreamOf(const ExecutionContext& context) {
  return static_cast<cudaStream_t>(context.cuda_stream);
}

struct NamedPointer {
  absl::string_view name;
  const void* pointer;
};

template <typename Problem>
absl::Status CheckArgs(const Problem& problem, std::initializer_list<NamedPointer> pointers) {
  if (absl::Status valid = problem.Validate(); !valid.ok()) return valid;
  for (const NamedPointer& p : pointers) {
    if (p.pointer == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(problem.ToString(), ": args.", p.name, " is null"));
    }
  }
  return absl::OkStatus();
}

// Converts a launch's error into a status naming the kernel.
inline absl::Status LaunchStatus(cudaError_t error, absl::string_view kernel) {
  return CudaStatus(error, absl::StrCat("launching ", kernel));
}

}  // namespace convoy::cuda

#endif  // CONVOY_KERNELS_CUDA_ELEMENTWISE_CUH_
