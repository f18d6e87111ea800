// Calibration statistics and ranges: the histogram's exact widening, the three methods' ranges on fresh random
// distributions with known answers, the entropy search's behaviour on outliers, scales and zero points.
#include "server/runtime/calibration.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <iostream>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"

namespace convoy::runtime {
namespace {

using ::convoy::testing::IsOk;
using ::testing::HasSubstr;

uint32_t FreshSeed() { return std::random_device{}(); }

std::vector<float> Uniform(size_t n, float lo, float hi, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

int64_t Total(const TensorStatistics& s) {
  return std::accumulate(s.positive().begin(), s.positive().end(), int64_t{0}) +
         std::accumulate(s.negative().begin(), s.negative().end(), int64_t{0});
}

TEST(TensorStatisticsTest, CountsEveryValueAndWidensExactly) {
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937 rng(seed);
  const std::vector<float> small = Uniform(5000, -0.7f, 0.9f, rng);
  const std::vector<float> large = Uniform(3000, -9.0f, 13.0f, rng);
  TensorStatistics grown;
  grown.Add(small.data(), small.size());
  EXPECT_EQ(grown.range(), 1.0);  // the first power of two above 0.9
  grown.Add(large.data(), large.size());
  EXPECT_EQ(grown.range(), 16.0);
  // Built at once, R is 16 from the start: doubling merged the first batch's bins exactly into the same histogram.
  std::vector<float> all = small;
  all.insert(all.end(), large.begin(), large.end());
  TensorStatistics direct;
  direct.Add(all.data(), all.size());
  EXPECT_EQ(direct.range(), 16.0);
  EXPECT_EQ(grown.positive(), direct.positive());
  EXPECT_EQ(grown.negative(), direct.negative());
  EXPECT_EQ(grown.count(), 8000);
  EXPECT_EQ(Total(grown), 8000);
  EXPECT_EQ(grown.min(), *std::min_element(all.begin(), all.end()));
  EXPECT_EQ(grown.max(), *std::max_element(all.begin(), all.end()));
}

TEST(TensorStatisticsTest, IgnoresNonFiniteValuesAndKeepsZerosBeforeAnyScale) {
  TensorStatistics s;
  const std::vector<float> zeros(10, 0.0f);
  s.Add(zeros.data(), zeros.size());
  EXPECT_EQ(s.range(), 0.0);
  const std::vector<float> mixed = {std::nanf(""), INFINITY, 0.25f, -0.5f};
  s.Add(mixed.data(), mixed.size());
  EXPECT_EQ(s.non_finite(), 2);
  EXPECT_EQ(s.count(), 12);
  EXPECT_EQ(Total(s), 12);
  EXPECT_EQ(s.positive()[0], 10);  // the zeros
  EXPECT_EQ(s.min(), -0.5f);
  EXPECT_EQ(s.max(), 0.25f);
  TensorStatistics empty;
  EXPECT_THAT(ChooseRange(empty, CalibrationMethod::kMinMax, 100, false).status().message(),
              HasSubstr("no finite value"));
}

TEST(ChooseRangeTest, MinMaxAndPercentileOnAUniformDistribution) {
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937 rng(seed);
  const std::vector<float> v = Uniform(200000, -2.0f, 6.0f, rng);
  TensorStatistics s;
  s.Add(v.data(), v.size());
  CONVOY_ASSERT_OK_AND_ASSIGN(ActivationRange minmax, ChooseRange(s, CalibrationMethod::kMinMax, 0, false));
  EXPECT_EQ(minmax.lo, s.min());
  EXPECT_EQ(minmax.hi, s.max());
  // 99 %: the 1st and 99th percentiles of U(-2, 6) are -1.92 and 5.92; the histogram resolves 8 / 2048.
  CONVOY_ASSERT_OK_AND_ASSIGN(ActivationRange p99, ChooseRange(s, CalibrationMethod::kPercentile, 99, false));
  const double bin = 8.0 / TensorStatistics::kBins;
  EXPECT_NEAR(p99.lo, -1.92, 0.01 + bin);
  EXPECT_NEAR(p99.hi, 5.92, 0.01 + bin);
  // 100 % is min-max.
  CONVOY_ASSERT_OK_AND_ASSIGN(ActivationRange p100, ChooseRange(s, CalibrationMethod::kPercentile, 100, false));
  EXPECT_EQ(p100.lo, s.min());
  EXPECT_EQ(p100.hi, s.max());
  EXPECT_THAT(ChooseRange(s, CalibrationMethod::kPercentile, 40, false).status().message(),
              HasSubstr("percentile must be in (50, 100], got 40"));
}

TEST(ChooseRangeTest, EntropyOnReluLikeGaussianAndUniformTensors) {
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937 rng(seed);
  // A ReLU's output: half exact zeros, the rest |N(0, 1)| (largest about 4.9, so R = 8 and the smallest candidate
  // threshold, 256 bins, is 1.0). The zeros must not decide the threshold: it keeps the bulk of the values.
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(400000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = i % 2 ? std::fabs(normal(rng)) : 0.0f;
  TensorStatistics s;
  s.Add(v.data(), v.size());
  CONVOY_ASSERT_OK_AND_ASSIGN(ActivationRange r, ChooseRange(s, CalibrationMethod::kEntropy, 0, false));
  EXPECT_EQ(r.lo, 0.0f);  // no negative value: [0, t]
  EXPECT_GT(r.hi, 2.0f);  // beyond 2 sigma (95 % of the nonzero values)
  EXPECT_LE(r.hi, s.max());
  // A signed Gaussian: [-t, t], t past 2 sigma, within what was seen.
  std::vector<float> g(400000);
  for (float& x : g) x = normal(rng);
  TensorStatistics sg;
  sg.Add(g.data(), g.size());
  CONVOY_ASSERT_OK_AND_ASSIGN(ActivationRange rg, ChooseRange(sg, CalibrationMethod::kEntropy, 0, false));
  EXPECT_GT(rg.hi, 2.0f);
  EXPECT_LT(rg.lo, -2.0f);
  EXPECT_LE(rg.hi, sg.max());
  EXPECT_GE(rg.lo, sg.min());
  // A uniform tensor has nothing to clip: the threshold stays near the top.
  const std::vector<float> u = Uniform(200000, -1.0f, 1.0f, rng);
  TensorStatistics su;
  su.Add(u.data(), u.size());
  CONVOY_ASSERT_OK_AND_ASSIGN(ActivationRange ru, ChooseRange(su, CalibrationMethod::kEntropy, 0, false));
  EXPECT_GT(ru.hi, 0.9f);
  EXPECT_LT(ru.lo, -0.9f);
  EXPECT_LE(ru.hi, su.max());
  EXPECT_GE(ru.lo, su.min());
  std::cout << "entropy thresholds: relu-like " << r.hi << " (max " << s.max() << "), gaussian [" << rg.lo << ", "
            << rg.hi << "] (seen [" << sg.min() << ", " << sg.max() << "]), uniform [" << ru.lo << ", " << ru.hi
            << "]\n";
}

TEST(EntropyThresholdBinsTest, FewUsedBinsKeepEverything) {
  std::vector<int64_t> h(2048, 0);
  h[0] = 50, h[3] = 7, h[99] = 1;
  EXPECT_EQ(EntropyThresholdBins(h, 128), 100);
  std::vector<int64_t> empty(2048, 0);
  EXPECT_EQ(EntropyThresholdBins(empty, 128), 1);
}

TEST(QuantizeRangeTest, AsymmetricUint8AndSymmetricInt8) {
  TensorQuantization u = QuantizeRange({-1.0f, 3.0f}, false);
  EXPECT_FLOAT_EQ(u.scale, 4.0f / 255.0f);
  EXPECT_EQ(u.zero_point, 64);  // round(1 / (4 / 255)) = round(63.75)
  // The ends of the range quantize to the ends of UINT8, to one step.
  EXPECT_NEAR(std::nearbyint(-1.0f / u.scale) + u.zero_point, 0, 1);
  EXPECT_NEAR(std::nearbyint(3.0f / u.scale) + u.zero_point, 255, 1);
  // A one-sided range widens to contain 0.
  TensorQuantization relu6 = QuantizeRange({0.5f, 6.0f}, false);
  EXPECT_EQ(relu6.zero_point, 0);
  EXPECT_FLOAT_EQ(relu6.scale, 6.0f / 255.0f);
  TensorQuantization s = QuantizeRange({-1.0f, 3.0f}, true);
  EXPECT_FLOAT_EQ(s.scale, 3.0f / 127.0f);
  EXPECT_EQ(s.zero_point, 0);
  TensorQuantization flat = QuantizeRange({0.0f, 0.0f}, false);
  EXPECT_EQ(flat.scale, 1.0f);
  EXPECT_EQ(flat.zero_point, 0);
}

TEST(WeightScalesTest, PerOutputChannelMaxOver127) {
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE(seed);
  std::mt19937 rng(seed);
  std::vector<float> w = Uniform(4 * 18, -0.3f, 0.3f, rng);
  std::fill(w.begin() + 2 * 18, w.begin() + 3 * 18, 0.0f);  // channel 2 all zero
  const std::vector<float> scales = WeightScalesPerChannel(w, 4);
  ASSERT_EQ(scales.size(), 4u);
  for (int k = 0; k < 4; ++k) {
    float largest = 0;
    for (int i = 0; i < 18; ++i) largest = std::max(largest, std::fabs(w[k * 18 + i]));
    EXPECT_EQ(scales[k], k == 2 ? 1.0f : largest / 127.0f) << k;
  }
}

TEST(CalibrationMethodTest, NamesRoundTrip) {
  for (CalibrationMethod m : {CalibrationMethod::kMinMax, CalibrationMethod::kPercentile, CalibrationMethod::kEntropy}) {
    CONVOY_ASSERT_OK_AND_ASSIGN(CalibrationMethod parsed, ParseCalibrationMethod(CalibrationMethodName(m)));
    EXPECT_EQ(parsed, m);
  }
  EXPECT_THAT(ParseCalibrationMethod("kl").status().message(),
              HasSubstr("unknown calibration method 'kl'; expected minmax, percentile or entropy"));
}

}  // namespace
}  // namespace convoy::runtime
