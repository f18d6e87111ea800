// Reference image pre-processing: UINT8 [N, H, W, C] -> ((x / 255 if scale_to_unit) - mean[c]) / stddev[c], written
// in the destination dtype and layout (logical dims N, C, H, W), computed in double.
#include "kernels/common/status_macros.h"
#include "kernels/cpu/reference/reference_internal.h"
#include "kernels/cpu/reference/reference_ops.h"

namespace convoy::reference {

absl::Status Preprocess(const PreprocessProblem& p, const PreprocessArgs& args) {
  CONVOY_RETURN_IF_ERROR(p.Validate());
  CONVOY_RETURN_IF_ERROR(internal::CheckNotNull(p.ToString(), {{"args.x", args.x}, {"args.y", args.y}}));
  const TensorDesc y_desc = TensorDesc::Image(p.dst_dtype, p.n, p.output_c(), p.h, p.w, p.dst_layout);
  for (int n = 0; n < p.n; ++n)
    for (int y = 0; y < p.h; ++y)
      for (int x = 0; x < p.w; ++x)
        for (int c = 0; c < p.output_c(); ++c) {
          double v = 0;  // padded channels (dst_c > c) are zeros
          if (c < p.c) {
            const int64_t src = ((int64_t{n} * p.h + y) * p.w + x) * p.c + c;  // [N, H, W, C]
            v = args.x[src];
            if (p.scale_to_unit) v /= 255.0;
            v = (v - p.mean[c]) / p.stddev[c];
          }
          StoreFromFloat(args.y, p.dst_dtype, y_desc.Offset4(n, c, y, x), static_cast<float>(v));
        }
  return absl::OkStatus();
}

}  // namespace convoy::reference
