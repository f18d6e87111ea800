// A discrete-event simulation of one model's dynamic batching, for deterministic tests of batching policies. A real
// BatchQueue (with the policy under test) is driven the way DynamicBatcher drives it: whenever something happens,
// free instances take what TakeBatch gives them, idle ones look again at its next_check, and an instance reports
// each batch with RecordBatchDone when it is done. The instances' execution time per batch comes from a function;
// the load from closed-loop clients in phases (each sends its next request `return_time` after its response) and
// open-loop arrivals at given times. Time is simulated: no threads, no clock; the same options give the same result.
//
//   SimulationOptions options;
//   options.policy = policy;                                  // batching_policy.h
//   options.execution_time = [](int64_t b, int64_t) { return absl::Milliseconds(4 + b); };
//   options.phases = {{.start = absl::ZeroDuration(), .clients = 8, .return_time = absl::Milliseconds(1)}};
//   options.duration = absl::Seconds(2);
//   CONVOY_ASSERT_OK_AND_ASSIGN(SimulationResult result, Simulate(options));
//   result.Throughput(absl::Seconds(1), absl::Seconds(2));   // inferences/s in the second half
#ifndef CONVOY_SERVER_BATCHING_BATCHING_SIMULATOR_H_
#define CONVOY_SERVER_BATCHING_BATCHING_SIMULATOR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/batching/batch_queue.h"
#include "server/batching/batching_policy.h"

namespace convoy::batching {

struct ClientPhase {
  absl::Duration start = absl::ZeroDuration();  // from the start of the simulation
  int clients = 0;                              // concurrent clients from `start` until the next phase starts
  absl::Duration return_time = absl::ZeroDuration();  // from a response to that client's next request
  absl::Duration return_jitter = absl::ZeroDuration();  // plus a uniform random share of this
  int late_every = 0;                           // every late_every-th return of a client (0: none) is...
  absl::Duration late_return = absl::ZeroDuration();  // ...this much later still (a pause of the client)
  int64_t batch_size = 1;                       // of every request
};

struct SimulationOptions {
  BatchingPolicy policy;
  int instances = 1;
  // Busy time of an instance for a batch of `batch_size` elements; `index` counts batches from 0 (for noise).
  std::function<absl::Duration(int64_t batch_size, int64_t index)> execution_time;
  std::vector<ClientPhase> phases;              // in start order
  std::vector<absl::Duration> open_arrivals;    // batch-1 requests from no client, at these offsets
  absl::Duration duration = absl::Seconds(1);   // clients send nothing after it; the run ends when all are answered
  uint32_t seed = 1;                            // of the return jitter
};

struct SimulatedRequest {
  int client = -1;  // -1: an open-loop arrival
  int64_t batch_size = 1;
  absl::Time arrival;
  absl::Time dispatch = absl::InfinitePast();  // when it left the queue in a batch (never, if it failed there)
  absl::Time done;                             // its response
  absl::Status status;                         // OK, or why the queue refused or failed it
  int64_t batch = -1;                          // index into SimulationResult::batches
  absl::Duration latency() const { return done - arrival; }  // queue + compute
  absl::Duration queue_time() const { return dispatch - arrival; }
};

struct SimulatedBatch {
  absl::Time dispatch;
  absl::Time done;
  int64_t elements = 0;
  int instance = 0;
};

struct SimulationResult {
  absl::Time start;
  std::vector<SimulatedRequest> requests;  // in arrival order
  std::vector<SimulatedBatch> batches;     // in dispatch order
  BatcherEstimates estimates;              // the queue's, when the last request was answered

  // Over the window [from, to) of offsets from the start:
  // inferences answered OK per second (by response time);
  double Throughput(absl::Duration from, absl::Duration to) const;
  // the q-quantile (0..1) of the latency of requests that arrived in it and succeeded;
  absl::Duration LatencyQuantile(double q, absl::Duration from, absl::Duration to) const;
  // the longest queue time among requests that arrived in it and ran;
  absl::Duration MaxQueueTime(absl::Duration from, absl::Duration to) const;
  // the batches dispatched in it.
  std::vector<SimulatedBatch> BatchesIn(absl::Duration from, absl::Duration to) const;
};

// An execution_time from times measured at some batch sizes (milliseconds), linear between them (and beyond them,
// along the nearest two), plus up to `noise` that varies from batch to batch (and with `seed`).
std::function<absl::Duration(int64_t batch_size, int64_t index)> InterpolatedExecutionTime(
    std::map<int64_t, double> measured_ms, absl::Duration noise, uint32_t seed = 0);

// InvalidArgument when the policy does not validate or no execution_time is given.
absl::StatusOr<SimulationResult> Simulate(const SimulationOptions& options);

}  // namespace convoy::batching

#endif  // CONVOY_SERVER_BATCHING_BATCHING_SIMULATOR_H_
