// The conv2d algorithm class over the tensor-core implicit GEMM (conv2d_implicit_gemm_kernel.cuh), one instance per
// tile shape: CudaConv2dImplicitGemm<Tile, kOneByOne>. conv2d_implicit_gemm.cu registers the general tiles
// ("cuda.conv2d.implicit_gemm_<M>x<N>") and conv2d_1x1_gemm.cu the 1x1 ones ("cuda.conv2d.gemm_1x1_<M>x<N>").
//
// CanImplement (exactly what the kernel needs): NHWC; groups 1; FP16 or BF16, or FP32 with allow_tf32 (computed in
// TF32); C a multiple of 8 (FP16/BF16) or 4 (FP32), so every 16-byte copy lies in one filter tap; K even (paired
// stores); N*P*Q and R*S*C below 2^31; for the 1x1 variant also R = S = 1, stride 1 and no padding. Run also
// checks that x and w are 16-byte aligned, y aligned for the paired store (two elements: 8 bytes for FP32/TF32, 4 for
// FP16/BF16) and the residual 4-byte aligned (cudaMalloc'd buffers are).
#ifndef CONVOY_KERNELS_CUDA_CONV2D_IMPLICIT_GEMM_ALGORITHM_CUH_
#define CONVOY_KERNELS_CUDA_CONV2D_IMPLICIT_GEMM_ALGORITHM_CUH_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/common/problems.h"
#include "kernels/cuda/conv2d_implicit_gemm_kernel.cuh"
#include "kernels/cuda_emulation/cuda_compat.cuh"
#include "kernels/cuda_emulation/cuda_status.h"
#include "kernels/registry/algorithm.h"

namespace convoy::cuda {

inline bool IsAligned(const void* pointer, uintptr_t bytes) {
  return reinterpret_cast<uintptr_t>(pointer) % bytes == 0;
}

// The kernel's 16-byte copies need C in whole 16-byte vectors; TF32 only when the problem allows it.
inline absl::Status TensorCoreDtypeSupported(DataType dtype, bool allow_tf32, int reduction_channels,
                                             absl::string_view what) {
  if (dtype == DataType::kFloat32 && !allow_tf32) {
    return absl::UnimplementedError("FP32 on tensor cores needs allow_tf32");
  }
  if (dtype != DataType::kFloat32 && dtype != DataType::kFloat16 && dtype != DataType::kBFloat16) {
    return absl::UnimplementedError(absl::StrCat("dtype ", DataTypeName(dtype), " is not FP32/FP16/BF16"));
  }
  const int vector = 16 / static_cast<int>(DataTypeSize(dtype));
  if (reduction_channels % vector != 0) {
    return absl::UnimplementedError(
        absl::StrCat(what, " = ", reduction_channels, " is not a multiple of ", vector, " (16-byte vectors)"));
  }
  return absl::OkStatus();
}

// The argument checks every tensor-core conv2d/GEMM Run makes before it launches (mma.sync and Hopper kernels):
// the inputs a, b (`inputs` names them: "x and w", "a and b") and y set, the epilogue's operands set, a and b 16-byte
// aligned (16-byte copies, tensor maps), y aligned to two elements for the paired store (8 bytes FP32, 4 FP16/BF16)
// and the residual 4-byte aligned.
template <typename Args>
absl::Status CheckTensorCoreRunArguments(absl::string_view algorithm, absl::string_view inputs, const void* a,
                                         const void* b, const Args& args, const Epilogue& epilogue, DataType dtype) {
  if (a == nullptr || b == nullptr || args.y == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(algorithm, ": ", inputs, " and y must be set"));
  }
  if ((epilogue.has_bias && args.bias == nullptr) || (epilogue.has_scale && args.scale == nullptr) ||
      (epilogue.residual != ResidualMode::kNone && args.residual == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat(algorithm, ": an epilogue operand (bias, scale or residual) is null"));
  }
  const size_t y_alignment = PairedStoreAlignment(dtype);
  if (!IsAligned(a, 16) || !IsAligned(b, 16) || !IsAligned(args.y, y_alignment) || !IsAligned(args.residual, 4)) {
    return absl::InvalidArgumentError(absl::StrCat(algorithm, ": ", inputs, " must be 16-byte aligned, y ",
                                                   y_alignment, "-byte (paired stores) and residual 4-byte"));
  }
  return absl::OkStatus();
}

