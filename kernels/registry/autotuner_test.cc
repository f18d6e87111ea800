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
#include <map>
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

// The GEMM depths reserved for the cold-start and contention tests: only their own fakes implement them.
constexpr int kColdStartK = 24;
constexpr int kContendedK = 40;

// The default CPU device, except that TimeRuns reports simulated time, and the first `cold_runs` runs it is given (in
// warm-ups and timed runs alike) each take 5 simulated ms more: a process's cold start, which slows whatever runs
// first, whichever candidate that is.
class ColdStartDevice : public ForwardingDevice {
 public:
  explicit ColdStartDevice(int cold_runs) : ForwardingDevice(&CpuDevice::Default()), cold_runs_(cold_runs) {}
  absl::StatusOr<std::vector<double>> TimeRuns(const std::function<absl::Status()>& fn, int warmup,
                                               int reps) override {
    std::vector<double> times;
    for (int i = 0; i < warmup + reps; ++i) {
      const int64_t start = t_simulated_us;
      if (absl::Status s = fn(); !s.ok()) return s;
      if (runs_++ < cold_runs_) t_simulated_us += 5000;
      if (i >= warmup) times.push_back(static_cast<double>(t_simulated_us - start) / 1000.0);
    }
    return times;
  }
  int runs() const { return runs_; }

 private:
  const int cold_runs_;
  int runs_ = 0;
};

// Computes Y = A * B^T naively (naive_gemm_for_tests.h) and advances the simulated clock by kCostUs.
template <int kCostUs, int kScore>
class FakeGemm : public NaiveGemmForTests<kScore> {
 public:
  absl::Status CanImplement(const GemmProblem& p) const override {
    if (p.k == kColdStartK || p.k == kContendedK) return absl::UnimplementedError("k 24 and 40 are reserved");
    return NaiveGemmForTests<kScore>::CanImplement(p);
  }
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

// The cold-start tests' pair (k == kColdStartK only): the faster one is registered, so timed, first.
template <int kCostUs>
class ColdStartGemm : public NaiveGemmForTests<0> {
 public:
  absl::Status CanImplement(const GemmProblem& p) const override {
    if (p.k != kColdStartK) return absl::UnimplementedError("the cold-start tests' problems only");
    return NaiveGemmForTests<0>::CanImplement(p);
  }
  absl::Status Run(const GemmProblem& p, const GemmArgs& args, Workspace w, const ExecutionContext& c) const override {
    t_simulated_us += kCostUs;
    return NaiveGemmForTests<0>::Run(p, args, w, c);
  }
};
class ColdStartFastGemm : public ColdStartGemm<100> {
 public:
  absl::string_view name() const override { return "test.gemm.cold_start_fast"; }
};
class ColdStartSteadyGemm : public ColdStartGemm<1000> {
 public:
  absl::string_view name() const override { return "test.gemm.cold_start_steady"; }
};

// The contention test's pair (k == kContendedK only): a oneDNN-like kernel on a thread team, 0.1 ms alone, whose runs
// on a shared machine wait at a barrier for a descheduled thread two times in three (+5 ms: a time slice), and an
// own-pool-like kernel, 1 ms, which the same machine does not slow down in this simulation.
std::atomic<int> g_team_runs{0};
template <int kCostUs, bool kTeam>
class ContendedGemm : public NaiveGemmForTests<0> {
 public:
  absl::Status CanImplement(const GemmProblem& p) const override {
    if (p.k != kContendedK) return absl::UnimplementedError("the contention test's problems only");
    return NaiveGemmForTests<0>::CanImplement(p);
  }
  absl::Status Run(const GemmProblem& p, const GemmArgs& args, Workspace w, const ExecutionContext& c) const override {
    t_simulated_us += kCostUs;
    if (kTeam && g_team_runs.fetch_add(1) % 3 != 0) t_simulated_us += 5000;
    return NaiveGemmForTests<0>::Run(p, args, w, c);
  }
};
class TeamGemm : public ContendedGemm<100, true> {
 public:
  absl::string_view name() const override { return "test.gemm.team"; }
};
class PoolGemm : public ContendedGemm<1000, false> {
 public:
  absl::string_view name() const override { return "test.gemm.pool"; }
};

CONVOY_REGISTER_ALGORITHM(GemmOp, SlowGemm);
CONVOY_REGISTER_ALGORITHM(GemmOp, QuickGemm);
CONVOY_REGISTER_ALGORITHM(GemmOp, BrokenGemm);
CONVOY_REGISTER_ALGORITHM(GemmOp, HungryGemm);
CONVOY_REGISTER_ALGORITHM(GemmOp, Fp16OnlyGemm);
CONVOY_REGISTER_ALGORITHM(GemmOp, ColdStartFastGemm);
CONVOY_REGISTER_ALGORITHM(GemmOp, ColdStartSteadyGemm);
CONVOY_REGISTER_ALGORITHM(GemmOp, TeamGemm);
CONVOY_REGISTER_ALGORITHM(GemmOp, PoolGemm);

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
  EXPECT_DOUBLE_EQ(FindCandidate(*entry, "test.gemm.slow")->time_ms, 3.0);
  EXPECT_DOUBLE_EQ(FindCandidate(*entry, "test.gemm.quick")->time_ms, 0.01);
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
    EXPECT_DOUBLE_EQ(quick.time_ms, 0.01);
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
  EXPECT_DOUBLE_EQ(timing.time_ms, 3.0);
}

