#include "server/imaging/image_decoder.h"

#include <png.h>
#include <turbojpeg.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace convoy::imaging {
namespace {

constexpr unsigned char kPngSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

absl::Status CheckDimensions(ImageFormat format, int64_t height, int64_t width, const ImageLimits& limits) {
  if (height <= 0 || width <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(ImageFormatName(format), " image header gives no size (", width,
                                                   "x", height, "): the data is truncated or corrupt"));
  }
  if (height > limits.max_dimension || width > limits.max_dimension || height * width > limits.max_pixels) {
    return absl::InvalidArgumentError(absl::StrCat(
        ImageFormatName(format), " image is ", width, "x", height, " pixels; at most ", limits.max_dimension,
        " on a side and ", limits.max_pixels, " pixels in all are accepted"));
  }
  return absl::OkStatus();
}

// ---- JPEG (TurboJPEG) ------------------------------------------------------------------------------------------

struct TjHandleCloser {
  void operator()(void* handle) const { tjDestroy(handle); }
};

absl::StatusOr<RgbImage> DecodeJpeg(absl::string_view bytes, const ImageLimits& limits) {
  std::unique_ptr<void, TjHandleCloser> handle(tjInitDecompress());
  if (handle == nullptr) return absl::InternalError(absl::StrCat("TurboJPEG: ", tjGetErrorStr2(nullptr)));
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
  if (tjDecompressHeader3(handle.get(), data, bytes.size(), &width, &height, &subsampling, &colorspace) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("JPEG image cannot be read: ", tjGetErrorStr2(handle.get())));
  }
  if (colorspace == TJCS_CMYK || colorspace == TJCS_YCCK) {
    return absl::InvalidArgumentError("JPEG image is CMYK; send an RGB or grayscale JPEG, or a PNG");
  }
  if (absl::Status status = CheckDimensions(ImageFormat::kJpeg, height, width, limits); !status.ok()) return status;
  RgbImage image;
  image.height = height;
  image.width = width;
  image.pixels.resize(static_cast<size_t>(height) * width * 3);
  // Warnings (a truncated or corrupt stream that libjpeg would pad with grey) are errors: Pillow refuses those too.
  if (tjDecompress2(handle.get(), data, bytes.size(), image.pixels.data(), width, width * 3, height, TJPF_RGB,
                    TJFLAG_ACCURATEDCT | TJFLAG_STOPONWARNING) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("JPEG image is corrupt or truncated: ", tjGetErrorStr2(handle.get())));
  }
  return image;
}

// ---- PNG (libpng) ----------------------------------------------------------------------------------------------

struct PngReader {
  absl::string_view bytes;
  size_t offset = 0;
  char message[256] = {0};
  char warning[256] = {0};  // the last warning: libpng explains some errors ("Invalid IHDR data") only there
};

void PngRead(png_structp png, png_bytep out, png_size_t length) {
  auto* reader = static_cast<PngReader*>(png_get_io_ptr(png));
  if (length > reader->bytes.size() - reader->offset) {
    png_error(png, "the data ends before the image does (truncated)");
  }
  std::memcpy(out, reader->bytes.data() + reader->offset, length);
  reader->offset += length;
}

void PngError(png_structp png, png_const_charp message) {
  auto* reader = static_cast<PngReader*>(png_get_error_ptr(png));
  std::snprintf(reader->message, sizeof(reader->message), "%s", message);
  png_longjmp(png, 1);
}

// Benign (unknown chunks, iCCP profiles): decoding goes on; kept to explain a later error.
void PngWarning(png_structp png, png_const_charp message) {
  auto* reader = static_cast<PngReader*>(png_get_error_ptr(png));
  std::snprintf(reader->warning, sizeof(reader->warning), "%s", message);
}

