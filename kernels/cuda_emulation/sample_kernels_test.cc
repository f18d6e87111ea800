// Runs the sample kernels of testdata/ through the CUDA emulation and compares them with plain CPU computations on
// fresh random inputs, outputs poisoned with NaN first. Each kernel runs under the forward, reverse and a seeded
// random schedule. Tolerances: float sums are compared with |got - want| <= 1e-5 * sum(|terms|) + 1e-6 (fp32
// rounding of up to a few hundred terms in a different order); integer results exactly.
#include "kernels/cuda_emulation/testdata/sample_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda_emulation/cuda_host_api.h"
#include "kernels/cuda_emulation/test_device_buffer.h"

namespace convoy::cuda_emulation {
namespace {

namespace testdata = ::convoy::cuda_emulation_testdata;

}  // namespace

void PrintTo(const Schedule& schedule, std::ostream* os) { *os << schedule.ToString(); }

namespace {

class SampleKernelsTest : public ::testing::TestWithParam<Schedule> {
 protected:
  SampleKernelsTest() : schedule_(GetParam()), random_(std::random_device{}()) {}

  std::vector<float> RandomFloats(size_t n, float low, float high) {
    std::uniform_real_distribution<float> uniform(low, high);
    std::vector<float> values(n);
    for (float& v : values) v = uniform(random_);
    return values;
  }

  ScopedSchedule schedule_;
  std::mt19937 random_;
};

// Checks got[i] against want[i] within 1e-5 * magnitude[i] + 1e-6.
void ExpectClose(const std::vector<float>& got, const std::vector<double>& want, const std::vector<double>& magnitude) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-5 * magnitude[i] + 1e-6) << "element " << i;
  }
}

TEST_P(SampleKernelsTest, BlockSumMatchesCpuSum) {
  for (int threads : {256, 96}) {
    const int n = 50000, blocks = 7;
    const std::vector<float> input = RandomFloats(n, -1.0f, 1.0f);
    TestDeviceBuffer<float> device_input(input);
    TestDeviceBuffer<float> sums(blocks);
    ASSERT_EQ(testdata::LaunchBlockSum(device_input.get(), n, sums.get(), blocks, threads, nullptr), cudaSuccess)
        << LastErrorDetail();
    std::vector<double> want(blocks, 0.0), magnitude(blocks, 0.0);
    for (int i = 0; i < n; ++i) {
      const int block = (i / threads) % blocks;  // the grid-stride loop's owner of element i
      want[block] += input[i];
      magnitude[block] += std::fabs(input[i]);
    }
    ExpectClose(sums.Download(), want, magnitude);
  }
}

TEST_P(SampleKernelsTest, WarpIntrinsicsFollowCudaSemantics) {
  constexpr int kThreads = 64, kOut = testdata::kWarpIntrinsicOutputs;
  std::uniform_int_distribution<int> small(0, 19);
  std::vector<int> input(kThreads);
  for (int& v : input) v = small(random_);
  TestDeviceBuffer<int> device_input(input);
  TestDeviceBuffer<int> out(kThreads * kOut);
  ASSERT_EQ(testdata::LaunchWarpIntrinsics(device_input.get(), kThreads, out.get(), nullptr), cudaSuccess)
      << LastErrorDetail();
  const std::vector<int> got = out.Download();
  int odd_count = 0;
  for (int v : input) odd_count += v % 2;
  for (int t = 0; t < kThreads; ++t) {
    const int lane = t % 32, base = t - lane;
    auto in = [&](int l) { return input[base + l]; };
    unsigned ballot = 0, matching = 0;
    int any7 = 0, sum = 0, maximum = 0;
    for (int l = 0; l < 32; ++l) {
      ballot |= (in(l) % 3 == 0 ? 1u : 0u) << l;
      matching |= (in(l) % 4 == in(lane) % 4 ? 1u : 0u) << l;
      any7 |= in(l) == 7;
      sum += in(l);
      maximum = std::max(maximum, in(l));
    }
    const int* o = &got[t * kOut];
    EXPECT_EQ(o[0], in((lane * 7 + 3) % 32)) << "thread " << t;
    EXPECT_EQ(o[1], lane >= 3 ? in(lane - 3) : in(lane)) << "thread " << t;
    EXPECT_EQ(o[2], lane + 5 < 32 ? in(lane + 5) : in(lane)) << "thread " << t;
    EXPECT_EQ(o[3], in(lane ^ 6)) << "thread " << t;
    EXPECT_EQ(o[4], in((lane & ~7) + ((lane ^ 1) & 7))) << "thread " << t;
    EXPECT_EQ(static_cast<unsigned>(o[5]), ballot) << "thread " << t;
    EXPECT_EQ(o[6], any7) << "thread " << t;
    EXPECT_EQ(o[7], 1) << "thread " << t;
    EXPECT_EQ(o[8], sum) << "thread " << t;
    EXPECT_EQ(o[9], maximum) << "thread " << t;
    EXPECT_EQ(static_cast<unsigned>(o[10]), matching) << "thread " << t;
    EXPECT_EQ(o[11], lane < 16 ? in(lane ^ 1) : -1) << "thread " << t;
    EXPECT_EQ(static_cast<unsigned>(o[12]), 0xFFFFFFFFu) << "thread " << t;
    EXPECT_EQ(o[13], odd_count) << "thread " << t;
  }
}

