// Reference spatial padding: constant, reflect (mirror without repeating the edge) and edge (repeat the border).
#include <algorithm>

#include "kernels/common/status_macros.h"
#include "kernels/cpu/reference/reference_internal.h"
#include "kernels/cpu/reference/reference_ops.h"

namespace convoy::reference {
namespace {

// Source coordinate for padded coordinate i in [-pad_before, size + pad_after), or -1 for the constant value.
int SourceIndex(PadMode mode, int i, int size) {
  if (i >= 0 && i < size) return i;
  switch (mode) {
    case PadMode::kConstant: return -1;
    case PadMode::kReflect: return i < 0 ? -i : 2 * (size - 1) - i;
    case PadMode::kEdge: return std::clamp(i, 0, size - 1);
  }
  return -1;
}

}  // namespace

absl::Status Pad(const PadProblem& p, const PadArgs& args) {
  CONVOY_RETURN_IF_ERROR(p.Validate());
  CONVOY_RETURN_IF_ERROR(internal::CheckNotNull(p.ToString(), {{"args.x", args.x}, {"args.y", args.y}}));
  const TensorDesc x_desc = TensorDesc::Image(p.dtype, p.n, p.c, p.h, p.w, p.layout);
  const TensorDesc y_desc = TensorDesc::Image(p.dtype, p.n, p.c, p.out_h(), p.out_w(), p.layout);
  for (int n = 0; n < p.n; ++n)
    for (int c = 0; c < p.c; ++c)
      for (int oy = 0; oy < p.out_h(); ++oy)
        for (int ox = 0; ox < p.out_w(); ++ox) {
          const int sy = SourceIndex(p.mode, oy - p.pad_top, p.h), sx = SourceIndex(p.mode, ox - p.pad_left, p.w);
          const float v = (sy < 0 || sx < 0) ? p.value : LoadAsFloat(args.x, p.dtype, x_desc.Offset4(n, c, sy, sx));
          StoreFromFloat(args.y, p.dtype, y_desc.Offset4(n, c, oy, ox), v);
        }
  return absl::OkStatus();
}

}  // namespace convoy::reference
