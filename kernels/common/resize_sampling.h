// The per-axis arithmetic of ResizeProblem (problems.h), shared by the reference, the CPU algorithm, the CUDA kernel
// and the graph's reference interpreter, so every implementation picks the same source pixels and weights:
//
//   const ResizeAxis ax = ResizeAxisH(problem);
//   const float x = ResizeSourceCoordinate(ax, oy);            // ONNX's x_original of output row oy
//   if (ResizeExtrapolates(ax, x)) ...                           // tf_crop_and_resize outside the input
//   nearest: ResizeNearestIndex(ax, x)
//   linear / cubic: ResizeTaps taps = ResizeTapsOf(ax, x);      // taps.count source rows from taps.first
//                   for (int t = 0; t < taps.count; ++t) ResizeTapIndex(ax, taps, t), ResizeTapWeight(ax, taps, t)
//                   then divide by the sum of the weights (ResizeTapWeight is unnormalised)
//
// The taps follow the ONNX reference (onnx/reference/ops/op_resize.py): the `count` source positions nearest to x
// (ties to the smaller), each weighted by the filter at (position - x) * filter_scale, where filter_scale is the
// axis scale when antialiasing a downscaled axis and 1 otherwise; positions outside the input read the edge, or
// with exclude_outside get weight 0. Everything is computed in FP32, as onnxruntime does.
#ifndef CONVOY_KERNELS_COMMON_RESIZE_SAMPLING_H_
#define CONVOY_KERNELS_COMMON_RESIZE_SAMPLING_H_

#include <cmath>

#include "kernels/common/host_device.h"
#include "kernels/common/problems.h"

