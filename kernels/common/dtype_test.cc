#include "kernels/common/dtype.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "gtest/gtest.h"

namespace convoy {
namespace {

// Independent FP16 decoding from the IEEE definition, used to check round-to-nearest-even of FloatToHalfBits.
double DecodeHalf(uint16_t bits) {
  const int sign = bits >> 15 ? -1 : 1;
  const int exp = (bits >> 10) & 0x1f;
  const int mant = bits & 0x3ff;
  if (exp == 0) return sign * std::ldexp(mant, -24);
  if (exp == 31) return mant ? std::nan("") : sign * std::numeric_limits<double>::infinity();
  return sign * std::ldexp(1024 + mant, exp - 25);
}

TEST(DtypeTest, HalfRoundTripsEveryFiniteHalf) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const uint16_t h = static_cast<uint16_t>(bits);
    if (((h >> 10) & 0x1f) == 0x1f) continue;  // Inf/NaN checked below
    const float f = HalfBitsToFloat(h);
    EXPECT_EQ(static_cast<double>(f), DecodeHalf(h)) << "bits " << bits;
    EXPECT_EQ(FloatToHalfBits(f), h) << "bits " << bits;
  }
}

TEST(DtypeTest, HalfRoundsToNearestEvenOnRandomFloats) {
  std::mt19937 rng(20261129);
  std::uniform_real_distribution<float> exponent(-26.0f, 16.0f);  // up to 2^15 * (2 - ulp): finite in FP16
  for (int i = 0; i < 200000; ++i) {
    const float f = std::ldexp(1.0f + static_cast<float>(rng() % 8388608) / 8388608.0f, static_cast<int>(exponent(rng))) *
                    ((rng() & 1) ? -1.0f : 1.0f);
    if (std::fabs(f) >= 65520.0f) continue;  // rounds to infinity, covered by HalfSpecialValues
    const uint16_t h = FloatToHalfBits(f);
    const double got = DecodeHalf(h);
    // No other half is closer; on a tie the even mantissa wins.
    const double err = std::fabs(got - f);
    for (int delta : {-1, 1}) {
      const uint16_t n = static_cast<uint16_t>(h + delta);
      if ((n & 0x7fff) >= 0x7c00 || ((n ^ h) & 0x8000)) continue;
      const double other = std::fabs(DecodeHalf(n) - f);
      ASSERT_LE(err, other) << "value " << f;
      if (err == other) {
        ASSERT_EQ(h & 1, 0) << "tie not to even for " << f;
      }
    }
  }
}

TEST(DtypeTest, HalfSpecialValues) {
  EXPECT_EQ(FloatToHalfBits(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(FloatToHalfBits(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(FloatToHalfBits(70000.0f), 0x7c00);  // overflow rounds to infinity
  EXPECT_TRUE(std::isnan(HalfBitsToFloat(FloatToHalfBits(std::nanf("")))));
  EXPECT_EQ(FloatToHalfBits(-0.0f), 0x8000);
}

TEST(DtypeTest, BFloat16RoundsToNearestEven) {
  std::mt19937 rng(7);
  for (int i = 0; i < 100000; ++i) {
    uint32_t u = rng();
    float f;
    std::memcpy(&f, &u, 4);
    if (!std::isfinite(f)) continue;
    const uint16_t b = FloatToBFloat16Bits(f);
    const double got = BFloat16BitsToFloat(b);
    const uint32_t lower = u & 0xffff0000u, upper = lower + 0x10000u;
    float lo, hi;
    std::memcpy(&lo, &lower, 4);
    std::memcpy(&hi, &upper, 4);
    const double dlo = std::fabs(static_cast<double>(lo) - f), dhi = std::fabs(static_cast<double>(hi) - f);
    if (std::isinf(hi)) continue;
    const double expected = dlo < dhi ? lo : dhi < dlo ? hi : (((lower >> 16) & 1) ? hi : lo);
    ASSERT_EQ(got, expected) << "value " << f;
  }
  EXPECT_TRUE(std::isnan(BFloat16BitsToFloat(FloatToBFloat16Bits(std::nanf("")))));
}

TEST(DtypeTest, NamesParseBack) {
  for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16, DataType::kInt8, DataType::kUInt8,
                     DataType::kInt64}) {
    auto parsed = ParseDataType(DataTypeName(t));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, t);
  }
  EXPECT_FALSE(ParseDataType("FP64").ok());
}

TEST(DtypeTest, StoreSaturatesIntegers) {
  uint8_t u8[3];
  StoreFromFloat(u8, DataType::kUInt8, 0, 300.0f);
  StoreFromFloat(u8, DataType::kUInt8, 1, -5.0f);
  StoreFromFloat(u8, DataType::kUInt8, 2, 41.6f);
  EXPECT_EQ(u8[0], 255);
  EXPECT_EQ(u8[1], 0);
  EXPECT_EQ(u8[2], 42);
}

}  // namespace
}  // namespace convoy
