// A decoded photo fitted to a model's image input: the largest centred box of the input's aspect ratio, scaled by
// a crop fraction (the ImageNet evaluation crop keeps 224/256 = 0.875 of the shorter side), resampled to the input's
// size with an antialiased bicubic filter. The arithmetic is Pillow's Image.resize(size, BICUBIC, box=...) (separable
// passes, filter support widened by the downscale factor, 22-bit fixed-point weights, the horizontal pass first and
// rounded to 8 bits), so the server's pixels equal those of a client that prepared the photo with Pillow
// (tools/classify.py).
#ifndef CONVOY_SERVER_IMAGING_IMAGE_RESIZE_H_
#define CONVOY_SERVER_IMAGING_IMAGE_RESIZE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "server/imaging/image_decoder.h"

namespace convoy::imaging {

// A box in source pixel coordinates: [left, right) x [top, bottom), fractional.
struct SourceBox {
  double left = 0, top = 0, right = 0, bottom = 0;
};

// The centred box of aspect ratio width:height covering `crop_fraction` of the source's limiting side.
SourceBox CenterCropBox(int source_height, int source_width, int height, int width, double crop_fraction);

// Resamples `box` of `source` to height x width RGB pixels into `out` (height * width * 3 bytes, row-major HWC).
absl::Status ResizeBicubic(const RgbImage& source, const SourceBox& box, int height, int width, uint8_t* out);

// CenterCropBox then ResizeBicubic.
absl::Status CenterCropAndResize(const RgbImage& source, int height, int width, double crop_fraction, uint8_t* out);

}  // namespace convoy::imaging

#endif  // CONVOY_SERVER_IMAGING_IMAGE_RESIZE_H_
