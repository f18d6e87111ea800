// CUDA's 16-bit floating point types for the emulation: __half / half / __half2 (IEEE binary16) and
// __nv_bfloat16 / nv_bfloat16 / __nv_bfloat162, with the cuda_fp16.h / cuda_bf16.h conversion and arithmetic
// intrinsics kernels use. Conversions from float round to nearest, ties to even, bit-exact to the GPU's cvt.rn
// (a NaN becomes the canonical 0x7FFF, as on the GPU); conversions to float are exact. Arithmetic computes in float
// and rounds once, which is exact for +, -, *, / of 16-bit values (float has more than 2p+2 bits).
//
// Host code may use these types too (tests build inputs with them). Only for emulation builds and host code: under
// nvcc, cuda_compat.cuh includes the real cuda_fp16.h / cuda_bf16.h instead.
#ifndef CONVOY_KERNELS_CUDA_EMULATION_FLOAT16_H_
#define CONVOY_KERNELS_CUDA_EMULATION_FLOAT16_H_

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cuda_emulation/vector_types.h"

namespace convoy::cuda_emulation {

inline uint32_t FloatBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

inline float BitsToFloat(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

// float -> binary16, round to nearest even.
inline uint16_t FloatToHalfBits(float value) {
  const uint32_t bits = FloatBits(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return 0x7FFF;           // NaN: canonical, as cvt.rn.f16.f32
  if (magnitude >= 0x477FF000u) return sign | 0x7C00u;  // rounds to (or is) infinity: >= 65520
  if (magnitude < 0x38800000u) {                        // below 2^-14: zero or subnormal
    // Adding 0.5 puts the value's 2^-24 multiples into the low mantissa bits, rounded to nearest even by the FPU.
    const float shifted = BitsToFloat(magnitude) + 0.5f;
    return sign | static_cast<uint16_t>(FloatBits(shifted) - 0x3F000000u);
  }
  const uint32_t odd = (magnitude >> 13) & 1u;
  magnitude += 0xC8000FFFu + odd;  // rebias the exponent (-112 << 23) and round the 13 dropped bits to even
  return sign | static_cast<uint16_t>(magnitude >> 13);
}

// binary16 -> float, exact.
inline float HalfBitsToFloat(uint16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  const uint32_t exponent = (half >> 10) & 0x1Fu;
  const uint32_t mantissa = half & 0x3FFu;
  if (exponent == 0x1F) return BitsToFloat(sign | 0x7F800000u | (mantissa << 13));
  if (exponent == 0) {
    const float subnormal = static_cast<float>(mantissa) * 5.9604644775390625e-8f;  // mantissa * 2^-24, exact
    return sign != 0 ? -subnormal : subnormal;
  }
  return BitsToFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

// float -> bfloat16, round to nearest even (NaN becomes the canonical 0x7FFF).
inline uint16_t FloatToBfloat16Bits(float value) {
  const uint32_t bits = FloatBits(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FFF;
  return static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

inline float Bfloat16BitsToFloat(uint16_t bits) { return BitsToFloat(static_cast<uint32_t>(bits) << 16); }

}  // namespace convoy::cuda_emulation

struct __half {
  uint16_t __x;  // the bits, named as in cuda_fp16.h
  __half() = default;
  __half(float value) : __x(convoy::cuda_emulation::FloatToHalfBits(value)) {}     // NOLINT: implicit as in CUDA
  __half(double value) : __half(static_cast<float>(value)) {}                      // NOLINT
  __half(int value) : __half(static_cast<float>(value)) {}                         // NOLINT
  operator float() const { return convoy::cuda_emulation::HalfBitsToFloat(__x); }  // NOLINT
};
typedef __half half;

struct __nv_bfloat16 {
  uint16_t __x;
  __nv_bfloat16() = default;
  __nv_bfloat16(float value) : __x(convoy::cuda_emulation::FloatToBfloat16Bits(value)) {}  // NOLINT
  __nv_bfloat16(double value) : __nv_bfloat16(static_cast<float>(value)) {}                // NOLINT
  __nv_bfloat16(int value) : __nv_bfloat16(static_cast<float>(value)) {}                   // NOLINT
  operator float() const { return convoy::cuda_emulation::Bfloat16BitsToFloat(__x); }      // NOLINT
};
typedef __nv_bfloat16 nv_bfloat16;

struct alignas(4) __half2 {
  __half x, y;
};
struct alignas(4) __nv_bfloat162 {
  __nv_bfloat16 x, y;
};
typedef __half2 half2;
typedef __nv_bfloat162 nv_bfloat162;

// Conversions.
inline __half __float2half(float a) { return __half(a); }
inline __half __float2half_rn(float a) { return __half(a); }
inline float __half2float(__half a) { return static_cast<float>(a); }
inline __nv_bfloat16 __float2bfloat16(float a) { return __nv_bfloat16(a); }
inline __nv_bfloat16 __float2bfloat16_rn(float a) { return __nv_bfloat16(a); }
inline float __bfloat162float(__nv_bfloat16 a) { return static_cast<float>(a); }
inline unsigned short __half_as_ushort(__half a) { return a.__x; }            // NOLINT: CUDA's type
inline short __half_as_short(__half a) { return static_cast<short>(a.__x); }  // NOLINT
inline __half __ushort_as_half(unsigned short bits) {                         // NOLINT
  __half h;
  h.__x = bits;
  return h;
}
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 a) { return a.__x; }  // NOLINT
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short bits) {               // NOLINT
  __nv_bfloat16 b;
  b.__x = bits;
  return b;
}
inline __half2 __halves2half2(__half lo, __half hi) { return {lo, hi}; }
inline __half2 __floats2half2_rn(float lo, float hi) { return {__half(lo), __half(hi)}; }
inline __half2 __float2half2_rn(float a) { return {__half(a), __half(a)}; }
inline __half2 __float22half2_rn(float2 a) { return {__half(a.x), __half(a.y)}; }
inline float2 __half22float2(__half2 a) { return {static_cast<float>(a.x), static_cast<float>(a.y)}; }
inline __half __low2half(__half2 a) { return a.x; }
inline __half __high2half(__half2 a) { return a.y; }
inline float __low2float(__half2 a) { return static_cast<float>(a.x); }
inline float __high2float(__half2 a) { return static_cast<float>(a.y); }
inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 lo, __nv_bfloat16 hi) { return {lo, hi}; }
inline __nv_bfloat162 __floats2bfloat162_rn(float lo, float hi) { return {__nv_bfloat16(lo), __nv_bfloat16(hi)}; }
inline __nv_bfloat162 __float2bfloat162_rn(float a) { return {__nv_bfloat16(a), __nv_bfloat16(a)}; }
inline __nv_bfloat162 __float22bfloat162_rn(float2 a) { return {__nv_bfloat16(a.x), __nv_bfloat16(a.y)}; }
inline float2 __bfloat1622float2(__nv_bfloat162 a) { return {static_cast<float>(a.x), static_cast<float>(a.y)}; }
inline __nv_bfloat16 __low2bfloat16(__nv_bfloat162 a) { return a.x; }
inline __nv_bfloat16 __high2bfloat16(__nv_bfloat162 a) { return a.y; }

// Arithmetic: computed in float, rounded once.
#define CONVOY_EMULATION_F16_ARITHMETIC(T, T2)                                                                   \
  inline T operator+(T a, T b) { return T(static_cast<float>(a) + static_cast<float>(b)); }                      \
  inline T operator-(T a, T b) { return T(static_cast<float>(a) - static_cast<float>(b)); }                      \
  inline T operator*(T a, T b) { return T(static_cast<float>(a) * static_cast<float>(b)); }                      \
  inline T operator/(T a, T b) { return T(static_cast<float>(a) / static_cast<float>(b)); }                      \
  inline T operator-(T a) { return T(-static_cast<float>(a)); }                                                  \
  inline T& operator+=(T& a, T b) { return a = a + b; }                                                          \
  inline T& operator-=(T& a, T b) { return a = a - b; }                                                          \
  inline T& operator*=(T& a, T b) { return a = a * b; }                                                          \
  inline T& operator/=(T& a, T b) { return a = a / b; }                                                          \
  inline bool operator==(T a, T b) { return static_cast<float>(a) == static_cast<float>(b); }                    \
  inline bool operator!=(T a, T b) { return static_cast<float>(a) != static_cast<float>(b); }                    \
  inline bool operator<(T a, T b) { return static_cast<float>(a) < static_cast<float>(b); }                      \
  inline bool operator>(T a, T b) { return static_cast<float>(a) > static_cast<float>(b); }                      \
  inline bool operator<=(T a, T b) { return static_cast<float>(a) <= static_cast<float>(b); }                    \
  inline bool operator>=(T a, T b) { return static_cast<float>(a) >= static_cast<float>(b); }                    \
  inline T __hadd(T a, T b) { return a + b; }                                                                    \
  inline T __hsub(T a, T b) { return a - b; }                                                                    \
  inline T __hmul(T a, T b) { return a * b; }                                                                    \
  inline T __hdiv(T a, T b) { return a / b; }                                                                    \
  inline T __hneg(T a) { return -a; }                                                                            \
  inline T __habs(T a) { return T(std::fabs(static_cast<float>(a))); }                                           \
  inline T __hfma(T a, T b, T c) {                                                                               \
    return T(static_cast<float>(                                                                                 \
        std::fma(double{static_cast<float>(a)}, double{static_cast<float>(b)}, double{static_cast<float>(c)}))); \
  }                                                                                                              \
  inline T __hmax(T a, T b) { return T(std::fmax(static_cast<float>(a), static_cast<float>(b))); }               \
  inline T __hmin(T a, T b) { return T(std::fmin(static_cast<float>(a), static_cast<float>(b))); }               \
  inline bool __heq(T a, T b) { return a == b; }                                                                 \
  inline bool __hne(T a, T b) { return a != b; }                                                                 \
  inline bool __hlt(T a, T b) { return a < b; }                                                                  \
  inline bool __hgt(T a, T b) { return a > b; }                                                                  \
  inline bool __hle(T a, T b) { return a <= b; }                                                                 \
  inline bool __hge(T a, T b) { return a >= b; }                                                                 \
  inline bool __hisnan(T a) { return std::isnan(static_cast<float>(a)); }                                        \
  inline bool __hisinf(T a) { return std::isinf(static_cast<float>(a)); }                                        \
  inline T2 __hadd2(T2 a, T2 b) { return {a.x + b.x, a.y + b.y}; }                                               \
  inline T2 __hsub2(T2 a, T2 b) { return {a.x - b.x, a.y - b.y}; }                                               \
  inline T2 __hmul2(T2 a, T2 b) { return {a.x * b.x, a.y * b.y}; }                                               \
  inline T2 __hfma2(T2 a, T2 b, T2 c) { return {__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)}; }                 \
  inline T2 __hmax2(T2 a, T2 b) { return {__hmax(a.x, b.x), __hmax(a.y, b.y)}; }                                 \
  inline T2 __hmin2(T2 a, T2 b) { return {__hmin(a.x, b.x), __hmin(a.y, b.y)}; }                                 \
  inline T2 operator+(T2 a, T2 b) { return __hadd2(a, b); }                                                      \
  inline T2 operator-(T2 a, T2 b) { return __hsub2(a, b); }                                                      \
  inline T2 operator*(T2 a, T2 b) { return __hmul2(a, b); }
CONVOY_EMULATION_F16_ARITHMETIC(__half, __half2)
CONVOY_EMULATION_F16_ARITHMETIC(__nv_bfloat16, __nv_bfloat162)
#undef CONVOY_EMULATION_F16_ARITHMETIC

#endif  // CONVOY_KERNELS_CUDA_EMULATION_FLOAT16_H_
