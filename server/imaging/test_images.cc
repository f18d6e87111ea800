#include "server/imaging/test_images.h"

#include <png.h>
#include <turbojpeg.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

namespace convoy::imaging::testing {

RgbImage RandomImage(int height, int width, uint32_t seed) {
  std::mt19937 random(seed);
  std::uniform_real_distribution<double> phase(0, 6.28), noise(-12, 12);
  const double p[3] = {phase(random), phase(random), phase(random)};
  RgbImage image{height, width, std::vector<uint8_t>(static_cast<size_t>(height) * width * 3)};
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < 3; ++c) {
        const double v = 128 + 90 * std::sin(p[c] + 7.0 * x / width + 3.0 * c * y / height) + noise(random);
        image.pixels[(static_cast<size_t>(y) * width + x) * 3 + c] = static_cast<uint8_t>(std::clamp(v, 0.0, 255.0));
      }
    }
  }
  return image;
}

std::string EncodePng(RgbImage& image, PngKind kind) {
  png_image png;
  std::memset(&png, 0, sizeof(png));
  png.version = PNG_IMAGE_VERSION;
  png.width = image.width;
  png.height = image.height;
  const size_t count = static_cast<size_t>(image.width) * image.height;
  std::vector<uint8_t> buffer;
  std::vector<uint8_t> colormap;
  switch (kind) {
    case PngKind::kRgb:
      png.format = PNG_FORMAT_RGB;
      buffer = image.pixels;
      break;
    case PngKind::kRgba:
      png.format = PNG_FORMAT_RGBA;
      buffer.resize(count * 4);
      for (size_t i = 0; i < count; ++i) {
        std::memcpy(&buffer[i * 4], &image.pixels[i * 3], 3);
        buffer[i * 4 + 3] = static_cast<uint8_t>(i * 37);  // any alpha: it is dropped, not composited
      }
      break;
    case PngKind::kGray:
    case PngKind::kGrayAlpha: {
      const bool alpha = kind == PngKind::kGrayAlpha;
      png.format = alpha ? PNG_FORMAT_GA : PNG_FORMAT_GRAY;
      buffer.resize(count * (alpha ? 2 : 1));
      for (size_t i = 0; i < count; ++i) {
        const uint8_t g = image.pixels[i * 3 + 1];
        buffer[i * (alpha ? 2 : 1)] = g;
        if (alpha) buffer[i * 2 + 1] = static_cast<uint8_t>(255 - i);
        image.pixels[i * 3] = image.pixels[i * 3 + 1] = image.pixels[i * 3 + 2] = g;
      }
      break;
    }
    case PngKind::kRgb16: {
      // The simplified writer treats 16-bit data as linear: write sRGB 8-bit values widened (v * 257), whose
      // high byte is v, and mark the file sRGB-encoded through the flag below.
      png.format = PNG_FORMAT_LINEAR_RGB;
      buffer.resize(count * 3 * 2);
      auto* wide = reinterpret_cast<uint16_t*>(buffer.data());
      for (size_t i = 0; i < count * 3; ++i) wide[i] = static_cast<uint16_t>(image.pixels[i] * 257);
      break;
    }
    case PngKind::kPalette: {
      png.format = PNG_FORMAT_RGB_COLORMAP;
      png.colormap_entries = 256;
      colormap.resize(256 * 3);
      for (int i = 0; i < 256; ++i) {  // 6x7x6 colour cube
        colormap[i * 3] = static_cast<uint8_t>((i % 6) * 51);
        colormap[i * 3 + 1] = static_cast<uint8_t>(((i / 6) % 7) * 42);
        colormap[i * 3 + 2] = static_cast<uint8_t>(((i / 42) % 6) * 51);
      }
      buffer.resize(count);
      for (size_t i = 0; i < count; ++i) {
        const int r = (image.pixels[i * 3] + 25) / 51, g = std::min((image.pixels[i * 3 + 1] + 21) / 42, 6),
                  b = (image.pixels[i * 3 + 2] + 25) / 51;
        buffer[i] = static_cast<uint8_t>(std::min(r + 6 * g + 42 * b, 255));
        std::memcpy(&image.pixels[i * 3], &colormap[buffer[i] * 3], 3);
      }
      break;
    }
  }
  png_alloc_size_t size = 0;
  if (!png_image_write_get_memory_size(png, size, 0, buffer.data(), 0, colormap.empty() ? nullptr : colormap.data())) {
    throw std::runtime_error(std::string("png_image_write sizing: ") + png.message);
  }
  std::string out(size, '\0');
  if (!png_image_write_to_memory(&png, out.data(), &size, 0, buffer.data(), 0,
                                 colormap.empty() ? nullptr : colormap.data())) {
    throw std::runtime_error(std::string("png_image_write: ") + png.message);
  }
  out.resize(size);
  return out;
}

