// Reference argmax along the middle axis of [outer, axis, inner]: one output position at a time, plain `>` (`>=`
// with select_last_index) from index 0.
#include "kernels/common/status_macros.h"
#include "kernels/cpu/reference/reference_internal.h"
#include "kernels/cpu/reference/reference_ops.h"

namespace convoy::reference {

absl::Status ArgMax(const ArgMaxProblem& p, const ArgMaxArgs& args) {
  CONVOY_RETURN_IF_ERROR(p.Validate());
  CONVOY_RETURN_IF_ERROR(internal::CheckNotNull(p.ToString(), {{"args.x", args.x}, {"args.y", args.y}}));
  for (int64_t o = 0; o < p.outer; ++o)
    for (int64_t i = 0; i < p.inner; ++i) {
      int64_t best = 0;
      float best_value = LoadAsFloat(args.x, p.dtype, o * p.axis * p.inner + i);
      for (int64_t a = 1; a < p.axis; ++a) {
        const float v = LoadAsFloat(args.x, p.dtype, (o * p.axis + a) * p.inner + i);
        if (v > best_value || (p.select_last_index && v == best_value)) best = a, best_value = v;
      }
      const int64_t y = o * p.inner + i;
      switch (p.index_dtype) {
        case DataType::kInt32: static_cast<int32_t*>(args.y)[y] = static_cast<int32_t>(best); break;
        case DataType::kInt64: static_cast<int64_t*>(args.y)[y] = best; break;
        default: StoreFromFloat(args.y, p.index_dtype, y, static_cast<float>(best)); break;  // UINT8 and floats
      }
    }
  return absl::OkStatus();
}

}  // namespace convoy::reference
