// Reference 2-D transposed convolution, written as the scatter the definition describes: every input element adds
// x * filter into the outputs its filter taps reach (accumulated in double), then the bias. The CPU and CUDA
// algorithms gather instead, so the two formulations check each other.
#include <vector>

#include "kernels/common/status_macros.h"
#include "kernels/cpu/reference/reference_internal.h"
#include "kernels/cpu/reference/reference_ops.h"

namespace convoy::reference {
namespace {

// Element (n, c, y, x) of an [N, C, H, W] tensor stored in `layout` (NCHW or NHWC).
int64_t ImageIndex(Layout layout, int64_t n, int64_t c, int64_t y, int64_t x, int64_t C, int64_t H, int64_t W) {
  return layout == Layout::kNHWC ? ((n * H + y) * W + x) * C + c : ((n * C + c) * H + y) * W + x;
}

}  // namespace

absl::Status ConvTranspose2d(const ConvTranspose2dProblem& p, const ConvTranspose2dArgs& args) {
  CONVOY_RETURN_IF_ERROR(p.Validate());
  const std::string name = p.ToString();
  CONVOY_RETURN_IF_ERROR(internal::CheckNotNull(name, {{"args.x", args.x}, {"args.w", args.w}, {"args.y", args.y}}));
  if (p.has_bias) CONVOY_RETURN_IF_ERROR(internal::CheckNotNull(name, {{"args.bias (has_bias)", args.bias}}));
  const int64_t c_per_group = p.c / p.groups, k_per_group = p.k / p.groups;
  std::vector<double> acc(static_cast<size_t>(p.n) * p.k * p.out_h * p.out_w, 0.0);  // NCHW
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t c = 0; c < p.c; ++c) {
      const int64_t g = c / c_per_group;
      for (int64_t iy = 0; iy < p.h; ++iy)
        for (int64_t ix = 0; ix < p.w; ++ix) {
          const double xv = LoadAsFloat(args.x, p.dtype, ImageIndex(p.layout, n, c, iy, ix, p.c, p.h, p.w));
          for (int64_t kk = 0; kk < k_per_group; ++kk)
            for (int64_t r = 0; r < p.r; ++r) {
              const int64_t oy = iy * p.stride_h - p.pad_top + r * p.dilation_h;
              if (oy < 0 || oy >= p.out_h) continue;
              for (int64_t s = 0; s < p.s; ++s) {
                const int64_t ox = ix * p.stride_w - p.pad_left + s * p.dilation_w;
                if (ox < 0 || ox >= p.out_w) continue;
                const double wv = LoadAsFloat(args.w, p.dtype, ((c * k_per_group + kk) * p.r + r) * p.s + s);
                acc[((n * p.k + g * k_per_group + kk) * p.out_h + oy) * p.out_w + ox] += xv * wv;
              }
            }
        }
    }
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t k = 0; k < p.k; ++k)
      for (int64_t oy = 0; oy < p.out_h; ++oy)
        for (int64_t ox = 0; ox < p.out_w; ++ox) {
          double v = acc[((n * p.k + k) * p.out_h + oy) * p.out_w + ox];
          if (p.has_bias) v += args.bias[k];
          StoreFromFloat(args.y, p.dtype, ImageIndex(p.layout, n, k, oy, ox, p.k, p.out_h, p.out_w),
                         static_cast<float>(v));
        }
  return absl::OkStatus();
}

}  // namespace convoy::reference
