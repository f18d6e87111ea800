// The quantize and dequantize steps of INT8 plans on the CUDA backend (cuda.convert.elementwise and
// cuda.convert.transpose_tiles with ConvertProblem::quantized()): FP32 to UINT8 / INT8 and back, with a scale and a
// zero point, between every pair of NCHW and NHWC (the layouts of CUDA plans), on the shared cases of
// kernels/testing/quantized_step_cases.h: against ONNX's definition written out there and against the CPU algorithm
// (cpu.convert.elementwise) on the same inputs, byte for byte and bit for bit. Fresh random inputs each run (the seed
// is printed on failure): rounding ties, saturation, NaN, +-infinity; outputs poisoned first.
//
// Two builds of this one source: :quantized_convert_emulated_test (the emulated CudaDevice, also under the reverse and
// seeded-random thread orders: the transpose's shared-memory tile) and :quantized_convert_cuda_test (the nvcc-built
// kernels on a GPU; skips where there is none).
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "kernels/cpu/convert.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/test_device_or_skip.h"
#include "kernels/registry/registry.h"
#include "kernels/testing/quantized_step_cases.h"

#if defined(CONVOY_CUDA_EMULATION)
#include "kernels/cuda_emulation/schedule.h"
#endif

namespace convoy::cuda {
namespace {

using ::convoy::testing::IsOk;
using ::convoy::testing::QuantizedConvertCase;

// Runs every case through whichever CUDA convert algorithm implements it; each algorithm must run some case.
void CheckEveryCase(Device& device) {
  const cpu::CpuConvertAlgorithm cpu_algorithm;
  std::vector<std::string> used;
  for (const QuantizedConvertCase& c : testing::QuantizedConvertTestCases()) {
    const ConvertProblem probe = c.Quantize(0.1f, 0);
    bool ran = false;
    for (const ConvertAlgorithm* algorithm : OpRegistry<ConvertOp>::Global().All(Backend::kCuda)) {
      if (!algorithm->CanImplement(probe).ok()) continue;
      ran = true;
      used.emplace_back(algorithm->name());
      const uint32_t seed = std::random_device{}();
      EXPECT_THAT(testing::CheckQuantizeRoundTrip(*algorithm, c, device, seed, &cpu_algorithm), IsOk())
          << algorithm->name() << " " << c.ToString() << " seed " << seed;
    }
    EXPECT_TRUE(ran) << "no CUDA convert algorithm implements " << probe.ToString();
  }
  EXPECT_THAT(used, ::testing::Contains("cuda.convert.elementwise"));
  EXPECT_THAT(used, ::testing::Contains("cuda.convert.transpose_tiles"));
}

TEST(CudaQuantizedConvertTest, QuantizesAndDequantizesAsOnnxAndTheCpuInEveryLayoutPair) {
  CONVOY_CREATE_DEVICE_OR_SKIP(device);
  CheckEveryCase(*device);
}

#if defined(CONVOY_CUDA_EMULATION)
TEST(CudaQuantizedConvertTest, TilesHoldUnderReverseAndRandomSchedules) {
  CONVOY_CREATE_DEVICE_OR_SKIP(device);
  for (const cuda_emulation::Schedule& schedule :
       {cuda_emulation::Schedule::Reverse(), cuda_emulation::Schedule::SeededRandom(std::random_device{}())}) {
    SCOPED_TRACE(schedule.ToString());
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
