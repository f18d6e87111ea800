// Reference layout and dtype conversion of a 4-D tensor: each element read in the source dtype and layout and
// written (rounded to nearest even) in the destination's; padded channels (dst_c > c) are zeros.
#include "kernels/common/status_macros.h"
#include "kernels/cpu/reference/reference_internal.h"
#include "kernels/cpu/reference/reference_ops.h"

namespace convoy::reference {

absl::Status Convert(const ConvertProblem& p, const ConvertArgs& args) {
  CONVOY_RETURN_IF_ERROR(p.Validate());
  CONVOY_RETURN_IF_ERROR(internal::CheckNotNull(p.ToString(), {{"args.x", args.x}, {"args.y", args.y}}));
  const TensorDesc x_desc = TensorDesc::Image(p.src_dtype, p.n, p.c, p.h, p.w, p.src_layout);
  const TensorDesc y_desc = TensorDesc::Image(p.dst_dtype, p.n, p.output_c(), p.h, p.w, p.dst_layout);
  for (int n = 0; n < p.n; ++n)
    for (int c = 0; c < p.output_c(); ++c)
      for (int y = 0; y < p.h; ++y)
        for (int x = 0; x < p.w; ++x) {
          const float v = c < p.c ? LoadAsFloat(args.x, p.src_dtype, x_desc.Offset4(n, c, y, x)) : 0.0f;
          StoreFromFloat(args.y, p.dst_dtype, y_desc.Offset4(n, c, y, x), v);
        }
  return absl::OkStatus();
}

}  // namespace convoy::reference
