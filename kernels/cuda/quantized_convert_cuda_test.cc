// The quantize and dequantize steps of INT8 plans on the CUDA backend (cuda.convert.elementwise and
// cuda.convert.transpose_tiles with ConvertProblem::quantized()): FP32 to UINT8 / INT8 and back, with a scale and a
// zero point, between every pair of NCHW and NHWC (the layouts of CUDA plans), against the CPU algorithm
// (cpu.convert.elementwise, itself tested against ONNX's definition in kernels/cpu/convert_test.cc) and against the
// definition written out here. Fresh random inputs each run (the seed is printed on failure) covering saturation at
// both ends, exact rounding ties (k + 0.5 steps, half to even), NaN (the type's minimum) and +-infinity; shapes with
// tails past the 32 x 32 tiles and the four-element packs. Outputs are poisoned first (FP32: NaN; bytes: the
// complement of the expected value). Compared exactly: quantized bytes equal, FP32 outputs bit for bit.
//
// Two builds of this one source: :quantized_convert_emulated_test (the emulated CudaDevice, also under the reverse and
// seeded-random thread orders: the transpose's shared-memory tile) and :quantized_convert_cuda_test (the nvcc-built
// kernels on a GPU; skips where there is none).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_macros.h"
#include "kernels/common/status_matchers.h"
#include "kernels/common/tensor.h"
#include "kernels/common/thread_pool.h"
#include "kernels/cpu/convert.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/test_device_or_skip.h"
#include "kernels/registry/registry.h"

#if defined(CONVOY_CUDA_EMULATION)
#include "kernels/cuda_emulation/schedule.h"
#endif