template <typename T>
ImplicitGemmParams<T> MakeImplicitGemmParams(const Conv2dProblem& problem, const Conv2dArgs& args) {
  ImplicitGemmParams<T> params;
  ImplicitGemmShape& shape = params.shape;
  shape.n = problem.n, shape.h = problem.h, shape.w = problem.w, shape.c = problem.c;
  shape.k = problem.k, shape.r = problem.r, shape.s = problem.s;
  shape.p = problem.p(), shape.q = problem.q();
  shape.pad_h = problem.pad_top, shape.pad_w = problem.pad_left;
  shape.stride_h = problem.stride_h, shape.stride_w = problem.stride_w;
  shape.dilation_h = problem.dilation_h, shape.dilation_w = problem.dilation_w;
  shape.gemm_m = problem.n * shape.p * shape.q;
  shape.gemm_k = problem.r * problem.s * problem.c;
  params.x = static_cast<const T*>(args.x);
  params.w = static_cast<const T*>(args.w);
  params.y = static_cast<T*>(args.y);
  params.epilogue = MakeEpilogueOperands<T>(problem.epilogue, args);
  return params;
}

template <typename Tile, bool kOneByOne>
class CudaConv2dImplicitGemm final : public Conv2dAlgorithm {
 public:
  CudaConv2dImplicitGemm()
      : name_(absl::StrCat(kOneByOne ? "cuda.conv2d.gemm_1x1_" : "cuda.conv2d.implicit_gemm_", Tile::kM, "x",
                           Tile::kN)) {}

  absl::string_view name() const override { return name_; }
  Backend backend() const override { return Backend::kCuda; }

  absl::Status CanImplement(const Conv2dProblem& problem) const override {
    if (absl::Status valid = problem.Validate(); !valid.ok()) return valid;
    if (problem.layout != Layout::kNHWC) return absl::UnimplementedError("needs NHWC");
    if (problem.groups != 1) return absl::UnimplementedError("needs groups == 1");
    if (absl::Status dtype = TensorCoreDtypeSupported(problem.dtype, problem.allow_tf32, problem.c, "C");
        !dtype.ok()) {
      return dtype;
    }
    if (problem.k % 2 != 0) return absl::UnimplementedError(absl::StrCat("K = ", problem.k, " is odd"));
    if (int64_t{problem.n} * problem.p() * problem.q() >= (int64_t{1} << 31) ||
        int64_t{problem.r} * problem.s * problem.c >= (int64_t{1} << 31)) {
      return absl::UnimplementedError("N*P*Q or R*S*C does not fit in 32 bits");
    }
    if (kOneByOne && (problem.r != 1 || problem.s != 1 || problem.stride_h != 1 || problem.stride_w != 1 ||
                      problem.pad_top != 0 || problem.pad_bottom != 0 || problem.pad_left != 0 ||
                      problem.pad_right != 0)) {
      return absl::UnimplementedError("the 1x1 GEMM needs a 1x1 filter, stride 1 and no padding");
    }
    return absl::OkStatus();
  }

  absl::Status Run(const Conv2dProblem& problem, const Conv2dArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override {
    if (absl::Status can = CanImplement(problem); !can.ok()) return can;
    if (absl::Status checked = CheckTensorCoreRunArguments(name_, "x and w", args.x, args.w, args, problem.epilogue,
                                                           problem.dtype);
        !checked.ok()) {
      return checked;
    }
    const auto stream = static_cast<cudaStream_t>(context.cuda_stream);
    return LaunchForFloatType(problem.dtype, "LaunchImplicitGemm", [&](auto tag) {
      using T = decltype(tag);
      return LaunchImplicitGemm<T, Tile, kOneByOne>(MakeImplicitGemmParams<T>(problem, args), stream);
    });
  }

  // Big tiles for big problems: the 128x128 tile when there are at least ~2 waves of them on a 132-SM GPU, the
  // 64x64 tile for small ones; the 1x1 GEMM over the general kernel when it applies.
  int HeuristicScore(const Conv2dProblem& problem) const override {
    const int64_t m = int64_t{problem.n} * problem.p() * problem.q();
    const int64_t tiles = ((m + Tile::kM - 1) / Tile::kM) * ((problem.k + Tile::kN - 1) / Tile::kN);
    int score = 40 + (kOneByOne ? 5 : 0);
    if (tiles >= 264) score += Tile::kM * Tile::kN / 4096;  // 4 (128x128), 2 (128x64), 1 (64x64)
    else if (Tile::kM == 64) score += 4;                       // small problem: more blocks
    return score;
  }

 private:
  std::string name_;
};

}  // namespace convoy::cuda

#endif  // CONVOY_KERNELS_CUDA_CONV2D_IMPLICIT_GEMM_ALGORITHM_CUH_