TEST_P(SampleKernelsTest, TiledSgemmMatchesCpuProduct) {
  const int m = 37, n = 45, k = 29;  // not multiples of the tile: exercises the bounds checks
  const std::vector<float> a = RandomFloats(m * k, -1.0f, 1.0f), b = RandomFloats(k * n, -1.0f, 1.0f);
  TestDeviceBuffer<float> device_a(a), device_b(b), c(m * n);
  ASSERT_EQ(testdata::LaunchTiledSgemm(device_a.get(), device_b.get(), c.get(), m, n, k, nullptr), cudaSuccess)
      << LastErrorDetail();
  std::vector<double> want(m * n, 0.0), magnitude(m * n, 0.0);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      for (int p = 0; p < k; ++p) {
        want[i * n + j] += double{a[i * k + p]} * b[p * n + j];
        magnitude[i * n + j] += std::fabs(double{a[i * k + p]} * b[p * n + j]);
      }
    }
  }
  ExpectClose(c.Download(), want, magnitude);
}

TEST_P(SampleKernelsTest, DynamicSharedMemoryAboveDefaultNeedsTheAttribute) {
  const int count = 20000, blocks = 3;  // 80000 bytes of dynamic shared memory per block
  const std::vector<float> input = RandomFloats(count * blocks, -10.0f, 10.0f);
  TestDeviceBuffer<float> device_input(input), out(count * blocks);

  EXPECT_EQ(
      testdata::LaunchReverseThroughDynamicShared(device_input.get(), out.get(), count, blocks, 48 * 1024, nullptr),
      cudaErrorInvalidValue);
  EXPECT_NE(LastErrorDetail().find("80000 bytes requested, the kernel's limit is 49152"), std::string::npos)
      << LastErrorDetail();
  EXPECT_EQ(
      testdata::LaunchReverseThroughDynamicShared(device_input.get(), out.get(), count, blocks, 300 * 1024, nullptr),
      cudaErrorInvalidValue);
  // As on a GPU, the failed cudaFuncSetAttribute's error stays the thread's last error until read; unread, the next
  // launch (kernel<<<>>>; cudaGetLastError()) would return it.
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);

  ASSERT_EQ(
      testdata::LaunchReverseThroughDynamicShared(device_input.get(), out.get(), count, blocks, count * 4, nullptr),
      cudaSuccess)
      << LastErrorDetail();
  const std::vector<float> got = out.Download();
  for (int b = 0; b < blocks; ++b) {
    for (int i = 0; i < count; ++i) ASSERT_EQ(got[b * count + i], input[b * count + count - 1 - i]) << b << "," << i;
  }
}

