// The element loops of the CPU INT8 steps, vectorized: the quantized residual add (quantized_add.h) and ONNX's
// QuantizeLinear / DequantizeLinear over contiguous runs (the quantize and dequantize steps of convert.h). Each loop
// has three versions: AVX-512 (16 lanes), AVX2 (8 lanes) and portable C++ (the baseline); BestCpuIsa() (cpu_isa.h)
// picks the widest the CPU runs, and every version is callable directly so tests check each one the machine has.
//
// Every version computes the same FP32 operations in the same order as the scalar definition (no FMA contraction: the
// library is compiled with -ffp-contract=off; explicit FMAs where the definition has them; rounding half to even by
// the rounding instruction, as rintf), so the versions agree bit for bit with each other and with:
//   add:        ra = a_scale / y_scale, rb = b_scale / y_scale, fixed = y_zp - fma(ra, a_zp, rb * b_zp),
//               y = saturate(rint(fma(a, ra, fma(b, rb, fixed))))
//   quantize:   y = saturate(rint(x / scale) + zp), NaN -> the type's minimum
//   dequantize: y = (x - zp) * scale
// The add is onnxruntime's x86 QLinearAdd (MLAS's AVX2 kernel, which it also runs on AVX-512 CPUs), the operation a
// QDQ model's DequantizeLinear, DequantizeLinear -> Add -> QuantizeLinear becomes there; ONNX's own definition,
// saturate(rint(((a - a_zp) * a_scale + (b - b_zp) * b_scale) / y_scale) + y_zp), rounds about 4 of 10^6 operand
// pairs to the neighbouring step, and such a step travels on through a deep network (ResNet-50: 7 outputs in 10^5 of
// its first residual add, 22 % of the logits one step off). The AVX2 version needs FMA as well (every AVX2 CPU has it).
// The AVX versions are compiled for their ISA with function target attributes (not per-file -m flags), so no
// inline function shared with the rest of the program is ever compiled for an ISA the CPU may lack.
#ifndef CONVOY_KERNELS_CPU_QUANTIZED_VECTOR_LOOPS_H_
#define CONVOY_KERNELS_CPU_QUANTIZED_VECTOR_LOOPS_H_

#include <cstdint>
#include <vector>

#include "kernels/cpu/cpu_isa.h"

namespace convoy::cpu {

// The quantization of one 8-bit tensor: scale, zero point, UINT8 (else INT8).
struct ByteQuantization {
  float scale = 1.0f;
  int zero_point = 0;
  bool is_unsigned = true;
};

// y[i] = the quantized add of a[i] and b[i] (above), i < count. y may equal a or b.
void QuantizedAddLoop(CpuIsa isa, const ByteQuantization& a, const void* a_data, const ByteQuantization& b,
                      const void* b_data, const ByteQuantization& y, void* y_data, int64_t count);

// QuantizeLinear of `runs` runs of `width` FP32 values: run r reads x + r * x_stride and writes y + r * y_stride
// (strides in elements). One run of a whole buffer is a flat loop; width 8 with strides 8 and C walks NCHW8c <-> NHWC.
void QuantizeRuns(CpuIsa isa, const ByteQuantization& q, const float* x, int64_t x_stride, void* y,
                  int64_t y_stride, int64_t runs, int64_t width);

// DequantizeLinear of `runs` runs of `width` 8-bit values, as QuantizeRuns.
void DequantizeRuns(CpuIsa isa, const ByteQuantization& q, const void* x, int64_t x_stride, float* y,
                    int64_t y_stride, int64_t runs, int64_t width);

}  // namespace convoy::cpu

#endif  // CONVOY_KERNELS_CPU_QUANTIZED_VECTOR_LOOPS_H_