std::string EncodeJpeg(const RgbImage& image, int quality, bool grayscale) {
  tjhandle handle = tjInitCompress();
  unsigned char* data = nullptr;
  unsigned long size = 0;
  const int result = tjCompress2(handle, image.pixels.data(), image.width, image.width * 3, image.height, TJPF_RGB,
                                 &data, &size, grayscale ? TJSAMP_GRAY : TJSAMP_420, quality, TJFLAG_ACCURATEDCT);
  if (result != 0) throw std::runtime_error(tjGetErrorStr2(handle));
  std::string out(reinterpret_cast<char*>(data), size);
  tjFree(data);
  tjDestroy(handle);
  return out;
}

std::string WithExifOrientation(const std::string& jpeg, int orientation, bool big_endian) {
  auto u16 = [&](uint16_t v) {
    return big_endian ? std::string{static_cast<char>(v >> 8), static_cast<char>(v & 0xff)}
                      : std::string{static_cast<char>(v & 0xff), static_cast<char>(v >> 8)};
  };
  auto u32 = [&](uint32_t v) { return big_endian ? u16(v >> 16) + u16(v & 0xffff) : u16(v & 0xffff) + u16(v >> 16); };
  // TIFF header, IFD0 at offset 8 with two entries: ImageDescription-like filler (tag 0x010E, ASCII) first, so
  // the reader must walk entries, then Orientation (0x0112, SHORT, count 1, value in the first two bytes).
  std::string tiff = (big_endian ? "MM" : "II") + u16(42) + u32(8);
  tiff += u16(2);
  tiff += u16(0x010E) + u16(2) + u32(4) + std::string("abc\0", 4);
  tiff += u16(0x0112) + u16(3) + u32(1) + u16(static_cast<uint16_t>(orientation)) + u16(0);
  tiff += u32(0);
  const std::string payload = std::string("Exif\0\0", 6) + tiff;
  const size_t length = payload.size() + 2;
  std::string segment = {static_cast<char>(0xFF), static_cast<char>(0xE1), static_cast<char>(length >> 8),
                         static_cast<char>(length & 0xff)};
  return jpeg.substr(0, 2) + segment + payload + jpeg.substr(2);
}

std::string PngClaimingSize(std::string png, uint32_t height, uint32_t width) {
  // Signature (8), IHDR length (4), "IHDR" (4), width (4), height (4), ..., CRC over "IHDR" + 13 bytes.
  for (int i = 0; i < 4; ++i) {
    png[16 + i] = static_cast<char>(width >> (24 - 8 * i));
    png[20 + i] = static_cast<char>(height >> (24 - 8 * i));
  }
  const uint32_t crc = crc32(crc32(0, nullptr, 0), reinterpret_cast<const Bytef*>(png.data() + 12), 17);
  for (int i = 0; i < 4; ++i) png[29 + i] = static_cast<char>(crc >> (24 - 8 * i));
  return png;
}

std::string JpegClaimingSize(std::string jpeg, uint16_t height, uint16_t width) {
  for (size_t at = 2; at + 9 < jpeg.size();) {
    const unsigned char marker = static_cast<unsigned char>(jpeg[at + 1]);
    const size_t length = static_cast<unsigned char>(jpeg[at + 2]) << 8 | static_cast<unsigned char>(jpeg[at + 3]);
    if (marker == 0xC0 || marker == 0xC2) {  // SOF0 / SOF2: length, precision, height, width
      jpeg[at + 5] = static_cast<char>(height >> 8);
      jpeg[at + 6] = static_cast<char>(height & 0xff);
      jpeg[at + 7] = static_cast<char>(width >> 8);
      jpeg[at + 8] = static_cast<char>(width & 0xff);
      return jpeg;
    }
    at += 2 + length;
  }
  throw std::runtime_error("no SOF segment");
}

}  // namespace convoy::imaging::testing
