// Reference pool2d: max, average (PyTorch divisor rules) and the global modes, double accumulation.
#include <algorithm>
#include <limits>

#include "kernels/common/status_macros.h"
#include "kernels/cpu/reference/reference_internal.h"
#include "kernels/cpu/reference/reference_ops.h"

namespace convoy::reference {
namespace {

// Pools window [y0, y1) x [x0, x1) (already clipped to the input) of image n, channel c. `divisor` is used by the
// average modes only.
double PoolWindow(const Pool2dProblem& p, const Pool2dArgs& args, const TensorDesc& x_desc, int n, int c, int y0,
                  int y1, int x0, int x1, double divisor) {
  const bool is_max = p.mode == PoolMode::kMax || p.mode == PoolMode::kGlobalMax;
  double acc = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
  for (int y = y0; y < y1; ++y) {
    for (int x = x0; x < x1; ++x) {
      const double v = LoadAsFloat(args.x, p.dtype, x_desc.Offset4(n, c, y, x));
      acc = is_max ? std::max(acc, v) : acc + v;
    }
  }
  return is_max ? acc : acc / divisor;
}

}  // namespace

absl::Status Pool2d(const Pool2dProblem& p, const Pool2dArgs& args) {
  CONVOY_RETURN_IF_ERROR(p.Validate());
  CONVOY_RETURN_IF_ERROR(internal::CheckNotNull(p.ToString(), {{"args.x", args.x}, {"args.y", args.y}}));
  const bool global = p.mode == PoolMode::kGlobalAverage || p.mode == PoolMode::kGlobalMax;
  const TensorDesc x_desc = p.input_desc(), y_desc = p.output_desc();
  for (int n = 0; n < p.n; ++n) {
    for (int c = 0; c < p.c; ++c) {
      for (int oy = 0; oy < p.p(); ++oy) {
        for (int ox = 0; ox < p.q(); ++ox) {
          double v;
          if (global) {
            v = PoolWindow(p, args, x_desc, n, c, 0, p.h, 0, p.w, static_cast<double>(p.h) * p.w);
          } else {
            // Window in padded coordinates, clipped to the padded input (the count_include_pad divisor) ...
            const int py0 = oy * p.stride_h - p.pad_top, px0 = ox * p.stride_w - p.pad_left;
            const int py1 = std::min(py0 + p.r, p.h + p.pad_bottom), px1 = std::min(px0 + p.s, p.w + p.pad_right);
            // ... and to the input itself (the elements that exist).
            const int y0 = std::max(py0, 0), y1 = std::min(py1, p.h), x0 = std::max(px0, 0), x1 = std::min(px1, p.w);
            const double divisor =
                p.count_include_pad ? static_cast<double>(py1 - py0) * (px1 - px0) : static_cast<double>(y1 - y0) * (x1 - x0);
            v = PoolWindow(p, args, x_desc, n, c, y0, y1, x0, x1, divisor);
          }
          StoreFromFloat(args.y, p.dtype, y_desc.Offset4(n, c, oy, ox), static_cast<float>(v));
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace convoy::reference
