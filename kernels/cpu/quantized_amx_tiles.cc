// AMX tile loops of the own INT8 1x1 convolution; see quantized_amx_tiles.h. Tiles 0-3 hold the 32x32 block of sums
// (rows 0-15 / 16-31 x channels 0-15 / 16-31), 4-5 the two 16-row slices of the source, 6-7 the two filter blocks.
#include "kernels/cpu/quantized_amx_tiles.h"

#include <immintrin.h>

#include <cstring>
#include <initializer_list>

namespace convoy::cpu {
namespace {

struct TileConfig {
  uint8_t palette_id;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};
static_assert(sizeof(TileConfig) == 64, "the tile configuration is 64 bytes");

template <bool kTwoRowTiles, bool kTwoBlocks, bool kSigned>
void Accumulate(const uint8_t* a, int64_t a_stride, const int8_t* b, int64_t ksteps, int32_t* acc) {
  _tile_zero(0);
  if constexpr (kTwoBlocks) _tile_zero(1);
  if constexpr (kTwoRowTiles) {
    _tile_zero(2);
    if constexpr (kTwoBlocks) _tile_zero(3);
  }
  const uint8_t* a1 = a + 16 * a_stride;
  const int8_t* b1 = b + ksteps * kAmxTileBytes;
  for (int64_t t = 0; t < ksteps; ++t) {
    _tile_loadd(4, a + t * 64, a_stride);
    _tile_loadd(6, b + t * kAmxTileBytes, 64);
    if constexpr (kTwoBlocks) _tile_loadd(7, b1 + t * kAmxTileBytes, 64);
    if constexpr (kTwoRowTiles) _tile_loadd(5, a1 + t * 64, a_stride);
    if constexpr (kSigned) {
      _tile_dpbssd(0, 4, 6);
      if constexpr (kTwoBlocks) _tile_dpbssd(1, 4, 7);
      if constexpr (kTwoRowTiles) {
        _tile_dpbssd(2, 5, 6);
        if constexpr (kTwoBlocks) _tile_dpbssd(3, 5, 7);
      }
    } else {
      _tile_dpbusd(0, 4, 6);
      if constexpr (kTwoBlocks) _tile_dpbusd(1, 4, 7);
      if constexpr (kTwoRowTiles) {
        _tile_dpbusd(2, 5, 6);
        if constexpr (kTwoBlocks) _tile_dpbusd(3, 5, 7);
      }
    }
  }
  constexpr int64_t kStride = kAmxBlockChannels * sizeof(int32_t);
  _tile_stored(0, acc, kStride);
  if constexpr (kTwoBlocks) _tile_stored(1, acc + 16, kStride);
  if constexpr (kTwoRowTiles) {
    _tile_stored(2, acc + 16 * kAmxBlockChannels, kStride);
    if constexpr (kTwoBlocks) _tile_stored(3, acc + 16 * kAmxBlockChannels + 16, kStride);
  }
}

template <bool kTwoRowTiles, bool kTwoBlocks>
void AccumulateSigned(bool a_signed, const void* a, int64_t a_stride, const int8_t* b, int64_t ksteps, int32_t* acc) {
  const uint8_t* rows = static_cast<const uint8_t*>(a);
  if (a_signed) {
    Accumulate<kTwoRowTiles, kTwoBlocks, true>(rows, a_stride, b, ksteps, acc);
  } else {
    Accumulate<kTwoRowTiles, kTwoBlocks, false>(rows, a_stride, b, ksteps, acc);
  }
}

}  // namespace

void AmxConfigureTiles(int rows) {
  TileConfig config;
  std::memset(&config, 0, sizeof(config));
  config.palette_id = 1;
  const int rows0 = rows < 16 ? rows : 16, rows1 = rows - rows0;
  for (int t : {0, 1}) config.rows[t] = rows0, config.colsb[t] = 64;  // sums, rows 0-15
  config.rows[4] = rows0, config.colsb[4] = 64;                        // source rows 0-15
  if (rows1 > 0) {
    for (int t : {2, 3}) config.rows[t] = rows1, config.colsb[t] = 64;  // sums, rows 16-31
    config.rows[5] = rows1, config.colsb[5] = 64;                        // source rows 16-31
  }
  for (int t : {6, 7}) config.rows[t] = 16, config.colsb[t] = 64;  // filter blocks
  _tile_loadconfig(&config);
}

void AmxAccumulate(const void* a, int64_t a_stride, int rows, bool a_signed, const int8_t* b, int64_t ksteps,
                   int blocks, int32_t* acc) {
  if (rows > 16) {
    if (blocks == 2) {
      AccumulateSigned<true, true>(a_signed, a, a_stride, b, ksteps, acc);
    } else {
      AccumulateSigned<true, false>(a_signed, a, a_stride, b, ksteps, acc);
    }
  } else if (blocks == 2) {
    AccumulateSigned<false, true>(a_signed, a, a_stride, b, ksteps, acc);
  } else {
    AccumulateSigned<false, false>(a_signed, a, a_stride, b, ksteps, acc);
  }
}

void AmxReleaseTiles() { _tile_release(); }

}  // namespace convoy::cpu
