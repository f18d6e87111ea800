// What GPUs this process can use, for the server's startup log, its device selection and the algorithm cache key.
//
//   absl::StatusOr<std::vector<GpuInfo>> gpus = cuda::ListGpus();
//   if (!gpus.ok()) LOG(INFO) << gpus.status();   // UNAVAILABLE "no CUDA device: cudaErrorInsufficientDriver ..."
//
// Built against the real CUDA runtime it asks the driver; built against the CUDA emulation it reports the one
// emulated device (emulated = true), whose identity starts with "cuda-emulated:" so algorithm-cache entries tuned on
// the emulation are never mistaken for a real GPU's.
#ifndef CONVOY_KERNELS_CUDA_GPU_INFO_H_
#define CONVOY_KERNELS_CUDA_GPU_INFO_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace convoy::cuda {

struct GpuInfo {
  int index = 0;
  std::string name;                // "NVIDIA H200"
  int sm_count = 0;                // streaming multiprocessors
  int compute_major = 0, compute_minor = 0;
  size_t total_memory_bytes = 0;   // 0 when unknown (emulation)
  size_t shared_memory_per_block_optin = 0;
  bool emulated = false;

  // "cuda:NVIDIA H200:sm=132:cc=9.0" (or "cuda-emulated:..."): the Device::Identity of a CudaDevice on this GPU.
  std::string Identity() const;
  // One line for logs: "GPU 0: NVIDIA H200, 132 SMs, cc 9.0, 139.8 GiB".
  std::string ToString() const;
};

// True when this binary's CUDA code runs on the emulation instead of a GPU.
bool IsCudaEmulated();

// Every visible device. UNAVAILABLE "no CUDA device: <reason>" when there is none or no usable driver (never aborts).
absl::StatusOr<std::vector<GpuInfo>> ListGpus();

// The one device `index`: UNAVAILABLE as above, NOT_FOUND for an index beyond the visible devices.
absl::StatusOr<GpuInfo> QueryGpu(int index);

// A CUDA runtime error from device discovery as a status: errors that mean "no usable GPU here" (no device, no or
// too old a driver, devices hidden) become UNAVAILABLE "no CUDA device: ...", the rest go through CudaStatus.
absl::Status DeviceDiscoveryStatus(int cuda_error, absl::string_view context);

}  // namespace convoy::cuda

#endif  // CONVOY_KERNELS_CUDA_GPU_INFO_H_
