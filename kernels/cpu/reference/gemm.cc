// Reference GEMM: Y[m, n] = epilogue(sum_k A[m, k] * B[n, k]), double accumulation.
#include "kernels/common/status_macros.h"
#include "kernels/cpu/reference/reference_internal.h"
#include "kernels/cpu/reference/reference_ops.h"

namespace convoy::reference {

absl::Status Gemm(const GemmProblem& p, const GemmArgs& args) {
  CONVOY_RETURN_IF_ERROR(p.Validate());
  const std::string name = p.ToString();
  CONVOY_RETURN_IF_ERROR(internal::CheckNotNull(name, {{"args.a", args.a}, {"args.b", args.b}, {"args.y", args.y}}));
  CONVOY_RETURN_IF_ERROR(internal::CheckEpilogueOperands(name, p.epilogue, args.scale, args.bias, args.residual));
  for (int64_t row = 0; row < p.m; ++row) {
    for (int64_t col = 0; col < p.n; ++col) {
      double acc = 0.0;
      for (int64_t i = 0; i < p.k; ++i) {
        acc += double{LoadAsFloat(args.a, p.dtype, row * p.k + i)} * LoadAsFloat(args.b, p.dtype, col * p.k + i);
      }
      const int64_t y_offset = row * p.n + col;
      const double residual =
          p.epilogue.residual == ResidualMode::kNone ? 0.0 : LoadAsFloat(args.residual, p.dtype, y_offset);
      const double y = internal::ApplyEpilogueReference(acc, p.epilogue, args.scale, args.bias,
                                                        static_cast<int>(col), residual);
      StoreFromFloat(args.y, p.dtype, y_offset, static_cast<float>(y));
    }
  }
  return absl::OkStatus();
}

}  // namespace convoy::reference