namespace convoy {

// One axis of a ResizeProblem.
struct ResizeAxis {
  int in = 1, out = 1;
  float scale = 1.0f, length = 1.0f;
  float roi_start = 0.0f, roi_end = 1.0f;
  ResizeMode mode = ResizeMode::kNearest;
  ResizeCoordinates coordinates = ResizeCoordinates::kHalfPixel;
  ResizeNearest nearest = ResizeNearest::kRoundPreferFloor;
  float cubic_a = -0.75f;
  bool exclude_outside = false;
  bool antialias = false;
};

CONVOY_HOST_DEVICE ResizeAxis ResizeAxisOf(const ResizeProblem& p, bool width) {
  ResizeAxis a;
  a.in = width ? p.w : p.h;
  a.out = width ? p.out_w : p.out_h;
  a.scale = width ? p.scale_w : p.scale_h;
  a.length = width ? p.length_w : p.length_h;
  a.roi_start = width ? p.roi_left : p.roi_top;
  a.roi_end = width ? p.roi_right : p.roi_bottom;
  a.mode = p.mode;
  a.coordinates = p.coordinates;
  a.nearest = p.nearest;
  a.cubic_a = p.cubic_a;
  a.exclude_outside = p.exclude_outside;
  a.antialias = p.antialias;
  return a;
}
CONVOY_HOST_DEVICE ResizeAxis ResizeAxisH(const ResizeProblem& p) { return ResizeAxisOf(p, false); }
CONVOY_HOST_DEVICE ResizeAxis ResizeAxisW(const ResizeProblem& p) { return ResizeAxisOf(p, true); }

// ONNX's x_original of output index o.
CONVOY_HOST_DEVICE float ResizeSourceCoordinate(const ResizeAxis& a, int o) {
  const float x = static_cast<float>(o);
  switch (a.coordinates) {
    case ResizeCoordinates::kHalfPixel:
      return (x + 0.5f) / a.scale - 0.5f;
    case ResizeCoordinates::kHalfPixelSymmetric: {
      // Maps the centre of the input to the centre of the output when out != in * scale.
      const float adjustment = static_cast<float>(a.out) / a.length;
      const float offset = static_cast<float>(a.in) * 0.5f * (1.0f - adjustment);
      return offset + (x + 0.5f) / a.scale - 0.5f;
    }
    case ResizeCoordinates::kPytorchHalfPixel:  // an output of one element samples the first (ONNX's formula)
      return a.out > 1 ? (x + 0.5f) / a.scale - 0.5f : 0.0f;
    case ResizeCoordinates::kAlignCorners:
      return a.length == 1.0f ? 0.0f : x * static_cast<float>(a.in - 1) / (a.length - 1.0f);
    case ResizeCoordinates::kAsymmetric:
      return x / a.scale;
    case ResizeCoordinates::kTfCropAndResize: {
      const float span = static_cast<float>(a.in - 1);
      if (a.length == 1.0f) return 0.5f * (a.roi_start + a.roi_end) * span;
      return a.roi_start * span + x * (a.roi_end - a.roi_start) * span / (a.length - 1.0f);
    }
  }
  return 0.0f;
}

// tf_crop_and_resize: the output takes the extrapolation value where its source lies outside [0, in - 1].
CONVOY_HOST_DEVICE bool ResizeExtrapolates(const ResizeAxis& a, float x) {
  return a.coordinates == ResizeCoordinates::kTfCropAndResize && (x < 0.0f || x > static_cast<float>(a.in - 1));
}

CONVOY_HOST_DEVICE int ResizeClampIndex(int i, int size) { return i < 0 ? 0 : (i >= size ? size - 1 : i); }

CONVOY_HOST_DEVICE int ResizeNearestIndex(const ResizeAxis& a, float x) {
  const float lower = floorf(x);
  const float fraction = x - lower;
  int index = static_cast<int>(lower);
  switch (a.nearest) {
    case ResizeNearest::kRoundPreferFloor: index += fraction > 0.5f ? 1 : 0; break;
    case ResizeNearest::kRoundPreferCeil: index += fraction >= 0.5f ? 1 : 0; break;
    case ResizeNearest::kFloor: break;
    case ResizeNearest::kCeil: index += fraction > 0.0f ? 1 : 0; break;
    case ResizeNearest::kSimple: index += (a.scale < 1.0f && fraction > 0.0f) ? 1 : 0; break;
  }
  return ResizeClampIndex(index, a.in);
}

struct ResizeTaps {
  int first = 0;              // source position of tap 0 (may lie outside the input)
  int count = 1;              // number of taps
  float x = 0.0f;             // the source coordinate
  float filter_scale = 1.0f;  // the filter is evaluated at (position - x) * filter_scale
};

// Taps of a linear or cubic axis at source coordinate x.
CONVOY_HOST_DEVICE ResizeTaps ResizeTapsOf(const ResizeAxis& a, float x) {
  ResizeTaps t;
  t.x = x;
  t.filter_scale = (a.antialias && a.scale < 1.0f) ? a.scale : 1.0f;
  const float support = a.mode == ResizeMode::kCubic ? 2.0f : 1.0f;
  // The ONNX reference's footprint: start = floor(-support / f) + 1 taps before, 2 - 2 * start in all.
  const int start = static_cast<int>(floorf(-support / t.filter_scale)) + 1;
  t.count = 2 - 2 * start;
  // The count positions nearest to x, ties to the smaller: for x in (k, k + 1] they start at k + start.
  t.first = static_cast<int>(ceilf(x)) - 1 + start;
  return t;
}

CONVOY_HOST_DEVICE float ResizeFilter(const ResizeAxis& a, float d) {
  d = fabsf(d);
  if (a.mode == ResizeMode::kLinear) return d < 1.0f ? 1.0f - d : 0.0f;
  const float A = a.cubic_a;
  if (d <= 1.0f) return ((A + 2.0f) * d - (A + 3.0f)) * d * d + 1.0f;
  if (d < 2.0f) return ((A * d - 5.0f * A) * d + 8.0f * A) * d - 4.0f * A;
  return 0.0f;
}

// Source index tap t reads (clamped to the edge).
CONVOY_HOST_DEVICE int ResizeTapIndex(const ResizeAxis& a, const ResizeTaps& taps, int t) {
  return ResizeClampIndex(taps.first + t, a.in);
}

// Unnormalised weight of tap t (0 for a position outside the input with exclude_outside).
CONVOY_HOST_DEVICE float ResizeTapWeight(const ResizeAxis& a, const ResizeTaps& taps, int t) {
  const int position = taps.first + t;
  if (a.exclude_outside && (position < 0 || position >= a.in)) return 0.0f;
  return ResizeFilter(a, (static_cast<float>(position) - taps.x) * taps.filter_scale);
}

}  // namespace convoy

#endif  // CONVOY_KERNELS_COMMON_RESIZE_SAMPLING_H_
