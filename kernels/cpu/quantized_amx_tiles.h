// The AMX inner loop of the CPU's own INT8 1x1 convolution (QuantizedConv2dAmx1x1Nhwc in quantized_conv2d_gemm.h),
// compiled with -mamx-tile -mamx-int8 in quantized_amx_tiles.cc alone: nothing here may run unless
// AmxInt8Usable() (quantized_conv2d_gemm.cc) said yes. Like quantized_gemm_tiles.h, free of anything but <cstdint>.
//
// The operands as the AMX tiles take them: the source rows are 8-bit as they lie ([rows][a_stride] bytes, 64
// channels per tile step), the filter packed into blocks of 16 output channels, each block `ksteps` tiles of
// [16 groups of 4 channels][16 output channels][4] int8 (1 KiB; what TDPBUSD multiplies a 64-channel step by). The
// sums are exact int32 (u8 x s8 or s8 x s8 products summed in 32 bits, reductions below 65793).
#ifndef CONVOY_KERNELS_CPU_QUANTIZED_AMX_TILES_H_
#define CONVOY_KERNELS_CPU_QUANTIZED_AMX_TILES_H_

#include <cstdint>

namespace convoy::cpu {

constexpr int kAmxTileBytes = 1024;   // one packed filter tile: 64 channels x 16 output channels
constexpr int kAmxBlockRows = 32;     // rows (output pixels) per call: two 16-row tiles
constexpr int kAmxBlockChannels = 32;  // output channels per call: two 16-channel blocks

// Loads the tile configuration for blocks of `rows` rows (1..32) on the calling thread.
void AmxConfigureTiles(int rows);

// acc[r * 32 + j] = sum over the reduction of a[r][i] * filter(i, j), r < rows (as configured), j < 16 * blocks
// (blocks 1 or 2: the filter blocks at b and b + ksteps tiles). a is UINT8 (a_signed false) or INT8.
void AmxAccumulate(const void* a, int64_t a_stride, int rows, bool a_signed, const int8_t* b, int64_t ksteps,
                   int blocks, int32_t* acc);

// Releases the tile state of the calling thread.
void AmxReleaseTiles();

}  // namespace convoy::cpu

#endif  // CONVOY_KERNELS_CPU_QUANTIZED_AMX_TILES_H_
