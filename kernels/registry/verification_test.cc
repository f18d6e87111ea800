// Verified algorithm choices (verification.h, SelectAlgorithm in autotuner.h) with fake CPU GEMM algorithms
// registered only in this test binary: a correct one, one that returns wrong numbers, one that leaves its output
// unwritten, one that fails. Verification runs on the CPU device here (on_cpu), against the CPU reference.
#include "kernels/registry/verification.h"

#include <atomic>
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "kernels/cpu/cpu_device.h"
#include "kernels/registry/autotuner.h"
#include "kernels/registry/naive_gemm_for_tests.h"

namespace convoy {
namespace {

using ::convoy::testing::IsOk;
using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;

std::atomic<int> g_wrong_runs{0}, g_correct_runs{0};

// The fakes compute Y = epilogue(A * B^T) in float naively (naive_gemm_for_tests.h) and change what they test.
// Correct, the lowest heuristic score.
class CorrectGemm : public NaiveGemmForTests<1> {
 public:
  absl::string_view name() const override { return "test.gemm.correct"; }
  absl::Status Run(const GemmProblem& p, const GemmArgs& args, Workspace w, const ExecutionContext& c) const override {
    g_correct_runs.fetch_add(1);
    return NaiveGemmForTests<1>::Run(p, args, w, c);
  }
};
// The heuristic's favourite and the fastest (it skips the work for most rows): wrong from row 1 on.
class WrongGemm : public NaiveGemmForTests<30> {
 public:
  absl::string_view name() const override { return "test.gemm.wrong"; }
  absl::Status Run(const GemmProblem& p, const GemmArgs& args, Workspace w, const ExecutionContext& c) const override {
    g_wrong_runs.fetch_add(1);
    GemmProblem first_row = p;
    first_row.m = 1;
    CONVOY_RETURN_IF_ERROR(NaiveGemmForTests<30>::Run(first_row, args, w, c));
    float* y = static_cast<float*>(args.y);
    for (int64_t i = p.n; i < int64_t{p.m} * p.n; ++i) y[i] = 0.5f;
    return absl::OkStatus();
  }
};
// Leaves the output as it finds it (NaN-poisoned by the verifier).
class LazyGemm : public NaiveGemmForTests<20> {
 public:
  absl::string_view name() const override { return "test.gemm.lazy"; }
  absl::Status Run(const GemmProblem&, const GemmArgs&, Workspace, const ExecutionContext&) const override {
    return absl::OkStatus();
  }
};
class FailingGemm : public NaiveGemmForTests<10> {
 public:
  absl::string_view name() const override { return "test.gemm.failing"; }
  absl::Status Run(const GemmProblem&, const GemmArgs&, Workspace, const ExecutionContext&) const override {
    return absl::InternalError("deliberately failing");
  }
};

CONVOY_REGISTER_ALGORITHM(GemmOp, CorrectGemm);
CONVOY_REGISTER_ALGORITHM(GemmOp, WrongGemm);
CONVOY_REGISTER_ALGORITHM(GemmOp, LazyGemm);
CONVOY_REGISTER_ALGORITHM(GemmOp, FailingGemm);

GemmProblem Problem(int m) {
  GemmProblem p;
  p.m = m, p.n = 6, p.k = 40;
  p.epilogue.has_bias = true;
  return p;
}

TuningOptions VerifyOnCpu() {
  TuningOptions options;
  options.verification.on_cpu = true;
  options.warmup_runs = 1;
  options.timed_runs = 3;
  options.min_timed_ms = 0;
  options.confirm_rounds = 0;
  return options;
}

int64_t Rejections(const std::string& algorithm, const std::string& reason) {
  for (const auto& c : AlgorithmRejections::Global().Counts()) {
    if (c.algorithm == algorithm && c.reason == reason) return c.count;
  }
  return 0;
}

std::string ReasonOf(const std::vector<VerificationRecord>& records, const std::string& algorithm) {
  for (const auto& r : records) {
    if (r.algorithm == algorithm) return r.passed ? "passed" : r.reason;
  }
  return "none";
}

TEST(VerificationTest, SessionJudgesEachAlgorithm) {
  VerificationSession<GemmOp> session(Problem(4), CpuDevice::Default(), VerificationOptions());
  const auto& registry = OpRegistry<GemmOp>::Global();
  const VerificationRecord correct = session.Verify(*registry.Find("test.gemm.correct"));
  EXPECT_TRUE(correct.passed) << correct.detail;
  EXPECT_EQ(correct.trusted, "reference");
  EXPECT_LE(correct.max_error, 1.0);
  const VerificationRecord wrong = session.Verify(*registry.Find("test.gemm.wrong"));
  EXPECT_FALSE(wrong.passed);
  EXPECT_EQ(wrong.reason, kRejectedMismatch);
  EXPECT_GT(wrong.max_error, 1.0);
  const VerificationRecord lazy = session.Verify(*registry.Find("test.gemm.lazy"));
  EXPECT_EQ(lazy.reason, kRejectedNonFinite);
  const VerificationRecord failing = session.Verify(*registry.Find("test.gemm.failing"));
  EXPECT_EQ(failing.reason, kRejectedRunFailed);
  EXPECT_THAT(failing.detail, HasSubstr("deliberately failing"));
  EXPECT_THAT(DescribeRejection(failing, "gemm x"), HasSubstr("rejected test.gemm.failing for gemm x: run_failed"));
}

// The heuristic's order is wrong (30), lazy (20), failing (10), correct (1): all but the last are rejected, in order,
// counted, and recorded in the cache entry, so the next selection verifies nothing.
TEST(VerificationTest, HeuristicFallsBackToTheFirstCandidateThatVerifies) {
  AlgorithmCache cache;
  const int64_t wrong_before = Rejections("test.gemm.wrong", kRejectedMismatch);
  const int64_t lazy_before = Rejections("test.gemm.lazy", kRejectedNonFinite);
  const int64_t failing_before = Rejections("test.gemm.failing", kRejectedRunFailed);
  auto selected = SelectAlgorithm<GemmOp>(Problem(5), CpuDevice::Default(), cache, AlgorithmSelection::kHeuristic,
                                          VerifyOnCpu());
  ASSERT_THAT(selected.status(), IsOk());
  EXPECT_EQ(selected->algorithm->name(), "test.gemm.correct");
  EXPECT_TRUE(selected->verified);
  ASSERT_EQ(selected->rejected.size(), 3u);
  EXPECT_EQ(selected->rejected[0].algorithm, "test.gemm.wrong");
  EXPECT_EQ(Rejections("test.gemm.wrong", kRejectedMismatch), wrong_before + 1);
  EXPECT_EQ(Rejections("test.gemm.lazy", kRejectedNonFinite), lazy_before + 1);
  EXPECT_EQ(Rejections("test.gemm.failing", kRejectedRunFailed), failing_before + 1);
  const std::string key = AlgorithmCache::MakeKey(OpKind::kGemm, Problem(5).ToString(),
                                                  CpuDevice::Default().Identity());
  const std::optional<CacheEntry> entry = cache.Peek(key);
  ASSERT_TRUE(entry.has_value());
  EXPECT_FALSE(entry->tuned);
  EXPECT_EQ(entry->algorithm, "test.gemm.correct");
  EXPECT_EQ(ReasonOf(entry->verifications, "test.gemm.wrong"), "mismatch");
  EXPECT_EQ(ReasonOf(entry->verifications, "test.gemm.correct"), "passed");

  const int wrong_runs = g_wrong_runs.load(), correct_runs = g_correct_runs.load();
  auto again = SelectAlgorithm<GemmOp>(Problem(5), CpuDevice::Default(), cache, AlgorithmSelection::kHeuristic,
                                       VerifyOnCpu());
  ASSERT_THAT(again.status(), IsOk());
  EXPECT_EQ(again->algorithm->name(), "test.gemm.correct");
  EXPECT_TRUE(again->from_cache);
  EXPECT_TRUE(again->rejected.empty());
  EXPECT_EQ(g_wrong_runs.load(), wrong_runs);
  EXPECT_EQ(g_correct_runs.load(), correct_runs);
  EXPECT_EQ(Rejections("test.gemm.wrong", kRejectedMismatch), wrong_before + 1);
}

// Tuning verifies every candidate before timing it: the wrong one is the fastest but never timed, never chosen.
TEST(VerificationTest, TuningSkipsRejectedCandidates) {
  AlgorithmCache cache;
  const int wrong_runs = g_wrong_runs.load();
  auto selected =
      SelectAlgorithm<GemmOp>(Problem(6), CpuDevice::Default(), cache, AlgorithmSelection::kTune, VerifyOnCpu());
  ASSERT_THAT(selected.status(), IsOk());
  EXPECT_EQ(selected->algorithm->name(), "test.gemm.correct");
  EXPECT_TRUE(selected->tuned);
  EXPECT_EQ(g_wrong_runs.load(), wrong_runs + 1);  // the verification run only
  const std::string key = AlgorithmCache::MakeKey(OpKind::kGemm, Problem(6).ToString(),
                                                  CpuDevice::Default().Identity());
  const std::optional<CacheEntry> entry = cache.Peek(key);
  ASSERT_TRUE(entry.has_value());
  EXPECT_TRUE(entry->tuned);
  for (const CandidateTiming& c : entry->candidates) {
    if (c.algorithm == "test.gemm.correct") {
      EXPECT_TRUE(c.ok);
    } else {
      EXPECT_FALSE(c.ok) << c.algorithm;
      EXPECT_THAT(c.skip_reason, HasSubstr("rejected by verification")) << c.algorithm;
    }
  }
}

// A tuned entry from elsewhere (a cache file without records) naming the wrong algorithm: it is verified, rejected,
// and the fastest timed candidate that verifies replaces it in the entry.
TEST(VerificationTest, CachedChoiceThatFailsIsReplaced) {
  AlgorithmCache cache;
  const std::string key = AlgorithmCache::MakeKey(OpKind::kGemm, Problem(7).ToString(),
                                                  CpuDevice::Default().Identity());
  CacheEntry shipped;
  shipped.algorithm = "test.gemm.wrong";
  shipped.tuned = true;
  shipped.time_ms = 0.001;
  for (const char* name : {"test.gemm.wrong", "test.gemm.lazy", "test.gemm.correct"}) {
    CandidateTiming c;
    c.algorithm = name;
    c.ok = true;
    c.time_ms = shipped.candidates.size() + 0.001;
    shipped.candidates.push_back(c);
  }
  cache.Insert(key, shipped);
  auto selected =
      SelectAlgorithm<GemmOp>(Problem(7), CpuDevice::Default(), cache, AlgorithmSelection::kTune, VerifyOnCpu());
  ASSERT_THAT(selected.status(), IsOk());
  EXPECT_EQ(selected->algorithm->name(), "test.gemm.correct");
  ASSERT_EQ(selected->rejected.size(), 2u);
  const std::optional<CacheEntry> entry = cache.Peek(key);
  ASSERT_TRUE(entry.has_value());
  EXPECT_EQ(entry->algorithm, "test.gemm.correct");
  EXPECT_EQ(ReasonOf(entry->verifications, "test.gemm.lazy"), "non_finite");
}

// The records travel in the cache file: a fresh cache loaded from it picks the verified choice without running any
// candidate.
TEST(VerificationTest, RecordsSurviveARestart) {
  AlgorithmCache cache;
  ASSERT_THAT(SelectAlgorithm<GemmOp>(Problem(8), CpuDevice::Default(), cache, AlgorithmSelection::kHeuristic,
                                      VerifyOnCpu())
                  .status(),
              IsOk());
  const std::string path = absl::StrCat(::testing::TempDir(), "/verified.cache");
  ASSERT_THAT(cache.Save(path), IsOk());
  AlgorithmCache restarted;
  ASSERT_THAT(restarted.Load(path), IsOk());
  const int wrong_runs = g_wrong_runs.load(), correct_runs = g_correct_runs.load();
  auto selected = SelectAlgorithm<GemmOp>(Problem(8), CpuDevice::Default(), restarted,
                                          AlgorithmSelection::kHeuristic, VerifyOnCpu());
  ASSERT_THAT(selected.status(), IsOk());
  EXPECT_EQ(selected->algorithm->name(), "test.gemm.correct");
  EXPECT_TRUE(selected->from_cache);
  EXPECT_EQ(g_wrong_runs.load(), wrong_runs);
  EXPECT_EQ(g_correct_runs.load(), correct_runs);
  std::remove(path.c_str());
}

// Without verification (the CPU default) the heuristic's favourite is taken as is: the check is what stops it.
TEST(VerificationTest, OffMeansTheHeuristicsFirstChoice) {
  AlgorithmCache cache;
  auto selected = SelectAlgorithm<GemmOp>(Problem(9), CpuDevice::Default(), cache, AlgorithmSelection::kHeuristic);
  ASSERT_THAT(selected.status(), IsOk());
  EXPECT_EQ(selected->algorithm->name(), "test.gemm.wrong");
  EXPECT_FALSE(selected->verified);
}

// Larger problems than cpu_reference_max_flops are compared with the backend's trusted algorithm; with none
// registered here, the reference still decides.
TEST(VerificationTest, TrustedResultFallsBackToTheReference) {
  VerificationOptions options;
  options.cpu_reference_max_flops = 1;
  VerificationSession<GemmOp> session(Problem(4), CpuDevice::Default(), options);
  EXPECT_FALSE(session.Verify(*OpRegistry<GemmOp>::Global().Find("test.gemm.wrong")).passed);
  EXPECT_EQ(session.trusted(), "reference");
}

}  // namespace
}  // namespace convoy
