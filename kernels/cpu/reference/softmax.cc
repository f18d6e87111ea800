// Reference softmax along the middle axis of a dense [outer, axis, inner] tensor, stable, in double.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/common/status_macros.h"
#include "kernels/cpu/reference/reference_internal.h"
#include "kernels/cpu/reference/reference_ops.h"

namespace convoy::reference {

absl::Status Softmax(const SoftmaxProblem& p, const SoftmaxArgs& args) {
  CONVOY_RETURN_IF_ERROR(p.Validate());
  CONVOY_RETURN_IF_ERROR(internal::CheckNotNull(p.ToString(), {{"args.x", args.x}, {"args.y", args.y}}));
  for (int64_t o = 0; o < p.outer; ++o) {
    for (int64_t i = 0; i < p.inner; ++i) {
      const int64_t base = o * p.axis * p.inner + i;  // element (o, 0, i); the axis has stride `inner`
      double max_value = -std::numeric_limits<double>::infinity();
      for (int64_t a = 0; a < p.axis; ++a) max_value = std::max<double>(max_value, LoadAsFloat(args.x, p.dtype, base + a * p.inner));
      double sum = 0.0;
      for (int64_t a = 0; a < p.axis; ++a) sum += std::exp(LoadAsFloat(args.x, p.dtype, base + a * p.inner) - max_value);
      for (int64_t a = 0; a < p.axis; ++a) {
        const double e = std::exp(LoadAsFloat(args.x, p.dtype, base + a * p.inner) - max_value);
        StoreFromFloat(args.y, p.dtype, base + a * p.inner, static_cast<float>(e / sum));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace convoy::reference
