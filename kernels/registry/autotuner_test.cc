// Autotuner tests with fake GEMM algorithms of known speed, registered only in this test binary.
//
// Time is simulated, never slept or read from a clock: each fake algorithm's Run advances a per-thread simulated
// clock by its declared cost, and SimulatedTimeDevice (the CPU device with TimeRuns replaced) reports each run's
// simulated milliseconds. So how often the autotuner times a candidate, and which one wins, is exact and does not
// depend on the machine's load or on a sanitizer's slowdown.
#include "kernels/registry/autotuner.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "kernels/cpu/cpu_device.h"
#include "kernels/registry/forwarding_device.h"
#include "kernels/registry/naive_gemm_for_tests.h"

namespace convoy {
namespace {

using ::convoy::testing::IsOk;
using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;

std::atomic<int> g_slow_runs{0};
thread_local int64_t t_simulated_us = 0;  // advanced by the fake algorithms' runs on this thread

// The default CPU device, except that TimeRuns reports the simulated time each run took.
class SimulatedTimeDevice : public ForwardingDevice {
 public:
  static SimulatedTimeDevice& Get() {
    static SimulatedTimeDevice* device = new SimulatedTimeDevice(&CpuDevice::Default());
    return *device;
  }
  absl::StatusOr<std::vector<double>> TimeRuns(const std::function<absl::Status()>& fn, int warmup,
                                               int reps) override {
    for (int i = 0; i < warmup; ++i) {
      if (absl::Status s = fn(); !s.ok()) return s;
    }
    std::vector<double> times;
    for (int i = 0; i < reps; ++i) {
      const int64_t start = t_simulated_us;
      if (absl::Status s = fn(); !s.ok()) return s;
      times.push_back(static_cast<double>(t_simulated_us - start) / 1000.0);
    }
    return times;
  }

