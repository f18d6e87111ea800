// NvmlGpuCollector against a fake libnvidia-ml (testing/fake_nvml.cc) whose answers the test chooses through
// environment variables, plus the quiet absence of NVML.
#include "server/metrics/nvml_gpu_collector.h"

#include <cstdlib>
#include <random>
#include <string>

#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "server/metrics/metrics_registry.h"
#include "server/metrics/testing/scrape.h"

namespace convoy::metrics {
namespace {

using ::convoy::metrics::testing::SampleValue;

std::string FakeNvmlPath() {
  const char* runfiles = std::getenv("TEST_SRCDIR");
  return std::string(runfiles == nullptr ? "." : runfiles) + "/convoy/server/metrics/testing/libfake_nvml.so";
}

void SetEnv(const std::string& name, uint64_t value) { setenv(name.c_str(), std::to_string(value).c_str(), 1); }

class NvmlGpuCollectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv("FAKE_NVML_INIT_FAIL");
    unsetenv("FAKE_NVML_FAIL_DEVICE");
    devices_ = std::uniform_int_distribution<int>(1, 4)(rng_);
    SetEnv("FAKE_NVML_DEVICES", devices_);
    for (int i = 0; i < devices_; ++i) {
      total_.push_back(std::uniform_int_distribution<uint64_t>(1ull << 30, 200ull << 30)(rng_));
      used_.push_back(std::uniform_int_distribution<uint64_t>(0, total_.back())(rng_));
      utilization_.push_back(std::uniform_int_distribution<int>(0, 100)(rng_));
      SetEnv("FAKE_NVML_TOTAL_" + std::to_string(i), total_.back());
      SetEnv("FAKE_NVML_USED_" + std::to_string(i), used_.back());
      SetEnv("FAKE_NVML_UTIL_" + std::to_string(i), utilization_.back());
    }
  }

  std::mt19937 rng_{std::random_device{}()};
  int devices_ = 0;
  std::vector<uint64_t> total_, used_;
  std::vector<int> utilization_;
};

TEST_F(NvmlGpuCollectorTest, MissingLibraryMeansNoCollector) {
  EXPECT_EQ(NvmlGpuCollector::Open("libconvoy-no-such-nvml.so.1"), nullptr);
}

TEST_F(NvmlGpuCollectorTest, FailedInitMeansNoCollector) {
  setenv("FAKE_NVML_INIT_FAIL", "1", 1);
  EXPECT_EQ(NvmlGpuCollector::Open(FakeNvmlPath()), nullptr);
}

TEST_F(NvmlGpuCollectorTest, SamplesEveryDevice) {
  std::unique_ptr<NvmlGpuCollector> collector = NvmlGpuCollector::Open(FakeNvmlPath());
  ASSERT_NE(collector, nullptr) << "cannot load " << FakeNvmlPath();
  const std::vector<GpuSample> samples = collector->Sample();
  ASSERT_EQ(samples.size(), static_cast<size_t>(devices_));
  for (int i = 0; i < devices_; ++i) {
    EXPECT_EQ(samples[i].uuid, "GPU-fake-" + std::to_string(i));
    EXPECT_EQ(samples[i].memory_used_bytes, used_[i]);
    EXPECT_EQ(samples[i].memory_total_bytes, total_[i]);
    EXPECT_DOUBLE_EQ(samples[i].utilization, utilization_[i] / 100.0);
  }
}

TEST_F(NvmlGpuCollectorTest, ADeviceThatFailsIsLeftOut) {
  const int failing = std::uniform_int_distribution<int>(0, devices_ - 1)(rng_);
  SetEnv("FAKE_NVML_FAIL_DEVICE", failing);
  std::unique_ptr<NvmlGpuCollector> collector = NvmlGpuCollector::Open(FakeNvmlPath());
  ASSERT_NE(collector, nullptr);
  const std::vector<GpuSample> samples = collector->Sample();
  EXPECT_EQ(samples.size(), static_cast<size_t>(devices_ - 1));
  for (const GpuSample& sample : samples) EXPECT_NE(sample.uuid, "GPU-fake-" + std::to_string(failing));
}

TEST_F(NvmlGpuCollectorTest, RegistryExportsGpuGaugesByUuid) {
  MetricsRegistry::Options options;
  options.listen_address = "";
  options.nvml_library = FakeNvmlPath();
  CONVOY_ASSERT_OK_AND_ASSIGN(auto metrics, MetricsRegistry::Create(options));
  ASSERT_TRUE(metrics->gpu_metrics_enabled());
  const std::string page = metrics->Scrape();
  for (int i = 0; i < devices_; ++i) {
    const std::map<std::string, std::string> gpu = {{"gpu_uuid", "GPU-fake-" + std::to_string(i)}};
    EXPECT_EQ(SampleValue(page, "nv_gpu_memory_used_bytes", gpu), static_cast<double>(used_[i]));
    EXPECT_EQ(SampleValue(page, "nv_gpu_memory_total_bytes", gpu), static_cast<double>(total_[i]));
    EXPECT_EQ(SampleValue(page, "nv_gpu_utilization", gpu), utilization_[i] / 100.0);
  }
}

}  // namespace
}  // namespace convoy::metrics
