// cpu.convert.elementwise as the quantize and dequantize steps of QDQ plans (ConvertProblem::quantized()): FP32 to
// UINT8 / INT8 and back, with a scale and a zero point, between every pair of NCHW, NHWC and NCHW8c, against ONNX's
// definition written out element by element here. Inputs are fresh random values each run (the seed is printed on
// failure), covering saturation at both ends, exact rounding ties (k + 0.5 steps, which round half to even) and NaN
// (which QuantizeLinear saturates to the type's minimum). Outputs are poisoned first (FP32: NaN; integers: the
// complement of the expected value), so an unwritten element fails. Quantized outputs are compared exactly, FP32
// outputs bit for bit: both sides compute the same single FP32 operations.
#include "kernels/cpu/convert.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_macros.h"
#include "kernels/common/status_matchers.h"
#include "kernels/common/tensor.h"
#include "kernels/common/thread_pool.h"

namespace convoy::cpu {
namespace {

using ::convoy::testing::IsOk;

struct Range {
  int lo, hi;
};
Range RangeOf(DataType q) { return q == DataType::kUInt8 ? Range{0, 255} : Range{-128, 127}; }

// ONNX QuantizeLinear of one FP32 value: the FP32 quotient rounded half to even, the zero point added, saturated.
int QuantizeLinear(float x, float scale, int zero_point, Range r) {
  const float quotient = x / scale;
  if (std::isnan(quotient)) return r.lo;
  const double q = std::nearbyint(static_cast<double>(quotient)) + zero_point;
  return static_cast<int>(std::fmin(std::fmax(q, r.lo), r.hi));
}

// Random FP32 values on and around the grid of `scale` (ties included), some far outside the range, and a NaN.
std::vector<float> RandomFloats(int64_t count, float scale, Range r, std::mt19937& rng) {
  std::uniform_int_distribution<int> step(r.lo - 40, r.hi + 40);
  std::uniform_int_distribution<int> kind(0, 3);
  std::uniform_real_distribution<float> fraction(-0.5f, 0.5f);
  std::vector<float> x(count);
  for (float& v : x) {
    const float base = static_cast<float>(step(rng) - (r.lo + r.hi) / 2);
    switch (kind(rng)) {
      case 0: v = (base + 0.5f) * scale; break;        // a tie
      case 1: v = base * scale; break;                  // on the grid
      default: v = (base + fraction(rng)) * scale; break;
    }
  }
  x[count / 2] = std::nanf("");
  return x;
}

struct Case {
  DataType quantized;
  Layout src_layout, dst_layout;
};

std::vector<Case> Cases() {
  std::vector<Case> out;
  const Layout layouts[] = {Layout::kNCHW, Layout::kNHWC, Layout::kNCHW8c};
  for (DataType q : {DataType::kUInt8, DataType::kInt8}) {
    for (Layout a : layouts) {
      for (Layout b : layouts) out.push_back({q, a, b});
    }
  }
  return out;
}

// Quantizes random FP32 data and dequantizes the result back, each step against the definition.
absl::Status CheckRoundTrip(const Case& c, uint32_t seed, int64_t N = 2, int64_t C = 16, int64_t H = 5,
                            int64_t W = 7) {
  std::mt19937 rng(seed);
  ThreadPool pool(2);
  ExecutionContext context{Backend::kCpu, &pool};
  const CpuConvertAlgorithm algorithm;
  const Range range = RangeOf(c.quantized);
  std::uniform_real_distribution<float> scale_dist(0.004f, 0.2f);
  std::uniform_int_distribution<int> zp_dist(range.lo, range.hi);
  ConvertProblem quantize;
  quantize.n = N, quantize.c = C, quantize.h = H, quantize.w = W;
  quantize.src_dtype = DataType::kFloat32, quantize.dst_dtype = c.quantized;
  quantize.src_layout = c.src_layout, quantize.dst_layout = c.dst_layout;
  quantize.scale = scale_dist(rng), quantize.zero_point = zp_dist(rng);
  CONVOY_RETURN_IF_ERROR(algorithm.CanImplement(quantize));
  const TensorDesc src = TensorDesc::Image(DataType::kFloat32, N, C, H, W, c.src_layout);
  const TensorDesc dst = TensorDesc::Image(c.quantized, N, C, H, W, c.dst_layout);
  const int64_t count = src.num_elements();
  const std::vector<float> x = RandomFloats(count, quantize.scale, range, rng);

  std::vector<int> expected(count);  // in the destination's order
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ch = 0; ch < C; ++ch)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w) {
          expected[dst.Offset4(n, ch, h, w)] =
              QuantizeLinear(x[src.Offset4(n, ch, h, w)], quantize.scale, quantize.zero_point, range);
        }
  std::vector<uint8_t> q(count);
  for (int64_t i = 0; i < count; ++i) q[i] = static_cast<uint8_t>(~expected[i]);  // poison: never the expected byte
  CONVOY_RETURN_IF_ERROR(algorithm.Run(quantize, ConvertArgs{x.data(), q.data()}, Workspace{}, context));
  for (int64_t i = 0; i < count; ++i) {
    const int got = c.quantized == DataType::kUInt8 ? int{q[i]} : int{static_cast<int8_t>(q[i])};
    if (got != expected[i]) {
      return absl::InternalError(absl::StrCat(quantize.ToString(), ": element ", i, " quantized to ", got,
                                              ", expected ", expected[i]));
    }
  }

