// GEMM / fully connected on Hopper (sm_90a): Y[m, n] = epilogue(A[m, k] * B[n, k]^T) through the Hopper main loop
// (conv2d_hopper_kernel.cuh, 2D tiled bulk copies of A and B), FP16/BF16 with FP32 accumulation, FP32 as TF32 when
// allowed; candidates only on compute capability 9.0: cuda.gemm.hopper_{128x128,128x64,64x64}.
// CanImplement: k a multiple of 8 (FP16/BF16) or 4 (FP32) (16-byte rows for the copies), n even (paired stores);
// a and b 16-byte aligned, y aligned to two elements and residual 4-byte (checked in Run).
#include <string>

#include "kernels/cuda/conv2d_hopper_algorithm.cuh"
#include "kernels/registry/registry.h"

namespace convoy::cuda {
namespace {

template <typename Tile>
class CudaGemmHopper final : public GemmAlgorithm {
 public:
  CudaGemmHopper() : name_(absl::StrCat("cuda.gemm.hopper_", Tile::kM, "x", Tile::kN)) {}

  absl::string_view name() const override { return name_; }
  Backend backend() const override { return Backend::kCuda; }

  absl::Status CanImplement(const GemmProblem& problem) const override {
    if (absl::Status valid = problem.Validate(); !valid.ok()) return valid;
    CONVOY_RETURN_IF_ERROR(TensorCoreDtypeSupported(problem.dtype, problem.allow_tf32, problem.k, "k"));
    if (problem.n % 2 != 0) return absl::UnimplementedError(absl::StrCat("n = ", problem.n, " is odd"));
    if (int64_t{problem.m} >= (int64_t{1} << 31)) return absl::UnimplementedError("m does not fit in 32 bits");
    return HopperDeviceSupported();
  }

  absl::Status Run(const GemmProblem& problem, const GemmArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override {
    CONVOY_RETURN_IF_ERROR(CanImplement(problem));
    CONVOY_RETURN_IF_ERROR(
        CheckTensorCoreRunArguments(name_, "a and b", args.a, args.b, args, problem.epilogue, problem.dtype,
                                                    OutputAlignment::kPairedStores));
    const auto stream = static_cast<cudaStream_t>(context.cuda_stream);
    absl::Status encoded = absl::OkStatus();
    absl::Status launched = LaunchForFloatType(problem.dtype, "LaunchHopperGemm", [&](auto tag) -> cudaError_t {
      using T = decltype(tag);
      constexpr int kBlockK = 128 / static_cast<int>(sizeof(T));
      // Thread-local rather than on the stack: the tensor maps need 64-byte alignment, which ASan's fake stack frames
      // (detect_stack_use_after_return) do not keep. Every field is set below; the launch copies the parameters.
      static thread_local HopperGemmParams<T> params;
      ImplicitGemmShape& shape = params.shape;  // a 1x1 NHWC conv: N = m pixels of 1x1, C = k, K = n
      shape = ImplicitGemmShape{};
      shape.n = problem.m, shape.h = shape.w = 1, shape.c = problem.k;
      shape.k = problem.n, shape.r = shape.s = 1, shape.p = shape.q = 1;
      shape.gemm_m = problem.m;
      shape.gemm_k = problem.k;
      params.y = static_cast<T*>(args.y);
      params.epilogue = MakeEpilogueOperands<T>(problem.epilogue, args);
      params.k_iterations = (problem.k + kBlockK - 1) / kBlockK;
      encoded.Update(EncodeMatrixMap<T>(&params.a_map, args.a, problem.m, problem.k, Tile::kM, "a"));
      if (encoded.ok()) {
        encoded.Update(EncodeMatrixMap<T>(&params.b_map, args.b, problem.n, problem.k, Tile::kN, "b"));
      }
      if (!encoded.ok()) return cudaSuccess;
      return LaunchHopperGemm<T, Tile, false>(params, stream);
    });
    CONVOY_RETURN_IF_ERROR(encoded);
    return launched;
  }

  int HeuristicScore(const GemmProblem& problem) const override { return HopperHeuristicScore(problem.dtype); }
  double EstimatedMicroseconds(const GemmProblem& problem) const override {
    return HopperEstimate<Tile>(problem.dtype, GemmShapeOf(problem)).total_us;
  }
  std::string LaunchSummary(const GemmProblem& problem) const override {
    return HopperLaunchSummary<Tile>(problem.dtype, GemmShapeOf(problem));
  }

 private:
  std::string name_;
};

using CudaGemmHopper128x128 = CudaGemmHopper<HopperTile128x128>;
using CudaGemmHopper128x64 = CudaGemmHopper<HopperTile128x64>;
using CudaGemmHopper64x64 = CudaGemmHopper<HopperTile64x64>;

CONVOY_REGISTER_ALGORITHM(GemmOp, CudaGemmHopper128x128);
CONVOY_REGISTER_ALGORITHM(GemmOp, CudaGemmHopper128x64);
CONVOY_REGISTER_ALGORITHM(GemmOp, CudaGemmHopper64x64);

}  // namespace
}  // namespace convoy::cuda