// Decodes into `image`, whose pixels are sized here. No C++ object is made between setjmp and the end: libpng's
// errors longjmp back into this frame, which then only reports.
// A header whose size is over the limits returns false with `image`'s height and width set and no error text.
bool DecodePngInto(PngReader& reader, const ImageLimits& limits, RgbImage& image, std::string& error) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &reader, PngError, PngWarning);
  if (png == nullptr) {
    error = "libpng could not start";
    return false;
  }
  png_infop info = png_create_info_struct(png);
  png_bytep* volatile rows = nullptr;
  if (info == nullptr || setjmp(png_jmpbuf(png))) {
    error = reader.message[0] ? reader.message : "libpng could not start";
    if (reader.warning[0]) absl::StrAppend(&error, " (", reader.warning, ")");
    delete[] rows;
    png_destroy_read_struct(&png, info ? &info : nullptr, nullptr);
    return false;
  }
  png_set_read_fn(png, &reader, PngRead);
  png_set_user_limits(png, limits.max_dimension, limits.max_dimension);
  png_set_chunk_malloc_max(png, 8 << 20);  // text and ICC chunks: a bomb in a side chunk is refused, not inflated
  png_read_info(png, info);
  const png_uint_32 width = png_get_image_width(png, info), height = png_get_image_height(png, info);
  if (static_cast<int64_t>(width) * height > limits.max_pixels) {
    image.height = static_cast<int>(height);
    image.width = static_cast<int>(width);
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  png_set_expand(png);          // palette -> RGB, gray < 8 bits -> 8 bits, tRNS -> alpha
  png_set_strip_16(png);        // 16-bit samples keep their high byte
  png_set_strip_alpha(png);     // alpha dropped, not composited (Pillow's convert("RGB"))
  png_set_gray_to_rgb(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  if (png_get_rowbytes(png, info) != static_cast<size_t>(width) * 3) png_error(png, "unexpected row size");
  image.height = static_cast<int>(height);
  image.width = static_cast<int>(width);
  image.pixels.resize(static_cast<size_t>(height) * width * 3);
  rows = new png_bytep[height];
  for (png_uint_32 y = 0; y < height; ++y) rows[y] = image.pixels.data() + static_cast<size_t>(y) * width * 3;
  png_read_image(png, rows);
  png_read_end(png, nullptr);
  delete[] rows;
  png_destroy_read_struct(&png, &info, nullptr);
  return true;
}

absl::StatusOr<RgbImage> DecodePng(absl::string_view bytes, const ImageLimits& limits) {
  PngReader reader{bytes};
  RgbImage image;
  std::string error;
  if (!DecodePngInto(reader, limits, image, error)) {
    if (error.empty()) return CheckDimensions(ImageFormat::kPng, image.height, image.width, limits);
    if (absl::StrContains(error, "exceeds user limit") && bytes.size() >= 24) {
      auto be32 = [&](size_t at) {
        const auto* p = reinterpret_cast<const unsigned char*>(bytes.data() + at);
        return static_cast<int64_t>(p[0]) << 24 | p[1] << 16 | p[2] << 8 | p[3];
      };
      // IHDR: width at 16, height at 20.
      if (absl::Status size = CheckDimensions(ImageFormat::kPng, be32(20), be32(16), limits); !size.ok()) return size;
    }
    return absl::InvalidArgumentError(absl::StrCat("PNG image cannot be read: ", error));
  }
  return image;
}

// ---- EXIF orientation ------------------------------------------------------------------------------------------

// Reads the TIFF structure inside an EXIF block: byte order from its header, bounds checked on every read.
class TiffReader {
 public:
  explicit TiffReader(absl::string_view tiff) : tiff_(tiff), big_endian_(tiff.substr(0, 2) == "MM") {}
  bool Valid() const { return tiff_.size() >= 8 && (tiff_.substr(0, 2) == "MM" || tiff_.substr(0, 2) == "II"); }
  bool U16(size_t at, uint32_t& value) const {
    if (at + 2 > tiff_.size()) return false;
    const auto* p = reinterpret_cast<const unsigned char*>(tiff_.data() + at);
    value = big_endian_ ? (p[0] << 8 | p[1]) : (p[1] << 8 | p[0]);
    return true;
  }
  bool U32(size_t at, uint32_t& value) const {
    uint32_t high = 0, low = 0;
    if (!U16(at, big_endian_ ? high : low) || !U16(at + 2, big_endian_ ? low : high)) return false;
    value = high << 16 | low;
    return true;
  }

 private:
  absl::string_view tiff_;
  bool big_endian_;
};

int OrientationInTiff(absl::string_view tiff) {
  const TiffReader reader(tiff);
  uint32_t ifd = 0, entries = 0;
  if (!reader.Valid() || !reader.U32(4, ifd) || !reader.U16(ifd, entries)) return 1;
  for (uint32_t i = 0; i < entries; ++i) {
    const size_t entry = ifd + 2 + 12 * static_cast<size_t>(i);
    uint32_t tag = 0, type = 0, value = 0;
    if (!reader.U16(entry, tag) || !reader.U16(entry + 2, type)) return 1;
    if (tag != 0x0112) continue;
    if (type != 3 || !reader.U16(entry + 8, value)) return 1;  // SHORT, stored in the entry's value field
    return value >= 1 && value <= 8 ? static_cast<int>(value) : 1;
  }
  return 1;
}

}  // namespace

