// NaiveGemmForTests: a CPU FP32 GEMM algorithm (Y = epilogue(A * B^T), one loop nest) for tests that register fake
// algorithms of their own (autotuner_test, verification_test): each derives, names itself, and changes what it
// needs (its cost, a planted error) around NaiveGemmForTests::Run. Test-only (the :naive_gemm_for_tests target).
#ifndef CONVOY_KERNELS_REGISTRY_NAIVE_GEMM_FOR_TESTS_H_
#define CONVOY_KERNELS_REGISTRY_NAIVE_GEMM_FOR_TESTS_H_

#include "absl/status/status.h"
#include "kernels/common/epilogue.h"
#include "kernels/registry/algorithm.h"

namespace convoy {

template <int kScore>
class NaiveGemmForTests : public GemmAlgorithm {
 public:
  Backend backend() const override { return Backend::kCpu; }
  absl::Status CanImplement(const GemmProblem& p) const override {
    return p.dtype == DataType::kFloat32 ? absl::OkStatus() : absl::UnimplementedError("FP32 only");
  }
  int HeuristicScore(const GemmProblem&) const override { return kScore; }
  absl::Status Run(const GemmProblem& p, const GemmArgs& args, Workspace, const ExecutionContext&) const override {
    const float* a = static_cast<const float*>(args.a);
    const float* b = static_cast<const float*>(args.b);
    float* y = static_cast<float*>(args.y);
    for (int i = 0; i < p.m; ++i) {
      for (int j = 0; j < p.n; ++j) {
        float acc = 0;
        for (int k = 0; k < p.k; ++k) acc += a[i * p.k + k] * b[j * p.k + k];
        y[i * p.n + j] = ApplyEpilogue(acc, p.epilogue, args.scale, args.bias, j, 0.0f);
      }
    }
    return absl::OkStatus();
  }
};

}  // namespace convoy

#endif  // CONVOY_KERNELS_REGISTRY_NAIVE_GEMM_FOR_TESTS_H_
