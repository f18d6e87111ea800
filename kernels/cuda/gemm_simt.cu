// cuda.gemm.simt: Y[m, n] = epilogue(A[m, k] * B[n, k]^T) for ANY m, n, k and FP32/FP16/BF16 (FP32 accumulation,
// exact FP32 products: no TF32). Classic shared-memory tiling: a 16x16 block of threads computes a 16x16 output
// tile, staging 16x16 slices of A and B (converted to FP32) through shared memory per step of k.
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/cuda/conv2d_common.cuh"
#include "kernels/cuda_emulation/cuda_status.h"
#include "kernels/registry/registry.h"

namespace convoy::cuda {
namespace {

constexpr int kGemmSimtTile = 16;

template <typename T>
struct GemmSimtParams {
  int m = 1, n = 1, k = 1;
  const T* a = nullptr;  // [m, k]
  const T* b = nullptr;  // [n, k]
  T* y = nullptr;        // [m, n]
  EpilogueOperands<T> epilogue;
};

template <typename T>
__global__ void __launch_bounds__(256) GemmSimtKernel(GemmSimtParams<T> params) {
  CONVOY_SHARED_ARRAY(float, a_tile, [kGemmSimtTile][kGemmSimtTile + 1]);  // [row of A][k]
  CONVOY_SHARED_ARRAY(float, b_tile, [kGemmSimtTile][kGemmSimtTile + 1]);  // [row of B (column of Y)][k]
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * kGemmSimtTile + ty;        // [m]
  const int column = blockIdx.x * kGemmSimtTile + tx;     // [n]
  const int b_row = blockIdx.x * kGemmSimtTile + ty;      // [n], the B row this thread stages
  float acc = 0.0f;
  for (int k0 = 0; k0 < params.k; k0 += kGemmSimtTile) {
    const int kk = k0 + tx;  // [k]
    a_tile[ty][tx] = row < params.m && kk < params.k ? ElementToFloat<T>(params.a[int64_t{row} * params.k + kk]) : 0.0f;
    b_tile[ty][tx] =
        b_row < params.n && kk < params.k ? ElementToFloat<T>(params.b[int64_t{b_row} * params.k + kk]) : 0.0f;
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kGemmSimtTile; ++i) acc += a_tile[ty][i] * b_tile[tx][i];
    __syncthreads();
  }
  if (row < params.m && column < params.n) {
    const int64_t offset = int64_t{row} * params.n + column;  // into Y [m, n]
    params.y[offset] = FloatToElement<T>(ApplyFusedEpilogue(params.epilogue, acc, column, offset));
  }
}

template <typename T>
cudaError_t LaunchGemmSimt(const GemmSimtParams<T>& params, cudaStream_t stream) {
  const dim3 grid((params.n + kGemmSimtTile - 1) / kGemmSimtTile, (params.m + kGemmSimtTile - 1) / kGemmSimtTile);
  return CONVOY_LAUNCH_KERNEL(GemmSimtKernel<T>, grid, dim3(kGemmSimtTile, kGemmSimtTile), 0, stream, params);
}

template <typename T>
GemmSimtParams<T> MakeGemmSimtParams(const GemmProblem& problem, const GemmArgs& args) {
  GemmSimtParams<T> params;
  params.m = problem.m, params.n = problem.n, params.k = problem.k;
  params.a = static_cast<const T*>(args.a);
  params.b = static_cast<const T*>(args.b);
  params.y = static_cast<T*>(args.y);
  params.epilogue = MakeEpilogueOperands<T>(problem.epilogue, args);
  return params;
}

class CudaGemmSimt final : public GemmAlgorithm {
 public:
  absl::string_view name() const override { return "cuda.gemm.simt"; }
  Backend backend() const override { return Backend::kCuda; }

  absl::Status CanImplement(const GemmProblem& problem) const override {
    if (absl::Status valid = problem.Validate(); !valid.ok()) return valid;
    if (problem.dtype != DataType::kFloat32 && problem.dtype != DataType::kFloat16 &&
        problem.dtype != DataType::kBFloat16) {
      return absl::UnimplementedError("dtype is not FP32/FP16/BF16");
    }
    if (problem.m > 65535 * kGemmSimtTile) return absl::UnimplementedError("m exceeds the grid's y limit");
    return absl::OkStatus();
  }

  absl::Status Run(const GemmProblem& problem, const GemmArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override {
    if (absl::Status can = CanImplement(problem); !can.ok()) return can;
    if (args.a == nullptr || args.b == nullptr || args.y == nullptr) {
      return absl::InvalidArgumentError("cuda.gemm.simt: a, b and y must be set");
    }
    if ((problem.epilogue.has_bias && args.bias == nullptr) || (problem.epilogue.has_scale && args.scale == nullptr) ||
        (problem.epilogue.residual != ResidualMode::kNone && args.residual == nullptr)) {
      return absl::InvalidArgumentError("cuda.gemm.simt: an epilogue operand is null");
    }
    const auto stream = static_cast<cudaStream_t>(context.cuda_stream);
    return LaunchForFloatType(problem.dtype, "LaunchGemmSimt", [&](auto tag) {
      using T = decltype(tag);
      return LaunchGemmSimt(MakeGemmSimtParams<T>(problem, args), stream);
    });
  }

  int HeuristicScore(const GemmProblem& problem) const override { return 1; }
  // One thread per output, every product exact in FP32: what the other CUDA algorithms are verified against.
  bool TrustedForVerification() const override { return true; }
};

CONVOY_REGISTER_ALGORITHM(GemmOp, CudaGemmSimt);

}  // namespace
}  // namespace convoy::cuda
