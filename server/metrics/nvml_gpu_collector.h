// NvmlGpuCollector: GPU memory and utilization gauges read from NVML at scrape time (nv_gpu_memory_used_bytes,
// nv_gpu_memory_total_bytes, nv_gpu_utilization, label gpu_uuid, as Triton names them). NVML is loaded at run time
// with dlopen, so Convoy builds and runs where the NVIDIA driver is absent: Open() then returns null and the server
// simply exports no GPU metrics.
#ifndef CONVOY_SERVER_METRICS_NVML_GPU_COLLECTOR_H_
#define CONVOY_SERVER_METRICS_NVML_GPU_COLLECTOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace convoy::metrics {

struct GpuSample {
  std::string uuid;
  uint64_t memory_used_bytes = 0;
  uint64_t memory_total_bytes = 0;
  double utilization = 0;  // 0..1: fraction of the last sample period a kernel was running
};

class NvmlGpuCollector final : public prometheus::Collectable {
 public:
  // Null, quietly, when the library cannot be loaded, lacks a symbol, or nvmlInit fails (no driver, no GPU).
  static std::unique_ptr<NvmlGpuCollector> Open(const std::string& library = "libnvidia-ml.so.1");
  ~NvmlGpuCollector() override;
  NvmlGpuCollector(const NvmlGpuCollector&) = delete;
  NvmlGpuCollector& operator=(const NvmlGpuCollector&) = delete;

  // One sample per device that answered; a device whose query fails is left out of this sample.
  std::vector<GpuSample> Sample() const;
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  struct Api;
  NvmlGpuCollector(void* handle, std::unique_ptr<Api> api);

  void* const handle_;  // from dlopen
  const std::unique_ptr<Api> api_;
};

}  // namespace convoy::metrics

#endif  // CONVOY_SERVER_METRICS_NVML_GPU_COLLECTOR_H_