// A conv that adds the residual onto the output buffer (residual_in_output.h), or one that reads it where it is, at a
// simulated 100 us a run; the accumulating one copies the residual into the output first when given two buffers,
// which costs 50 us more, as oneDNN's sum post-op does. Neither is registered: TimeCandidate times them directly.
template <bool kAccumulates>
class ResidualConv final : public Conv2dAlgorithm, public ResidualInOutput {
 public:
  absl::string_view name() const override { return kAccumulates ? "test.conv.accumulating" : "test.conv.reading"; }
  Backend backend() const override { return Backend::kCpu; }
  absl::Status CanImplement(const Conv2dProblem&) const override { return absl::OkStatus(); }
  bool AccumulatesOntoOutput(const Conv2dProblem& p) const override {
    return kAccumulates && p.epilogue.residual != ResidualMode::kNone;
  }
  absl::Status Run(const Conv2dProblem&, const Conv2dArgs& args, Workspace, const ExecutionContext&) const override {
    in_place_runs += args.residual == args.y ? 1 : 0;
    other_runs += args.residual != args.y ? 1 : 0;
    t_simulated_us += kAccumulates && args.residual != args.y ? 150 : 100;
    return absl::OkStatus();
  }
  mutable int in_place_runs = 0;
  mutable int other_runs = 0;
};

