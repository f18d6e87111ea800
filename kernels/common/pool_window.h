// The per-axis arithmetic of a Pool2dProblem window (problems.h), shared by the CPU algorithm and the CUDA kernel so
// both read the same taps and divide by the same count:
//
//   const PoolTaps rows = PoolTapsAlong(oy * p.stride_h - p.pad_top, p.r, p.dilation_h, p.h, p.pad_bottom);
//   for (int t = 0; t < rows.count; ++t) { const int iy = rows.first + t * p.dilation_h; ... }
//   divisor = count_include_pad ? rows.padded * cols.padded : rows.count * cols.count
//
// A window of `taps` taps starts at input index `start` (negative inside the leading padding) and reads every
// `dilation`-th index: start, start + dilation, ... Taps inside the input are read; taps inside the padding are not,
// but with count_include_pad those inside the padded input [-pad_begin, extent + pad_end) count for the average's
// divisor. Taps past the padded input (a ceil-mode window's end) never count: PyTorch's rule, which the reference
// (kernels/cpu/reference/pool2d.cc) computes tap by tap.
#ifndef CONVOY_KERNELS_COMMON_POOL_WINDOW_H_
#define CONVOY_KERNELS_COMMON_POOL_WINDOW_H_

#include "kernels/common/host_device.h"

namespace convoy {

struct PoolTaps {
  int first = 0;   // input index of the first tap inside the input
  int count = 0;   // taps inside the input [0, extent)
  int padded = 0;  // taps inside the padded input [start, extent + pad_end): the count_include_pad factor
};

// Number of taps start + i * dilation (0 <= i < taps) below `limit`.
CONVOY_HOST_DEVICE int PoolTapsBelow(int start, int taps, int dilation, int limit) {
  if (start >= limit) return 0;
  const int below = (limit - start + dilation - 1) / dilation;
  return below < taps ? below : taps;
}

CONVOY_HOST_DEVICE PoolTaps PoolTapsAlong(int start, int taps, int dilation, int extent, int pad_end) {
  // Taps before index 0 (in the leading padding): i < ceil(-start / dilation).
  const int skipped = start >= 0 ? 0 : (-start + dilation - 1) / dilation;
  const int inside = PoolTapsBelow(start, taps, dilation, extent) - skipped;
  PoolTaps t;
  t.first = start + skipped * dilation;
  t.count = inside > 0 ? inside : 0;
  t.padded = PoolTapsBelow(start, taps, dilation, extent + pad_end);
  return t;
}

}  // namespace convoy

#endif  // CONVOY_KERNELS_COMMON_POOL_WINDOW_H_
