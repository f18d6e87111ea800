// MetricsRegistry: the one owner of Convoy's Prometheus registry and of the pull endpoint (HTTP, default port 8002,
// path /metrics). Everything else records through it: a ModelMetricsReporter per model version, the kernel
// algorithm cache through a polled callback, and GPU gauges from NVML where a driver is present. docs/metrics.md
// lists every metric.
//
//   MetricsRegistry::Options options;            // listens on 0.0.0.0:8002
//   CONVOY_ASSIGN_OR_RETURN(auto metrics, MetricsRegistry::Create(options));
//   std::unique_ptr<ModelMetricsReporter> resnet = metrics->ForModel("resnet50", "1");
//   metrics->SetAlgorithmCacheSource([&cache] { return cache.Counters(); });
#ifndef CONVOY_SERVER_METRICS_METRICS_REGISTRY_H_
#define CONVOY_SERVER_METRICS_METRICS_REGISTRY_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "prometheus/registry.h"
#include "server/metrics/algorithm_cache_collector.h"
#include "server/metrics/metrics_http_server.h"
#include "server/metrics/model_metrics_reporter.h"
#include "server/metrics/nvml_gpu_collector.h"

namespace convoy::metrics {

class MetricsRegistry {
 public:
  struct Options {
    // host:port of the HTTP pull endpoint. Port 0 takes any free port (see port()); empty serves no endpoint
    // (metrics are still recorded and Scrape() still works).
    std::string listen_address = "0.0.0.0:8002";
    std::string path = "/metrics";
    // Export GPU gauges through NVML when the library loads; nothing happens where it does not.
    bool gpu_metrics = true;
    std::string nvml_library = "libnvidia-ml.so.1";
  };

  // UNAVAILABLE naming the address when the endpoint cannot listen (port taken, bad address).
  static absl::StatusOr<std::unique_ptr<MetricsRegistry>> Create(const Options& options);
  ~MetricsRegistry();
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // The port the endpoint listens on; 0 without an endpoint.
  int port() const { return port_; }
  bool gpu_metrics_enabled() const { return gpu_collector_ != nullptr; }

  // The reporter of one model version; its series appear (at zero) at once. Two reporters of the same model and
  // version share series. Must not outlive this registry.
  std::unique_ptr<ModelMetricsReporter> ForModel(const std::string& model, const std::string& version);

  // Where the algorithm cache counters are read at scrape time (see algorithm_cache_collector.h).
  void SetAlgorithmCacheSource(std::function<AlgorithmCacheCounters()> source);

  // Everything the endpoint would serve, in the Prometheus text format.
  std::string Scrape() const;

 private:
  MetricsRegistry();
  void RegisterFamilies();

  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<AlgorithmCacheCollector> cache_collector_;
  std::shared_ptr<NvmlGpuCollector> gpu_collector_;  // null without NVML
  ModelMetricFamilies families_{};
  std::unique_ptr<MetricsHttpServer> endpoint_;
  int port_ = 0;
};

}  // namespace convoy::metrics

#endif  // CONVOY_SERVER_METRICS_METRICS_REGISTRY_H_
