// GEMM / fully connected on tensor cores: Y[m, n] = epilogue(A[m, k] * B[n, k]^T), FP16/BF16 with FP32
// accumulation, FP32 as TF32 when allow_tf32. It runs the 1x1 implicit-GEMM mainloop (conv2d_implicit_gemm_kernel.cuh)
// with A as the [m, k] "pixels x channels" matrix and B as the [n, k] filter; bias/scale index n; the residual is
// [m, n]. Two tile shapes: cuda.gemm.tensor_core_128x64 (large m) and cuda.gemm.tensor_core_64x64 (small m: FC
// layers at small batch).
//
// CanImplement: FP16/BF16, or FP32 with allow_tf32; k a multiple of 8 (FP16/BF16) or 4 (FP32); n even; a and b
// 16-byte aligned, y aligned to two elements (8 bytes for FP32: paired stores) and residual 4-byte (checked in Run).
#include <string>

#include "kernels/cuda/conv2d_implicit_gemm_algorithm.cuh"
#include "kernels/registry/registry.h"

namespace convoy::cuda {
namespace {

template <typename T>
ImplicitGemmParams<T> MakeGemmParams(const GemmProblem& problem, const GemmArgs& args) {
  ImplicitGemmParams<T> params;
  ImplicitGemmShape& shape = params.shape;  // a 1x1 NHWC conv: N = m pixels of 1x1, C = k, K = n
  shape.n = problem.m, shape.h = shape.w = 1, shape.c = problem.k;
  shape.k = problem.n, shape.r = shape.s = 1, shape.p = shape.q = 1;
  shape.gemm_m = problem.m;
  shape.gemm_k = problem.k;
  params.x = static_cast<const T*>(args.a);
  params.w = static_cast<const T*>(args.b);
  params.y = static_cast<T*>(args.y);
  params.epilogue = MakeEpilogueOperands<T>(problem.epilogue, args);
  return params;
}

template <typename Tile>
class CudaGemmTensorCore final : public GemmAlgorithm {
 public:
  CudaGemmTensorCore() : name_(absl::StrCat("cuda.gemm.tensor_core_", Tile::kM, "x", Tile::kN)) {}

  absl::string_view name() const override { return name_; }
  Backend backend() const override { return Backend::kCuda; }

  absl::Status CanImplement(const GemmProblem& problem) const override {
    if (absl::Status valid = problem.Validate(); !valid.ok()) return valid;
    if (absl::Status dtype = TensorCoreDtypeSupported(problem.dtype, problem.allow_tf32, problem.k, "k");
        !dtype.ok()) {
      return dtype;
    }
    if (problem.n % 2 != 0) return absl::UnimplementedError(absl::StrCat("n = ", problem.n, " is odd"));
    return absl::OkStatus();
  }

  absl::Status Run(const GemmProblem& problem, const GemmArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override {
    if (absl::Status can = CanImplement(problem); !can.ok()) return can;
    if (absl::Status checked = CheckTensorCoreRunArguments(name_, "a and b", args.a, args.b, args, problem.epilogue,
                                                           problem.dtype);
        !checked.ok()) {
      return checked;
    }
    const auto stream = static_cast<cudaStream_t>(context.cuda_stream);
    return LaunchForFloatType(problem.dtype, "LaunchImplicitGemm", [&](auto tag) {
      using T = decltype(tag);
      return LaunchImplicitGemm<T, Tile, true>(MakeGemmParams<T>(problem, args), stream);
    });
  }

  int HeuristicScore(const GemmProblem& problem) const override {
    return 40 + ((problem.m >= 256) == (Tile::kM == 128) ? 2 : 0);
  }

 private:
  std::string name_;
};

using CudaGemmTensorCore128x64 = CudaGemmTensorCore<ImplicitGemmTile128x64>;
using CudaGemmTensorCore64x64 = CudaGemmTensorCore<ImplicitGemmTile64x64>;

CONVOY_REGISTER_ALGORITHM(GemmOp, CudaGemmTensorCore128x64);
CONVOY_REGISTER_ALGORITHM(GemmOp, CudaGemmTensorCore64x64);

}  // namespace
}  // namespace convoy::cuda