// A plan gives an accumulating conv's output the residual's storage (PlaceOutputOverResidual), so the autotuner times
// it that way, without the copy; a conv that reads the residual where it is keeps two buffers, and so does a problem
// without a residual.
TEST(AutotunerTest, TimesAnAccumulatingConvWithTheOutputInTheResidualsStorage) {
  Device& device = SimulatedTimeDevice::Get();
  Conv2dProblem p;
  p.n = 1, p.c = p.k = 8, p.h = p.w = 6;
  p.layout = Layout::kNHWC;
  p.epilogue.residual = ResidualMode::kBeforeActivation;
  TuningOptions options;
  options.warmup_runs = 1;
  options.timed_runs = 3;
  options.min_timed_ms = 0;
  auto buffers = TuningBuffers<Conv2dOp>::Create(p, device);
  ASSERT_THAT(buffers.status(), IsOk());
  ASSERT_NE((*buffers)->args.residual, (*buffers)->args.y);
  ResidualConv<true> accumulating;
  ResidualConv<false> reading;
  const CandidateTiming a = TimeCandidate<Conv2dOp>(accumulating, p, **buffers, device, options);
  const CandidateTiming r = TimeCandidate<Conv2dOp>(reading, p, **buffers, device, options);
  ASSERT_TRUE(a.ok && r.ok) << a.skip_reason << r.skip_reason;
  EXPECT_EQ(accumulating.other_runs, 0);
  EXPECT_EQ(accumulating.in_place_runs, 4);
  EXPECT_EQ(reading.in_place_runs, 0);
  EXPECT_EQ(reading.other_runs, 4);
  EXPECT_DOUBLE_EQ(a.time_ms, 0.1);
  EXPECT_DOUBLE_EQ(r.time_ms, 0.1);

  p.epilogue.residual = ResidualMode::kNone;
  ResidualConv<true> without_residual;
  const CandidateTiming n = TimeCandidate<Conv2dOp>(without_residual, p, **buffers, device, options);
  ASSERT_TRUE(n.ok) << n.skip_reason;
  EXPECT_EQ(without_residual.in_place_runs, 0);
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
  EXPECT_EQ(candidates[0].time_ms, 2.0);
  EXPECT_EQ(candidates[2].time_ms, 1.5);
  EXPECT_EQ(candidates[3].time_ms, 5.0) << "only the two leaders are re-timed";
  EXPECT_EQ(order, (std::vector<size_t>{0, 2, 2, 0, 0, 2, 2, 0}));
  // Leaders far apart are left alone.
  std::vector<CandidateTiming> apart = {{"a", true, 1.0, 0, ""}, {"b", true, 2.0, 0, ""}};
  autotuner_internal::ConfirmLeaders(apart, options, [](size_t) -> absl::StatusOr<double> { return 9.0; });
  EXPECT_EQ(apart[0].time_ms, 1.0);
  EXPECT_EQ(apart[1].time_ms, 2.0);
}

GemmProblem ColdStartProblem(int m) {
  GemmProblem p;
  p.m = m, p.n = 8, p.k = kColdStartK;
  return p;
}

// Tunes ColdStartProblem(m) on `device` into a fresh cache; the timed candidates' times by name.
std::map<std::string, double> TuneColdStart(int m, Device& device, const TuningOptions& options,
                                            std::string* chosen) {
  AlgorithmCache cache;
  auto selected = SelectAlgorithm<GemmOp>(ColdStartProblem(m), device, cache, AlgorithmSelection::kTune, options);
  EXPECT_THAT(selected, IsOk());
  if (!selected.ok()) return {};
  *chosen = std::string(selected->algorithm->name());
  auto entry = cache.Peek(AlgorithmCache::MakeKey(OpKind::kGemm, ColdStartProblem(m).ToString(), device.Identity()));
  std::map<std::string, double> times;
  for (const CandidateTiming& c : entry->candidates) {
    if (c.ok) times[c.algorithm] = c.time_ms;
  }
  return times;
}

TuningOptions WithoutColdStartDefences() {
  TuningOptions options;
  options.cold_start_warmup_ms = 0;
  options.recheck_runs = 0;
  return options;
}

// The fast candidate (0.1 ms) is timed first, during the device's 7 cold runs (its 2 warm-ups and 5 timed runs, 5.1 ms
// each); the steady one (1 ms) after them. Undefended, the cold start decides: this is what the defences must change.
TEST(AutotunerTest, UndefendedTheColdStartDecides) {
  static ColdStartDevice device(7);
  std::string chosen;
  const auto times = TuneColdStart(1, device, WithoutColdStartDefences(), &chosen);
  EXPECT_EQ(chosen, "test.gemm.cold_start_steady");
  EXPECT_DOUBLE_EQ(times.at("test.gemm.cold_start_fast"), 5.1);
  EXPECT_DOUBLE_EQ(times.at("test.gemm.cold_start_steady"), 1.0);
}

