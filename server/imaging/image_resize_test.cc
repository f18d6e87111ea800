#include "server/imaging/image_resize.h"

#include <cmath>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "server/imaging/test_images.h"

namespace convoy::imaging {
namespace {

using ::convoy::testing::IsOk;
using testing::RandomImage;

// The same antialiased bicubic resampling in double precision, without fixed-point weights or the 8-bit rounding
// between the passes: the fast path may differ from it by rounding only.
std::vector<double> ReferenceResize(const RgbImage& source, const SourceBox& box, int height, int width) {
  auto bicubic = [](double x) {
    x = std::abs(x);
    if (x < 1) return (1.5 * x - 2.5) * x * x + 1;
    if (x < 2) return ((-0.5 * x + 2.5) * x - 4) * x + 2;
    return 0.0;
  };
  auto weights = [&](int in_size, double in0, double in1, int out) {
    const double scale = (in1 - in0) / out, filter_scale = std::max(scale, 1.0);
    std::vector<std::vector<double>> w(out, std::vector<double>(in_size, 0.0));
    for (int o = 0; o < out; ++o) {
      const double center = in0 + (o + 0.5) * scale;
      double total = 0;
      for (int i = 0; i < in_size; ++i) total += w[o][i] = bicubic((i + 0.5 - center) / filter_scale);
      for (double& v : w[o]) v /= total;
    }
    return w;
  };
  const auto wx = weights(source.width, box.left, box.right, width);
  const auto wy = weights(source.height, box.top, box.bottom, height);
  std::vector<double> out(static_cast<size_t>(height) * width * 3, 0.0);
  for (int y = 0; y < height; ++y)
    for (int sy = 0; sy < source.height; ++sy) {
      if (wy[y][sy] == 0) continue;
      for (int x = 0; x < width; ++x)
        for (int sx = 0; sx < source.width; ++sx) {
          if (wx[x][sx] == 0) continue;
          for (int c = 0; c < 3; ++c)
            out[(static_cast<size_t>(y) * width + x) * 3 + c] +=
                wy[y][sy] * wx[x][sx] * source.pixels[(static_cast<size_t>(sy) * source.width + sx) * 3 + c];
        }
    }
  return out;
}

struct Case {
  int source_height, source_width, height, width;
  double crop_fraction;
};

TEST(ImageResizeTest, MatchesTheDoublePrecisionFilterWithinRounding) {
  const Case cases[] = {
      {120, 160, 32, 32, 0.875},   // downscale (the filter widens), landscape
      {90, 60, 24, 40, 0.875},     // portrait source, landscape target
      {30, 20, 64, 48, 1.0},       // upscale
      {50, 50, 50, 50, 0.9},       // almost identity, fractional box
      {17, 211, 7, 13, 0.5},
  };
  uint32_t seed = 20;
  for (const Case& c : cases) {
    const RgbImage source = RandomImage(c.source_height, c.source_width, seed++);
    std::vector<uint8_t> out(static_cast<size_t>(c.height) * c.width * 3, 0xAB);
    ASSERT_THAT(CenterCropAndResize(source, c.height, c.width, c.crop_fraction, out.data()), IsOk());
    const SourceBox box = CenterCropBox(c.source_height, c.source_width, c.height, c.width, c.crop_fraction);
    const std::vector<double> expected = ReferenceResize(source, box, c.height, c.width);
    int worst = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      const double clamped = std::clamp(expected[i], 0.0, 255.0);
      worst = std::max(worst, static_cast<int>(std::ceil(std::abs(out[i] - clamped) - 1e-9)));
    }
    // Two 8-bit roundings (after each pass) and the vertical filter's overshoot on the rounded rows: <= 2 levels.
    EXPECT_LE(worst, 2) << c.source_width << "x" << c.source_height << " -> " << c.width << "x" << c.height;
  }
}

TEST(ImageResizeTest, SameSizeWholeImageIsTheIdentity) {
  const RgbImage source = RandomImage(21, 34, 30);
  std::vector<uint8_t> out(source.pixels.size(), 0);
  ASSERT_THAT(ResizeBicubic(source, {0, 0, 34, 21}, 21, 34, out.data()), IsOk());
  EXPECT_EQ(out, source.pixels);
}

TEST(ImageResizeTest, ConstantImageStaysConstant) {
  RgbImage source{40, 70, std::vector<uint8_t>(40 * 70 * 3)};
  for (size_t i = 0; i < source.pixels.size(); ++i) source.pixels[i] = static_cast<uint8_t>(50 + 60 * (i % 3));
  std::vector<uint8_t> out(9 * 11 * 3, 0);
  ASSERT_THAT(CenterCropAndResize(source, 9, 11, 0.875, out.data()), IsOk());
  for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], 50 + 60 * (i % 3)) << i;
}

// tools/classify.py's box for a 640x480 photo and a 224x224 input: 87.5 % of the shorter side, centred.
TEST(ImageResizeTest, CenterCropBoxIsTheClientsBox) {
  const SourceBox box = CenterCropBox(480, 640, 224, 224, 224.0 / 256);
  EXPECT_DOUBLE_EQ(box.left, 110);
  EXPECT_DOUBLE_EQ(box.top, 30);
  EXPECT_DOUBLE_EQ(box.right, 530);
  EXPECT_DOUBLE_EQ(box.bottom, 450);
}

TEST(ImageResizeTest, BadBoxesAndSizesAreRefused) {
  const RgbImage source = RandomImage(10, 10, 31);
  std::vector<uint8_t> out(300);
  EXPECT_EQ(ResizeBicubic(source, {0, 0, 11, 10}, 10, 10, out.data()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ResizeBicubic(source, {5, 0, 5, 10}, 10, 10, out.data()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ResizeBicubic(source, {0, 0, 10, 10}, 0, 10, out.data()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CenterCropAndResize(source, 10, 10, 1.5, out.data()).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace convoy::imaging
