// A stand-in for libnvidia-ml.so.1 for tests: the few NVML entry points Convoy uses, answering from environment
// variables the test sets before each call, so tests choose the values and check them in the scrape:
//   FAKE_NVML_INIT_FAIL=1        nvmlInit_v2 fails (as without a driver)
//   FAKE_NVML_DEVICES=<n>        device count
//   FAKE_NVML_USED_<i>, FAKE_NVML_TOTAL_<i>   memory of device i, bytes
//   FAKE_NVML_UTIL_<i>           utilization of device i, percent
//   FAKE_NVML_FAIL_DEVICE=<i>    memory queries of device i fail
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

unsigned long long EnvNumber(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  return value == nullptr ? 0 : std::strtoull(value, nullptr, 10);
}

struct FakeMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct FakeUtilization {
  unsigned int gpu;
  unsigned int memory;
};
constexpr int kSuccess = 0;
constexpr int kError = 999;  // NVML_ERROR_UNKNOWN

// Devices are handed out as 1-based integers cast to pointers.
unsigned int IndexOf(void* device) { return static_cast<unsigned int>(reinterpret_cast<uintptr_t>(device)) - 1; }

}  // namespace

extern "C" {

int nvmlInit_v2() { return EnvNumber("FAKE_NVML_INIT_FAIL") == 1 ? kError : kSuccess; }
int nvmlShutdown() { return kSuccess; }

int nvmlDeviceGetCount_v2(unsigned int* count) {
  *count = static_cast<unsigned int>(EnvNumber("FAKE_NVML_DEVICES"));
  return kSuccess;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device) {
  *device = reinterpret_cast<void*>(static_cast<uintptr_t>(index) + 1);
  return kSuccess;
}

int nvmlDeviceGetUUID(void* device, char* uuid, unsigned int length) {
  std::snprintf(uuid, length, "GPU-fake-%u", IndexOf(device));
  return kSuccess;
}

int nvmlDeviceGetMemoryInfo(void* device, FakeMemory* memory) {
  const unsigned int index = IndexOf(device);
  if (std::getenv("FAKE_NVML_FAIL_DEVICE") != nullptr && EnvNumber("FAKE_NVML_FAIL_DEVICE") == index) return kError;
  memory->used = EnvNumber("FAKE_NVML_USED_" + std::to_string(index));
  memory->total = EnvNumber("FAKE_NVML_TOTAL_" + std::to_string(index));
  memory->free = memory->total - memory->used;
  return kSuccess;
}

int nvmlDeviceGetUtilizationRates(void* device, FakeUtilization* utilization) {
  utilization->gpu = static_cast<unsigned int>(EnvNumber("FAKE_NVML_UTIL_" + std::to_string(IndexOf(device))));
  utilization->memory = 0;
  return kSuccess;
}

}  // extern "C"
