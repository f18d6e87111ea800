// LoadEstimator with explicit times: execution-time estimates (running mean, interpolation, no assumed gain outside
// the measured sizes, the p99 bound), returning clients (matching, expected return times, forgetting those who
// left, new arrivals never awaited) and the open stream's rate.
#include "server/batching/load_estimator.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace convoy::batching {
namespace {

using ::testing::ElementsAre;

const absl::Time kStart = absl::FromUnixSeconds(2'000'000);

class LoadEstimatorTest : public ::testing::Test {
 protected:
  double Uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng_); }
  std::mt19937 rng_{std::random_device{}()};
};

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

TEST_F(LoadEstimatorTest, ExecutionTimeInterpolatesAndAssumesNoGainOutsideTheMeasuredSizes) {
  LoadEstimator load(16);
  EXPECT_FALSE(load.ExecutionTime(4).has_value()) << "nothing measured yet";
  const double t2 = Uniform(5, 10), t6 = t2 + Uniform(1, 5);
  load.RecordExecution(2, absl::Milliseconds(t2));
  load.RecordExecution(6, absl::Milliseconds(t6));
  // 1e-6 ms: absl::Duration holds quarter-nanoseconds; everything else here is exact arithmetic on two samples.
  EXPECT_NEAR(Ms(*load.ExecutionTime(2)), t2, 1e-6);
  EXPECT_NEAR(Ms(*load.ExecutionTime(4)), (t2 + t6) / 2, 1e-6);  // halfway between 2 and 6
  EXPECT_NEAR(Ms(*load.ExecutionTime(1)), t2 / 2, 1e-6);          // the time per element of size 2
  EXPECT_NEAR(Ms(*load.ExecutionTime(12)), t6 * 2, 1e-6);         // the time per element of size 6
  EXPECT_EQ(load.ExecutionSamples(2), 1);
  EXPECT_EQ(load.ExecutionSamples(4), 0);
  EXPECT_THAT(load.MeasuredExecutionTimes(), ElementsAre(::testing::Key(2), ::testing::Key(6)));
}

TEST_F(LoadEstimatorTest, SecondBatchReplacesTheFirstThenRunningMeanForEightThenOneEighthWeightAndAP99Bound) {
  LoadEstimator load(8);
  // A size's first batch pays one-time costs: it is the estimate only until the second batch replaces it.
  const double cold = Uniform(50, 200);
  load.RecordExecution(3, absl::Milliseconds(cold));
  EXPECT_NEAR(Ms(*load.ExecutionTime(3)), cold, 1e-6);
  EXPECT_NEAR(Ms(*load.ExecutionTimeP99(3)), 1.1 * cold, 1e-6) << "one sample: no variance, the 10 % floor";
  const double x = Uniform(2, 20);
  load.RecordExecution(3, absl::Milliseconds(x));
  EXPECT_NEAR(Ms(*load.ExecutionTime(3)), x, 1e-6) << "the second sample replaces the first";
  EXPECT_NEAR(Ms(*load.ExecutionTimeP99(3)), 1.1 * x, 1e-6) << "and its variance starts over";
  EXPECT_EQ(load.ExecutionSamples(3), 2);
  double sum = x;
  for (int i = 1; i < 8; ++i) {
    const double sample = Uniform(2, 20);
    sum += sample;
    load.RecordExecution(3, absl::Milliseconds(sample));
  }
  EXPECT_NEAR(Ms(*load.ExecutionTime(3)), sum / 8, 1e-6);
  const double mean = sum / 8, next = Uniform(2, 20);
  load.RecordExecution(3, absl::Milliseconds(next));
  EXPECT_NEAR(Ms(*load.ExecutionTime(3)), mean + (next - mean) / 8, 1e-6);
  // Two alternating values: mean and sigma settle at their average and half their distance.
  LoadEstimator alternating(4);
  for (int i = 0; i < 400; ++i) alternating.RecordExecution(2, absl::Milliseconds(i % 2 == 0 ? 10 : 20));
  EXPECT_NEAR(Ms(*alternating.ExecutionTime(2)), 15, 0.7);         // the last weights 1/8: off by at most 5/8
  EXPECT_NEAR(Ms(*alternating.ExecutionTimeP99(2)), 15 + 2.33 * 5, 1.2);
}

