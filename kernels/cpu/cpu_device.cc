#include "kernels/cpu/cpu_device.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/strings/match.h"
#include "kernels/common/align.h"

namespace convoy {

std::string CpuModelName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, "model name")) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
    }
  }
  return "unknown-cpu";
}

CpuDevice::CpuDevice(int num_threads)
    : pool_(std::make_unique<ThreadPool>(num_threads)),
      identity_(absl::StrCat("cpu:", CpuModelName(), ":threads=", num_threads)) {}

absl::StatusOr<std::unique_ptr<CpuDevice>> CpuDevice::Create(const Options& options) {
  if (options.num_threads < 0) {
    return absl::InvalidArgumentError(absl::StrCat("num_threads must be >= 0, got ", options.num_threads));
  }
  const int threads = options.num_threads > 0 ? options.num_threads : ThreadPool::DefaultThreadCount();
  return std::unique_ptr<CpuDevice>(new CpuDevice(threads));
}

CpuDevice& CpuDevice::Default() {
  static CpuDevice* device = new CpuDevice(ThreadPool::DefaultThreadCount());
  return *device;
}

ExecutionContext CpuDevice::context() const {
  ExecutionContext c;
  c.backend = Backend::kCpu;
  c.thread_pool = pool_.get();
  return c;
}

absl::StatusOr<DeviceAllocation> CpuDevice::Allocate(size_t bytes) {
  if (bytes == 0) return DeviceAllocation();
  void* p = std::aligned_alloc(kCacheLineBytes, AlignUp(bytes));
  if (p == nullptr) return absl::ResourceExhaustedError(absl::StrCat("CPU allocation of ", bytes, " bytes failed"));
  return DeviceAllocation(p, bytes, [](void* q) { std::free(q); });
}

absl::Status CpuDevice::CopyToDevice(void* device_dst, const void* host_src, size_t bytes) {
  if (bytes) std::memcpy(device_dst, host_src, bytes);
  return absl::OkStatus();
}

absl::Status CpuDevice::CopyToHost(void* host_dst, const void* device_src, size_t bytes) {
  if (bytes) std::memcpy(host_dst, device_src, bytes);
  return absl::OkStatus();
}

namespace {

// The CPU has nothing to queue on: kernels run on the device's thread pool as they are called.
class CpuQueue final : public DeviceQueue {
 public:
  explicit CpuQueue(CpuDevice* device) : device_(device) {}
  ExecutionContext context() const override { return device_->context(); }
  absl::Status CopyToDevice(void* device_dst, const void* host_src, size_t bytes) override {
    return device_->CopyToDevice(device_dst, host_src, bytes);
  }
  absl::Status CopyToHost(void* host_dst, const void* device_src, size_t bytes) override {
    return device_->CopyToHost(host_dst, device_src, bytes);
  }
  absl::Status Synchronize() override { return absl::OkStatus(); }

 private:
  CpuDevice* const device_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceQueue>> CpuDevice::CreateQueue() {
  return std::unique_ptr<DeviceQueue>(new CpuQueue(this));
}

absl::StatusOr<std::vector<double>> CpuDevice::TimeRuns(const std::function<absl::Status()>& fn, int warmup,
                                                        int reps) {
  for (int i = 0; i < warmup; ++i) {
    if (absl::Status s = fn(); !s.ok()) return s;
  }
  std::vector<double> times;
  times.reserve(reps);
  for (int i = 0; i < reps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    if (absl::Status s = fn(); !s.ok()) return s;
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  return times;
}

}  // namespace convoy
