#include "kernels/cuda/gpu_info.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/common/status_macros.h"
#include "kernels/cuda_emulation/cuda_host_api.h"
#include "kernels/cuda_emulation/cuda_status.h"

namespace convoy::cuda {

bool IsCudaEmulated() {
#if defined(CONVOY_CUDA_EMULATION)
  return true;
#else
  return false;
#endif
}

std::string GpuInfo::Identity() const {
  return absl::StrCat(emulated ? "cuda-emulated:" : "cuda:", name, ":sm=", sm_count, ":cc=", compute_major, ".",
                      compute_minor);
}

std::string GpuInfo::ToString() const {
  return absl::StrFormat("GPU %d: %s, %d SMs, cc %d.%d, %.1f GiB%s", index, name, sm_count, compute_major,
                         compute_minor, static_cast<double>(total_memory_bytes) / (1024.0 * 1024.0 * 1024.0),
                         emulated ? " (CUDA emulation on the CPU)" : "");
}

absl::Status DeviceDiscoveryStatus(int cuda_error, absl::string_view context) {
  const cudaError_t error = static_cast<cudaError_t>(cuda_error);
  if (error == cudaSuccess) return absl::OkStatus();
#if !defined(CONVOY_CUDA_EMULATION)
  // 35 cudaErrorInsufficientDriver, 100 cudaErrorNoDevice, 3 cudaErrorInitializationError, 34 cudaErrorStubLibrary,
  // 999 cudaErrorUnknown (what a container without /dev/nvidia* often gets), 46 cudaErrorDevicesUnavailable.
  switch (error) {
    case cudaErrorInsufficientDriver:
    case cudaErrorNoDevice:
    case cudaErrorInitializationError:
    case cudaErrorStubLibrary:
    case cudaErrorDevicesUnavailable:
    case cudaErrorUnknown:
      (void)cudaGetLastError();
      return absl::UnavailableError(absl::StrCat("no CUDA device: ", cudaGetErrorName(error), " (",
                                                 cudaGetErrorString(error), ") from ", context));
    default:
      break;
  }
#endif
  return CudaStatus(error, context);
}

namespace {

absl::StatusOr<int> VisibleDeviceCount() {
  int count = 0;
  CONVOY_RETURN_IF_ERROR(DeviceDiscoveryStatus(cudaGetDeviceCount(&count), "cudaGetDeviceCount"));
  if (count <= 0) return absl::UnavailableError("no CUDA device: cudaGetDeviceCount found 0 devices");
  return count;
}

absl::StatusOr<int> Attribute(cudaDeviceAttr attribute, int index, absl::string_view what) {
  int value = 0;
  CONVOY_RETURN_IF_ERROR(
      CudaStatus(cudaDeviceGetAttribute(&value, attribute, index), absl::StrCat("querying the ", what, " of device ", index)));
  return value;
}

absl::StatusOr<GpuInfo> QueryVisibleGpu(int index) {
  GpuInfo info;
  info.index = index;
  info.emulated = IsCudaEmulated();
  CONVOY_ASSIGN_OR_RETURN(info.sm_count, Attribute(cudaDevAttrMultiProcessorCount, index, "SM count"));
  CONVOY_ASSIGN_OR_RETURN(info.compute_major, Attribute(cudaDevAttrComputeCapabilityMajor, index, "cc major"));
  CONVOY_ASSIGN_OR_RETURN(info.compute_minor, Attribute(cudaDevAttrComputeCapabilityMinor, index, "cc minor"));
  CONVOY_ASSIGN_OR_RETURN(const int smem_optin,
                          Attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin, index, "shared memory per block"));
  info.shared_memory_per_block_optin = static_cast<size_t>(smem_optin);
#if defined(CONVOY_CUDA_EMULATION)
  info.name = "CUDA emulation";
#else
  cudaDeviceProp properties{};
  CONVOY_RETURN_IF_ERROR(
      DeviceDiscoveryStatus(cudaGetDeviceProperties(&properties, index), "cudaGetDeviceProperties"));
  info.name = properties.name;
  info.total_memory_bytes = properties.totalGlobalMem;
#endif
  return info;
}

}  // namespace

absl::StatusOr<std::vector<GpuInfo>> ListGpus() {
  CONVOY_ASSIGN_OR_RETURN(const int count, VisibleDeviceCount());
  std::vector<GpuInfo> gpus;
  for (int i = 0; i < count; ++i) {
    CONVOY_ASSIGN_OR_RETURN(GpuInfo info, QueryVisibleGpu(i));
    gpus.push_back(std::move(info));
  }
  return gpus;
}

absl::StatusOr<GpuInfo> QueryGpu(int index) {
  CONVOY_ASSIGN_OR_RETURN(const int count, VisibleDeviceCount());
  if (index < 0 || index >= count) {
    return absl::NotFoundError(absl::StrCat("CUDA device ", index, " does not exist: ", count, " visible"));
  }
  return QueryVisibleGpu(index);
}

}  // namespace convoy::cuda