TEST_F(LoadEstimatorTest, TheRelativeErrorOfAnEstimateFollowsTheSpreadOfItsBatchesNotAChangeOfTheMachine) {
  LoadEstimator load(16);
  EXPECT_EQ(load.ExecutionTimeRelativeError(8), 0);  // nothing measured
  // Batches of 8 that vary: normal, sigma 20 % of 40 ms (fresh random samples; clipped far out so none is negative).
  std::normal_distribution<double> noisy(40.0, 8.0);
  for (int i = 0; i < 400; ++i) load.RecordExecution(8, absl::Milliseconds(std::clamp(noisy(rng_), 4.0, 76.0)));
  // Its mean holds 15 samples in effect (weight 1/8): the error is sigma / mean / sqrt(15) = 0.052. The spread comes
  // from an exponential mean of successive differences, itself uncertain: over 100000 seeds its median was 0.98 x
  // sigma and 99.99 % of the runs fell within 0.38-2.19 x, so the stated tolerance is 0.3 to 2.5 x.
  const double expected = 0.2 / std::sqrt(15.0);
  EXPECT_GT(load.ExecutionTimeRelativeError(8), 0.3 * expected);
  EXPECT_LT(load.ExecutionTimeRelativeError(8), 2.5 * expected);
  // A size measured once has no spread of its own: it takes the typical one (that of 8), undivided.
  load.RecordExecution(1, absl::Milliseconds(6));
  EXPECT_GT(load.ExecutionTimeRelativeError(1), 0.3 * 0.2);
  EXPECT_LT(load.ExecutionTimeRelativeError(1), 2.5 * 0.2);
  // A size never measured: the larger error of its measured neighbours.
  EXPECT_DOUBLE_EQ(load.ExecutionTimeRelativeError(4),
                   std::max(load.ExecutionTimeRelativeError(1), load.ExecutionTimeRelativeError(8)));

  // Exact batches have no error, and a change of the machine (every batch of 16 now 60 % slower, exactly) is one
  // jump, not noise: the mean follows it over about twenty batches while the error stays below 0.001 (the jump counts
  // as a difference of at most 2 % of the mean, weighted 1/8: 0.002 / sqrt(15)); a deviation from the mean would
  // have made it 0.05 and more.
  LoadEstimator exact(16);
  for (int i = 0; i < 40; ++i) exact.RecordExecution(16, absl::Milliseconds(50));
  EXPECT_EQ(exact.ExecutionTimeRelativeError(16), 0);
  for (int i = 0; i < 5; ++i) {
    exact.RecordExecution(16, absl::Milliseconds(80));
    EXPECT_LT(exact.ExecutionTimeRelativeError(16), 0.001) << "after " << i + 1 << " slower batches";
  }
  EXPECT_LT(Ms(*exact.ExecutionTime(16)), 79.0);  // the mean still catching up
}

