// 8-bit max pooling on oneDNN (cpu.pool2d.onednn_nhwc with UINT8 / INT8 tensors, the INT8 max pool of QDQ plans)
// against the definition: each output is the largest input inside its window, padding never taken. Fresh random
// bytes each run (the seed is printed on failure); every output is written over twice, once from a buffer filled
// with the type's lowest byte and once from one filled with its highest, so an element the kernel leaves unwritten
// fails one of the two. Tolerance: none (a maximum of integers is exact).
#include "kernels/cpu/pool2d_onednn.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "kernels/cpu/cpu_device.h"
#include "kernels/cpu/pool2d.h"

namespace convoy::cpu {
namespace {

using ::convoy::testing::IsOk;
using ::testing::HasSubstr;

Pool2dProblem MaxPool(DataType dtype, int n, int c, int h, int w, int r, int s, int stride, int pad_top, int pad_bottom,
                      int pad_left, int pad_right, bool ceil_mode = false) {
  Pool2dProblem p;
  p.mode = PoolMode::kMax;
  p.n = n, p.c = c, p.h = h, p.w = w, p.r = r, p.s = s;
  p.stride_h = p.stride_w = stride;
  p.pad_top = pad_top, p.pad_bottom = pad_bottom, p.pad_left = pad_left, p.pad_right = pad_right;
  p.ceil_mode = ceil_mode;
  p.dtype = dtype;
  p.layout = Layout::kNHWC;
  return p;
}

// The definition on NHWC bytes read as `T`.
template <typename T>
std::vector<T> ReferenceMaxPool(const Pool2dProblem& p, const std::vector<T>& x) {
  const bool global = p.mode == PoolMode::kGlobalMax;
  std::vector<T> y(size_t{1} * p.n * p.p() * p.q() * p.c);
  for (int n = 0; n < p.n; ++n)
    for (int oy = 0; oy < p.p(); ++oy)
      for (int ox = 0; ox < p.q(); ++ox)
        for (int c = 0; c < p.c; ++c) {
          const int y0 = global ? 0 : oy * p.stride_h - p.pad_top, x0 = global ? 0 : ox * p.stride_w - p.pad_left;
          const int rows = global ? p.h : p.r, cols = global ? p.w : p.s;
          int best = INT32_MIN;
          for (int i = std::max(0, y0); i < std::min(p.h, y0 + rows); ++i)
            for (int j = std::max(0, x0); j < std::min(p.w, x0 + cols); ++j)
              best = std::max<int>(best, x[((size_t{1} * n * p.h + i) * p.w + j) * p.c + c]);
          y[((size_t{1} * n * p.p() + oy) * p.q() + ox) * p.c + c] = static_cast<T>(best);
        }
  return y;
}

template <typename T>
void ExpectMatchesDefinition(const Pool2dAlgorithm& algorithm, const Pool2dProblem& p, CpuDevice& device) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << p.ToString() << " seed " << seed);
  ASSERT_THAT(algorithm.CanImplement(p), IsOk());
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(std::numeric_limits<T>::min(), std::numeric_limits<T>::max());
  std::vector<T> x(size_t{1} * p.n * p.h * p.w * p.c);
  for (T& v : x) v = static_cast<T>(byte(rng));
  const std::vector<T> want = ReferenceMaxPool(p, x);
  const ExecutionContext context = device.context();
  CONVOY_ASSERT_OK_AND_ASSIGN(std::unique_ptr<AlgorithmState> state, algorithm.Prepare(p, context));
  std::vector<uint8_t> workspace(std::max<size_t>(algorithm.WorkspaceBytes(p), 1));
  for (const T poison : {std::numeric_limits<T>::min(), std::numeric_limits<T>::max()}) {
    std::vector<T> y(want.size(), poison);
    ASSERT_THAT(algorithm.Run(p, Pool2dArgs{x.data(), y.data()},
                              Workspace{workspace.data(), algorithm.WorkspaceBytes(p), state.get()}, context),
                IsOk());
    ASSERT_THAT(device.Synchronize(), IsOk());
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_EQ(static_cast<int>(y[i]), static_cast<int>(want[i])) << "element " << i << ", poison " << int{poison};
    }
  }
}

