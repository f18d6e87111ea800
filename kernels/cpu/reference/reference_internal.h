// Small pieces shared by the reference implementations: argument checks and the fused epilogue in double.
#ifndef CONVOY_KERNELS_CPU_REFERENCE_REFERENCE_INTERNAL_H_
#define CONVOY_KERNELS_CPU_REFERENCE_REFERENCE_INTERNAL_H_

#include <initializer_list>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/common/epilogue.h"

namespace convoy::reference::internal {

// INVALID_ARGUMENT naming the first null pointer among `pointers` ({"args.x", args.x}, ...).
inline absl::Status CheckNotNull(const std::string& problem,
                                 std::initializer_list<std::pair<const char*, const void*>> pointers) {
  for (const auto& [name, pointer] : pointers) {
    if (pointer == nullptr) return absl::InvalidArgumentError(absl::StrCat(problem, ": ", name, " is null"));
  }
  return absl::OkStatus();
}

// The epilogue of epilogue.h evaluated in double: act(acc * scale[k] + bias[k] (+ r)) (+ r).
inline double ApplyEpilogueReference(double acc, const Epilogue& e, const float* scale, const float* bias, int k,
                                     double residual) {
  double v = acc;
  if (e.has_scale) v *= scale[k];
  if (e.has_bias) v += bias[k];
  if (e.residual == ResidualMode::kBeforeActivation) v += residual;
  v = ApplyActivationReference(v, e.activation);
  if (e.residual == ResidualMode::kAfterActivation) v += residual;
  return v;
}

// Null checks for the optional epilogue operands the epilogue asks for.
inline absl::Status CheckEpilogueOperands(const std::string& problem, const Epilogue& e, const float* scale,
                                          const float* bias, const void* residual) {
  if (e.has_scale && scale == nullptr) return CheckNotNull(problem, {{"scale (epilogue has_scale)", nullptr}});
  if (e.has_bias && bias == nullptr) return CheckNotNull(problem, {{"bias (epilogue has_bias)", nullptr}});
  if (e.residual != ResidualMode::kNone && residual == nullptr) {
    return CheckNotNull(problem, {{"residual (epilogue has a residual)", nullptr}});
  }
  return absl::OkStatus();
}

}  // namespace convoy::reference::internal

#endif  // CONVOY_KERNELS_CPU_REFERENCE_REFERENCE_INTERNAL_H_
