// Test photos made in memory: random smooth RGB images encoded as PNG (libpng's simplified writer, every PNG colour
// type) or JPEG (TurboJPEG), an EXIF orientation segment spliced into a JPEG, and headers patched to claim other
// dimensions (PNG's CRC kept valid, so only the size check can refuse them).
#ifndef CONVOY_SERVER_IMAGING_TEST_IMAGES_H_
#define CONVOY_SERVER_IMAGING_TEST_IMAGES_H_

#include <cstdint>
#include <string>

#include "server/imaging/image_decoder.h"

namespace convoy::imaging::testing {

// Smooth gradients plus noise, so JPEG keeps them close and resizing has structure to get wrong.
RgbImage RandomImage(int height, int width, uint32_t seed);

enum class PngKind { kRgb, kRgba, kGray, kGrayAlpha, kRgb16, kPalette };
// The PNG of `image` stored as `kind`; `image` is changed to what a decoder must return (gray: the luminance
// replicated; 16-bit: the same high bytes; palette: the colours the palette could hold).
std::string EncodePng(RgbImage& image, PngKind kind);

std::string EncodeJpeg(const RgbImage& image, int quality, bool grayscale = false);

// `jpeg` with an APP1 EXIF segment holding orientation `orientation` right after SOI (TIFF in `big_endian` order).
std::string WithExifOrientation(const std::string& jpeg, int orientation, bool big_endian);

// The same file claiming height x width in its header.
std::string PngClaimingSize(std::string png, uint32_t height, uint32_t width);
std::string JpegClaimingSize(std::string jpeg, uint16_t height, uint16_t width);

}  // namespace convoy::imaging::testing

#endif  // CONVOY_SERVER_IMAGING_TEST_IMAGES_H_
