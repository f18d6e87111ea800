// The FP32 / BF16 NHWC depthwise convolution's row kernel (conv2d_depthwise.cc), compiled once per instruction set:
// depthwise_nhwc_rows_baseline.cc (x86-64-v2: SSE4.2), depthwise_nhwc_rows_avx2.cc (-mavx2 -mfma) and
// depthwise_nhwc_rows_avx512.cc (-mavx512f/bw/dq/vl), each from the same body (depthwise_nhwc_rows_body.inc) with its
// vector width. Pick a table after checking CpuSupports (cpu_isa.h): calling a table the CPU lacks the instructions
// for faults.
//
// This header stays free of anything but <cstdint>: the per-instruction-set translation units include it.
#ifndef CONVOY_KERNELS_CPU_DEPTHWISE_NHWC_ROWS_H_
#define CONVOY_KERNELS_CPU_DEPTHWISE_NHWC_ROWS_H_

#include <cstdint>

namespace convoy::cpu {

// One output row y[n, oh, :, :] of a depthwise convolution (groups == C == K) on NHWC tensors, FP32 or BF16 (x, y and
// the residual of one type; the filter, scale and bias FP32; BF16 computes in FP32 and rounds once at the store):
//
//   y[ow, c] = finish(sum over the taps (r, s) inside the input of w[r, s, c] * x[ih, iw, c])
//   ih = oh * stride_h - pad_top + r * dilation_h,  iw = ow * stride_w - pad_left + s * dilation_w
//   finish(v) = clamp(v * scale[c] + bias[c] (+ residual before), lo, hi) (+ residual after)
//
// with a missing scale 1, a missing bias 0, and the clamp like fminf(fmaxf(v, lo), hi) (a NaN sum becomes lo). With
// no scale, bias, residual or clamp the raw sums are stored. Taps (r * s) at most kMaxDepthwiseNhwcTaps.
struct DepthwiseNhwcRow {
  const void* x = nullptr;          // x[n, 0, 0, 0]: the image
  const float* w = nullptr;         // the packed filter w[r, s, c]
  const float* scale = nullptr;     // [C] or null
  const float* bias = nullptr;      // [C] or null
  const void* residual = nullptr;   // residual[n, oh, 0, 0] (shaped like y) or null
  void* y = nullptr;                // y[n, oh, 0, 0]
  int64_t h = 0, w_in = 0, c = 0;   // the input's height, width and channels
  int64_t out_w = 0, oh = 0;
  int r = 0, s = 0;
  int stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1, pad_top = 0, pad_left = 0;
  int residual_mode = 0;  // 0: none, 1: added before the clamp, 2: after it
  bool clamp = false;
  float lo = 0.0f, hi = 0.0f;
};

constexpr int kMaxDepthwiseNhwcTaps = 64;

struct DepthwiseNhwcRowKernels {
  void (*fp32_row)(const DepthwiseNhwcRow& row);
  void (*bf16_row)(const DepthwiseNhwcRow& row);  // x, y and the residual as BF16 bits (uint16_t)
};

extern const DepthwiseNhwcRowKernels kDepthwiseNhwcRowsBaseline;
extern const DepthwiseNhwcRowKernels kDepthwiseNhwcRowsAvx2;
extern const DepthwiseNhwcRowKernels kDepthwiseNhwcRowsAvx512;

}  // namespace convoy::cpu

#endif  // CONVOY_KERNELS_CPU_DEPTHWISE_NHWC_ROWS_H_