absl::string_view ImageFormatName(ImageFormat format) { return format == ImageFormat::kJpeg ? "JPEG" : "PNG"; }

absl::StatusOr<ImageFormat> SniffImageFormat(absl::string_view bytes) {
  if (bytes.size() >= 3 && static_cast<unsigned char>(bytes[0]) == 0xFF &&
      static_cast<unsigned char>(bytes[1]) == 0xD8 && static_cast<unsigned char>(bytes[2]) == 0xFF) {
    return ImageFormat::kJpeg;
  }
  if (bytes.size() >= 8 && std::memcmp(bytes.data(), kPngSignature, 8) == 0) return ImageFormat::kPng;
  if (bytes.empty()) return absl::InvalidArgumentError("image is empty (0 bytes); expected JPEG or PNG data");
  return absl::InvalidArgumentError(absl::StrCat(
      "image is neither JPEG (starts FF D8 FF) nor PNG (starts 89 50 4E 47 0D 0A 1A 0A): its ", bytes.size(),
      " bytes start ", absl::BytesToHexString(bytes.substr(0, 8))));
}

int JpegExifOrientation(absl::string_view jpeg) {
  size_t at = 2;  // after SOI
  while (at + 4 <= jpeg.size()) {
    if (static_cast<unsigned char>(jpeg[at]) != 0xFF) return 1;
    const unsigned char marker = static_cast<unsigned char>(jpeg[at + 1]);
    if (marker == 0xFF) {  // fill byte
      ++at;
      continue;
    }
    if (marker == 0xDA || marker == 0xD9) return 1;  // start of scan / end of image: no EXIF before the pixels
    const size_t length = static_cast<unsigned char>(jpeg[at + 2]) << 8 | static_cast<unsigned char>(jpeg[at + 3]);
    if (length < 2 || at + 2 + length > jpeg.size()) return 1;
    const absl::string_view segment = jpeg.substr(at + 4, length - 2);
    if (marker == 0xE1 && segment.size() > 6 && segment.substr(0, 6) == absl::string_view("Exif\0\0", 6)) {
      return OrientationInTiff(segment.substr(6));
    }
    at += 2 + length;
  }
  return 1;
}

RgbImage ApplyExifOrientation(const RgbImage& image, int orientation) {
  if (orientation < 2 || orientation > 8) return image;
  const bool swaps = orientation >= 5;
  RgbImage out;
  out.height = swaps ? image.width : image.height;
  out.width = swaps ? image.height : image.width;
  out.pixels.resize(image.pixels.size());
  const int h = image.height, w = image.width;
  for (int y = 0; y < out.height; ++y) {
    for (int x = 0; x < out.width; ++x) {
      int sy = y, sx = x;  // the source pixel of output (y, x), as Pillow's transposes map them
      switch (orientation) {
        case 2: sx = w - 1 - x; break;                      // mirrored left-right
        case 3: sy = h - 1 - y; sx = w - 1 - x; break;      // rotated 180
        case 4: sy = h - 1 - y; break;                      // mirrored top-bottom
        case 5: sy = x; sx = y; break;                      // transposed
        case 6: sy = h - 1 - x; sx = y; break;              // rotated 90 clockwise
        case 7: sy = h - 1 - x; sx = w - 1 - y; break;      // transversed
        case 8: sy = x; sx = w - 1 - y; break;              // rotated 90 counter-clockwise
      }
      std::memcpy(&out.pixels[(static_cast<size_t>(y) * out.width + x) * 3],
                  &image.pixels[(static_cast<size_t>(sy) * w + sx) * 3], 3);
    }
  }
  return out;
}

absl::StatusOr<RgbImage> DecodeImage(absl::string_view bytes, const ImageLimits& limits) {
  if (static_cast<int64_t>(bytes.size()) > limits.max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("image is ", bytes.size(), " bytes; at most ", limits.max_bytes,
                                                   " bytes are accepted"));
  }
  absl::StatusOr<ImageFormat> format = SniffImageFormat(bytes);
  if (!format.ok()) return format.status();
  if (*format == ImageFormat::kPng) return DecodePng(bytes, limits);
  absl::StatusOr<RgbImage> image = DecodeJpeg(bytes, limits);
  if (!image.ok()) return image;
  const int orientation = JpegExifOrientation(bytes);
  return orientation == 1 ? std::move(image) : absl::StatusOr<RgbImage>(ApplyExifOrientation(*image, orientation));
}

}  // namespace convoy::imaging
