// NvmlGpuCollector: NVML through dlopen, declared here from NVML's public C ABI so no NVML header is needed at
// build time. See nvml_gpu_collector.h.
#include "server/metrics/nvml_gpu_collector.h"

#include <dlfcn.h>

#include <type_traits>
#include <utility>

#include "prometheus/client_metric.h"
#include "prometheus/metric_type.h"

namespace convoy::metrics {
namespace {

// NVML's C ABI, as far as Convoy uses it: every call returns 0 (NVML_SUCCESS) on success.
using NvmlReturn = int;
using NvmlDevice = struct NvmlDeviceOpaque*;
struct NvmlMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct NvmlUtilization {
  unsigned int gpu;     // percent
  unsigned int memory;  // percent
};
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr unsigned int kUuidBufferSize = 96;

prometheus::MetricFamily GaugeFamily(std::string name, std::string help) {
  prometheus::MetricFamily family;
  family.name = std::move(name);
  family.help = std::move(help);
  family.type = prometheus::MetricType::Gauge;
  return family;
}

void AddGauge(prometheus::MetricFamily& family, const std::string& uuid, double value) {
  prometheus::ClientMetric metric;
  metric.label.push_back({"gpu_uuid", uuid});
  metric.gauge.value = value;
  family.metric.push_back(std::move(metric));
}

}  // namespace

struct NvmlGpuCollector::Api {
  NvmlReturn (*init)();
  NvmlReturn (*shutdown)();
  NvmlReturn (*device_count)(unsigned int*);
  NvmlReturn (*device_by_index)(unsigned int, NvmlDevice*);
  NvmlReturn (*device_uuid)(NvmlDevice, char*, unsigned int);
  NvmlReturn (*memory_info)(NvmlDevice, NvmlMemory*);
  NvmlReturn (*utilization)(NvmlDevice, NvmlUtilization*);
};

std::unique_ptr<NvmlGpuCollector> NvmlGpuCollector::Open(const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return nullptr;
  auto api = std::make_unique<Api>();
  bool complete = true;
  const auto bind = [&](auto& function, const char* symbol) {
    function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(dlsym(handle, symbol));
    complete = complete && function != nullptr;
  };
  bind(api->init, "nvmlInit_v2");
  bind(api->shutdown, "nvmlShutdown");
  bind(api->device_count, "nvmlDeviceGetCount_v2");
  bind(api->device_by_index, "nvmlDeviceGetHandleByIndex_v2");
  bind(api->device_uuid, "nvmlDeviceGetUUID");
  bind(api->memory_info, "nvmlDeviceGetMemoryInfo");
  bind(api->utilization, "nvmlDeviceGetUtilizationRates");
  if (!complete || api->init() != kNvmlSuccess) {
    dlclose(handle);
    return nullptr;
  }
  return std::unique_ptr<NvmlGpuCollector>(new NvmlGpuCollector(handle, std::move(api)));
}

NvmlGpuCollector::NvmlGpuCollector(void* handle, std::unique_ptr<Api> api) : handle_(handle), api_(std::move(api)) {}

NvmlGpuCollector::~NvmlGpuCollector() {
  api_->shutdown();
  dlclose(handle_);
}

std::vector<GpuSample> NvmlGpuCollector::Sample() const {
  std::vector<GpuSample> samples;
  unsigned int count = 0;
  if (api_->device_count(&count) != kNvmlSuccess) return samples;
  for (unsigned int index = 0; index < count; ++index) {
    NvmlDevice device = nullptr;
    char uuid[kUuidBufferSize] = {};
    NvmlMemory memory{};
    NvmlUtilization utilization{};
    if (api_->device_by_index(index, &device) != kNvmlSuccess ||
        api_->device_uuid(device, uuid, kUuidBufferSize) != kNvmlSuccess ||
        api_->memory_info(device, &memory) != kNvmlSuccess ||
        api_->utilization(device, &utilization) != kNvmlSuccess) {
      continue;
    }
    samples.push_back(GpuSample{uuid, memory.used, memory.total, utilization.gpu / 100.0});
  }
  return samples;
}

std::vector<prometheus::MetricFamily> NvmlGpuCollector::Collect() const {
  const std::vector<GpuSample> samples = Sample();
  if (samples.empty()) return {};
  prometheus::MetricFamily used = GaugeFamily("nv_gpu_memory_used_bytes", "GPU memory in use, bytes");
  prometheus::MetricFamily total = GaugeFamily("nv_gpu_memory_total_bytes", "GPU memory in total, bytes");
  prometheus::MetricFamily busy =
      GaugeFamily("nv_gpu_utilization", "GPU utilization, 0..1 (fraction of the last sample period busy)");
  for (const GpuSample& sample : samples) {
    AddGauge(used, sample.uuid, static_cast<double>(sample.memory_used_bytes));
    AddGauge(total, sample.uuid, static_cast<double>(sample.memory_total_bytes));
    AddGauge(busy, sample.uuid, sample.utilization);
  }
  return {std::move(used), std::move(total), std::move(busy)};
}

}  // namespace convoy::metrics
