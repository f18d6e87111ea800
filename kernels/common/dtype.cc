#include "kernels/common/dtype.h"

#include <cmath>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"

namespace convoy {
namespace {

uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

}  // namespace

size_t DataTypeSize(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32: return 4;
    case DataType::kFloat16: return 2;
    case DataType::kBFloat16: return 2;
    case DataType::kInt8: return 1;
    case DataType::kUInt8: return 1;
    case DataType::kInt64: return 8;
    case DataType::kInt32: return 4;
  }
  return 0;
}

absl::string_view DataTypeName(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32: return "FP32";
    case DataType::kFloat16: return "FP16";
    case DataType::kBFloat16: return "BF16";
    case DataType::kInt8: return "INT8";
    case DataType::kUInt8: return "UINT8";
    case DataType::kInt64: return "INT64";
    case DataType::kInt32: return "INT32";
  }
  return "UNKNOWN";
}

absl::StatusOr<DataType> ParseDataType(absl::string_view name) {
  for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16, DataType::kInt8,
                     DataType::kUInt8, DataType::kInt64, DataType::kInt32}) {
    if (name == DataTypeName(t)) return t;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown data type '", name, "'; expected one of FP32, FP16, BF16, INT8, UINT8, INT64, INT32"));
}

bool IsFloatingPoint(DataType dtype) {
  return dtype == DataType::kFloat32 || dtype == DataType::kFloat16 || dtype == DataType::kBFloat16;
}

uint16_t FloatToHalfBits(float value) {
  const uint32_t f = FloatBits(value);
  const uint32_t sign = (f >> 16) & 0x8000u;
  const uint32_t abs = f & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // Inf or NaN
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u | ((abs >> 13) & 0x3ffu) : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to infinity
  if (abs < 0x38800000u) {                                                // subnormal or zero in half
    // Shift the implicit-one mantissa into half's subnormal range with round to nearest even.
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // below half the smallest subnormal
    const uint32_t exp = abs >> 23;
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - exp;  // 14..24
    uint32_t half_mant = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (half_mant & 1u))) ++half_mant;
    return static_cast<uint16_t>(sign | half_mant);
  }
  uint32_t rounded = abs - 0x38000000u;  // rebias exponent 127 -> 15
  const uint32_t rem = rounded & 0x1fffu;
  rounded >>= 13;
  if (rem > 0x1000u || (rem == 0x1000u && (rounded & 1u))) ++rounded;
  return static_cast<uint16_t>(sign | rounded);
}

float HalfBitsToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exp = (bits >> 10) & 0x1fu;
  uint32_t mant = bits & 0x3ffu;
  if (exp == 0x1fu) return BitsFloat(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    if (mant == 0) return BitsFloat(sign);
    // Subnormal: value = mant * 2^-24.
    const float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  return BitsFloat(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t FloatToBFloat16Bits(float value) {
  uint32_t f = FloatBits(value);
  if ((f & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((f >> 16) | 0x40u);  // quiet NaN
  const uint32_t lsb = (f >> 16) & 1u;
  f += 0x7fffu + lsb;
  return static_cast<uint16_t>(f >> 16);
}

float BFloat16BitsToFloat(uint16_t bits) { return BitsFloat(static_cast<uint32_t>(bits) << 16); }

float LoadAsFloat(const void* data, DataType dtype, size_t i) {
  switch (dtype) {
    case DataType::kFloat32: return static_cast<const float*>(data)[i];
    case DataType::kFloat16: return HalfBitsToFloat(static_cast<const uint16_t*>(data)[i]);
    case DataType::kBFloat16: return BFloat16BitsToFloat(static_cast<const uint16_t*>(data)[i]);
    case DataType::kInt8: return static_cast<const int8_t*>(data)[i];
    case DataType::kUInt8: return static_cast<const uint8_t*>(data)[i];
    case DataType::kInt64: return static_cast<float>(static_cast<const int64_t*>(data)[i]);
    case DataType::kInt32: return static_cast<float>(static_cast<const int32_t*>(data)[i]);
  }
  return std::numeric_limits<float>::quiet_NaN();
}

void StoreFromFloat(void* data, DataType dtype, size_t i, float value) {
  auto saturate = [value](float lo, float hi) {
    if (std::isnan(value)) return 0.0f;
    return std::fmin(std::fmax(std::nearbyint(value), lo), hi);
  };
  switch (dtype) {
    case DataType::kFloat32: static_cast<float*>(data)[i] = value; return;
    case DataType::kFloat16: static_cast<uint16_t*>(data)[i] = FloatToHalfBits(value); return;
    case DataType::kBFloat16: static_cast<uint16_t*>(data)[i] = FloatToBFloat16Bits(value); return;
    case DataType::kInt8: static_cast<int8_t*>(data)[i] = static_cast<int8_t>(saturate(-128, 127)); return;
    case DataType::kUInt8: static_cast<uint8_t*>(data)[i] = static_cast<uint8_t>(saturate(0, 255)); return;
    case DataType::kInt64: static_cast<int64_t*>(data)[i] = static_cast<int64_t>(value); return;
    case DataType::kInt32: static_cast<int32_t*>(data)[i] = static_cast<int32_t>(value); return;
  }
}

}  // namespace convoy
