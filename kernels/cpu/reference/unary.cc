// Reference unary functions: each definition of unary_function.h written again from ONNX's operator text and
// evaluated in double (Softplus as log(1 + exp(x)), Selu's and Gelu's constants spelled out), so the shared FP32
// function the kernels use is checked against an independent formulation.
#include <cmath>

#include "kernels/common/status_macros.h"
#include "kernels/cpu/reference/reference_internal.h"
#include "kernels/cpu/reference/reference_ops.h"

namespace convoy::reference {
namespace {

double Softplus(double x) { return x > 30.0 ? x : std::log(1.0 + std::exp(x)); }

double UnaryValue(const UnaryProblem& p, double x) {
  const double alpha = p.alpha, beta = p.beta;
  switch (p.kind) {
    case UnaryKind::kElu: return x > 0 ? x : alpha * (std::exp(x) - 1.0);
    case UnaryKind::kSelu: return beta * (x > 0 ? x : alpha * (std::exp(x) - 1.0));
    case UnaryKind::kCelu: return std::max(0.0, x) + std::min(0.0, alpha * (std::exp(x / alpha) - 1.0));
    case UnaryKind::kSoftplus: return Softplus(x);
    case UnaryKind::kSoftsign: return x / (1.0 + std::abs(x));
    case UnaryKind::kMish: return x * std::tanh(Softplus(x));
    case UnaryKind::kThresholdedRelu: return x > alpha ? x : 0.0;
    case UnaryKind::kGeluTanh: {
      const double pi = 3.14159265358979323846;
      return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / pi) * (x + 0.044715 * x * x * x)));
    }
    case UnaryKind::kErf: return std::erf(x);
    case UnaryKind::kExp: return std::exp(x);
    case UnaryKind::kLog: return std::log(x);
    case UnaryKind::kAbs: return std::abs(x);
    case UnaryKind::kNeg: return -x;
    case UnaryKind::kSqrt: return std::sqrt(x);
    case UnaryKind::kReciprocal: return 1.0 / x;
    case UnaryKind::kFloor: return std::floor(x);
    case UnaryKind::kCeil: return std::ceil(x);
    case UnaryKind::kRound: return std::nearbyint(x);  // the default rounding mode: half to even
    case UnaryKind::kSign: return x > 0 ? 1.0 : x < 0 ? -1.0 : x;
  }
  return x;
}

}  // namespace

absl::Status Unary(const UnaryProblem& p, const UnaryArgs& args) {
  CONVOY_RETURN_IF_ERROR(p.Validate());
  CONVOY_RETURN_IF_ERROR(internal::CheckNotNull(p.ToString(), {{"args.x", args.x}, {"args.y", args.y}}));
  for (int64_t i = 0; i < p.count; ++i) {
    StoreFromFloat(args.y, p.dtype, i, static_cast<float>(UnaryValue(p, LoadAsFloat(args.x, p.dtype, i))));
  }
  return absl::OkStatus();
}

}  // namespace convoy::reference
