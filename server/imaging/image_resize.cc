#include "server/imaging/image_resize.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"

namespace convoy::imaging {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;
constexpr double kBicubicSupport = 2.0;

double Bicubic(double x) {
  constexpr double a = -0.5;
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

// For each output index: the first source index it reads, how many, and their fixed-point weights (ksize apart).
struct Taps {
  int ksize = 0;
  std::vector<int> first, count;
  std::vector<int32_t> weights;
};

// The box edges are single precision, and their difference is taken in single precision (Pillow's arithmetic).
Taps ComputeTaps(int in_size, float in0, float in1, int out_size) {
  const double scale = static_cast<double>(in1 - in0) / out_size;
  const double filter_scale = std::max(scale, 1.0);
  const double support = kBicubicSupport * filter_scale;
  Taps taps;
  taps.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  taps.first.resize(out_size);
  taps.count.resize(out_size);
  taps.weights.assign(static_cast<size_t>(out_size) * taps.ksize, 0);
  std::vector<double> k(taps.ksize);
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = in0 + (xx + 0.5) * scale;
    const double ss = 1.0 / filter_scale;
    const int xmin = std::max(static_cast<int>(center - support + 0.5), 0);
    const int xmax = std::min(static_cast<int>(center + support + 0.5), in_size) - xmin;
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      k[x] = Bicubic((x + xmin - center + 0.5) * ss);
      ww += k[x];
    }
    for (int x = 0; x < xmax; ++x) {
      const double w = ww != 0.0 ? k[x] / ww : k[x];
      taps.weights[static_cast<size_t>(xx) * taps.ksize + x] =
          static_cast<int32_t>(w < 0 ? -0.5 + w * (1 << kPrecisionBits) : 0.5 + w * (1 << kPrecisionBits));
    }
    taps.first[xx] = xmin;
    taps.count[xx] = std::max(xmax, 0);
  }
  return taps;
}

uint8_t Clip8(int32_t value) {
  if (value >= (1 << kPrecisionBits << 8)) return 255;
  if (value <= 0) return 0;
  return static_cast<uint8_t>(value >> kPrecisionBits);
}

}  // namespace

SourceBox CenterCropBox(int source_height, int source_width, int height, int width, double crop_fraction) {
  const double scale = std::min(static_cast<double>(source_width) / width, static_cast<double>(source_height) / height) *
                       crop_fraction;
  const double box_w = width * scale, box_h = height * scale;
  const double left = (source_width - box_w) / 2, top = (source_height - box_h) / 2;
  return {left, top, left + box_w, top + box_h};
}

absl::Status ResizeBicubic(const RgbImage& source, const SourceBox& box, int height, int width, uint8_t* out) {
  if (height <= 0 || width <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("resize to ", width, "x", height, ": not a size"));
  }
  if (!(box.left >= 0 && box.top >= 0 && box.right <= source.width && box.bottom <= source.height &&
        box.left < box.right && box.top < box.bottom)) {
    return absl::InvalidArgumentError(absl::StrCat("resize box [", box.left, ", ", box.right, ") x [", box.top, ", ",
                                                   box.bottom, ") is not inside the ", source.width, "x",
                                                   source.height, " image"));
  }
  const Taps horizontal =
      ComputeTaps(source.width, static_cast<float>(box.left), static_cast<float>(box.right), width);
  const Taps vertical = ComputeTaps(source.height, static_cast<float>(box.top), static_cast<float>(box.bottom), height);
  // The source rows the vertical pass reads; the horizontal pass makes only those (8-bit, rounded, as Pillow does).
  const int first_row = vertical.first[0];
  const int last_row = vertical.first[height - 1] + vertical.count[height - 1];
  std::vector<uint8_t> temp(static_cast<size_t>(last_row - first_row) * width * 3);
  for (int y = first_row; y < last_row; ++y) {
    const uint8_t* in = source.row(y);
    uint8_t* row = temp.data() + static_cast<size_t>(y - first_row) * width * 3;
    for (int xx = 0; xx < width; ++xx) {
      const int32_t* k = &horizontal.weights[static_cast<size_t>(xx) * horizontal.ksize];
      const int xmin = horizontal.first[xx];
      int32_t sum[3] = {1 << (kPrecisionBits - 1), 1 << (kPrecisionBits - 1), 1 << (kPrecisionBits - 1)};
      for (int x = 0; x < horizontal.count[xx]; ++x) {
        for (int c = 0; c < 3; ++c) sum[c] += in[(x + xmin) * 3 + c] * k[x];
      }
      for (int c = 0; c < 3; ++c) row[xx * 3 + c] = Clip8(sum[c]);
    }
  }
  for (int yy = 0; yy < height; ++yy) {
    const int32_t* k = &vertical.weights[static_cast<size_t>(yy) * vertical.ksize];
    const int ymin = vertical.first[yy] - first_row;
    uint8_t* row = out + static_cast<size_t>(yy) * width * 3;
    for (int i = 0; i < width * 3; ++i) {
      int32_t sum = 1 << (kPrecisionBits - 1);
      for (int y = 0; y < vertical.count[yy]; ++y) sum += temp[static_cast<size_t>(y + ymin) * width * 3 + i] * k[y];
      row[i] = Clip8(sum);
    }
  }
  return absl::OkStatus();
}

absl::Status CenterCropAndResize(const RgbImage& source, int height, int width, double crop_fraction, uint8_t* out) {
  if (!(crop_fraction > 0 && crop_fraction <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("crop fraction ", crop_fraction, " is not in (0, 1]"));
  }
  return ResizeBicubic(source, CenterCropBox(source.height, source.width, height, width, crop_fraction), height,
                       width, out);
}

}  // namespace convoy::imaging
