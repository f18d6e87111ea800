// The inner loops of the CPU's own INT8 convolution (quantized_conv2d_gemm.h), compiled once per instruction set:
// quantized_gemm_tiles_baseline.cc (x86-64-v2: SSE4.2), _avx2.cc (-mavx2 -mfma) and _avx512.cc (-mavx512f/bw/dq/vl),
// each from the same body (quantized_gemm_tiles_body.inc) with its vector width. The algorithm of each instruction
// set registers only where CpuSupports (cpu_isa.h) says the CPU runs it: a table the CPU lacks the instructions for
// faults.
//
// The products are exact on every instruction set: both operands are widened to 16 bits (the source less its zero
// point, -255..255; the weight, -128..127) and pmaddwd sums each pair of products into 32 bits, which cannot saturate
// (2 * 255 * 128 < 2^31). The epilogue computes the reference's FP32 operations in its order (no FMA contraction: the
// translation units are compiled with -ffp-contract=off; explicit FMAs where the quantized add's definition has them;
// rounding half to even by the rounding instruction), so every version gives the reference's bytes.
//
// This header stays free of anything but <cstdint>: the per-instruction-set translation units include it, and an
// inline function they shared with the rest of the program could be linked in its AVX-512 form for everyone.
#ifndef CONVOY_KERNELS_CPU_QUANTIZED_GEMM_TILES_H_
#define CONVOY_KERNELS_CPU_QUANTIZED_GEMM_TILES_H_

#include <cstdint>

namespace convoy::cpu {

// The channels one packed filter block holds, and the layout of a block: [reduction pairs][16 channels][2] int16, the
// reduction (r, s, c) in the NHWC filter's order, zero past the reduction's end and past the group's last channel.
constexpr int kQuantizedGemmBlockChannels = 16;

// Element types of the epilogue's 8-bit and FP32 operands.
enum class QuantizedTileType : int8_t { kUInt8 = 0, kInt8 = 1, kFloat32 = 2 };

// What the epilogue of one output row needs (QuantizedEpilogue in kernels/common/epilogue.h, with the fused add):
//   v = float(acc + bias[c]) * scale[c]
//   v = v + residual_scale * (residual - residual_zero_point)           (residual != null)
//   v = v < 0 ? 0 : v                                                  (relu)
//   y = clamp(rint(v) + dst_zero_point, conv_lo, conv_hi)              (8-bit output; an FP32 output is v)
//   y = clamp(rint(fma(a, ra, fma(b, rb, add_fixed))), add_lo, add_hi)  (fused_add: y is a or b, the other operand
//                                                                        read from add_operand)
struct QuantizedTileEpilogue {
  const int32_t* bias = nullptr;   // per output channel, or null
  const float* scale = nullptr;    // per output channel
  const void* residual = nullptr;  // output-shaped, output_type, or null
  float residual_scale = 1.0f, residual_zero_point = 0.0f;
  bool relu = false;
  QuantizedTileType output_type = QuantizedTileType::kUInt8;  // y's type (the add's when fused; FP32 never is)
  float dst_zero_point = 0.0f, conv_lo = 0.0f, conv_hi = 255.0f;
  int fused_add = 0;  // 0 none, 1 the conv's value is the add's a, 2 its b
  const void* add_operand = nullptr;
  QuantizedTileType add_operand_type = QuantizedTileType::kUInt8;
  float ra = 1.0f, rb = 1.0f, add_fixed = 0.0f, add_lo = 0.0f, add_hi = 255.0f;
};

struct QuantizedGemmTiles {
  // Rows per tile (the register tile's height) and 16-channel blocks per tile (its width), at most.
  int max_rows;
  int max_blocks;
  // dst[i] = src[i] - zero_point as int16, i < count; src UINT8 (is_unsigned) or INT8.
  void (*widen)(const void* src, bool is_unsigned, int zero_point, int16_t* dst, int64_t count);
  // acc[r * 16 * blocks + j] = sum over reduction pairs p of the products of row r of `a` ([rows][a_stride] int16,
  // 2 * pairs used) with channel j of the packed filter blocks (block b at b + b * block_stride). 1 <= rows <=
  // max_rows, 1 <= blocks <= max_blocks.
  void (*accumulate)(const int16_t* a, int64_t a_stride, int rows, const int16_t* b, int64_t block_stride,
                     int blocks, int64_t pairs, int32_t* acc);
  // Depthwise: acc[c] = sum over taps t < tap_count of (taps[t][c] - zero_point) * weight(t, c), c < channels, exact
  // in int32, with the weights in pairs of taps: w[((t / 2) * channels + c) * 2 + t % 2] (int16). tap_count is even
  // (an odd window gets a last tap with zero weights); a padding tap points at `channels` bytes of the zero point.
  // The sources are UINT8 (is_unsigned) or INT8.
  void (*depthwise)(const void* const* taps, int tap_count, bool is_unsigned, int zero_point, const int16_t* w,
                    int64_t channels, int32_t* acc);
  // The epilogue of `count` channels of `rows` output rows: row r's sums are acc[r * acc_stride + i] for channels
  // channel0 + i, its output (and residual, add operand) elements at y_offset + r * y_stride + i. A fused add and a
  // residual sum never come together (QuantizedConv2dProblem::Validate).
  void (*epilogue)(const QuantizedTileEpilogue& e, const int32_t* acc, int64_t acc_stride, int rows,
                   int64_t channel0, int64_t count, int64_t y_offset, int64_t y_stride, void* y);
};

extern const QuantizedGemmTiles kQuantizedGemmTilesBaseline;
extern const QuantizedGemmTiles kQuantizedGemmTilesAvx2;
extern const QuantizedGemmTiles kQuantizedGemmTilesAvx512;

}  // namespace convoy::cpu

#endif  // CONVOY_KERNELS_CPU_QUANTIZED_GEMM_TILES_H_
