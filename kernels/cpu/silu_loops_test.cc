// Each version of the SiLU and sigmoid loops the CPU runs (SupportedCpuIsas) against x / (1 + e^-x) and 1 / (1 + e^-x)
// in double precision: fresh random values over the range where the functions are not constant to within rounding,
// plus lengths that leave every tail (16-lane body, 8-lane step, scalar), zeros, the clamp's edges, infinities and
// NaN. Asserted: within 6 ulp of the exact value for x >= -87 (SiLU measured: at most 3.6 over 10^5 random values),
// below -87 within 1.5e-36 (SiLU, -0) or 1.7e-38 (sigmoid, +0) absolutely, the versions identical bit for bit, NaN
// kept.
#include "kernels/cpu/silu_loops.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace convoy::cpu {
namespace {

double ExactSilu(float x) { return static_cast<double>(x) / (1.0 + std::exp(-static_cast<double>(x))); }

// Distance in units in the last place of `want` (rounded to float) between got and want.
double UlpsFrom(float got, double want) {
  const float w = static_cast<float>(want);
  const double ulp = std::nextafter(std::fabs(w), std::numeric_limits<float>::infinity()) - std::fabs(w);
  return std::fabs(static_cast<double>(got) - want) / ulp;
}

std::vector<float> Inputs(std::mt19937& rng, int64_t random_count) {
  std::vector<float> x = {0.0f, -0.0f, 1.0f, -1.0f, 87.0f, -87.0f, 88.0f, -88.0f, 90.0f, -90.0f, 1e-30f, -1e-30f,
                          std::numeric_limits<float>::infinity(), std::numeric_limits<float>::max(),
                          -std::numeric_limits<float>::max()};
  std::uniform_real_distribution<float> wide(-100.0f, 100.0f), narrow(-8.0f, 8.0f);
  for (int64_t i = 0; i < random_count; ++i) x.push_back(i % 2 ? wide(rng) : narrow(rng));
  return x;
}

double ExactSigmoid(float x) { return 1.0 / (1.0 + std::exp(-static_cast<double>(x))); }

// One of the loops under test: its name, the loop, the exact value, the exact value's bound below -87, and what it
// gives for +infinity.
struct LoopUnderTest {
  const char* name;
  void (*loop)(CpuIsa, float*, int64_t);
  double (*exact)(float);
  double bound_below_lowest;
  float at_infinity;
};

const LoopUnderTest kLoops[] = {
    {"silu", SiluInPlace, ExactSilu, 1.5e-36, std::numeric_limits<float>::infinity()},
    {"sigmoid", SigmoidInPlace, ExactSigmoid, 1.7e-38, 1.0f},
};

TEST(SiluLoopsTest, EveryVersionIsWithinSixUlpsAndTheyAgreeBitForBit) {
  const uint32_t seed = std::random_device{}();
  std::mt19937 rng(seed);
  const std::vector<CpuIsa> isas = SupportedCpuIsas();
  ASSERT_FALSE(isas.empty());
  for (const LoopUnderTest& f : kLoops) {
    for (int64_t extra : {0, 1, 7, 8, 9, 15, 16, 17, 31, 100000}) {
      const std::vector<float> x = Inputs(rng, extra);
      std::vector<float> first;
      for (CpuIsa isa : isas) {
        std::vector<float> y = x;
        f.loop(isa, y.data(), static_cast<int64_t>(y.size()));
        double worst = 0;
        for (size_t i = 0; i < x.size(); ++i) {
          const double want = f.exact(x[i]);
          if (x[i] >= -87.0f) {
            if (std::isinf(x[i])) {
              EXPECT_EQ(y[i], f.at_infinity) << f.name << " " << CpuIsaName(isa);
              continue;
            }
            const double ulps = UlpsFrom(y[i], want);
            worst = std::max(worst, ulps);
            EXPECT_LE(ulps, 6.0) << CpuIsaName(isa) << " " << f.name << "(" << x[i] << ") = " << y[i] << ", exact "
                                 << want << " seed " << seed;
          } else {
            EXPECT_LE(std::fabs(static_cast<double>(y[i]) - want), f.bound_below_lowest)
                << CpuIsaName(isa) << " " << f.name << "(" << x[i] << ") = " << y[i] << " seed " << seed;
          }
        }
        if (extra == 100000) {
          std::printf("%s %s: at most %.2f ulp\n", f.name, std::string(CpuIsaName(isa)).c_str(), worst);
        }
        if (first.empty()) {
          first = y;
        } else {
          EXPECT_EQ(std::memcmp(first.data(), y.data(), y.size() * sizeof(float)), 0)
              << f.name << " " << CpuIsaName(isa) << " differs from " << CpuIsaName(isas[0]) << " seed " << seed;
        }
      }
    }
  }
}

TEST(SiluLoopsTest, NanStaysNan) {
  for (const LoopUnderTest& f : kLoops) {
    for (CpuIsa isa : SupportedCpuIsas()) {
      std::vector<float> x(19, 0.5f);
      x[3] = x[17] = std::nanf("");
      f.loop(isa, x.data(), static_cast<int64_t>(x.size()));
      EXPECT_TRUE(std::isnan(x[3]) && std::isnan(x[17])) << f.name << " " << CpuIsaName(isa);
      EXPECT_FLOAT_EQ(x[0], static_cast<float>(f.exact(0.5f))) << f.name << " " << CpuIsaName(isa);
    }
  }
}

}  // namespace
}  // namespace convoy::cpu
