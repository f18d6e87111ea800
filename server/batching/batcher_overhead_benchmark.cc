// What the dynamic batcher itself costs per request, without a model: closed-loop clients (each sends its next
// request the moment its response arrives, or --return_us later) drive a real DynamicBatcher on the real clock, with
// the server's metrics observer attached, and an executor that busy-waits a fixed time per batch
// (t(b) = base + per_element * b) instead of running a network. Batching off, the fixed policy and the adaptive policy
// run round by round in turns, so a drifting machine hits them alike; every round makes a fresh batcher. Because the
// executor's time is the same in every run, a throughput difference at one client is the batcher's and the policy's
// own work (queueing, Decide, the estimator, the metrics), and with several clients that plus the batches each
// policy forms: what the serving benchmark (bench/serving_benchmark.py) cannot separate from the spread of the
// model's execution time between server processes.
//
//   bazel build //server/batching:batcher_overhead_benchmark
//   taskset -c 0 bazel-bin/server/batching/batcher_overhead_benchmark --concurrency=1,16 --rounds=8
//   # clients that take 1.5 ms between a response and their next request, long enough runs for the steady state:
//   taskset -c 0 bazel-bin/server/batching/batcher_overhead_benchmark --concurrency=16 --return_us=1500
//       --requests=2400   (one command line)
//
// Prints, per concurrency and policy: throughput (median over the rounds), its median round ratio to batching off,
// the time a request spends outside the executor (latency minus its batch's execution; queueing included) and the
// CPU time per request outside the executor (process CPU time minus the executor's busy time); every run's line
// also lists its batches by size.
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/batching/batch_metrics_observer.h"
#include "server/batching/dynamic_batcher.h"
#include "server/metrics/metrics_registry.h"

ABSL_FLAG(std::string, concurrency, "1,16", "Comma-separated numbers of closed-loop clients.");
ABSL_FLAG(int, rounds, 8, "Rounds; every round runs every policy once per concurrency, in rotating order.");
ABSL_FLAG(int, requests, 400, "Requests per run with one client; with C > 1 clients each sends 2 x requests / C.");
ABSL_FLAG(int, base_us, 4000, "Executor time per batch, fixed part (microseconds).");
ABSL_FLAG(int, per_element_us, 500, "Executor time per batch element (microseconds).");
ABSL_FLAG(int, max_batch_size, 32, "max_batch_size of the model.");
ABSL_FLAG(int, fixed_delay_us, 2000, "max_queue_delay of the fixed policy (the sample ResNet's).");
ABSL_FLAG(std::string, fixed_preferred, "4,8,16", "preferred_batch_size of the fixed policy (the sample ResNet's).");
ABSL_FLAG(int, return_us, 0, "Time a client waits after a response before its next request (its own work).");
ABSL_FLAG(int, target_latency_ms, 100, "target_latency of the adaptive policy; 0: none.");

namespace convoy::batching {
namespace {

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Busy-waits t(b) of wall time, as a model on a dedicated core would keep it busy; records each request's batch
// execution time (in its payload) and the CPU time it burned.
struct TimedPayload : BatchPayload {
  absl::Duration execution;
};

class SpinExecutor : public BatchExecutor {
 public:
  SpinExecutor(absl::Duration base, absl::Duration per_element) : base_(base), per_element_(per_element) {}

  absl::Status ExecuteBatch(Batch& batch, int) override {
    int64_t elements = 0;
    for (const auto& request : batch) elements += request->batch_size();
    const double cpu_start = ThreadCpuSeconds();
    const absl::Time start = absl::Now();
    const absl::Time end = start + base_ + per_element_ * elements;
    while (absl::Now() < end) {
    }
    const absl::Duration ran = absl::Now() - start;
    busy_cpu_ns_ += static_cast<int64_t>((ThreadCpuSeconds() - cpu_start) * 1e9);
    for (const auto& request : batch) request->payload_as<TimedPayload>()->execution = ran;
    return absl::OkStatus();
  }
  double busy_cpu_seconds() const { return 1e-9 * static_cast<double>(busy_cpu_ns_.load()); }

