// CUDA errors as absl::Status, for launchers and host code in both modes (nvcc or the CUDA emulation):
//
//   CONVOY_RETURN_IF_CUDA_ERROR(convoy::cuda::LaunchKernel(MyKernel, grid, block, 0, stream, args...));
//   absl::Status s = convoy::cuda::CudaStatus(cudaMemsetAsync(p, 0, n, stream), "clearing the output");
//
// The message names the call's context, the CUDA error name and string, and in emulation the detail of what went
// wrong (the thread, barrier, lane or limit). Making the Status consumes the thread's last CUDA error (see below). Needs the CUDA runtime types: include it after cuda_compat.cuh or
// cuda_host_api.h.
#ifndef CONVOY_KERNELS_CUDA_EMULATION_CUDA_STATUS_H_
#define CONVOY_KERNELS_CUDA_EMULATION_CUDA_STATUS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace convoy::cuda {

inline absl::Status CudaStatus(cudaError_t error, absl::string_view context) {
  if (error == cudaSuccess) return absl::OkStatus();
  std::string message = absl::StrCat(context, ": ", cudaGetErrorName(error), " (", cudaGetErrorString(error), ")");
#if defined(CONVOY_CUDA_EMULATION) && !defined(__CUDACC__)  // host code of real CUDA builds has no emulation
  const std::string detail = ::convoy::cuda_emulation::LastErrorDetail();
  if (!detail.empty()) absl::StrAppend(&message, ": ", detail);
#endif
  // The error is reported here, once: consume it, or the next launch (whose cudaGetLastError() reads the last error)
  // would fail with it too, e.g. every kernel after one failed allocation. A sticky kernel fault cannot be cleared.
  (void)cudaGetLastError();
  switch (error) {
    case cudaErrorInvalidValue:
    case cudaErrorInvalidConfiguration:
      return absl::InvalidArgumentError(message);
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace convoy::cuda

#define CONVOY_RETURN_IF_CUDA_ERROR(expr)                                                                \
  do {                                                                                                   \
    const cudaError_t convoy_cuda_error_ = (expr);                                                       \
    if (convoy_cuda_error_ != cudaSuccess) return ::convoy::cuda::CudaStatus(convoy_cuda_error_, #expr); \
  } while (false)

#endif  // CONVOY_KERNELS_CUDA_EMULATION_CUDA_STATUS_H_
