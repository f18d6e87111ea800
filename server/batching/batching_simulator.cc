// The batching simulation: events in time order, a BatchQueue, instances and clients. See batching_simulator.h.
#include "server/batching/batching_simulator.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <memory>
#include <queue>
#include <random>
#include <set>
#include <utility>

#include "absl/status/statusor.h"
#include "server/batching/batch_queue.h"
#include "server/batching/batch_request.h"

namespace convoy::batching {
namespace {

struct IndexPayload : BatchPayload {
  explicit IndexPayload(int64_t index) : index(index) {}
  int64_t index;
};

class Simulation {
 public:
  Simulation(const SimulationOptions& options, std::unique_ptr<BatchQueue> queue)
      : options_(options), queue_(std::move(queue)), running_(std::max(options.instances, 1)), rng_(options.seed) {
    int most = 0;
    for (const ClientPhase& phase : options.phases) most = std::max(most, phase.clients);
    client_busy_.assign(most, false);
    client_returns_.assign(most, 0);
    result_.start = absl::FromUnixSeconds(1'000'000);
  }

  SimulationResult Run() {
    for (size_t i = 0; i < options_.phases.size(); ++i) {
      Schedule(result_.start + options_.phases[i].start, Kind::kPhase, static_cast<int>(i));
    }
    for (absl::Duration at : options_.open_arrivals) Schedule(result_.start + at, Kind::kArrival, -1);
    while (!events_.empty()) {
      const absl::Time now = events_.top().time;
      while (!events_.empty() && events_.top().time == now) {
        const Event event = events_.top();
        events_.pop();
        Handle(event);
      }
      Poll(now);
    }
    result_.estimates = queue_->Estimates();
    return std::move(result_);
  }

 private:
  enum class Kind { kPhase, kArrival, kBatchDone, kCheck };
  struct Event {
    absl::Time time;
    int64_t sequence;
    Kind kind;
    int value;  // phase index, client (-1: open loop) or instance
    bool operator>(const Event& other) const {
      return time != other.time ? time > other.time : sequence > other.sequence;
    }
  };

  void Schedule(absl::Time time, Kind kind, int value) { events_.push(Event{time, next_sequence_++, kind, value}); }

  void Handle(const Event& event) {
    switch (event.kind) {
      case Kind::kPhase:
        StartPhase(event.value, event.time);
        break;
      case Kind::kArrival:
        Arrive(event.value, event.time);
        break;
      case Kind::kBatchDone:
        FinishBatch(event.value, event.time);
        break;
      case Kind::kCheck:
        checks_.erase(event.time);
        break;
    }
  }

  void StartPhase(int index, absl::Time now) {
    phase_ = &options_.phases[index];
    for (int client = 0; client < phase_->clients; ++client) {
      if (client_busy_[client]) continue;
      client_busy_[client] = true;
      Schedule(now, Kind::kArrival, client);
    }
  }

  void Arrive(int client, absl::Time now) {
    SimulatedRequest record;
    record.client = client;
    record.batch_size = client >= 0 && phase_ != nullptr ? phase_->batch_size : 1;
    record.arrival = now;
    const int64_t index = static_cast<int64_t>(result_.requests.size());
    result_.requests.push_back(record);
    BatchRequest::Spec spec;
    spec.batch_size = record.batch_size;
    spec.shape_key = "x";
    auto request = std::make_unique<BatchRequest>(std::move(spec), std::make_unique<IndexPayload>(index),
                                                  [](absl::Status) {});
    const absl::Status added = queue_->Add(request, now);
    if (!added.ok()) Respond(index, added, now);
  }

  // The response of request `index` reaches its client, which sends its next request one return time later while
  // its phase keeps it.
  void Respond(int64_t index, absl::Status status, absl::Time now) {
    SimulatedRequest& request = result_.requests[index];
    request.status = std::move(status);
    request.done = now;
    const int client = request.client;
    if (client < 0) return;
    absl::Time next = now + phase_->return_time +
                      std::uniform_real_distribution<double>(0, 1)(rng_) * phase_->return_jitter;
    if (phase_->late_every > 0 && ++client_returns_[client] % phase_->late_every == 0) next += phase_->late_return;
    if (client < phase_->clients && next < result_.start + options_.duration) {
      Schedule(next, Kind::kArrival, client);
    } else {
      client_busy_[client] = false;
    }
  }

  void FinishBatch(int instance, absl::Time now) {
    Running& running = running_[instance];
    running.finished.done = now;
    queue_->RecordResponsesSent(running.finished, now);
    queue_->RecordBatchDone(running.finished);
    result_.batches[running.batch].done = now;
    for (int64_t index : running.requests) Respond(index, absl::OkStatus(), now);
    running = Running{};
  }