// Reference product of 16-bit or TF32 inputs already rounded to what the tensor core sees; b is read as b(p, j).
template <typename BAt>
void ExpectGemm(const std::vector<float>& got, const std::vector<float>& a, BAt b_at, int m, int n, int k) {
  std::vector<double> want(m * n, 0.0), magnitude(m * n, 0.0);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      for (int p = 0; p < k; ++p) {
        const double product = double{a[i * k + p]} * b_at(p, j);
        want[i * n + j] += product;
        magnitude[i * n + j] += std::fabs(product);
      }
    }
  }
  ExpectClose(got, want, magnitude);
}

TEST_P(SampleKernelsTest, MmaF16GemmMatchesCpuProduct) {
  const int m = 32, n = 16, k = 64;
  const std::vector<float> a_values = RandomFloats(m * k, -2.0f, 2.0f), b_values = RandomFloats(n * k, -2.0f, 2.0f);
  std::vector<__half> a(a_values.begin(), a_values.end()), b_nk(b_values.begin(), b_values.end());
  std::vector<float> a_rounded(a.begin(), a.end()), b_rounded(b_nk.begin(), b_nk.end());
  TestDeviceBuffer<__half> device_a(a), device_b(b_nk);
  TestDeviceBuffer<float> c(m * n);
  ASSERT_EQ(testdata::LaunchMmaGemmF16(device_a.get(), device_b.get(), c.get(), m, n, k, nullptr), cudaSuccess)
      << LastErrorDetail();
  ExpectGemm(
      c.Download(), a_rounded, [&](int p, int j) { return double{b_rounded[j * k + p]}; }, m, n, k);
}

TEST_P(SampleKernelsTest, MmaBf16GemmWithTransposedLdmatrixMatchesCpuProduct) {
  const int m = 16, n = 24, k = 48;
  const std::vector<float> a_values = RandomFloats(m * k, -2.0f, 2.0f), b_values = RandomFloats(k * n, -2.0f, 2.0f);
  std::vector<__nv_bfloat16> a(a_values.begin(), a_values.end()), b_kn(b_values.begin(), b_values.end());
  std::vector<float> a_rounded(a.begin(), a.end()), b_rounded(b_kn.begin(), b_kn.end());
  TestDeviceBuffer<__nv_bfloat16> device_a(a), device_b(b_kn);
  TestDeviceBuffer<float> c(m * n);
  ASSERT_EQ(testdata::LaunchMmaGemmBf16(device_a.get(), device_b.get(), c.get(), m, n, k, nullptr), cudaSuccess)
      << LastErrorDetail();
  ExpectGemm(
      c.Download(), a_rounded, [&](int p, int j) { return double{b_rounded[p * n + j]}; }, m, n, k);
}

// TF32 as cvt.rna.tf32.f32 rounds: 11 significant bits, ties away from zero (computed with frexp, independently of
// the emulation's bit trick).
float RoundToTf32(float value) {
  int exponent = 0;
  const double fraction = std::frexp(double{value}, &exponent);  // value = fraction * 2^exponent, |fraction| in [.5,1)
  return static_cast<float>(std::ldexp(std::round(std::ldexp(fraction, 11)), exponent - 11));
}

TEST_P(SampleKernelsTest, MmaTf32GemmMatchesCpuProductOfRoundedInputs) {
  const int m = 32, n = 16, k = 40;
  const std::vector<float> a = RandomFloats(m * k, -2.0f, 2.0f), b_nk = RandomFloats(n * k, -2.0f, 2.0f);
  TestDeviceBuffer<float> device_a(a), device_b(b_nk), c(m * n);
  ASSERT_EQ(testdata::LaunchMmaGemmTf32(device_a.get(), device_b.get(), c.get(), m, n, k, nullptr), cudaSuccess)
      << LastErrorDetail();
  std::vector<float> a_rounded(a.size());
  for (size_t i = 0; i < a.size(); ++i) a_rounded[i] = RoundToTf32(a[i]);
  ExpectGemm(
      c.Download(), a_rounded, [&](int p, int j) { return double{RoundToTf32(b_nk[j * k + p])}; }, m, n, k);
}

