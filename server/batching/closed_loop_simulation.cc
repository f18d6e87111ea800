// The adaptive and the fixed batching policy side by side on a simulated closed loop (batching_simulator.h: the real
// BatchQueue, simulated clients and instance, no threads, no clock), for several seeds of the clients' random return
// times: the throughput of each from 1 s on, their ratio, and the adaptive policy's batches by size and by reason.
// Deterministic: the same flags give the same numbers on any machine, so it isolates what the policy's schedule
// costs or gains from the noise of a real server (bench/serving_benchmark.py) and of real threads on a shared core
// (batcher_overhead_benchmark.cc).
//
//   bazel build //server/batching:closed_loop_simulation
//   # 16 clients back 1.5 to 3.5 ms after each response, a batch takes 4 ms + 0.5 ms per element:
//   bazel-bin/server/batching/closed_loop_simulation --clients=16 --return_us=1500 --jitter_us=2000
//   # every 37th return of a client 4 ms late; the sample ResNet's execution times on the CPU server instead:
//   bazel-bin/server/batching/closed_loop_simulation --late_every=37 --late_us=4000
//   bazel-bin/server/batching/closed_loop_simulation --return_us=500 --jitter_us=5000 --resnet
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "server/batching/batching_policy.h"
#include "server/batching/batching_simulator.h"

ABSL_FLAG(int, clients, 16, "Closed-loop clients.");
ABSL_FLAG(int, return_us, 1500, "Return time: from a response to the client's next request (microseconds).");
ABSL_FLAG(int, jitter_us, 500, "Plus a uniform random share of this (microseconds).");
ABSL_FLAG(int, late_every, 0, "Every late_every-th return of a client is --late_us later still (0: none).");
ABSL_FLAG(int, late_us, 0, "How much later (microseconds).");
ABSL_FLAG(int, base_us, 4000, "Execution time per batch, fixed part (microseconds).");
ABSL_FLAG(int, per_element_us, 500, "Execution time per batch element (microseconds).");
ABSL_FLAG(int, noise_us, 300, "Up to this much more per batch, varying from batch to batch (microseconds).");
ABSL_FLAG(bool, resnet, false,
          "Execution times of the sample ResNet as the CPU server measured them (1: 6.4 ms, 2: 11.85, 4: 21.9, 8: 33.9, "
          "16: 61.5, 32: 123; linear between) instead of --base_us and --per_element_us.");
ABSL_FLAG(int, seconds, 6, "Simulated time per run; throughput is counted from 1 s on.");
ABSL_FLAG(int, seeds, 4, "Runs per policy, seeds 1..N of the return times.");

namespace convoy::batching {
namespace {

// Busy time of the instance for a batch: --resnet's table, or --base_us + --per_element_us per element; plus up to
// --noise_us.
std::function<absl::Duration(int64_t, int64_t)> ExecutionTime(uint32_t seed) {
  const absl::Duration noise = absl::Microseconds(absl::GetFlag(FLAGS_noise_us));
  if (absl::GetFlag(FLAGS_resnet)) {
    return InterpolatedExecutionTime({{1, 6.4}, {2, 11.85}, {4, 21.9}, {8, 33.9}, {16, 61.5}, {32, 123.0}}, noise, seed);
  }
  const double base_ms = 1e-3 * absl::GetFlag(FLAGS_base_us);
  const double per_element_ms = 1e-3 * absl::GetFlag(FLAGS_per_element_us);
  return InterpolatedExecutionTime({{1, base_ms + per_element_ms}, {2, base_ms + 2 * per_element_ms}}, noise, seed);
}

BatchingPolicy Policy(bool adaptive) {
  BatchingPolicy policy;
  policy.model_name = "simulated";
  policy.max_batch_size = 32;
  if (adaptive) {  // the serving benchmark's adaptive configuration
    policy.formation = BatchFormation::kAdaptive;
    policy.max_queue_delay = absl::InfiniteDuration();
    policy.target_latency = absl::Milliseconds(100);
  } else {  // the sample ResNet's shipped configuration
    policy.max_queue_delay = absl::Milliseconds(2);
    policy.preferred_batch_sizes = {4, 8, 16};
  }
  return policy;
}

int Run() {
  const int seeds = absl::GetFlag(FLAGS_seeds);
  const absl::Duration seconds = absl::Seconds(absl::GetFlag(FLAGS_seconds));
  double ratio_sum = 0;
  for (int seed = 1; seed <= seeds; ++seed) {
    double throughput[2] = {0, 0};
    std::string adaptive_batches;
    for (bool adaptive : {false, true}) {
      SimulationOptions options;
      options.policy = Policy(adaptive);
      options.seed = seed;
      options.execution_time = ExecutionTime(seed);
      options.phases = {ClientPhase{absl::ZeroDuration(), absl::GetFlag(FLAGS_clients),
                                    absl::Microseconds(absl::GetFlag(FLAGS_return_us)),
                                    absl::Microseconds(absl::GetFlag(FLAGS_jitter_us)), absl::GetFlag(FLAGS_late_every),
                                    absl::Microseconds(absl::GetFlag(FLAGS_late_us))}};
      options.duration = seconds;
      absl::StatusOr<SimulationResult> result = Simulate(options);
      if (!result.ok()) {
        std::fprintf(stderr, "%s\n", std::string(result.status().message()).c_str());
        return 1;
      }
      throughput[adaptive] = result->Throughput(absl::Seconds(1), seconds);
      if (adaptive) {
        std::map<int64_t, int64_t> sizes;
        for (const SimulatedBatch& batch : result->BatchesIn(absl::Seconds(1), seconds)) ++sizes[batch.elements];
        for (const auto& [size, count] : sizes) absl::StrAppend(&adaptive_batches, " ", size, ":", count);
        absl::StrAppend(&adaptive_batches, "; reasons (whole run)");
        for (const auto& [reason, count] : result->estimates.batches_by_reason) {
          absl::StrAppend(&adaptive_batches, " ", reason, ":", count);
        }
      }
    }
    const double ratio = throughput[1] / throughput[0];
    ratio_sum += ratio;
    std::printf("seed %d: adaptive %.1f/s, fixed %.1f/s, adaptive / fixed %.4f; adaptive batches from 1 s:%s\n", seed,
                throughput[1], throughput[0], ratio, adaptive_batches.c_str());
  }
  std::printf("mean adaptive / fixed over %d seeds: %.4f\n", seeds, ratio_sum / seeds);
  return 0;
}

}  // namespace
}  // namespace convoy::batching

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return convoy::batching::Run();
}
