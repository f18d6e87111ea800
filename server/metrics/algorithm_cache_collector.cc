// AlgorithmCacheCollector: the kernel algorithm cache's counters, polled at scrape time. See
// algorithm_cache_collector.h.
#include "server/metrics/algorithm_cache_collector.h"

#include <string>
#include <utility>

#include "prometheus/client_metric.h"
#include "prometheus/metric_type.h"

namespace convoy::metrics {
namespace {

prometheus::MetricFamily CounterFamily(std::string name, std::string help, double value) {
  prometheus::MetricFamily family;
  family.name = std::move(name);
  family.help = std::move(help);
  family.type = prometheus::MetricType::Counter;
  prometheus::ClientMetric metric;
  metric.counter.value = value;
  family.metric.push_back(std::move(metric));
  return family;
}

// One sample per rejected (algorithm, reason).
prometheus::MetricFamily RejectedFamily(const std::vector<AlgorithmCacheCounters::Rejection>& rejections) {
  prometheus::MetricFamily family;
  family.name = "convoy_algorithm_rejected_total";
  family.help = "Kernel algorithms whose output disagreed with a trusted result on this device, and were not used";
  family.type = prometheus::MetricType::Counter;
  for (const auto& r : rejections) {
    prometheus::ClientMetric metric;
    metric.label = {{"algorithm", r.algorithm}, {"reason", r.reason}};
    metric.counter.value = static_cast<double>(r.count);
    family.metric.push_back(std::move(metric));
  }
  return family;
}

}  // namespace

void AlgorithmCacheCollector::SetSource(std::function<AlgorithmCacheCounters()> source) {
  convoy::MutexLock lock(&mu_);
  source_ = std::move(source);
}

std::vector<prometheus::MetricFamily> AlgorithmCacheCollector::Collect() const {
  std::function<AlgorithmCacheCounters()> source;
  {
    convoy::MutexLock lock(&mu_);
    source = source_;
  }
  if (!source) return {};
  const AlgorithmCacheCounters counters = source();
  return {
      CounterFamily("convoy_algorithm_cache_hits_total",
                    "Kernel algorithm cache lookups answered from the cache", static_cast<double>(counters.hits)),
      CounterFamily("convoy_algorithm_cache_misses_total",
                    "Kernel algorithm cache lookups that had to tune or fall back to the heuristic",
                    static_cast<double>(counters.misses)),
      CounterFamily("convoy_algorithm_tuning_seconds_total", "Seconds spent timing candidate kernel algorithms",
                    counters.tuning_seconds),
      RejectedFamily(counters.rejections),
  };
}

}  // namespace convoy::metrics