  // What the batcher's instance threads do after any change: drop expired requests, then every free instance
  // takes the next batch; an idle one looks again at next_check.
  void Poll(absl::Time now) {
    for (BatchQueue::Removed& removed : queue_->RemoveCancelledAndExpired(now)) {
      Respond(removed.request->payload_as<IndexPayload>()->index, removed.status, now);
    }
    for (size_t instance = 0; instance < running_.size(); ++instance) {
      if (running_[instance].batch >= 0) continue;
      BatchQueue::Decision decision = queue_->TakeBatch(now, /*flush=*/false);
      if (decision.batch.empty()) {
        if (decision.next_check != absl::InfiniteFuture() && checks_.insert(decision.next_check).second) {
          Schedule(decision.next_check, Kind::kCheck, 0);
        }
        return;
      }
      Dispatch(static_cast<int>(instance), decision.batch, now);
    }
  }

  void Dispatch(int instance, const std::vector<std::unique_ptr<BatchRequest>>& batch, absl::Time now) {
    SimulatedBatch record;
    record.dispatch = now;
    record.instance = instance;
    Running& running = running_[instance];
    running.batch = static_cast<int64_t>(result_.batches.size());
    for (const auto& request : batch) {
      const int64_t index = request->payload_as<IndexPayload>()->index;
      record.elements += request->batch_size();
      result_.requests[index].dispatch = now;
      result_.requests[index].batch = running.batch;
      running.requests.push_back(index);
    }
    running.finished = BatchQueue::Summarize(batch);
    result_.batches.push_back(record);
    Schedule(now + options_.execution_time(record.elements, running.batch), Kind::kBatchDone, instance);
  }

  struct Running {
    int64_t batch = -1;  // index into result_.batches; -1: the instance is free
    std::vector<int64_t> requests;
    BatchQueue::FinishedBatch finished;  // what the queue learns when it is done
  };

  const SimulationOptions& options_;
  std::unique_ptr<BatchQueue> queue_;
  std::vector<Running> running_;
  std::vector<bool> client_busy_;  // has a request outstanding or an arrival scheduled
  std::vector<int64_t> client_returns_;  // responses each client got (for late_every)
  const ClientPhase* phase_ = nullptr;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  int64_t next_sequence_ = 0;
  std::set<absl::Time> checks_;
  std::mt19937 rng_;
  SimulationResult result_;
};

}  // namespace

std::function<absl::Duration(int64_t, int64_t)> InterpolatedExecutionTime(std::map<int64_t, double> measured_ms,
                                                                          absl::Duration noise, uint32_t seed) {
  return [measured_ms = std::move(measured_ms), noise, seed](int64_t b, int64_t index) {
    auto above = measured_ms.lower_bound(b);
    if (above == measured_ms.end()) --above;
    const auto below = above->first == b || above == measured_ms.begin() ? above : std::prev(above);
    const double ms = below->second + (above->second - below->second) * static_cast<double>(b - below->first) /
                                          static_cast<double>(std::max<int64_t>(above->first - below->first, 1));
    const double share = static_cast<double>((index * 7919 + static_cast<int64_t>(seed) * 31) % 13) / 13.0;
    return absl::Microseconds(1000 * ms) + noise * share;
  };
}

absl::StatusOr<SimulationResult> Simulate(const SimulationOptions& options) {
  absl::StatusOr<std::unique_ptr<BatchQueue>> queue =
      BatchQueue::Create(options.policy, std::max(options.instances, 1));
  if (!queue.ok()) return queue.status();
  if (!options.execution_time) return absl::InvalidArgumentError("simulation: no execution_time");
  return Simulation(options, std::move(queue).value()).Run();
}

double SimulationResult::Throughput(absl::Duration from, absl::Duration to) const {
  int64_t inferences = 0;
  for (const SimulatedRequest& request : requests) {
    if (request.status.ok() && request.done >= start + from && request.done < start + to) {
      inferences += request.batch_size;
    }
  }
  return static_cast<double>(inferences) / absl::ToDoubleSeconds(to - from);
}

absl::Duration SimulationResult::LatencyQuantile(double q, absl::Duration from, absl::Duration to) const {
  std::vector<absl::Duration> latencies;
  for (const SimulatedRequest& request : requests) {
    if (request.status.ok() && request.arrival >= start + from && request.arrival < start + to) {
      latencies.push_back(request.latency());
    }
  }
  if (latencies.empty()) return absl::ZeroDuration();
  std::sort(latencies.begin(), latencies.end());
  const size_t count = latencies.size();
  const size_t rank = std::max<size_t>(static_cast<size_t>(std::ceil(q * static_cast<double>(count))), 1) - 1;
  return latencies[std::min(rank, latencies.size() - 1)];
}

absl::Duration SimulationResult::MaxQueueTime(absl::Duration from, absl::Duration to) const {
  absl::Duration longest = absl::ZeroDuration();
  for (const SimulatedRequest& request : requests) {
    if (request.batch >= 0 && request.arrival >= start + from && request.arrival < start + to) {
      longest = std::max(longest, request.queue_time());
    }
  }
  return longest;
}

std::vector<SimulatedBatch> SimulationResult::BatchesIn(absl::Duration from, absl::Duration to) const {
  std::vector<SimulatedBatch> in;
  for (const SimulatedBatch& batch : batches) {
    if (batch.dispatch >= start + from && batch.dispatch < start + to) in.push_back(batch);
  }
  return in;
}

}  // namespace convoy::batching
