// AlgorithmCacheCollector: exports the kernel library's algorithm-cache counters (hits, misses, seconds spent
// tuning, algorithms rejected by on-device verification) by reading them at scrape time through a callback the server registers, so kernels/ needs no dependency
// on metrics. The counters are process-wide (no labels); the callback returns totals since the process started.
//
//   registry->SetAlgorithmCacheSource([cache] {
//     return AlgorithmCacheCounters{cache->hits(), cache->misses(), cache->tuning_seconds()};
//   });
#ifndef CONVOY_SERVER_METRICS_ALGORITHM_CACHE_COLLECTOR_H_
#define CONVOY_SERVER_METRICS_ALGORITHM_CACHE_COLLECTOR_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "kernels/common/mutex.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace convoy::metrics {

struct AlgorithmCacheCounters {
  uint64_t hits = 0;
  uint64_t misses = 0;
  double tuning_seconds = 0;
  // Algorithms rejected by on-device verification, per (algorithm, reason).
  struct Rejection {
    std::string algorithm;
    std::string reason;  // "mismatch", "non_finite", "run_failed"
    uint64_t count = 0;
  };
  std::vector<Rejection> rejections;
};

class AlgorithmCacheCollector final : public prometheus::Collectable {
 public:
  // Replaces the source; an empty function removes it (the metrics then disappear from scrapes). The source runs on
  // the scraping thread and must be cheap and thread-safe.
  void SetSource(std::function<AlgorithmCacheCounters()> source);

  // convoy_algorithm_cache_hits_total, convoy_algorithm_cache_misses_total, convoy_algorithm_tuning_seconds_total,
  // convoy_algorithm_rejected_total{algorithm,reason} (one sample per pair rejected so far); nothing while no source
  // is set.
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  mutable convoy::Mutex mu_;
  std::function<AlgorithmCacheCounters()> source_ ABSL_GUARDED_BY(mu_);
};

}  // namespace convoy::metrics

#endif  // CONVOY_SERVER_METRICS_ALGORITHM_CACHE_COLLECTOR_H_