TEST_F(LoadEstimatorTest, ReturningClientsAreMatchedExpectedAndForgottenWhenTheyLeave) {
  LoadEstimator load(8);
  // Round 1: three new clients; their answers leave clients out that are matched but not awaited.
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(load.RecordArrival(kStart, 1));
  load.RecordResponses(kStart + absl::Milliseconds(10), 0, 3);
  EXPECT_EQ(load.ClientsExpected(kStart + absl::Milliseconds(10)), 0);
  EXPECT_FALSE(load.return_time().has_value());
  // They come back after 1 ms each: returning clients now, and Z = 1 ms exactly.
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(load.RecordArrival(kStart + absl::Milliseconds(11), 1));
  EXPECT_EQ(*load.return_time(), absl::Milliseconds(1));
  EXPECT_EQ(load.clients_out(), 0);
  // Round 2: two of them are answered at 20 ms: expected back by the late bound, 20 + 1 + max(3 * 0, 0.2 * 1) ms.
  const absl::Time answered = kStart + absl::Milliseconds(20);
  load.RecordResponses(answered, 2, 0);
  EXPECT_EQ(load.ClientsExpected(answered), 2);
  const absl::Time late = answered + absl::Microseconds(1200);
  // Likely back after every return time seen so far (1 ms), counted on until the late bound. Within 5 ms: the
  // three new arrivals of round 1 also make an open stream of one per 10 ms, due later.
  const LoadEstimator::ExpectedArrival back{answered + absl::Milliseconds(1), late};
  EXPECT_THAT(load.ExpectedArrivals(answered, 5, answered + absl::Milliseconds(5)), ElementsAre(back, back));
  EXPECT_THAT(load.ExpectedArrivals(answered, 1, answered + absl::Milliseconds(5)), ElementsAre(back));
  EXPECT_TRUE(load.ExpectedArrivals(answered, 5, back.likely - absl::Nanoseconds(1)).empty())
      << "beyond the horizon";
  // Overdue but not yet late: likely any moment now.
  const absl::Time overdue = answered + absl::Microseconds(1100);
  const LoadEstimator::ExpectedArrival any_moment{overdue, late};
  EXPECT_THAT(load.ExpectedArrivals(overdue, 5, overdue + absl::Milliseconds(5)), ElementsAre(any_moment, any_moment));
  EXPECT_EQ(load.ClientsExpected(late + absl::Nanoseconds(1)), 0) << "late: no longer counted on";
  // Nobody returns; the next arrival, well past 2 Z_mean + 6 Z_dev, finds them forgotten and is new.
  EXPECT_FALSE(load.RecordArrival(answered + absl::Milliseconds(50), 1));
  EXPECT_EQ(load.clients_out(), 0);
}

// The q-quantile of `samples`, interpolated between ranks (as the estimator should read it).
double Quantile(std::vector<double> samples, double q) {
  std::sort(samples.begin(), samples.end());
  const double position = q * static_cast<double>(samples.size() - 1);
  const size_t below = static_cast<size_t>(std::floor(position));
  const size_t above = std::min(below + 1, samples.size() - 1);
  return samples[below] + (position - static_cast<double>(below)) * (samples[above] - samples[below]);
}

