// Conversions from IEEE half (FP16) and bfloat16 bit patterns to float, shared by the ONNX and safetensors readers.
#ifndef CONVOY_SERVER_REPOSITORY_FLOAT16_H_
#define CONVOY_SERVER_REPOSITORY_FLOAT16_H_

#include <cmath>
#include <cstdint>
#include <cstring>

namespace convoy::repository {

inline float HalfBitsToFloat(uint16_t bits) {
  const int sign = (bits >> 15) & 1;
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  float magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);  // subnormal
  } else if (exponent == 31) {
    magnitude = mantissa ? NAN : INFINITY;
  } else {
    magnitude = std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
  }
  return sign ? -magnitude : magnitude;
}

inline float BFloat16BitsToFloat(uint16_t bits) {
  uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float out;
  std::memcpy(&out, &wide, sizeof(out));
  return out;
}

}  // namespace convoy::repository

#endif  // CONVOY_SERVER_REPOSITORY_FLOAT16_H_
