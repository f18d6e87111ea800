// Reference conv2d: direct convolution, one output element at a time, double accumulation.
#include "kernels/common/status_macros.h"
#include "kernels/cpu/reference/reference_internal.h"
#include "kernels/cpu/reference/reference_ops.h"

namespace convoy::reference {
namespace {

// Offset in elements of filter tap (k, c, r, s), c counted within the group, in the layout's filter convention.
int64_t FilterOffset(const Conv2dProblem& p, int k, int c, int r, int s) {
  const int cg = p.c_per_group();
  if (p.layout != Layout::kNHWC) return ((int64_t{k} * cg + c) * p.r + r) * p.s + s;  // [K, C/g, R, S]
  return ((int64_t{k} * p.r + r) * p.s + s) * cg + c;                                 // [K, R, S, C/g]
}

// The sum over one group's input channels and filter taps for output element (n, k, out_y, out_x).
double Accumulate(const Conv2dProblem& p, const Conv2dArgs& args, const TensorDesc& x_desc, int n, int k, int out_y,
                  int out_x) {
  const int group = k / p.k_per_group();
  double acc = 0.0;
  for (int c = 0; c < p.c_per_group(); ++c) {
    const int in_c = group * p.c_per_group() + c;
    for (int r = 0; r < p.r; ++r) {
      const int in_y = out_y * p.stride_h - p.pad_top + r * p.dilation_h;
      if (in_y < 0 || in_y >= p.h) continue;
      for (int s = 0; s < p.s; ++s) {
        const int in_x = out_x * p.stride_w - p.pad_left + s * p.dilation_w;
        if (in_x < 0 || in_x >= p.w) continue;
        const double x = LoadAsFloat(args.x, p.dtype, x_desc.Offset4(n, in_c, in_y, in_x));
        const double w = LoadAsFloat(args.w, p.dtype, FilterOffset(p, k, c, r, s));
        acc += x * w;
      }
    }
  }
  return acc;
}

}  // namespace

absl::Status Conv2d(const Conv2dProblem& p, const Conv2dArgs& args) {
  CONVOY_RETURN_IF_ERROR(p.Validate());
  const std::string name = p.ToString();
  CONVOY_RETURN_IF_ERROR(internal::CheckNotNull(name, {{"args.x", args.x}, {"args.w", args.w}, {"args.y", args.y}}));
  CONVOY_RETURN_IF_ERROR(internal::CheckEpilogueOperands(name, p.epilogue, args.scale, args.bias, args.residual));
  const TensorDesc x_desc = p.input_desc();
  const TensorDesc y_desc = p.output_desc();
  for (int n = 0; n < p.n; ++n) {
    for (int k = 0; k < p.k; ++k) {
      for (int out_y = 0; out_y < p.p(); ++out_y) {
        for (int out_x = 0; out_x < p.q(); ++out_x) {
          const int64_t y_offset = y_desc.Offset4(n, k, out_y, out_x);
          const double residual =
              p.epilogue.residual == ResidualMode::kNone ? 0.0 : LoadAsFloat(args.residual, p.dtype, y_offset);
          const double acc = Accumulate(p, args, x_desc, n, k, out_y, out_x);
          const double y = internal::ApplyEpilogueReference(acc, p.epilogue, args.scale, args.bias, k, residual);
          StoreFromFloat(args.y, p.dtype, y_offset, static_cast<float>(y));
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace convoy::reference