TEST_F(LoadEstimatorTest, ClientsAnsweredTogetherAreLikelyBackInRankOrderOnTheRecentReturnTimes) {
  LoadEstimator load(32);
  EXPECT_EQ(load.ReturnTimeOfLast(16), absl::ZeroDuration()) << "no return time seen yet";
  // One client at a time, answered and back after a random return time: 216 samples, of which the last 128 count.
  std::vector<double> returns_ms;
  absl::Time now = kStart;
  const auto round_trips = [&](int count, double lo_ms, double hi_ms) {
    for (int i = 0; i < count; ++i) {
      load.RecordResponses(now, 1, 0);
      const double z = Uniform(lo_ms, hi_ms);
      now += absl::Milliseconds(z);
      EXPECT_TRUE(load.RecordArrival(now, 1));
      returns_ms.push_back(z);
      now += absl::Milliseconds(5);
    }
  };
  round_trips(16, 4, 4);  // a steady start: no sample is taken for a client gone
  round_trips(200, 0.5, 4);
  std::vector<double> window(returns_ms.end() - 128, returns_ms.end());
  // Tolerance 1e-5 ms: the times are exact to a quarter-nanosecond.
  for (int k : {1, 2, 8, 16, 31}) {
    EXPECT_NEAR(Ms(load.ReturnTimeOfLast(k)), Quantile(window, k / (k + 1.0)), 1e-5) << k << " clients";
  }
  // Four clients answered together: the r-th likely back at the r / 5 quantile, all counted on until the late bound.
  load.RecordResponses(now, 4, 0);
  const std::vector<LoadEstimator::ExpectedArrival> expected = load.ExpectedArrivals(now, 8, now + absl::Seconds(1));
  ASSERT_EQ(expected.size(), 4u);
  for (int r = 1; r <= 4; ++r) {
    const double likely_ms = std::min(Quantile(window, r / 5.0), Ms(load.return_time_late_bound()));
    EXPECT_NEAR(Ms(expected[r - 1].likely - now), likely_ms, 1e-5) << "rank " << r;
    EXPECT_EQ(expected[r - 1].late, now + load.return_time_late_bound());
  }
  // Two of them come back: the other two keep the last ranks (3 and 4 of 4), not the first of two.
  const absl::Time first_back = now + absl::Milliseconds(Quantile(window, 0.2));
  load.RecordArrival(first_back, 1);
  load.RecordArrival(first_back, 1);
  window.erase(window.begin(), window.begin() + 2);
  const absl::Duration z1 = first_back - now;
  window.push_back(Ms(z1));
  window.push_back(Ms(z1));
  const std::vector<LoadEstimator::ExpectedArrival> rest = load.ExpectedArrivals(first_back, 8, now + absl::Seconds(1));
  ASSERT_EQ(rest.size(), 2u);
  for (int r = 3; r <= 4; ++r) {
    const double likely_ms = std::clamp(Quantile(window, r / 5.0), Ms(z1), Ms(load.return_time_late_bound()));
    EXPECT_NEAR(Ms(rest[r - 3].likely - now), likely_ms, 1e-5) << "rank " << r;
  }
  // The window moves on: 128 slower returns (the two clients still out are presumed gone) replace every sample
  // before them.
  now += absl::Seconds(1);
  returns_ms.clear();
  round_trips(128, 4.5, 6);
  EXPECT_NEAR(Ms(load.ReturnTimeOfLast(16)), Quantile(returns_ms, 16 / 17.0), 1e-5);
  EXPECT_GE(Ms(load.ReturnTimeOfLast(1)), 4.5);
}

TEST_F(LoadEstimatorTest, NewArrivalsFormAnOpenStreamWhoseRateDecaysWhenItStops) {
  LoadEstimator load(8);
  const double gap_ms = Uniform(1, 5);
  for (int i = 0; i < 40; ++i) load.RecordArrival(kStart + absl::Milliseconds(gap_ms * i), 1);
  const absl::Time last = kStart + absl::Milliseconds(gap_ms * 39);
  // 1e-6 relative: the times are exact to a quarter-nanosecond.
  EXPECT_NEAR(load.new_arrival_rate(last), 1000 / gap_ms, 1e-6 * 1000 / gap_ms);
  EXPECT_NEAR(load.arrival_rate(), 1000 / gap_ms, 1e-6 * 1000 / gap_ms);
  const std::vector<LoadEstimator::ExpectedArrival> expected = load.ExpectedArrivals(last, 3, last + absl::Seconds(1));
  ASSERT_EQ(expected.size(), 3u);
  for (int m = 1; m <= 3; ++m) {
    EXPECT_NEAR(Ms(expected[m - 1].likely - last), m * gap_ms, 1e-5);
    EXPECT_EQ(expected[m - 1].late, expected[m - 1].likely) << "the open stream is due, not late";
  }
  // A second later the stream looks 31 arrivals in 1 s + 31 gaps slow.
  EXPECT_NEAR(load.new_arrival_rate(last + absl::Seconds(1)), 31 / (1 + 31 * gap_ms / 1000), 1e-6 * 31);
  EXPECT_DOUBLE_EQ(load.mean_request_size(), 1.0);
}

}  // namespace
}  // namespace convoy::batching