std::unique_ptr<CpuDevice> TwoThreadDevice() {
  CpuDevice::Options options;
  options.num_threads = 2;
  auto device = CpuDevice::Create(options);
  EXPECT_THAT(device.status(), IsOk());
  return device.ok() ? std::move(*device) : nullptr;
}

// ResNet's stem pool (3x3, stride 2, padding 1) at odd sizes, a window without padding, asymmetric padding, ceil
// mode, a channel count that is no multiple of the vector width, batch 3, and the global maximum.
std::vector<Pool2dProblem> EightBitProblems(DataType dtype) {
  std::vector<Pool2dProblem> problems = {
      MaxPool(dtype, 1, 64, 15, 17, 3, 3, 2, 1, 1, 1, 1),   MaxPool(dtype, 3, 24, 12, 12, 2, 2, 2, 0, 0, 0, 0),
      MaxPool(dtype, 2, 37, 9, 11, 3, 3, 1, 0, 2, 1, 0),     MaxPool(dtype, 1, 16, 10, 13, 3, 3, 2, 0, 0, 0, 0, true),
      MaxPool(dtype, 2, 130, 7, 7, 3, 3, 2, 1, 1, 1, 1),
  };
  Pool2dProblem global = MaxPool(dtype, 2, 48, 7, 5, 1, 1, 1, 0, 0, 0, 0);
  global.mode = PoolMode::kGlobalMax;
  problems.push_back(global);
  return problems;
}

TEST(Pool2dOnednnTest, EightBitMaxPoolingMatchesTheDefinition) {
  const Pool2dOnednnNhwc algorithm;
  std::unique_ptr<CpuDevice> device = TwoThreadDevice();
  ASSERT_NE(device, nullptr);
  for (const Pool2dProblem& p : EightBitProblems(DataType::kUInt8)) ExpectMatchesDefinition<uint8_t>(algorithm, p, *device);
  for (const Pool2dProblem& p : EightBitProblems(DataType::kInt8)) ExpectMatchesDefinition<int8_t>(algorithm, p, *device);
}

// 8-bit averages are no problem at all (they round); 8-bit max pooling is NHWC's alone, and the direct CPU pool
// leaves it to oneDNN.
TEST(Pool2dOnednnTest, EightBitPoolingOnlyAsNhwcMaximum) {
  Pool2dProblem average = MaxPool(DataType::kUInt8, 1, 16, 8, 8, 2, 2, 2, 0, 0, 0, 0);
  average.mode = PoolMode::kAverage;
  const absl::Status invalid = average.Validate();
  EXPECT_TRUE(absl::IsInvalidArgument(invalid)) << invalid;
  EXPECT_THAT(invalid.message(), HasSubstr("data type must be FP32, FP16 or BF16, got UINT8"));

  Pool2dProblem nchw = MaxPool(DataType::kUInt8, 1, 16, 8, 8, 2, 2, 2, 0, 0, 0, 0);
  nchw.layout = Layout::kNCHW;
  EXPECT_THAT(nchw.Validate(), IsOk());
  const absl::Status declined = Pool2dOnednnNchw().CanImplement(nchw);
  EXPECT_TRUE(absl::IsUnimplemented(declined)) << declined;
  EXPECT_THAT(declined.message(), HasSubstr("8-bit max pooling runs on cpu.pool2d.onednn_nhwc"));

  const absl::Status direct = CpuPool2dAlgorithm().CanImplement(MaxPool(DataType::kUInt8, 1, 16, 8, 8, 2, 2, 2, 0, 0, 0, 0));
  EXPECT_TRUE(absl::IsUnimplemented(direct)) << direct;
  EXPECT_THAT(direct.message(), HasSubstr("FP32, FP16 or BF16 only"));
}

}  // namespace
}  // namespace convoy::cpu
