// An optional capability of a conv algorithm, beside the kernel contract (algorithm.h): it adds the residual onto
// what the output buffer holds, as oneDNN's sum post-op does. Given args.residual == args.y it reads each residual
// element there before overwriting it; given two buffers it first copies the residual into y. A plan then lets the
// output take over the residual's storage where nothing reads the residual afterwards, which saves that copy
// (server/runtime/planner.cc, PlaceOutputOverResidual), and the autotuner times it that way (autotuner.h,
// TimeAsPlanned). Every other algorithm needs y apart from the residual.
//
//   class MyConv final : public Conv2dAlgorithm, public ResidualInOutput { ... };
//   if (AccumulatesOntoOutput(*algorithm, problem)) { /* y may be the residual's buffer */ }
#ifndef CONVOY_KERNELS_REGISTRY_RESIDUAL_IN_OUTPUT_H_
#define CONVOY_KERNELS_REGISTRY_RESIDUAL_IN_OUTPUT_H_

#include "kernels/common/problems.h"
#include "kernels/registry/algorithm.h"

namespace convoy {

class ResidualInOutput {
 public:
  virtual ~ResidualInOutput() = default;
  // Whether Run adds the residual of `problem` onto the output buffer (false where the problem has no residual, or
  // where the algorithm takes it another way for this problem).
  virtual bool AccumulatesOntoOutput(const Conv2dProblem& problem) const = 0;
  // The same for an INT8 convolution's residual (its sum, or the add fused after it); none by default.
  virtual bool AccumulatesOntoOutput(const QuantizedConv2dProblem& problem) const { return false; }
};

// Whether `algorithm` adds the residual of `problem` onto the output buffer: false for algorithms without the
// capability.
inline bool AccumulatesOntoOutput(const Conv2dAlgorithm& algorithm, const Conv2dProblem& problem) {
  const auto* capable = dynamic_cast<const ResidualInOutput*>(&algorithm);
  return capable != nullptr && capable->AccumulatesOntoOutput(problem);
}

inline bool AccumulatesOntoOutput(const QuantizedConv2dAlgorithm& algorithm, const QuantizedConv2dProblem& problem) {
  const auto* capable = dynamic_cast<const ResidualInOutput*>(&algorithm);
  return capable != nullptr && capable->AccumulatesOntoOutput(problem);
}

}  // namespace convoy

#endif  // CONVOY_KERNELS_REGISTRY_RESIDUAL_IN_OUTPUT_H_
