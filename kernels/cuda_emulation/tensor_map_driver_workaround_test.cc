// CUTLASS's tensor-map driver workaround (tensor_map_driver_workaround.h): the condition (driver <= 13.1 and a tensor
// spanning under 128 KiB), the span of packed and strided tensors, and the bit cleared (bit 21 of 64-bit word 1, no
// other bit touched). With CONVOY_TEST_REAL_TENSOR_MAP (the nvcc build's variant of this test) it also checks that the
// real encode path (tensor_map_host.h) applies it to what the driver returned.
#include "kernels/cuda_emulation/tensor_map_driver_workaround.h"

#include <cstdint>
#include <cstring>

#include "gtest/gtest.h"

#if defined(CONVOY_TEST_REAL_TENSOR_MAP)
#include "kernels/cuda_emulation/tensor_map_host.h"
#endif

namespace convoy::cuda {
namespace {

struct alignas(64) Map {
  uint64_t words[16];
};

Map AllOnes() {
  Map map;
  std::memset(map.words, 0xFF, sizeof(map.words));
  return map;
}

TEST(TensorMapDriverWorkaround, AppliesUpToDriver13Point1ForTensorsUnder128KiB) {
  EXPECT_TRUE(TensorMapNeedsDriverWorkaround(13010, 131071));
  EXPECT_TRUE(TensorMapNeedsDriverWorkaround(13000, 1024));   // CUDA 13.0 (the H200 check machine's driver 580)
  EXPECT_TRUE(TensorMapNeedsDriverWorkaround(12080, 2));      // 12.8
  EXPECT_FALSE(TensorMapNeedsDriverWorkaround(13010, 131072));  // exactly 128 KiB: not under it
  EXPECT_FALSE(TensorMapNeedsDriverWorkaround(13020, 1024));    // 13.2 and newer: fixed drivers
  EXPECT_FALSE(TensorMapNeedsDriverWorkaround(14000, 16));
}

TEST(TensorMapDriverWorkaround, SpanIsCosizeTimesElementBytes) {
  // Packed NHWC [N=1, H=8, W=8, C=64] FP16 as cuTensorMapEncodeIm2col gets it: dims innermost first, byte strides of
  // dimensions 1.. : 8 KiB.
  const uint64_t dims[4] = {64, 8, 8, 1};
  const uint64_t strides[3] = {64 * 2, 64 * 2 * 8, 64 * 2 * 8 * 8};
  EXPECT_EQ(TensorMapSpanBytes(4, dims, strides, 2), 8192u);
  // A padded row pitch: 3 rows of 10 floats, 64-byte pitch: the last row ends after 10 floats, 2 * 64 + 40 bytes.
  const uint64_t row_dims[2] = {10, 3};
  const uint64_t row_strides[1] = {64};
  EXPECT_EQ(TensorMapSpanBytes(2, row_dims, row_strides, 4), 2u * 64 + 40);
  const uint64_t empty[2] = {0, 3};
  EXPECT_EQ(TensorMapSpanBytes(2, empty, row_strides, 4), 0u);
  // [K=64][R*S=9][C=64] FP16 filter: 73728 bytes (< 128 KiB); [256][9][64]: 294912 (not).
  const uint64_t w_dims[3] = {64, 9, 64};
  const uint64_t w_strides[2] = {128, 128 * 9};
  EXPECT_EQ(TensorMapSpanBytes(3, w_dims, w_strides, 2), 73728u);
  const uint64_t big_dims[3] = {64, 9, 256};
  EXPECT_EQ(TensorMapSpanBytes(3, big_dims, w_strides, 2), 294912u);
}

TEST(TensorMapDriverWorkaround, ClearsOnlyBit21OfTheSecondWord) {
  Map map = AllOnes();
  EXPECT_TRUE(ApplyTensorMapDriverWorkaround(&map, 13000, 8192));
  EXPECT_EQ(map.words[1], ~(uint64_t{1} << 21));
  for (int w = 0; w < 16; ++w) {
    if (w != 1) {
      EXPECT_EQ(map.words[w], ~uint64_t{0}) << "word " << w;
    }
  }
  Map big = AllOnes();
  EXPECT_FALSE(ApplyTensorMapDriverWorkaround(&big, 13000, 1 << 20));
  EXPECT_EQ(big.words[1], ~uint64_t{0});
  Map fixed_driver = AllOnes();
  EXPECT_FALSE(ApplyTensorMapDriverWorkaround(&fixed_driver, 13020, 8192));
  EXPECT_EQ(fixed_driver.words[1], ~uint64_t{0});
  Map zero{};
  ClearTensorMapDriverBit(&zero);  // a clear bit stays clear
  EXPECT_EQ(zero.words[1], 0u);
}

#if defined(CONVOY_TEST_REAL_TENSOR_MAP)
// The real encode path runs the workaround on the driver's result (here a stand-in map of all ones, as if the driver
// had set every bit), with the driver version cudaDriverGetVersion reports on this machine (0 without a driver).
TEST(TensorMapDriverWorkaround, RealEncodePathAppliesIt) {
  CUtensorMap map;
  std::memset(&map, 0xFF, sizeof(map));
  const cuuint64_t dims[2] = {64, 16};
  const cuuint64_t strides[1] = {128};
  ASSERT_EQ(tensor_map_internal::FinishEncode(CUDA_SUCCESS, &map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, dims, strides),
            CUDA_SUCCESS);
  uint64_t word1 = 0;
  std::memcpy(&word1, reinterpret_cast<const unsigned char*>(&map) + 8, 8);
  const int driver = tensor_map_internal::DriverVersion();
  const bool cleared = (word1 & (uint64_t{1} << 21)) == 0;
  EXPECT_EQ(cleared, driver <= kTensorMapWorkaroundNewestDriver) << "driver " << driver;
  // A failed encode is returned untouched.
  CUtensorMap failed;
  std::memset(&failed, 0xFF, sizeof(failed));
  EXPECT_EQ(tensor_map_internal::FinishEncode(CUDA_ERROR_INVALID_VALUE, &failed, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2,
                                              dims, strides),
            CUDA_ERROR_INVALID_VALUE);
  std::memcpy(&word1, reinterpret_cast<const unsigned char*>(&failed) + 8, 8);
  EXPECT_EQ(word1, ~uint64_t{0});
}
#endif

}  // namespace
}  // namespace convoy::cuda
