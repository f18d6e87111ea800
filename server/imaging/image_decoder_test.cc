#include "server/imaging/image_decoder.h"

#include <random>
#include <string>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "server/imaging/test_images.h"

namespace convoy::imaging {
namespace {

using ::convoy::testing::IsOk;
using ::testing::HasSubstr;
using testing::EncodeJpeg;
using testing::EncodePng;
using testing::PngKind;
using testing::RandomImage;

MATCHER_P(IsInvalidArgumentWith, substring, "") {
  *result_listener << "status: " << arg.status();
  return arg.status().code() == absl::StatusCode::kInvalidArgument &&
         absl::StrContains(arg.status().message(), substring);
}

double MeanAbsoluteDifference(const RgbImage& a, const RgbImage& b) {
  double sum = 0;
  for (size_t i = 0; i < a.pixels.size(); ++i) sum += std::abs(int(a.pixels[i]) - int(b.pixels[i]));
  return sum / a.pixels.size();
}

class PngKindTest : public ::testing::TestWithParam<PngKind> {};

// PNG is lossless: every colour type decodes to exactly the RGB the encoder was given (gray replicated, alpha
// dropped, 16-bit samples' high byte, palette entries), at odd sizes.
TEST_P(PngKindTest, DecodesExactly) {
  for (const auto& [height, width, seed] : {std::tuple{37, 53, 1u}, {1, 1, 2u}, {64, 3, 3u}}) {
    RgbImage expected = RandomImage(height, width, seed + 10 * static_cast<int>(GetParam()));
    const std::string png = EncodePng(expected, GetParam());
    const absl::StatusOr<RgbImage> decoded = DecodeImage(png);
    ASSERT_THAT(decoded.status(), IsOk());
    EXPECT_EQ(decoded->height, height);
    EXPECT_EQ(decoded->width, width);
    EXPECT_EQ(decoded->pixels, expected.pixels) << "PNG kind " << static_cast<int>(GetParam());
  }
}

INSTANTIATE_TEST_SUITE_P(EveryColourType, PngKindTest,
                         ::testing::Values(PngKind::kRgb, PngKind::kRgba, PngKind::kGray, PngKind::kGrayAlpha,
                                           PngKind::kRgb16, PngKind::kPalette));

// JPEG is lossy: at quality 95 the decoded pixels stay within a few levels of the original on average.
TEST(ImageDecoderTest, JpegDecodesCloseToTheOriginal) {
  const RgbImage original = RandomImage(48, 80, 7);
  const absl::StatusOr<RgbImage> decoded = DecodeImage(EncodeJpeg(original, 95));
  ASSERT_THAT(decoded.status(), IsOk());
  ASSERT_EQ(decoded->height, 48);
  ASSERT_EQ(decoded->width, 80);
  EXPECT_LT(MeanAbsoluteDifference(*decoded, original), 6.0);
}

TEST(ImageDecoderTest, GrayscaleJpegBecomesRgb) {
  const absl::StatusOr<RgbImage> decoded = DecodeImage(EncodeJpeg(RandomImage(16, 24, 8), 90, /*grayscale=*/true));
  ASSERT_THAT(decoded.status(), IsOk());
  for (size_t i = 0; i < decoded->pixels.size(); i += 3) {
    ASSERT_EQ(decoded->pixels[i], decoded->pixels[i + 1]);
    ASSERT_EQ(decoded->pixels[i], decoded->pixels[i + 2]);
  }
}

// Output (y, x) of each orientation, on a 2x3 image whose pixel (y, x) holds 10 * y + x: Pillow's transposes.
TEST(ImageDecoderTest, ExifOrientationsTurnAsPillowDoes) {
  RgbImage image{2, 3, {}};
  for (int y = 0; y < 2; ++y)
    for (int x = 0; x < 3; ++x)
      for (int c = 0; c < 3; ++c) image.pixels.push_back(static_cast<uint8_t>(10 * y + x));
  const std::vector<std::vector<int>> expected = {
      {},
      {0, 1, 2, 10, 11, 12},    // 1: as stored
      {2, 1, 0, 12, 11, 10},    // 2: mirrored left-right
      {12, 11, 10, 2, 1, 0},    // 3: rotated 180
      {10, 11, 12, 0, 1, 2},    // 4: mirrored top-bottom
      {0, 10, 1, 11, 2, 12},    // 5: transposed (3x2)
      {10, 0, 11, 1, 12, 2},    // 6: rotated 90 clockwise
      {12, 2, 11, 1, 10, 0},    // 7: transversed
      {2, 12, 1, 11, 0, 10},    // 8: rotated 90 counter-clockwise
  };
  for (int orientation = 1; orientation <= 8; ++orientation) {
    const RgbImage turned = ApplyExifOrientation(image, orientation);
    EXPECT_EQ(turned.height, orientation >= 5 ? 3 : 2);
    std::vector<int> values;
    for (size_t i = 0; i < turned.pixels.size(); i += 3) values.push_back(turned.pixels[i]);
    EXPECT_EQ(values, expected[orientation]) << "orientation " << orientation;
  }
}

TEST(ImageDecoderTest, JpegExifOrientationIsReadInBothByteOrdersAndApplied) {
  const std::string plain = EncodeJpeg(RandomImage(20, 30, 9), 90);
  const absl::StatusOr<RgbImage> upright = DecodeImage(plain);
  ASSERT_THAT(upright.status(), IsOk());
  EXPECT_EQ(JpegExifOrientation(plain), 1);
  for (const bool big_endian : {false, true}) {
    for (int orientation = 1; orientation <= 8; ++orientation) {
      const std::string tagged = testing::WithExifOrientation(plain, orientation, big_endian);
      EXPECT_EQ(JpegExifOrientation(tagged), orientation);
      const absl::StatusOr<RgbImage> decoded = DecodeImage(tagged);
      ASSERT_THAT(decoded.status(), IsOk());
      EXPECT_EQ(decoded->pixels, ApplyExifOrientation(*upright, orientation).pixels);
      EXPECT_EQ(decoded->width, orientation >= 5 ? 20 : 30);
    }
  }
}

TEST(ImageDecoderTest, NotAnImageNamesWhatTheBytesStartWith) {
  EXPECT_THAT(DecodeImage(""), IsInvalidArgumentWith("image is empty (0 bytes)"));
  EXPECT_THAT(DecodeImage("GIF89a......"),
              IsInvalidArgumentWith("neither JPEG (starts FF D8 FF) nor PNG (starts 89 50 4E 47 0D 0A 1A 0A): its 12 "
                                    "bytes start 4749463839612e2e"));
  EXPECT_THAT(DecodeImage("\xff\xd8"), IsInvalidArgumentWith("neither JPEG"));
}

TEST(ImageDecoderTest, TruncatedImagesAreRefused) {
  RgbImage image = RandomImage(40, 40, 11);
  const std::string png = EncodePng(image, PngKind::kRgb);
  const std::string jpeg = EncodeJpeg(image, 90);
  EXPECT_THAT(DecodeImage(png.substr(0, png.size() / 2)), IsInvalidArgumentWith("PNG image cannot be read"));
  EXPECT_THAT(DecodeImage(png.substr(0, 20)), IsInvalidArgumentWith("truncated"));
  EXPECT_THAT(DecodeImage(jpeg.substr(0, jpeg.size() / 2)), IsInvalidArgumentWith("JPEG image is corrupt or truncated"));
  EXPECT_THAT(DecodeImage(jpeg.substr(0, 10)), IsInvalidArgumentWith("JPEG image header gives no size (0x0): the data is truncated"));
}

TEST(ImageDecoderTest, CorruptPngChecksumIsRefused) {
  RgbImage image = RandomImage(16, 16, 12);
  std::string png = EncodePng(image, PngKind::kRgb);
  png[png.size() - 20] ^= 0x55;  // inside the IDAT data: its CRC no longer matches
  EXPECT_THAT(DecodeImage(png), IsInvalidArgumentWith("PNG image cannot be read"));
}

// The header's dimensions are checked before pixel memory is allocated: a 100000 x 100000 PNG (40 GB of pixels)
// or a 60000 x 60000 JPEG claimed by a few hundred bytes is refused at once.
TEST(ImageDecoderTest, HugeDimensionsAreRefusedFromTheHeader) {
  RgbImage image = RandomImage(8, 8, 13);
  EXPECT_THAT(DecodeImage(testing::PngClaimingSize(EncodePng(image, PngKind::kRgb), 100000, 100000)),
              IsInvalidArgumentWith("PNG image is 100000x100000 pixels; at most 16384 on a side"));
  EXPECT_THAT(DecodeImage(testing::JpegClaimingSize(EncodeJpeg(image, 90), 60000, 60000)),
              IsInvalidArgumentWith("JPEG image is 60000x60000 pixels; at most 16384 on a side"));
  ImageLimits small;
  small.max_pixels = 1000;
  EXPECT_THAT(DecodeImage(testing::PngClaimingSize(EncodePng(image, PngKind::kRgb), 100, 100), small),
              IsInvalidArgumentWith("PNG image is 100x100 pixels; at most 16384 on a side and 1000 pixels in all"));
  EXPECT_THAT(DecodeImage(testing::JpegClaimingSize(EncodeJpeg(image, 90), 100, 100), small),
              IsInvalidArgumentWith("JPEG image is 100x100 pixels; at most 16384 on a side and 1000 pixels"));
  small.max_bytes = 10;
  EXPECT_THAT(DecodeImage(EncodeJpeg(image, 90), small), IsInvalidArgumentWith("bytes; at most 10 bytes"));
}

// Random damage (flipped bytes, cuts, spliced garbage) to valid files: every outcome is an image or INVALID_ARGUMENT,
// never a crash or another code (run under AddressSanitizer by the asan pass).
TEST(ImageDecoderTest, DamagedFilesNeverCrash) {
  RgbImage image = RandomImage(24, 24, 14);
  const std::string sources[] = {EncodePng(image, PngKind::kRgb), EncodePng(image, PngKind::kPalette),
                                 EncodeJpeg(image, 80), testing::WithExifOrientation(EncodeJpeg(image, 80), 6, true)};
  std::mt19937 random(15);
  int decoded = 0, refused = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bytes = sources[trial % 4];
    const int edits = 1 + random() % 4;
    for (int e = 0; e < edits; ++e) {
      const size_t at = random() % bytes.size();
      switch (random() % 3) {
        case 0: bytes[at] = static_cast<char>(random()); break;
        case 1: bytes.resize(std::max<size_t>(at, 1)); break;
        case 2: bytes.insert(at, std::string(1 + random() % 8, static_cast<char>(random()))); break;
      }
    }
    const absl::StatusOr<RgbImage> result = DecodeImage(bytes);
    if (result.ok()) {
      ++decoded;
      ASSERT_EQ(result->pixels.size(), static_cast<size_t>(result->height) * result->width * 3);
    } else {
      ++refused;
      ASSERT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument) << result.status();
    }
  }
  std::printf("damaged files: %d decoded, %d refused\n", decoded, refused);
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace convoy::imaging
