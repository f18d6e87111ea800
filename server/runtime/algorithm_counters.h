// The kernel library's process-wide algorithm counters as the metrics registry exports them: the algorithm cache's
// hits, misses and tuning time (AlgorithmCache::Global()) and the algorithms rejected by on-device verification
// (AlgorithmRejections::Global()), for MetricsRegistry::SetAlgorithmCacheSource.
//
//   metrics->SetAlgorithmCacheSource(&runtime::KernelAlgorithmCounters);
#ifndef CONVOY_SERVER_RUNTIME_ALGORITHM_COUNTERS_H_
#define CONVOY_SERVER_RUNTIME_ALGORITHM_COUNTERS_H_

#include "server/metrics/algorithm_cache_collector.h"

namespace convoy::runtime {

metrics::AlgorithmCacheCounters KernelAlgorithmCounters();

}  // namespace convoy::runtime

#endif  // CONVOY_SERVER_RUNTIME_ALGORITHM_COUNTERS_H_
