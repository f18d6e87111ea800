#include "server/runtime/resize_lowering.h"

namespace convoy::runtime {

ResizeProblem LowerResize(const ResizeAttrs& a, int64_t n, int64_t c, int64_t h, int64_t w) {
  ResizeProblem p;
  p.n = static_cast<int>(n), p.c = static_cast<int>(c), p.h = static_cast<int>(h), p.w = static_cast<int>(w);
  p.out_h = static_cast<int>(a.out_h), p.out_w = static_cast<int>(a.out_w);
  p.scale_h = a.scale_h, p.scale_w = a.scale_w, p.length_h = a.length_h, p.length_w = a.length_w;
  // The graph's enums list the same values in the same order as the kernel library's.
  p.mode = static_cast<convoy::ResizeMode>(static_cast<int>(a.mode));
  p.coordinates = static_cast<convoy::ResizeCoordinates>(static_cast<int>(a.coordinates));
  p.nearest = static_cast<convoy::ResizeNearest>(static_cast<int>(a.nearest));
  p.cubic_a = a.cubic_a;
  p.exclude_outside = a.exclude_outside;
  p.antialias = a.antialias;
  p.roi_top = a.roi_top, p.roi_left = a.roi_left, p.roi_bottom = a.roi_bottom, p.roi_right = a.roi_right;
  p.extrapolation_value = a.extrapolation_value;
  return p;
}

}  // namespace convoy::runtime
