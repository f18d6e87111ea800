// Element data types of the kernel library and host-side FP16/BF16 conversions.
//
// FP32, FP16 and BF16 are computed; UINT8 is the input type of image pre-processing; INT64 travels through the server
// (labels, shape tensors) but no kernel computes in it; INT8 is reserved for quantized kernels.
#ifndef CONVOY_KERNELS_COMMON_DTYPE_H_
#define CONVOY_KERNELS_COMMON_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace convoy {

enum class DataType : uint8_t {
  kFloat32 = 0,
  kFloat16 = 1,
  kBFloat16 = 2,
  kInt8 = 3,  // reserved
  kUInt8 = 4,
  kInt64 = 5,
  kInt32 = 6,
};

// Bytes per element.
size_t DataTypeSize(DataType dtype);
// "FP32", "FP16", "BF16", "INT8", "UINT8", "INT64", "INT32" (the KServe v2 spelling).
absl::string_view DataTypeName(DataType dtype);
absl::StatusOr<DataType> ParseDataType(absl::string_view name);
// True for the types kernels compute in (FP32, FP16, BF16).
bool IsFloatingPoint(DataType dtype);

// IEEE binary16 conversion, round to nearest even; NaN and infinities preserved.
uint16_t FloatToHalfBits(float value);
float HalfBitsToFloat(uint16_t bits);
// bfloat16 conversion, round to nearest even; NaN stays NaN.
uint16_t FloatToBFloat16Bits(float value);
float BFloat16BitsToFloat(uint16_t bits);

// Reads element i of a buffer of `dtype` as float (FP32/FP16/BF16/UINT8/INT64/INT8).
float LoadAsFloat(const void* data, DataType dtype, size_t i);
// Writes `value` as element i of a buffer of `dtype` (rounded for FP16/BF16, saturated for integers).
void StoreFromFloat(void* data, DataType dtype, size_t i, float value);

}  // namespace convoy

#endif  // CONVOY_KERNELS_COMMON_DTYPE_H_
