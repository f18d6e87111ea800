// Every version of the INT8 vector loops this CPU runs (baseline, AVX2, AVX-512: each one called directly) against the
// scalar definitions written out here: the quantized add of every pair of operand types into either output type, and
// QuantizeLinear / DequantizeLinear over runs with strides. Lengths cover the 16-lane body, the 8-lane step and the
// scalar tail (1 to 50 elements per run, and long buffers of odd length). Fresh random data each run (the seed is
// printed on failure): operands over the whole byte range, FP32 values on, between and exactly half-way between the
// quantization steps, far outside the range, and NaN. Outputs are poisoned first (the complement of the expected byte;
// NaN for FP32) and compared exactly: every version computes the same FP32 operations as the definition.
#include "kernels/cpu/quantized_vector_loops.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"

namespace convoy::cpu {
namespace {

using ::convoy::testing::IsOk;

int Lo(bool is_unsigned) { return is_unsigned ? 0 : -128; }
int Hi(bool is_unsigned) { return is_unsigned ? 255 : 127; }
int Load(const uint8_t* p, bool is_unsigned, int64_t i) {
  return is_unsigned ? int{p[i]} : int{static_cast<int8_t>(p[i])};
}

// The definitions, in FP32 as the kernels document them, rounded by nearbyint in double (exact for an FP32 value).
int SaturatedRound(float v, int zero_point, bool is_unsigned) {
  if (std::isnan(v)) return Lo(is_unsigned);
  const double q = std::nearbyint(static_cast<double>(v)) + zero_point;
  return static_cast<int>(std::fmin(std::fmax(q, Lo(is_unsigned)), Hi(is_unsigned)));
}
// onnxruntime's x86 QLinearAdd: scale ratios, the zero points in one constant, two FMAs (quantized_vector_loops.h).
int AddDefinition(const ByteQuantization& a, int qa, const ByteQuantization& b, int qb, const ByteQuantization& y) {
  const float ra = a.scale / y.scale, rb = b.scale / y.scale;
  const float fixed = static_cast<float>(y.zero_point) -
                      std::fmaf(ra, static_cast<float>(a.zero_point), rb * static_cast<float>(b.zero_point));
  const float v = std::fmaf(static_cast<float>(qa), ra, std::fmaf(static_cast<float>(qb), rb, fixed));
  return SaturatedRound(v, 0, y.is_unsigned);
}

ByteQuantization RandomQuantization(bool is_unsigned, std::mt19937& rng) {
  ByteQuantization q;
  q.scale = std::uniform_real_distribution<float>(0.003f, 0.2f)(rng);
  q.zero_point = std::uniform_int_distribution<int>(Lo(is_unsigned), Hi(is_unsigned))(rng);
  q.is_unsigned = is_unsigned;
  return q;
}

std::vector<uint8_t> RandomBytes(int64_t count, std::mt19937& rng) {
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<uint8_t> v(count);
  for (uint8_t& x : v) x = static_cast<uint8_t>(byte(rng));
  return v;
}

// Lengths that reach every part of every version: tails alone, one step of 8 or 16 plus a tail, long odd buffers.
std::vector<int64_t> Lengths(std::mt19937& rng) {
  std::vector<int64_t> out = {1, 7, 8, 9, 15, 16, 17, 24, 25, 31, 32, 33, 47, 50};
  out.push_back(10000 + std::uniform_int_distribution<int>(0, 999)(rng));
  return out;
}

absl::Status CheckAdd(CpuIsa isa, bool a_unsigned, bool b_unsigned, bool y_unsigned, bool in_place, uint32_t seed) {
  std::mt19937 rng(seed);
  for (int64_t count : Lengths(rng)) {
    const ByteQuantization a = RandomQuantization(a_unsigned, rng), b = RandomQuantization(b_unsigned, rng);
    const ByteQuantization y = in_place ? a : RandomQuantization(y_unsigned, rng);
    std::vector<uint8_t> a_data = RandomBytes(count, rng), b_data = RandomBytes(count, rng);
    std::vector<int> expected(count);
    for (int64_t i = 0; i < count; ++i) {
      const int qa = Load(a_data.data(), a.is_unsigned, i), qb = Load(b_data.data(), b.is_unsigned, i);
      expected[i] = AddDefinition(a, qa, b, qb, y);
    }
    std::vector<uint8_t> y_data(count);
    for (int64_t i = 0; i < count; ++i) y_data[i] = static_cast<uint8_t>(~expected[i]);
    uint8_t* out = in_place ? a_data.data() : y_data.data();
    QuantizedAddLoop(isa, a, a_data.data(), b, b_data.data(), y, out, count);
    for (int64_t i = 0; i < count; ++i) {
      if (Load(out, y.is_unsigned, i) != expected[i]) {
        return absl::InternalError(absl::StrCat("count ", count, ": element ", i, " is ", Load(out, y.is_unsigned, i),
                                                ", expected ", expected[i]));
      }
    }
  }
  return absl::OkStatus();
}

TEST(QuantizedVectorLoopsTest, AddMatchesTheDefinitionOnEveryIsaAndTypeTriple) {
  for (CpuIsa isa : SupportedCpuIsas()) {
    for (bool a : {true, false}) {
      for (bool b : {true, false}) {
        for (bool y : {true, false}) {
          for (bool in_place : {false, true}) {
            const uint32_t seed = std::random_device{}();
            EXPECT_THAT(CheckAdd(isa, a, b, y, in_place, seed), IsOk())
                << CpuIsaName(isa) << (a ? " u8" : " s8") << (b ? " + u8" : " + s8") << (y ? " -> u8" : " -> s8")
                << (in_place ? " in place" : "") << " seed " << seed;
          }
        }
      }
    }
  }
}

// FP32 values on, between and half-way between the steps of q (ties round half to even), beyond both ends, and NaN.
std::vector<float> RandomFloats(int64_t count, const ByteQuantization& q, std::mt19937& rng) {
  std::uniform_int_distribution<int> step(Lo(q.is_unsigned) - 40, Hi(q.is_unsigned) + 40);
  std::uniform_int_distribution<int> kind(0, 3);
  std::uniform_real_distribution<float> fraction(-0.5f, 0.5f);
  std::vector<float> x(count);
  for (float& v : x) {
    const float base = static_cast<float>(step(rng) - q.zero_point);
    switch (kind(rng)) {
      case 0: v = (base + 0.5f) * q.scale; break;
      case 1: v = base * q.scale; break;
      default: v = (base + fraction(rng)) * q.scale; break;
    }
  }
  x[count / 2] = std::nanf("");
  return x;
}

// `runs` runs of `width`, the FP32 side at stride x_stride and the 8-bit side at stride y_stride (both >= width).
absl::Status CheckQuantizeRuns(CpuIsa isa, bool is_unsigned, int64_t runs, int64_t width, int64_t fp32_stride,
                               int64_t byte_stride, uint32_t seed) {
  std::mt19937 rng(seed);
  const ByteQuantization q = RandomQuantization(is_unsigned, rng);
  const std::vector<float> x = RandomFloats(runs * fp32_stride, q, rng);
  std::vector<int> expected(runs * byte_stride, 0);
  std::vector<uint8_t> y(runs * byte_stride, 0x5A);
  for (int64_t r = 0; r < runs; ++r) {
    for (int64_t i = 0; i < width; ++i) {
      const int e = SaturatedRound(x[r * fp32_stride + i] / q.scale, q.zero_point, is_unsigned);
      expected[r * byte_stride + i] = e;
      y[r * byte_stride + i] = static_cast<uint8_t>(~e);
    }
  }
  QuantizeRuns(isa, q, x.data(), fp32_stride, y.data(), byte_stride, runs, width);
  for (int64_t r = 0; r < runs; ++r) {
    for (int64_t i = r * byte_stride; i < (r + 1) * byte_stride; ++i) {
      const bool in_run = i - r * byte_stride < width;
      const int want = in_run ? expected[i] : 0x5A;  // untouched between runs
      if (Load(y.data(), is_unsigned, i) != want) {
        return absl::InternalError(absl::StrCat("quantize: byte ", i, (in_run ? "" : " (between runs)"), " is ",
                                                Load(y.data(), is_unsigned, i), ", expected ", want));
      }
    }
  }
  // Back: the 8-bit side dequantized into FP32 runs at the FP32 stride, (q - zero_point) * scale bit for bit.
  std::vector<float> back(runs * fp32_stride, std::nanf(""));
  DequantizeRuns(isa, q, y.data(), byte_stride, back.data(), fp32_stride, runs, width);
  for (int64_t r = 0; r < runs; ++r) {
    for (int64_t i = 0; i < width; ++i) {
      const float want = static_cast<float>(expected[r * byte_stride + i] - q.zero_point) * q.scale;
      const float got = back[r * fp32_stride + i];
      if (std::memcmp(&want, &got, sizeof(float)) != 0) {
        return absl::InternalError(absl::StrCat("dequantize: run ", r, " element ", i, " is ", got, ", expected ",
                                                want));
      }
    }
    if (width < fp32_stride && !std::isnan(back[r * fp32_stride + width])) {
      return absl::InternalError(absl::StrCat("dequantize wrote past run ", r));
    }
  }
  return absl::OkStatus();
}

TEST(QuantizedVectorLoopsTest, QuantizeAndDequantizeRunsMatchOnnxOnEveryIsa) {
  struct Shape {
    int64_t runs, width, fp32_stride, byte_stride;
  };
  const Shape shapes[] = {
      {1, 10007, 10007, 10007},  // one flat run
      {37, 8, 8, 64},            // NCHW8c -> NHWC: 8 channels contiguous, C apart
      {29, 8, 48, 8},            // the other way round
      {5, 1, 3, 1},  {3, 15, 15, 17}, {4, 16, 20, 16}, {6, 17, 17, 40}, {2, 50, 64, 50},
  };
  for (CpuIsa isa : SupportedCpuIsas()) {
    for (bool is_unsigned : {true, false}) {
      for (const Shape& s : shapes) {
        const uint32_t seed = std::random_device{}();
        EXPECT_THAT(CheckQuantizeRuns(isa, is_unsigned, s.runs, s.width, s.fp32_stride, s.byte_stride, seed), IsOk())
            << CpuIsaName(isa) << (is_unsigned ? " UINT8" : " INT8") << " runs " << s.runs << " width " << s.width
            << " seed " << seed;
      }
    }
  }
}

TEST(QuantizedVectorLoopsTest, BestIsaIsTheWidestSupported) {
  const std::vector<CpuIsa> supported = SupportedCpuIsas();
  ASSERT_FALSE(supported.empty());
  EXPECT_EQ(supported.front(), CpuIsa::kBaseline);
  EXPECT_EQ(BestCpuIsa(), supported.back());
  std::string names;
  for (CpuIsa isa : supported) names += absl::StrCat(" ", CpuIsaName(isa));
  std::printf("vector loops tested on this CPU:%s\n", names.c_str());
}

}  // namespace
}  // namespace convoy::cpu
