// Host-side tensor helpers for kernel tests: seeded random fills, NaN poisoning, reading any dtype back as floats,
// and element-wise comparison with a stated tolerance that reports the worst elements.
//
//   CONVOY_ASSERT_OK_AND_ASSIGN(HostBuffer x, RandomBuffer(DataType::kFloat16, 1000, /*seed=*/7));
//   PoisonWithNaN(y.data(), DataType::kFloat32, 1000);
//   EXPECT_THAT(CompareFloats(actual, expected, Tolerance{1e-4, 1e-5}), IsOk());
#ifndef CONVOY_KERNELS_TESTING_TEST_TENSORS_H_
#define CONVOY_KERNELS_TESTING_TEST_TENSORS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/common/dtype.h"
#include "kernels/common/tensor.h"
#include "kernels/common/tolerance.h"

namespace convoy::testing {

// Fills `count` elements with uniform values in [lo, hi) from a generator seeded with `seed` (rounded to `dtype`).
// UINT8 buffers get uniform integers in [0, 255] regardless of lo/hi.
void FillUniform(void* data, DataType dtype, int64_t count, uint32_t seed, float lo = -1.0f, float hi = 1.0f);
// `count` FP32 values from FillUniform, for tests that build their tensors as std::vector<float>.
std::vector<float> RandomFloats(size_t count, uint32_t seed, float lo = -1.0f, float hi = 1.0f);
// A fresh 64-byte aligned buffer of `count` elements filled by FillUniform.
absl::StatusOr<HostBuffer> RandomBuffer(DataType dtype, int64_t count, uint32_t seed, float lo = -1.0f,
                                        float hi = 1.0f);
// Sets every element to quiet NaN (floating types) or to 0xA5 bytes (integer types), so unwritten outputs show.
void PoisonWithNaN(void* data, DataType dtype, int64_t count);
// Reads `count` elements of any dtype as float.
std::vector<float> ToFloats(const void* data, DataType dtype, int64_t count);

// |actual - expected| <= absolute + relative * |expected| passes; NaN anywhere in actual fails unless expected is NaN
// at the same place (kernels/common/tolerance.h).
using ::convoy::Tolerance;

// OK, or INTERNAL naming how many elements differ and the worst few (index, actual, expected, allowed).
absl::Status CompareFloats(const std::vector<float>& actual, const std::vector<float>& expected,
                           const Tolerance& tolerance);

}  // namespace convoy::testing

#endif  // CONVOY_KERNELS_TESTING_TEST_TENSORS_H_
