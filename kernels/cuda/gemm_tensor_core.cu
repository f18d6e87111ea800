// GEMM / fully connected on tensor cores: Y[m, n] = epilogue(A[m, k] * B[n, k]^T), FP16/BF16 with FP32
// accumulation, FP32 as TF32 when allow_tf32. It runs the 1x1 implicit-GEMM mainloop (conv2d_implicit_gemm_kernel.cuh)
// with A as the [m, k] "pixels x channels" matrix and B as the [n, k] filter; bias/scale index n; the residual is
// [m, n]. Tile shapes and split factors, each an algorithm:
//   cuda.gemm.tensor_core_128x64              large m
//   cuda.gemm.tensor_core_64x64               small m
//   cuda.gemm.tensor_core_64x64_splitk{2,4,8,16}   FC layers at serving batch sizes (m <= 32, n = 1000, k = 2048:
//                                             16 tiles, 64 k-steps each, without a split)
//
// CanImplement: FP16/BF16, or FP32 with allow_tf32; k a multiple of 8 (FP16/BF16) or 4 (FP32); a and b 16-byte
// aligned (checked in Run); split candidates as for conv2d (conv2d_implicit_gemm_algorithm.cuh).
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
  params.vector_store = OutputVectorsAligned<T>(params.y, params.epilogue.residual, shape.k);
  return params;
}

template <typename Tile, int kSplitK = 1>
class CudaGemmTensorCore final : public GemmAlgorithm {
  using Config = ImplicitGemmConfig<Tile, true, kSplitK>;

 public:
  CudaGemmTensorCore() : name_(absl::StrCat("cuda.gemm.tensor_core_", Config::Suffix())) {}

  absl::string_view name() const override { return name_; }
  Backend backend() const override { return Backend::kCuda; }

  absl::Status CanImplement(const GemmProblem& problem) const override {
    if (absl::Status valid = problem.Validate(); !valid.ok()) return valid;
    if (absl::Status dtype = TensorCoreDtypeSupported(problem.dtype, problem.allow_tf32, problem.k, "k");
        !dtype.ok()) {
      return dtype;
    }
    return Config::CanSplit(problem.dtype, GemmShapeOf(problem));
  }

  size_t WorkspaceBytes(const GemmProblem& problem) const override {
    return Config::WorkspaceBytes(GemmShapeOf(problem));
  }

  absl::Status Run(const GemmProblem& problem, const GemmArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override {
    if (absl::Status can = CanImplement(problem); !can.ok()) return can;
    if (absl::Status checked = CheckTensorCoreRunArguments(name_, "a and b", args.a, args.b, args, problem.epilogue,
                                                           problem.dtype,
                                                           OutputAlignment::kAnyElement);
        !checked.ok()) {
      return checked;
    }
    if (absl::Status ws = Config::CheckWorkspace(workspace, GemmShapeOf(problem), name_); !ws.ok()) return ws;
    const auto stream = static_cast<cudaStream_t>(context.cuda_stream);
    return LaunchForFloatType(problem.dtype, "LaunchImplicitGemm", [&](auto tag) {
      using T = decltype(tag);
      return Config::template Launch<T>(MakeGemmParams<T>(problem, args), workspace, stream);
    });
  }

  int HeuristicScore(const GemmProblem& problem) const override { return kTensorCoreScore; }
  double EstimatedMicroseconds(const GemmProblem& problem) const override {
    return Config::Estimate(problem.dtype, GemmShapeOf(problem)).total_us;
  }
  std::string LaunchSummary(const GemmProblem& problem) const override {
    return Config::Describe(problem.dtype, GemmShapeOf(problem));
  }

 private:
  std::string name_;
};

using CudaGemmTensorCore128x64 = CudaGemmTensorCore<ImplicitGemmTile128x64>;
using CudaGemmTensorCore64x64 = CudaGemmTensorCore<ImplicitGemmTile64x64>;
using CudaGemmTensorCore64x64SplitK2 = CudaGemmTensorCore<ImplicitGemmTile64x64, 2>;
using CudaGemmTensorCore64x64SplitK4 = CudaGemmTensorCore<ImplicitGemmTile64x64, 4>;
using CudaGemmTensorCore64x64SplitK8 = CudaGemmTensorCore<ImplicitGemmTile64x64, 8>;
using CudaGemmTensorCore64x64SplitK16 = CudaGemmTensorCore<ImplicitGemmTile64x64, 16>;

CONVOY_REGISTER_ALGORITHM(GemmOp, CudaGemmTensorCore128x64);
CONVOY_REGISTER_ALGORITHM(GemmOp, CudaGemmTensorCore64x64);
CONVOY_REGISTER_ALGORITHM(GemmOp, CudaGemmTensorCore64x64SplitK2);
CONVOY_REGISTER_ALGORITHM(GemmOp, CudaGemmTensorCore64x64SplitK4);
CONVOY_REGISTER_ALGORITHM(GemmOp, CudaGemmTensorCore64x64SplitK8);
CONVOY_REGISTER_ALGORITHM(GemmOp, CudaGemmTensorCore64x64SplitK16);

}  // namespace
}  // namespace convoy::cuda
