// Photos as the server receives them (JPEG or PNG bytes) decoded to 8-bit RGB pixels, upright: the EXIF orientation
// of a JPEG applied as Pillow's ImageOps.exif_transpose does. JPEG through libjpeg-turbo's TurboJPEG API (accurate
// integer IDCT and fancy upsampling, libjpeg's defaults, as Pillow decodes), PNG through libpng (palette, gray, 16-bit
// and alpha all become RGB; alpha is dropped and 16-bit samples keep their high byte, as Pillow's convert("RGB")).
// Dimensions are checked against the limits from the file's header, before any pixel memory is allocated; a corrupt,
// truncated or unknown image is INVALID_ARGUMENT with the decoder's reason, never a crash.
#ifndef CONVOY_SERVER_IMAGING_IMAGE_DECODER_H_
#define CONVOY_SERVER_IMAGING_IMAGE_DECODER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace convoy::imaging {

enum class ImageFormat { kJpeg, kPng };
absl::string_view ImageFormatName(ImageFormat format);

// Pixels in row-major [height, width, 3] order, R G B.
struct RgbImage {
  int height = 0;
  int width = 0;
  std::vector<uint8_t> pixels;

  const uint8_t* row(int y) const { return pixels.data() + static_cast<size_t>(y) * width * 3; }
};

struct ImageLimits {
  int64_t max_bytes = 64 << 20;       // the encoded image
  int max_dimension = 16384;          // height or width, in pixels
  int64_t max_pixels = 64'000'000;    // height x width
};

// The format from the first bytes (JPEG FF D8 FF, PNG's 8-byte signature); INVALID_ARGUMENT naming what the bytes
// start with otherwise.
absl::StatusOr<ImageFormat> SniffImageFormat(absl::string_view bytes);

// The EXIF orientation (1-8) of a JPEG's APP1 segment; 1 when there is none or it cannot be read.
int JpegExifOrientation(absl::string_view jpeg);

// `image` turned as EXIF orientation `orientation` (1-8) asks, so that it shows upright.
RgbImage ApplyExifOrientation(const RgbImage& image, int orientation);

// Decodes a JPEG or PNG (sniffed), upright.
absl::StatusOr<RgbImage> DecodeImage(absl::string_view bytes, const ImageLimits& limits = {});

}  // namespace convoy::imaging

#endif  // CONVOY_SERVER_IMAGING_IMAGE_DECODER_H_