// The recheck times the slower candidate again after the first pass; the faster time stays.
TEST(AutotunerTest, ASlowFirstPassIsRecheckedAndDoesNotDecide) {
  static ColdStartDevice device(7);
  TuningOptions options = WithoutColdStartDefences();
  options.recheck_runs = 3;
  std::string chosen;
  const auto times = TuneColdStart(1, device, options, &chosen);
  EXPECT_EQ(chosen, "test.gemm.cold_start_fast");
  EXPECT_DOUBLE_EQ(times.at("test.gemm.cold_start_fast"), 0.1);
  EXPECT_DOUBLE_EQ(times.at("test.gemm.cold_start_steady"), 1.0);
}

// The warm-up runs every candidate before the device's first timing (here through all 7 cold runs), once per device:
// a second tuning on the same device makes exactly the runs that the same tuning without warm-up makes.
TEST(AutotunerTest, ADevicesFirstTuningWarmsItUpOnce) {
  TuningOptions options = WithoutColdStartDefences();
  options.cold_start_warmup_ms = 50;
  static ColdStartDevice device(7);
  std::string chosen;
  const auto times = TuneColdStart(1, device, options, &chosen);
  EXPECT_EQ(chosen, "test.gemm.cold_start_fast");
  EXPECT_DOUBLE_EQ(times.at("test.gemm.cold_start_fast"), 0.1);
  const int first_tuning_runs = device.runs();

  static ColdStartDevice undefended(0);  // never cold: the runs a tuning makes without any warm-up
  TuneColdStart(2, undefended, WithoutColdStartDefences(), &chosen);
  const int runs_without_warmup = undefended.runs();
  // The first tuning's warm-up: rounds of one run of each candidate until 50 simulated ms: three cold rounds of
  // 5.1 + 6 ms (33.3), one half cold (5.1 + 1: 39.4), then 1.1 ms each, ten of them to 50.4: 14 rounds, 28 runs.
  EXPECT_EQ(first_tuning_runs - runs_without_warmup, 28);

  const int before = device.runs();
  TuneColdStart(2, device, options, &chosen);
  EXPECT_EQ(chosen, "test.gemm.cold_start_fast");
  EXPECT_EQ(device.runs() - before, runs_without_warmup) << "the second tuning on a device warms nothing up";
}

// A candidate is judged by its fastest run: the team kernel's median here is 5.1 ms (two runs in three wait for a
// time slice), which would lose to the pool kernel's 1 ms, but its own speed is 0.1 ms.
TEST(AutotunerTest, ACandidateIsJudgedByItsFastestRunNotItsMedian) {
  AlgorithmCache cache;
  GemmProblem p;
  p.m = 4, p.n = 8, p.k = kContendedK;
  auto selected = SelectAlgorithm<GemmOp>(p, SimulatedTimeDevice::Get(), cache, AlgorithmSelection::kTune,
                                          WithoutColdStartDefences());
  ASSERT_THAT(selected, IsOk());
  EXPECT_EQ(selected->algorithm->name(), "test.gemm.team");
  EXPECT_DOUBLE_EQ(selected->time_ms, 0.1);
  EXPECT_DOUBLE_EQ(autotuner_internal::Fastest({5.1, 0.1, 5.1}), 0.1);
  EXPECT_DOUBLE_EQ(autotuner_internal::Median({5.1, 0.1, 5.1}), 5.1);
}

TEST(AutotunerTest, RecheckRunsFitAQuarterOfTheTimingBudget) {
  TuningOptions options;
  options.recheck_runs = 3;
  options.min_timed_ms = 20;  // a budget of 5 ms
  EXPECT_EQ(autotuner_internal::RecheckRuns(0.1, options), 3);
  EXPECT_EQ(autotuner_internal::RecheckRuns(2.0, options), 3);
  EXPECT_EQ(autotuner_internal::RecheckRuns(2.4, options), 3);
  EXPECT_EQ(autotuner_internal::RecheckRuns(3.0, options), 2);
  EXPECT_EQ(autotuner_internal::RecheckRuns(30.0, options), 1);
}

}  // namespace
}  // namespace convoy
