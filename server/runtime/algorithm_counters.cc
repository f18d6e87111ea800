// The kernel library's algorithm counters for the metrics registry (see algorithm_counters.h).
#include "server/runtime/algorithm_counters.h"

#include "kernels/registry/algorithm_cache.h"
#include "kernels/registry/verification.h"

namespace convoy::runtime {

metrics::AlgorithmCacheCounters KernelAlgorithmCounters() {
  const AlgorithmCacheStats stats = AlgorithmCache::Global().stats();
  metrics::AlgorithmCacheCounters counters;
  counters.hits = static_cast<uint64_t>(stats.hits);
  counters.misses = static_cast<uint64_t>(stats.misses);
  counters.tuning_seconds = stats.tuning_seconds;
  for (const AlgorithmRejections::Count& c : AlgorithmRejections::Global().Counts()) {
    counters.rejections.push_back({c.algorithm, c.reason, static_cast<uint64_t>(c.count)});
  }
  return counters;
}

}  // namespace convoy::runtime
