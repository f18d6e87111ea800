// Histogram bucket boundaries for Convoy's metrics, in one place so docs/metrics.md and dashboards agree with them.
//  - Latency (request, queue, compute), seconds: 100 us to 10 s, roughly 1-2.5-5 per decade. CNN inference runs from
//    a few hundred microseconds (small model, GPU) to seconds (big batch, CPU).
//  - Batch size: powers of two from 1 to 1024 (batch sizes are usually powers of two or close to them).
//  - Model load time, seconds: 0.1 s to 10 min (loading includes kernel tuning, which can take minutes).
#ifndef CONVOY_SERVER_METRICS_BUCKETS_H_
#define CONVOY_SERVER_METRICS_BUCKETS_H_

#include "prometheus/histogram.h"

namespace convoy::metrics {

inline prometheus::Histogram::BucketBoundaries LatencyBucketsSeconds() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

inline prometheus::Histogram::BucketBoundaries BatchSizeBuckets() {
  return {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
}

inline prometheus::Histogram::BucketBoundaries LoadTimeBucketsSeconds() {
  return {0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600};
}

}  // namespace convoy::metrics

#endif  // CONVOY_SERVER_METRICS_BUCKETS_H_