// The 8-bit integer mma (s8 x s8 and u8 x s8, m16n8k32) against a plain integer product: random bytes over the whole
// range of each type (so sign extension of A's and B's bytes is exercised), a random accumulator input, exact
// equality. The output starts as the bitwise complement of the expected result, so an element left unwritten fails.
TEST_P(SampleKernelsTest, MmaInt8GemmMatchesIntegerProductExactly) {
  const int m = 32, n = 16, k = 96;
  for (const bool a_unsigned : {false, true}) {
    SCOPED_TRACE(a_unsigned ? "u8 x s8" : "s8 x s8");
    std::uniform_int_distribution<int> byte(0, 255), start(-1000000, 1000000);
    std::vector<uint8_t> a(m * k);
    std::vector<int8_t> b_nk(n * k);
    std::vector<int32_t> c_in(m * n);
    for (uint8_t& v : a) v = static_cast<uint8_t>(byte(random_));
    for (int8_t& v : b_nk) v = static_cast<int8_t>(byte(random_) - 128);
    for (int32_t& v : c_in) v = start(random_);
    std::vector<int32_t> want(m * n), poison(m * n);
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < n; ++j) {
        int64_t sum = c_in[i * n + j];
        for (int p = 0; p < k; ++p) {
          const int a_value = a_unsigned ? int{a[i * k + p]} : int{static_cast<int8_t>(a[i * k + p])};
          sum += int64_t{a_value} * b_nk[j * k + p];
        }
        want[i * n + j] = static_cast<int32_t>(sum);
        poison[i * n + j] = ~want[i * n + j];
      }
    }
    TestDeviceBuffer<uint8_t> device_a(a);
    TestDeviceBuffer<int8_t> device_b(b_nk);
    TestDeviceBuffer<int32_t> device_c_in(c_in), c(poison);
    ASSERT_EQ(testdata::LaunchMmaGemmInt8(device_a.get(), a_unsigned, device_b.get(), device_c_in.get(), c.get(), m, n,
                                          k, nullptr),
              cudaSuccess)
        << LastErrorDetail();
    EXPECT_EQ(c.Download(), want);
  }
}

TEST_P(SampleKernelsTest, HistogramAndAtomicsMatchCpuCounts) {
  const int n = 10000, bins = 37;
  std::uniform_int_distribution<int> value(0, 999);
  std::vector<int> values(n);
  for (int& v : values) v = value(random_);
  const int target = values[n / 3];
  TestDeviceBuffer<int> device_values(values);
  TestDeviceBuffer<unsigned> histogram(std::vector<unsigned>(bins, 0));
  TestDeviceBuffer<int> stats(std::vector<int>{INT32_MIN, INT32_MAX, -1, -1});
  TestDeviceBuffer<float> sum(std::vector<float>{0.0f});
  ASSERT_EQ(
      testdata::LaunchHistogram(device_values.get(), n, bins, target, histogram.get(), stats.get(), sum.get(), nullptr),
      cudaSuccess)
      << LastErrorDetail();
  std::vector<unsigned> want(bins, 0);
  double want_sum = 0;
  for (int v : values) {
    ++want[v % bins];
    want_sum += v;
  }
  EXPECT_EQ(histogram.Download(), want);
  const std::vector<int> got = stats.Download();
  EXPECT_EQ(got[0], *std::max_element(values.begin(), values.end()));
  EXPECT_EQ(got[1], *std::min_element(values.begin(), values.end()));
  ASSERT_GE(got[2], 0);
  ASSERT_LT(got[2], n);
  EXPECT_EQ(values[got[2]], target);
  EXPECT_GE(got[3], 0);
  EXPECT_LT(got[3], n);
  EXPECT_EQ(sum.Download()[0], want_sum);  // integers below 2^24: exact in any order
}

INSTANTIATE_TEST_SUITE_P(Schedules, SampleKernelsTest,
                         ::testing::Values(Schedule::Forward(), Schedule::Reverse(), Schedule::SeededRandom(12345)),
                         [](const ::testing::TestParamInfo<Schedule>& info) {
                           return info.param.order == ScheduleOrder::kForward   ? std::string("Forward")
                                  : info.param.order == ScheduleOrder::kReverse ? std::string("Reverse")
                                                                                : std::string("SeededRandom");
                         });

}  // namespace
}  // namespace convoy::cuda_emulation