 private:
  explicit SimulatedTimeDevice(Device* inner) : ForwardingDevice(inner) {}
};

// Computes Y = A * B^T naively (naive_gemm_for_tests.h) and advances the simulated clock by kCostUs.
template <int kCostUs, int kScore>
class FakeGemm : public NaiveGemmForTests<kScore> {
 public:
  absl::Status Run(const GemmProblem& p, const GemmArgs& args, Workspace w, const ExecutionContext& c) const override {
    if (kCostUs >= 1000) g_slow_runs.fetch_add(1);
    t_simulated_us += kCostUs;
    return NaiveGemmForTests<kScore>::Run(p, args, w, c);
  }
};

class SlowGemm : public FakeGemm<3000, 10> {
 public:
  absl::string_view name() const override { return "test.gemm.slow"; }
};
class QuickGemm : public FakeGemm<10, 1> {
 public:
  absl::string_view name() const override { return "test.gemm.quick"; }
};
class BrokenGemm : public FakeGemm<0, 0> {
 public:
  absl::string_view name() const override { return "test.gemm.broken"; }
  absl::Status Run(const GemmProblem&, const GemmArgs&, Workspace, const ExecutionContext&) const override {
    return absl::InternalError("deliberately broken");
  }
};
class HungryGemm : public FakeGemm<0, 0> {
 public:
  absl::string_view name() const override { return "test.gemm.hungry"; }
  size_t WorkspaceBytes(const GemmProblem&) const override { return size_t{1} << 40; }
};
class Fp16OnlyGemm : public FakeGemm<0, 100> {
 public:
  absl::string_view name() const override { return "test.gemm.fp16_only"; }
  absl::Status CanImplement(const GemmProblem& p) const override {
    return p.dtype == DataType::kFloat16 ? absl::OkStatus() : absl::UnimplementedError("FP16 only");
  }
};

CONVOY_REGISTER_ALGORITHM(GemmOp, SlowGemm);
CONVOY_REGISTER_ALGORITHM(GemmOp, QuickGemm);
CONVOY_REGISTER_ALGORITHM(GemmOp, BrokenGemm);
CONVOY_REGISTER_ALGORITHM(GemmOp, HungryGemm);
CONVOY_REGISTER_ALGORITHM(GemmOp, Fp16OnlyGemm);

GemmProblem Problem(int m) {
  GemmProblem p;
  p.m = m, p.n = 8, p.k = 16;
  return p;
}

const CandidateTiming* FindCandidate(const CacheEntry& e, absl::string_view name) {
  for (const auto& c : e.candidates) {
    if (c.algorithm == name) return &c;
  }
  return nullptr;
}

TEST(AutotunerTest, TunePicksTheFastestAndRecordsEveryCandidate) {
  AlgorithmCache cache;
  Device& device = SimulatedTimeDevice::Get();
  auto selected = SelectAlgorithm<GemmOp>(Problem(4), device, cache, AlgorithmSelection::kTune);
  ASSERT_THAT(selected, IsOk());
  EXPECT_EQ(selected->algorithm->name(), "test.gemm.quick");
  EXPECT_TRUE(selected->tuned);
  EXPECT_FALSE(selected->from_cache);

  const std::string key = AlgorithmCache::MakeKey(OpKind::kGemm, Problem(4).ToString(), device.Identity());
  auto entry = cache.Peek(key);
  ASSERT_TRUE(entry.has_value());
  ASSERT_NE(FindCandidate(*entry, "test.gemm.slow"), nullptr);
  EXPECT_TRUE(FindCandidate(*entry, "test.gemm.slow")->ok);
  EXPECT_DOUBLE_EQ(FindCandidate(*entry, "test.gemm.slow")->median_ms, 3.0);
  EXPECT_DOUBLE_EQ(FindCandidate(*entry, "test.gemm.quick")->median_ms, 0.01);
  EXPECT_THAT(FindCandidate(*entry, "test.gemm.broken")->skip_reason, HasSubstr("deliberately broken"));
  EXPECT_THAT(FindCandidate(*entry, "test.gemm.hungry")->skip_reason, HasSubstr("workspace bytes, limit"));
  EXPECT_THAT(FindCandidate(*entry, "test.gemm.fp16_only")->skip_reason, HasSubstr("FP16 only"));

  // Second time: a cache hit, nothing timed.
  const int slow_runs = g_slow_runs.load();
  auto again = SelectAlgorithm<GemmOp>(Problem(4), device, cache, AlgorithmSelection::kTune);
  ASSERT_THAT(again, IsOk());
  EXPECT_TRUE(again->from_cache);
  EXPECT_EQ(again->algorithm->name(), "test.gemm.quick");
  EXPECT_EQ(g_slow_runs.load(), slow_runs);
  EXPECT_EQ(cache.stats().hits, 1);
}

TEST(AutotunerTest, HeuristicModeTimesNothingAndPrefersTheHighestScore) {
  AlgorithmCache cache;
  const int slow_runs = g_slow_runs.load();
  auto selected = SelectAlgorithm<GemmOp>(Problem(5), SimulatedTimeDevice::Get(), cache, AlgorithmSelection::kHeuristic);
  ASSERT_THAT(selected, IsOk());
  EXPECT_EQ(selected->algorithm->name(), "test.gemm.slow");  // score 10; fp16_only (100) can't implement FP32
  EXPECT_FALSE(selected->tuned);
  EXPECT_EQ(g_slow_runs.load(), slow_runs);
  EXPECT_EQ(cache.stats().entries, 0);
}

TEST(AutotunerTest, HeuristicModeHonoursAShippedCacheEntry) {
  AlgorithmCache shipped;
  Device& device = SimulatedTimeDevice::Get();
  CacheEntry entry;
  entry.algorithm = "test.gemm.quick";
  entry.tuned = true;
  entry.time_ms = 0.01;
  shipped.Insert(AlgorithmCache::MakeKey(OpKind::kGemm, Problem(6).ToString(), device.Identity()), entry);
  AlgorithmCache fleet;
  ASSERT_THAT(fleet.Deserialize(shipped.Serialize(), "shipped"), IsOk());
  auto selected = SelectAlgorithm<GemmOp>(Problem(6), device, fleet, AlgorithmSelection::kHeuristic);
  ASSERT_THAT(selected, IsOk());
  EXPECT_EQ(selected->algorithm->name(), "test.gemm.quick");
  EXPECT_TRUE(selected->from_cache);
}

TEST(AutotunerTest, StaleEntryNamingAnUnknownAlgorithmFallsBack) {
  AlgorithmCache cache;
  Device& device = SimulatedTimeDevice::Get();
  CacheEntry entry;
  entry.algorithm = "test.gemm.removed_long_ago";
  cache.Insert(AlgorithmCache::MakeKey(OpKind::kGemm, Problem(7).ToString(), device.Identity()), entry);
  auto selected = SelectAlgorithm<GemmOp>(Problem(7), device, cache, AlgorithmSelection::kHeuristic);
  ASSERT_THAT(selected, IsOk());
  EXPECT_EQ(selected->algorithm->name(), "test.gemm.slow");
}

TEST(AutotunerTest, NoImplementationNamesEveryReason) {
  AlgorithmCache cache;
  GemmProblem p = Problem(2);
  p.dtype = DataType::kBFloat16;
  auto selected = SelectAlgorithm<GemmOp>(p, SimulatedTimeDevice::Get(), cache, AlgorithmSelection::kTune);
  EXPECT_THAT(selected, StatusIs(absl::StatusCode::kNotFound, HasSubstr("test.gemm.fp16_only: FP16 only")));
}

TEST(AutotunerTest, InvalidProblemIsRejected) {
  AlgorithmCache cache;
  GemmProblem p = Problem(0);
  EXPECT_THAT(SelectAlgorithm<GemmOp>(p, SimulatedTimeDevice::Get(), cache, AlgorithmSelection::kTune),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("m must be positive")));
}

TEST(AutotunerTest, ConcurrentSelectionsTuneOnce) {
  AlgorithmCache cache;
  std::vector<std::thread> threads;
  std::atomic<int> quick{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      auto s = SelectAlgorithm<GemmOp>(Problem(9), SimulatedTimeDevice::Get(), cache, AlgorithmSelection::kTune);
      if (s.ok() && s->algorithm->name() == "test.gemm.quick") quick.fetch_add(1);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(quick.load(), 4);
  EXPECT_EQ(cache.stats().tunings, 1);
}

TEST(AutotunerTest, ShortKernelsAreTimedMoreOftenUpToTheCap) {
  Device& device = SimulatedTimeDevice::Get();
  GemmProblem p = Problem(3);
  auto buffers = TuningBuffers<GemmOp>::Create(p, device);
  ASSERT_TRUE(buffers.ok());
  // The quick one (10 us a run) never reaches min_timed_ms: the timed runs double from timed_runs (5, 10, 20, 40)
  // until the cap of 40 stops them; with the 2 warm-up runs that is 42 runs, 420 simulated us.
  {
    TuningOptions options;
    options.warmup_runs = 2;
    options.timed_runs = 5;
    options.min_timed_ms = 1e9;
    options.max_timed_runs = 40;
    QuickGemm quick_gemm;
    const int64_t start_us = t_simulated_us;
    const CandidateTiming quick = TimeCandidate<GemmOp>(quick_gemm, p, **buffers, device, options);
    ASSERT_TRUE(quick.ok) << quick.skip_reason;
    EXPECT_EQ(t_simulated_us - start_us, 420);
    EXPECT_DOUBLE_EQ(quick.median_ms, 0.01);
  }
  // The slow one: 3 ms a run and at least 20 ms wanted. 2 runs (6 ms), doubled to 4 (12 ms), doubled to 8 (24 ms):
  // exactly 8 timed runs, far below the cap of 1000.
  const int before = g_slow_runs.load();
  TuningOptions options;
  options.warmup_runs = 0;
  options.timed_runs = 2;
  options.min_timed_ms = 20;
  options.max_timed_runs = 1000;
  SlowGemm slow;
  const CandidateTiming timing = TimeCandidate<GemmOp>(slow, p, **buffers, device, options);
  ASSERT_TRUE(timing.ok);
  EXPECT_EQ(g_slow_runs.load() - before, 8);
  EXPECT_DOUBLE_EQ(timing.median_ms, 3.0);
}

TEST(AutotunerTest, AlternatingConfirmationOverridesANoisyFirstPass) {
  // First pass: "a" looked faster (1.0 vs 1.1 ms) but it ran in a quiet spell; run in alternation, "b" wins.
  std::vector<CandidateTiming> candidates(4);
  candidates[0] = {"a", true, 1.0, 0, ""};
  candidates[1] = {"skipped", false, 0, 0, "cannot"};
  candidates[2] = {"b", true, 1.1, 0, ""};
  candidates[3] = {"c", true, 5.0, 0, ""};
  std::vector<size_t> order;
  TuningOptions options;
  options.confirm_rounds = 4;
  autotuner_internal::ConfirmLeaders(candidates, options, [&](size_t i) -> absl::StatusOr<double> {
    order.push_back(i);
    return i == 0 ? 2.0 : 1.5;
  });
  EXPECT_EQ(candidates[0].median_ms, 2.0);
  EXPECT_EQ(candidates[2].median_ms, 1.5);
  EXPECT_EQ(candidates[3].median_ms, 5.0) << "only the two leaders are re-timed";
  EXPECT_EQ(order, (std::vector<size_t>{0, 2, 2, 0, 0, 2, 2, 0}));
  // Leaders far apart are left alone.
  std::vector<CandidateTiming> apart = {{"a", true, 1.0, 0, ""}, {"b", true, 2.0, 0, ""}};
  autotuner_internal::ConfirmLeaders(apart, options, [](size_t) -> absl::StatusOr<double> { return 9.0; });
  EXPECT_EQ(apart[0].median_ms, 1.0);
  EXPECT_EQ(apart[1].median_ms, 2.0);
}

}  // namespace
}  // namespace convoy
