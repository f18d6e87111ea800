// The launch-cost model's view of the current CUDA device (launch_cost_model.h), read from its attributes once per
// device and cached: SM count, compute capability, per-SM thread/block/register/shared-memory limits, clock, DRAM bus.
// Under the CUDA emulation the attributes are the emulated H200's (132 SMs, sm_90 limits), so the heuristic makes the
// choices here that it makes on an H200. A device whose attributes cannot be read gets GpuModel::H200() (the
// heuristic must always answer).
//
//   const GpuModel& gpu = CurrentGpuModel();
#ifndef CONVOY_KERNELS_CUDA_GPU_MODEL_CUH_
#define CONVOY_KERNELS_CUDA_GPU_MODEL_CUH_

#include <map>
#include <memory>
#include <mutex>

#include "kernels/cuda/launch_cost_model.h"
#include "kernels/cuda_emulation/cuda_compat.cuh"

namespace convoy::cuda {

// The model of device `device` from its attributes (false when a query failed).
inline bool QueryGpuModel(int device, GpuModel& gpu) {
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    return false;
  }
  gpu = GpuModel::ForArchitecture(major, minor);
  int clock_khz = 0, memory_clock_khz = 0, bus_bits = 0, l2 = 0;
  const bool ok =
      cudaDeviceGetAttribute(&gpu.sm_count, cudaDevAttrMultiProcessorCount, device) == cudaSuccess &&
      cudaDeviceGetAttribute(&gpu.max_threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, device) == cudaSuccess &&
      cudaDeviceGetAttribute(&gpu.max_blocks_per_sm, cudaDevAttrMaxBlocksPerMultiprocessor, device) == cudaSuccess &&
      cudaDeviceGetAttribute(&gpu.registers_per_sm, cudaDevAttrMaxRegistersPerMultiprocessor, device) ==
          cudaSuccess &&
      cudaDeviceGetAttribute(&gpu.shared_bytes_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device) ==
          cudaSuccess &&
      cudaDeviceGetAttribute(&gpu.max_shared_bytes_per_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) ==
          cudaSuccess &&
      cudaDeviceGetAttribute(&gpu.reserved_shared_bytes_per_block, cudaDevAttrReservedSharedMemoryPerBlock,
                             device) == cudaSuccess &&
      cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device) == cudaSuccess &&
      cudaDeviceGetAttribute(&memory_clock_khz, cudaDevAttrMemoryClockRate, device) == cudaSuccess &&
      cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device) == cudaSuccess &&
      cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device) == cudaSuccess;
  if (!ok) return false;
  if (clock_khz > 0) gpu.clock_ghz = clock_khz * 1e-6;
  // Double data rate: two transfers per memory clock over the bus.
  if (memory_clock_khz > 0 && bus_bits > 0) gpu.dram_gb_per_s = 2.0 * memory_clock_khz * 1e3 * bus_bits / 8 / 1e9;
  gpu.l2_gb_per_s = 2 * gpu.dram_gb_per_s;
  if (l2 > 0) gpu.l2_bytes = l2;
  gpu.name = "sm_" + std::to_string(major * 10 + minor);
  return true;
}

// The model of the calling thread's current device, queried once per device (thread-safe).
inline const GpuModel& CurrentGpuModel() {
  static std::mutex mu;
  static std::map<int, std::unique_ptr<GpuModel>>* models = new std::map<int, std::unique_ptr<GpuModel>>();
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) device = -1;
  std::lock_guard<std::mutex> lock(mu);
  std::unique_ptr<GpuModel>& model = (*models)[device];
  if (model == nullptr) {
    model = std::make_unique<GpuModel>();
    if (device < 0 || !QueryGpuModel(device, *model)) {
      *model = GpuModel::H200();
      (void)cudaGetLastError();  // a failed query must not leave a sticky error for the next launch check
    }
  }
  return *model;
}

}  // namespace convoy::cuda

#endif  // CONVOY_KERNELS_CUDA_GPU_MODEL_CUH_
