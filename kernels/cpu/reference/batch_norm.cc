// Reference inference batch norm: y = act(gamma * (x - mean) / sqrt(var + eps) + beta), in double.
#include <cmath>

#include "kernels/common/status_macros.h"
#include "kernels/cpu/reference/reference_internal.h"
#include "kernels/cpu/reference/reference_ops.h"

namespace convoy::reference {

absl::Status BatchNorm(const BatchNormProblem& p, const BatchNormArgs& args) {
  CONVOY_RETURN_IF_ERROR(p.Validate());
  CONVOY_RETURN_IF_ERROR(internal::CheckNotNull(
      p.ToString(), {{"args.x", args.x}, {"args.gamma", args.gamma}, {"args.beta", args.beta},
                     {"args.mean", args.mean}, {"args.var", args.var}, {"args.y", args.y}}));
  const TensorDesc desc = p.desc();
  for (int n = 0; n < p.n; ++n) {
    for (int c = 0; c < p.c; ++c) {
      const double inv_std = 1.0 / std::sqrt(double{args.var[c]} + p.epsilon);
      for (int y = 0; y < p.h; ++y) {
        for (int x = 0; x < p.w; ++x) {
          const int64_t offset = desc.Offset4(n, c, y, x);
          const double v = (LoadAsFloat(args.x, p.dtype, offset) - double{args.mean[c]}) * inv_std * args.gamma[c] +
                           args.beta[c];
          StoreFromFloat(args.y, p.dtype, offset, static_cast<float>(ApplyActivationReference(v, p.activation)));
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace convoy::reference