  // Back to FP32, the layouts swapped: (q - zero_point) * scale in FP32.
  ConvertProblem dequantize = quantize;
  std::swap(dequantize.src_dtype, dequantize.dst_dtype);
  std::swap(dequantize.src_layout, dequantize.dst_layout);
  CONVOY_RETURN_IF_ERROR(algorithm.CanImplement(dequantize));
  std::vector<float> y(count, std::nanf(""));
  CONVOY_RETURN_IF_ERROR(algorithm.Run(dequantize, ConvertArgs{q.data(), y.data()}, Workspace{}, context));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ch = 0; ch < C; ++ch)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w) {
          const float want = static_cast<float>(expected[dst.Offset4(n, ch, h, w)] - quantize.zero_point) * quantize.scale;
          const float got = y[src.Offset4(n, ch, h, w)];
          if (std::memcmp(&got, &want, sizeof(float)) != 0) {
            return absl::InternalError(absl::StrCat(dequantize.ToString(), ": element (", n, ",", ch, ",", h, ",", w,
                                                    ") is ", got, ", expected ", want));
          }
        }
  return absl::OkStatus();
}

TEST(ConvertQuantizedTest, QuantizesAndDequantizesAsOnnxDefinesInEveryLayoutPair) {
  for (const Case& c : Cases()) {
    const uint32_t seed = std::random_device{}();
    EXPECT_THAT(CheckRoundTrip(c, seed), IsOk())
        << DataTypeName(c.quantized) << " " << LayoutName(c.src_layout) << " -> " << LayoutName(c.dst_layout)
        << " seed " << seed;
  }
}

// The input quantize of an image: NCHW FP32 into NHWC bytes with 1-5 channels (3: the byte-shuffle interleave of 16
// pixels at a time), widths that leave tails after the 16-pixel pieces and after the 512-value stack buffer, and
// back; every element against ONNX's definition, outputs poisoned first.
TEST(ConvertQuantizedTest, QuantizesImagesIntoPixelsAsOnnxDefines) {
  struct Shape { int64_t n, c, h, w; };
  const Shape shapes[] = {{2, 3, 4, 224}, {1, 3, 3, 37}, {1, 3, 2, 1100}, {3, 1, 2, 19}, {1, 2, 3, 21},
                          {2, 4, 2, 33}, {1, 5, 2, 17}};
  for (DataType q : {DataType::kUInt8, DataType::kInt8}) {
    for (const Shape& s : shapes) {
      const uint32_t seed = std::random_device{}();
      EXPECT_THAT(CheckRoundTrip({q, Layout::kNCHW, Layout::kNHWC}, seed, s.n, s.c, s.h, s.w), IsOk())
          << DataTypeName(q) << " n" << s.n << " c" << s.c << " h" << s.h << " w" << s.w << " seed " << seed;
    }
  }
}

TEST(ConvertQuantizedTest, ValidateNamesTheField) {
  ConvertProblem p;
  p.n = 1, p.c = 8, p.h = 2, p.w = 2;
  p.dst_dtype = DataType::kUInt8, p.dst_layout = Layout::kNHWC;
  EXPECT_THAT(p.Validate().message(), ::testing::HasSubstr("scale must be positive and finite, got 0"));
  p.scale = 0.5f, p.zero_point = 300;
  EXPECT_THAT(p.Validate().message(), ::testing::HasSubstr("zero_point 300 is outside UINT8 [0, 255]"));
  p.zero_point = 3, p.src_dtype = DataType::kFloat16;
  EXPECT_THAT(p.Validate().message(), ::testing::HasSubstr("between FP32 and UINT8, got FP16"));
  p.src_dtype = DataType::kFloat32;
  EXPECT_THAT(p.Validate(), IsOk());
  // A float conversion carries no quantization.
  ConvertProblem f;
  f.zero_point = 2;
  EXPECT_THAT(f.Validate().message(), ::testing::HasSubstr("scale and zero_point apply only to a UINT8 or INT8 side"));
}

}  // namespace
}  // namespace convoy::cpu
