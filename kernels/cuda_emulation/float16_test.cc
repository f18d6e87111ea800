// Bit-exactness of the emulation's half and bfloat16 conversions: every binary16 value round-trips; float -> half
// matches GCC's _Float16 conversion (IEEE round to nearest even, libgcc) on random and boundary bit patterns; float ->
// bfloat16 matches a nearest-even rounding computed independently in double.
#include "kernels/cuda_emulation/float16.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace convoy::cuda_emulation {
namespace {

float FromBits(uint32_t bits) { return BitsToFloat(bits); }

// Random float bit patterns plus the neighbourhoods of the binary16 boundaries (overflow, subnormals, ties).
std::vector<uint32_t> InterestingFloatBits() {
  std::mt19937 random(std::random_device{}());
  std::vector<uint32_t> bits;
  for (int i = 0; i < 400000; ++i) bits.push_back(random());
  for (float center : {65504.0f, 65520.0f, 6.1035156e-05f, 5.9604645e-08f, 2.9802322e-08f, 1.0f, 0.0f}) {
    for (int delta = -2000; delta <= 2000; ++delta) {
      const uint32_t b = FloatBits(center) + static_cast<uint32_t>(delta);
      bits.push_back(b);
      bits.push_back(b | 0x80000000u);
    }
  }
  return bits;
}

TEST(HalfTest, EveryHalfValueRoundTripsThroughFloat) {
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    const float f = HalfBitsToFloat(static_cast<uint16_t>(h));
    const bool is_nan = (h & 0x7C00) == 0x7C00 && (h & 0x03FF) != 0;
    if (is_nan) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << h;
      EXPECT_EQ(FloatToHalfBits(f), 0x7FFF) << std::hex << h;
    } else {
      EXPECT_EQ(FloatToHalfBits(f), h) << std::hex << h;
      EXPECT_EQ(static_cast<float>(static_cast<_Float16>(f)), f) << std::hex << h;  // exact in binary16
    }
  }
}

TEST(HalfTest, FloatToHalfMatchesIeeeRoundToNearestEven) {
  for (uint32_t bits : InterestingFloatBits()) {
    const float f = FromBits(bits);
    if (std::isnan(f)) continue;
    const _Float16 reference = static_cast<_Float16>(f);
    uint16_t reference_bits;
    std::memcpy(&reference_bits, &reference, sizeof(reference_bits));
    ASSERT_EQ(FloatToHalfBits(f), reference_bits) << "float bits 0x" << std::hex << bits << " = " << f;
  }
}

// Nearest bfloat16 to f with ties to even, by comparing the two candidates in double.
uint16_t ReferenceBfloat16(float f) {
  const uint32_t bits = FloatBits(f);
  const uint32_t down = bits & 0xFFFF0000u;  // toward zero
  if (down == bits) return static_cast<uint16_t>(down >> 16);
  const uint32_t up = down + 0x10000u;  // away from zero; 2^128 stands in for it where it overflows to infinity
  const double down_value = FromBits(down);
  const double up_value = std::isinf(FromBits(up)) ? std::copysign(std::ldexp(1.0, 128), f) : double{FromBits(up)};
  const double error_down = std::fabs(f - down_value), error_up = std::fabs(f - up_value);
  if (error_down != error_up) return static_cast<uint16_t>((error_down < error_up ? down : up) >> 16);
  return static_cast<uint16_t>((((down >> 16) & 1u) ? up : down) >> 16);
}

TEST(Bfloat16Test, FloatToBfloat16MatchesNearestEven) {
  for (uint32_t bits : InterestingFloatBits()) {
    const float f = FromBits(bits);
    if (std::isnan(f)) {
      EXPECT_EQ(FloatToBfloat16Bits(f), 0x7FFF);
      continue;
    }
    ASSERT_EQ(FloatToBfloat16Bits(f), ReferenceBfloat16(f)) << "float bits 0x" << std::hex << bits << " = " << f;
  }
}

TEST(Bfloat16Test, EveryBfloat16ValueRoundTripsThroughFloat) {
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    const float f = Bfloat16BitsToFloat(static_cast<uint16_t>(b));
    if (std::isnan(f)) continue;
    EXPECT_EQ(FloatToBfloat16Bits(f), b) << std::hex << b;
  }
}

TEST(HalfTypesTest, ArithmeticRoundsOnceLikeTheConversions) {
  std::mt19937 random(std::random_device{}());
  std::uniform_real_distribution<float> uniform(-100.0f, 100.0f);
  for (int i = 0; i < 10000; ++i) {
    const __half a(uniform(random)), b(uniform(random));
    EXPECT_EQ(__half_as_ushort(a * b), FloatToHalfBits(static_cast<float>(a) * static_cast<float>(b)));
    EXPECT_EQ(__half_as_ushort(__hadd(a, b)), FloatToHalfBits(static_cast<float>(a) + static_cast<float>(b)));
    const __nv_bfloat16 c(uniform(random)), d(uniform(random));
    EXPECT_EQ(__bfloat16_as_ushort(c - d), FloatToBfloat16Bits(static_cast<float>(c) - static_cast<float>(d)));
    const float2 pair = __half22float2(__floats2half2_rn(static_cast<float>(a), static_cast<float>(b)));
    EXPECT_EQ(pair.x, static_cast<float>(a));
    EXPECT_EQ(pair.y, static_cast<float>(b));
  }
}

}  // namespace
}  // namespace convoy::cuda_emulation
