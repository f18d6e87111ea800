// Reference pool2d: max, average (PyTorch divisor rules) and the global modes, with dilated windows, double
// accumulation. Written tap by tap, independently of kernels/common/pool_window.h (which the fast kernels share).
#include <algorithm>
#include <limits>

#include "kernels/common/status_macros.h"
#include "kernels/cpu/reference/reference_internal.h"
#include "kernels/cpu/reference/reference_ops.h"

namespace convoy::reference {
namespace {

// Output (oy, ox) of image n, channel c. Window taps (py0 + i * dilation_h, px0 + j * dilation_w) inside the input
// are pooled; with count_include_pad the average divides by the taps inside the padded input instead.
double PoolWindow(const Pool2dProblem& p, const Pool2dArgs& args, const TensorDesc& x_desc, int n, int c, int oy,
                  int ox) {
  const bool is_max = p.mode == PoolMode::kMax || p.mode == PoolMode::kGlobalMax;
  const bool global = p.mode == PoolMode::kGlobalAverage || p.mode == PoolMode::kGlobalMax;
  const int r = global ? p.h : p.r, s = global ? p.w : p.s;
  const int dh = global ? 1 : p.dilation_h, dw = global ? 1 : p.dilation_w;
  const int py0 = global ? 0 : oy * p.stride_h - p.pad_top, px0 = global ? 0 : ox * p.stride_w - p.pad_left;
  const int pad_bottom = global ? 0 : p.pad_bottom, pad_right = global ? 0 : p.pad_right;
  double acc = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
  int64_t inside = 0, inside_padded = 0;
  for (int i = 0; i < r; ++i) {
    const int y = py0 + i * dh;
    for (int j = 0; j < s; ++j) {
      const int x = px0 + j * dw;
      if (y < p.h + pad_bottom && x < p.w + pad_right) ++inside_padded;  // y, x >= -pad always
      if (y < 0 || y >= p.h || x < 0 || x >= p.w) continue;
      ++inside;
      const double v = LoadAsFloat(args.x, p.dtype, x_desc.Offset4(n, c, y, x));
      acc = is_max ? std::max(acc, v) : acc + v;
    }
  }
  if (is_max) return acc;
  return acc / static_cast<double>(p.count_include_pad && !global ? inside_padded : inside);
}

}  // namespace

absl::Status Pool2d(const Pool2dProblem& p, const Pool2dArgs& args) {
  CONVOY_RETURN_IF_ERROR(p.Validate());
  CONVOY_RETURN_IF_ERROR(internal::CheckNotNull(p.ToString(), {{"args.x", args.x}, {"args.y", args.y}}));
  const TensorDesc x_desc = p.input_desc(), y_desc = p.output_desc();
  for (int n = 0; n < p.n; ++n) {
    for (int c = 0; c < p.c; ++c) {
      for (int oy = 0; oy < p.p(); ++oy) {
        for (int ox = 0; ox < p.q(); ++ox) {
          const double v = PoolWindow(p, args, x_desc, n, c, oy, ox);
          StoreFromFloat(args.y, p.dtype, y_desc.Offset4(n, c, oy, ox), static_cast<float>(v));
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace convoy::reference
