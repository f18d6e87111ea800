// Reference standalone activation: y[i] = act(x[i]) in double.
#include "kernels/common/status_macros.h"
#include "kernels/cpu/reference/reference_internal.h"
#include "kernels/cpu/reference/reference_ops.h"

namespace convoy::reference {

absl::Status Activation(const ActivationProblem& p, const ActivationArgs& args) {
  CONVOY_RETURN_IF_ERROR(p.Validate());
  CONVOY_RETURN_IF_ERROR(internal::CheckNotNull(p.ToString(), {{"args.x", args.x}, {"args.y", args.y}}));
  for (int64_t i = 0; i < p.count; ++i) {
    const double v = ApplyActivationReference(LoadAsFloat(args.x, p.dtype, i), p.activation);
    StoreFromFloat(args.y, p.dtype, i, static_cast<float>(v));
  }
  return absl::OkStatus();
}

}  // namespace convoy::reference