 private:
  const absl::Duration base_, per_element_;
  std::atomic<int64_t> busy_cpu_ns_{0};
};

enum class Mode { kOff, kFixed, kAdaptive };
const char* ModeName(Mode mode) {
  switch (mode) {
    case Mode::kOff: return "batching off";
    case Mode::kFixed: return "fixed";
    case Mode::kAdaptive: return "adaptive";
  }
  return "?";
}

// Positive integers separated by commas; exits on anything else.
std::vector<int64_t> ParseList(const std::string& text, const char* flag) {
  std::vector<int64_t> values;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int64_t value = 0;
    if (!absl::SimpleAtoi(part, &value) || value < 1) {
      std::fprintf(stderr, "%s: '%s' is not a positive integer\n", flag, std::string(part).c_str());
      std::exit(2);
    }
    values.push_back(value);
  }
  return values;
}

BatchingPolicy PolicyFor(Mode mode) {
  BatchingPolicy policy;
  policy.model_name = "overhead";
  policy.max_batch_size = absl::GetFlag(FLAGS_max_batch_size);
  policy.dynamic_batching = mode != Mode::kOff;
  if (mode == Mode::kFixed) {
    policy.max_queue_delay = absl::Microseconds(absl::GetFlag(FLAGS_fixed_delay_us));
    policy.preferred_batch_sizes = ParseList(absl::GetFlag(FLAGS_fixed_preferred), "--fixed_preferred");
  }
  if (mode == Mode::kAdaptive) {
    policy.formation = BatchFormation::kAdaptive;
    policy.max_queue_delay = absl::InfiniteDuration();
    policy.target_latency = absl::Milliseconds(absl::GetFlag(FLAGS_target_latency_ms));
  }
  return policy;
}

struct RunResult {
  double throughput = 0;            // requests per second
  double outside_us = 0;            // mean latency minus the request's batch execution
  double cpu_outside_us = 0;        // process CPU time per request, less the executor's busy time
  std::string batches;              // batches by size, "size:count ..."
};

RunResult RunOnce(Mode mode, int concurrency, int requests_per_client) {
  metrics::MetricsRegistry::Options registry_options;
  registry_options.listen_address = "";
  registry_options.gpu_metrics = false;
  auto registry = metrics::MetricsRegistry::Create(registry_options);
  if (!registry.ok()) {
    std::fprintf(stderr, "metrics registry: %s\n", registry.status().ToString().c_str());
    std::exit(1);
  }
  std::unique_ptr<metrics::ModelMetricsReporter> reporter = (*registry)->ForModel("overhead", "1");
  const BatchingPolicy policy = PolicyFor(mode);
  reporter->SetBatchingPolicy(policy.dynamic_batching ? BatchFormationName(policy.formation) : "none",
                              policy.target_latency);
  BatchMetricsObserver observer(reporter.get());
  SpinExecutor executor(absl::Microseconds(absl::GetFlag(FLAGS_base_us)),
                        absl::Microseconds(absl::GetFlag(FLAGS_per_element_us)));
  DynamicBatcher::Options options;
  options.policy = policy;
  options.executor = &executor;
  options.observer = &observer;
  auto batcher = DynamicBatcher::Create(options);
  if (!batcher.ok()) {
    std::fprintf(stderr, "batcher: %s\n", batcher.status().ToString().c_str());
    std::exit(1);
  }

  std::atomic<int64_t> outside_ns{0};
  std::atomic<bool> failed{false};
  const absl::Duration return_time = absl::Microseconds(absl::GetFlag(FLAGS_return_us));
  const auto client = [&] {
    for (int i = 0; i < requests_per_client; ++i) {
      absl::Notification done;
      auto payload = std::make_unique<TimedPayload>();
      TimedPayload* raw = payload.get();
      absl::Status result;
      absl::Duration execution;
      // The payload lives until the callback returns: its execution time is copied out here.
      auto request = std::make_unique<BatchRequest>(BatchRequest::Spec{}, std::move(payload), [&](absl::Status s) {
        result = s;
        execution = raw->execution;
        done.Notify();
      });
      const absl::Time sent = absl::Now();
      if (!(*batcher)->Enqueue(request).ok()) {
        failed = true;
        return;
      }
      done.WaitForNotification();
      if (!result.ok()) failed = true;
      outside_ns += absl::ToInt64Nanoseconds(absl::Now() - sent - execution);
      if (return_time > absl::ZeroDuration()) absl::SleepFor(return_time);
    }
  };
  const double cpu_start = ProcessCpuSeconds();
  const absl::Time start = absl::Now();
  std::vector<std::thread> clients;
  for (int c = 0; c < concurrency; ++c) clients.emplace_back(client);
  for (std::thread& thread : clients) thread.join();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  const double cpu = ProcessCpuSeconds() - cpu_start;
  if (failed) {
    std::fprintf(stderr, "%s: a request failed\n", ModeName(mode));
    std::exit(1);
  }
  const double total = static_cast<double>(concurrency) * requests_per_client;
  RunResult result;
  result.throughput = total / seconds;
  result.outside_us = 1e-3 * static_cast<double>(outside_ns.load()) / total;
  result.cpu_outside_us = 1e6 * (cpu - executor.busy_cpu_seconds()) / total;
  (*batcher)->Shutdown(absl::Now() + absl::Seconds(10)).IgnoreError();
  const BatcherStats stats = (*batcher)->stats();
  for (const auto& [size, count] : stats.batches_by_size) {
    absl::StrAppend(&result.batches, result.batches.empty() ? "" : " ", size, ":", count);
  }
  if (mode == Mode::kAdaptive) {  // why the adaptive policy's batches went (convoy_batcher_batches_total)
    absl::StrAppend(&result.batches, "; reasons");
    for (const auto& [reason, count] : stats.estimates.batches_by_reason) {
      absl::StrAppend(&result.batches, " ", reason, ":", count);
    }
  }
  return result;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int Main() {
  const std::vector<int64_t> concurrencies = ParseList(absl::GetFlag(FLAGS_concurrency), "--concurrency");
  const int rounds = std::max(1, absl::GetFlag(FLAGS_rounds));
  const std::vector<Mode> modes = {Mode::kOff, Mode::kFixed, Mode::kAdaptive};
  std::printf("executor t(b) = %d us + %d us * b, max_batch_size %d, fixed policy: delay %d us, preferred %s; "
              "adaptive target %d ms; clients return after %d us; --requests=%d; %d rounds\n",
              absl::GetFlag(FLAGS_base_us), absl::GetFlag(FLAGS_per_element_us), absl::GetFlag(FLAGS_max_batch_size),
              absl::GetFlag(FLAGS_fixed_delay_us), absl::GetFlag(FLAGS_fixed_preferred).c_str(),
              absl::GetFlag(FLAGS_target_latency_ms), absl::GetFlag(FLAGS_return_us), absl::GetFlag(FLAGS_requests),
              rounds);
  for (const int64_t c64 : concurrencies) {
    const int c = static_cast<int>(c64);
    const int requests = std::max(1, absl::GetFlag(FLAGS_requests) / c * (c > 1 ? 2 : 1));
    std::vector<std::vector<RunResult>> runs(modes.size());
    for (int round = 0; round < rounds; ++round) {
      for (size_t k = 0; k < modes.size(); ++k) {
        const size_t m = (k + round) % modes.size();
        runs[m].push_back(RunOnce(modes[m], c, requests));
        std::printf("round %d %s c=%d: %.2f req/s, outside the executor %.1f us, CPU outside %.1f us, batches %s\n",
                    round + 1, ModeName(modes[m]), c, runs[m].back().throughput, runs[m].back().outside_us,
                    runs[m].back().cpu_outside_us, runs[m].back().batches.c_str());
        std::fflush(stdout);
      }
    }
    std::printf("\n| concurrency | policy | req/s (median) | / batching off (median round ratio) | "
                "time outside the executor, us | CPU outside the executor, us per request |\n"
                "|---|---|---|---|---|---|\n");
    for (size_t m = 0; m < modes.size(); ++m) {
      std::vector<double> throughput, ratio, outside, cpu;
      for (int r = 0; r < rounds; ++r) {
        throughput.push_back(runs[m][r].throughput);
        ratio.push_back(runs[m][r].throughput / runs[0][r].throughput);
        outside.push_back(runs[m][r].outside_us);
        cpu.push_back(runs[m][r].cpu_outside_us);
      }
      std::printf("| %d | %s | %.2f | %.4f | %.1f | %.1f |\n", c, ModeName(modes[m]), Median(throughput),
                  Median(ratio), Median(outside), Median(cpu));
    }
    std::printf("\n");
  }
  return 0;
}

}  // namespace
}  // namespace convoy::batching

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return convoy::batching::Main();
}