namespace convoy::cuda {
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

int LoadByte(const std::vector<uint8_t>& v, DataType t, size_t i) {
  return t == DataType::kUInt8 ? int{v[i]} : int{static_cast<int8_t>(v[i])};
}

// Random FP32 values on and around the grid of `scale` (ties included), some far outside the range, NaN and +-inf.
std::vector<float> RandomFloats(int64_t count, float scale, int zero_point, Range r, std::mt19937& rng) {
  std::uniform_int_distribution<int> step(r.lo - 40, r.hi + 40);
  std::uniform_int_distribution<int> kind(0, 3);
  std::uniform_real_distribution<float> fraction(-0.5f, 0.5f);
  std::vector<float> x(count);
  for (float& v : x) {
    const float base = static_cast<float>(step(rng) - zero_point);
    switch (kind(rng)) {
      case 0: v = (base + 0.5f) * scale; break;  // a tie
      case 1: v = base * scale; break;            // on the grid
      default: v = (base + fraction(rng)) * scale; break;
    }
  }
  x[count / 2] = std::nanf("");
  x[count / 3] = std::numeric_limits<float>::infinity();
  x[count / 5] = -std::numeric_limits<float>::infinity();
  return x;
}

// Copies `bytes` to a new device buffer.
absl::StatusOr<DeviceAllocation> Upload(Device& device, const void* data, size_t bytes) {
  CONVOY_ASSIGN_OR_RETURN(DeviceAllocation buffer, device.Allocate(bytes));
  CONVOY_RETURN_IF_ERROR(device.CopyToDevice(buffer.data(), data, bytes));
  return buffer;
}

// Runs `algorithm` on `device` with x and a poisoned y; returns y's bytes.
absl::StatusOr<std::vector<uint8_t>> RunOnDevice(Device& device, const ConvertAlgorithm& algorithm,
                                                 const ConvertProblem& p, const void* x, size_t x_bytes,
                                                 const std::vector<uint8_t>& poisoned_y) {
  CONVOY_RETURN_IF_ERROR(algorithm.CanImplement(p));
  CONVOY_ASSIGN_OR_RETURN(DeviceAllocation dx, Upload(device, x, x_bytes));
  CONVOY_ASSIGN_OR_RETURN(DeviceAllocation dy, Upload(device, poisoned_y.data(), poisoned_y.size()));
  CONVOY_RETURN_IF_ERROR(
      algorithm.Run(p, ConvertArgs{dx.data(), dy.data()}, Workspace{}, device.context()));
  CONVOY_RETURN_IF_ERROR(device.Synchronize());
  std::vector<uint8_t> y(poisoned_y.size());
  CONVOY_RETURN_IF_ERROR(device.CopyToHost(y.data(), dy.data(), y.size()));
  return y;
}

struct Case {
  DataType quantized;
  Layout src_layout, dst_layout;
  int n, c, h, w;
};

std::vector<Case> Cases() {
  std::vector<Case> out;
  for (DataType q : {DataType::kUInt8, DataType::kInt8}) {
    for (Layout a : {Layout::kNCHW, Layout::kNHWC}) {
      for (Layout b : {Layout::kNCHW, Layout::kNHWC}) {
        out.push_back({q, a, b, 2, 40, 5, 7});   // C = 40, H * W = 35: partial tiles both ways
        out.push_back({q, a, b, 1, 3, 9, 11});   // an RGB input
        out.push_back({q, a, b, 3, 64, 1, 1});   // a pooled [N, C] tail: the layouts coincide
      }
    }
  }
  return out;
}

std::string CaseName(const Case& c) {
  return absl::StrCat(DataTypeName(c.quantized), " ", LayoutName(c.src_layout), " -> ", LayoutName(c.dst_layout), " [",
                      c.n, ",", c.c, ",", c.h, ",", c.w, "]");
}

// Quantizes random FP32 data on the device and dequantizes the CPU's bytes back on the device, each step against the
// CPU algorithm and the definition.
absl::Status CheckRoundTrip(Device& device, const ConvertAlgorithm& algorithm, const Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  ThreadPool pool(2);
  const ExecutionContext cpu_context{Backend::kCpu, &pool};
  const cpu::CpuConvertAlgorithm cpu_algorithm;
  const Range range = RangeOf(c.quantized);
  std::uniform_real_distribution<float> scale_dist(0.004f, 0.2f);
  std::uniform_int_distribution<int> zp_dist(range.lo, range.hi);
  ConvertProblem quantize;
  quantize.n = c.n, quantize.c = c.c, quantize.h = c.h, quantize.w = c.w;
  quantize.src_dtype = DataType::kFloat32, quantize.dst_dtype = c.quantized;
  quantize.src_layout = c.src_layout, quantize.dst_layout = c.dst_layout;
  quantize.scale = scale_dist(rng), quantize.zero_point = zp_dist(rng);
  const int64_t count = int64_t{c.n} * c.c * c.h * c.w;
  const std::vector<float> x = RandomFloats(count, quantize.scale, quantize.zero_point, range, rng);

  // The CPU's bytes, checked against the definition through the layouts.
  std::vector<uint8_t> expected(count);
  CONVOY_RETURN_IF_ERROR(cpu_algorithm.Run(quantize, ConvertArgs{x.data(), expected.data()}, Workspace{}, cpu_context));
  const TensorDesc src = TensorDesc::Image(DataType::kFloat32, c.n, c.c, c.h, c.w, c.src_layout);
  const TensorDesc dst = TensorDesc::Image(c.quantized, c.n, c.c, c.h, c.w, c.dst_layout);
  for (int n = 0; n < c.n; ++n)
    for (int ch = 0; ch < c.c; ++ch)
      for (int h = 0; h < c.h; ++h)
        for (int w = 0; w < c.w; ++w) {
          const int want = QuantizeLinear(x[src.Offset4(n, ch, h, w)], quantize.scale, quantize.zero_point, range);
          const int cpu = LoadByte(expected, c.quantized, dst.Offset4(n, ch, h, w));
          if (cpu != want) {
            return absl::InternalError(absl::StrCat("the CPU quantized element (", n, ",", ch, ",", h, ",", w, ") to ",
                                                    cpu, ", the definition to ", want));
          }
        }

  std::vector<uint8_t> poisoned(count);
  for (int64_t i = 0; i < count; ++i) poisoned[i] = static_cast<uint8_t>(~expected[i]);
  CONVOY_ASSIGN_OR_RETURN(std::vector<uint8_t> q,
                          RunOnDevice(device, algorithm, quantize, x.data(), x.size() * sizeof(float), poisoned));
  for (int64_t i = 0; i < count; ++i) {
    if (q[i] != expected[i]) {
      return absl::InternalError(absl::StrCat(quantize.ToString(), ": byte ", i, " (x = ", x[i], " in ",
                                              LayoutName(c.src_layout), " order at the same index) is ",
                                              LoadByte(q, c.quantized, i), ", expected ",
                                              LoadByte(expected, c.quantized, i)));
    }
  }

  ConvertProblem dequantize = quantize;
  std::swap(dequantize.src_dtype, dequantize.dst_dtype);
  std::swap(dequantize.src_layout, dequantize.dst_layout);
  std::vector<float> fp32_expected(count);
  CONVOY_RETURN_IF_ERROR(
      cpu_algorithm.Run(dequantize, ConvertArgs{expected.data(), fp32_expected.data()}, Workspace{}, cpu_context));
  std::vector<uint8_t> nan_bytes(count * sizeof(float));
  const std::vector<float> nans(count, std::numeric_limits<float>::quiet_NaN());
  std::memcpy(nan_bytes.data(), nans.data(), nan_bytes.size());
  CONVOY_ASSIGN_OR_RETURN(std::vector<uint8_t> y_bytes,
                          RunOnDevice(device, algorithm, dequantize, expected.data(), expected.size(), nan_bytes));
  std::vector<float> y(count);
  std::memcpy(y.data(), y_bytes.data(), y_bytes.size());
  for (int n = 0; n < c.n; ++n)
    for (int ch = 0; ch < c.c; ++ch)
      for (int h = 0; h < c.h; ++h)
        for (int w = 0; w < c.w; ++w) {
          const int64_t i = src.Offset4(n, ch, h, w);  // the dequantized tensor has the quantize's source layout
          const float want =
              static_cast<float>(LoadByte(expected, c.quantized, dst.Offset4(n, ch, h, w)) - quantize.zero_point) *
              quantize.scale;
          if (std::memcmp(&y[i], &fp32_expected[i], sizeof(float)) != 0 || y[i] != want) {
            return absl::InternalError(absl::StrCat(dequantize.ToString(), ": element (", n, ",", ch, ",", h, ",", w,
                                                    ") is ", y[i], ", the CPU's ", fp32_expected[i],
                                                    ", the definition's ", want));
          }
        }
  return absl::OkStatus();
}

// Runs every case through whichever CUDA convert algorithm implements it; each algorithm must run some case.
void CheckEveryCase(Device& device) {
  std::vector<std::string> used;
  for (const Case& c : Cases()) {
    ConvertProblem probe;
    probe.n = c.n, probe.c = c.c, probe.h = c.h, probe.w = c.w;
    probe.src_dtype = DataType::kFloat32, probe.dst_dtype = c.quantized;
    probe.src_layout = c.src_layout, probe.dst_layout = c.dst_layout;
    probe.scale = 0.1f;
    bool ran = false;
    for (const ConvertAlgorithm* algorithm : OpRegistry<ConvertOp>::Global().All(Backend::kCuda)) {
      if (!algorithm->CanImplement(probe).ok()) continue;
      ran = true;
      used.emplace_back(algorithm->name());
      const uint32_t seed = std::random_device{}();
      EXPECT_THAT(CheckRoundTrip(device, *algorithm, c, seed), IsOk())
          << algorithm->name() << " " << CaseName(c) << " seed " << seed;
    }
    EXPECT_TRUE(ran) << "no CUDA convert algorithm implements " << probe.ToString();
  }
  EXPECT_THAT(used, ::testing::Contains("cuda.convert.elementwise"));
  EXPECT_THAT(used, ::testing::Contains("cuda.convert.transpose_tiles"));
}

TEST(CudaQuantizedConvertTest, QuantizesAndDequantizesAsTheCpuInEveryLayoutPair) {
  CONVOY_CREATE_DEVICE_OR_SKIP(device);
  CheckEveryCase(*device);
}

#if defined(CONVOY_CUDA_EMULATION)
TEST(CudaQuantizedConvertTest, TilesHoldUnderReverseAndRandomSchedules) {
  CONVOY_CREATE_DEVICE_OR_SKIP(device);
  for (const cuda_emulation::Schedule& schedule :
       {cuda_emulation::Schedule::Reverse(), cuda_emulation::Schedule::SeededRandom(std::random_device{}())}) {
    cuda_emulation::ScopedSchedule scoped(schedule);
    CheckEveryCase(*device);
  }
}
#endif

TEST(CudaQuantizedConvertTest, RejectsWhatItCannotRun) {
  ConvertProblem p;
  p.n = 1, p.c = 16, p.h = 2, p.w = 2;
  p.src_dtype = DataType::kFloat32, p.dst_dtype = DataType::kUInt8, p.scale = 0.5f;
  p.src_layout = Layout::kNCHW8c, p.dst_layout = Layout::kNHWC;
  const ConvertAlgorithm* tiles = nullptr;
  for (const ConvertAlgorithm* algorithm : OpRegistry<ConvertOp>::Global().All(Backend::kCuda)) {
    if (algorithm->name() == "cuda.convert.transpose_tiles") tiles = algorithm;
  }
  ASSERT_NE(tiles, nullptr);
  EXPECT_THAT(tiles->CanImplement(p).message(), ::testing::HasSubstr("NCHW <-> NHWC only, got NCHW8c -> NHWC"));
  p.src_layout = Layout::kNCHW;
  p.src_dtype = DataType::kFloat16;  // a quantize reads FP32 only
  EXPECT_THAT(tiles->CanImplement(p).message(), ::testing::HasSubstr("between FP32 and UINT8, got FP16"));
  p.src_dtype = DataType::kFloat32;
  p.zero_point = 300;
  EXPECT_THAT(tiles->CanImplement(p).message(), ::testing::HasSubstr("zero_point 300 is outside UINT8 [0, 255]"));
}

}  // namespace
}  // namespace convoy::cuda
