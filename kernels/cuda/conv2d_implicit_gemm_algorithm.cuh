// The algorithm classes over the tensor-core implicit GEMM (conv2d_implicit_gemm_kernel.cuh), one instance per tile
// shape and split factor: CudaConv2dImplicitGemm<Tile, kOneByOne, kSplitK>. conv2d_implicit_gemm.cu registers the
// general tiles ("cuda.conv2d.implicit_gemm_<M>x<N>[_splitk<S>]"), conv2d_1x1_gemm.cu the 1x1 ones
// ("cuda.conv2d.gemm_1x1_<M>x<N>[_splitk<S>]"), gemm_tensor_core.cu the GEMM ones.
//
// CanImplement (exactly what the kernel needs): NHWC; groups 1; FP16 or BF16, or FP32 with allow_tf32 (computed in
// TF32); C a multiple of 8 (FP16/BF16) or 4 (FP32), so every 16-byte copy lies in one filter tap; N*P*Q, N*H*W and
// R*S*C below 2^31; for the 1x1 variant also R = S = 1, stride 1 and no padding (which the general variant leaves to
// it: same tiles without the gather, so never faster). Split-K candidates also need at
// least two main-loop iterations per split (2 * kSplitK k-steps) and at most kMaxSplitKWorkspaceBytes of workspace.
// Run checks that x and w are 16-byte aligned (cudaMalloc'd buffers are) and that the workspace is there; the output
// and residual are written/read with 16-byte vectors when aligned and element by element otherwise.
//
// Heuristic: every tensor-core candidate scores kTensorCoreScore; among them the registry takes the lowest
// EstimatedMicroseconds, the launch-cost model's estimate (launch_cost_model.h) for this problem on the current
// device, with the kernel's occupancy (cudaOccupancyMaxActiveBlocksPerMultiprocessor on a GPU).
#ifndef CONVOY_KERNELS_CUDA_CONV2D_IMPLICIT_GEMM_ALGORITHM_CUH_
#define CONVOY_KERNELS_CUDA_CONV2D_IMPLICIT_GEMM_ALGORITHM_CUH_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/common/problems.h"
#include "kernels/cuda/conv2d_implicit_gemm_kernel.cuh"
#include "kernels/cuda/gpu_model.cuh"
#include "kernels/cuda_emulation/cuda_compat.cuh"
#include "kernels/cuda_emulation/cuda_status.h"
#include "kernels/registry/algorithm.h"

namespace convoy::cuda {

// The heuristic score of every tensor-core GEMM-shaped candidate (conv and GEMM): above the SIMT fallbacks (1),
// below the depthwise kernel (50, which no tensor-core candidate implements anyway). Ties are broken by estimate.
inline constexpr int kTensorCoreScore = 40;
// Split-K candidates decline problems whose FP32 partials would exceed this.
inline constexpr int64_t kMaxSplitKWorkspaceBytes = int64_t{32} << 20;

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

// The GEMM view of a conv2d problem for the cost model.
inline GemmShape GemmShapeOf(const Conv2dProblem& problem) {
  GemmShape shape;
  shape.m = int64_t{problem.n} * problem.p() * problem.q();
  shape.n = problem.k;
  shape.k = int64_t{problem.r} * problem.s * problem.c;
  shape.input_bytes = shape.output_bytes = static_cast<int>(DataTypeSize(problem.dtype));
  shape.tf32 = problem.dtype == DataType::kFloat32;
  shape.residual = problem.epilogue.residual != ResidualMode::kNone;
  return shape;
}

inline GemmShape GemmShapeOf(const GemmProblem& problem) {
  GemmShape shape;
  shape.m = problem.m;
  shape.n = problem.n;
  shape.k = problem.k;
  shape.input_bytes = shape.output_bytes = static_cast<int>(DataTypeSize(problem.dtype));
  shape.tf32 = problem.dtype == DataType::kFloat32;
  shape.residual = problem.epilogue.residual != ResidualMode::kNone;
  return shape;
}

// One tensor-core implicit-GEMM configuration (tile, mode, split factor) independent of the op: its name suffix,
// the split-K checks, its workspace, its estimate and its launch. The conv2d and GEMM algorithm classes wrap it.
template <typename Tile, bool kOneByOne, int kSplitK>
struct ImplicitGemmConfig {
  static_assert(kSplitK >= 1, "split factor");

  // "128x64" or "64x64_splitk4".
  static std::string Suffix() {
    return absl::StrCat(Tile::kM, "x", Tile::kN, kSplitK > 1 ? absl::StrCat("_splitk", kSplitK) : "");
  }

  // Main-loop iterations of the whole reduction for `dtype`.
  static int64_t KTiles(DataType dtype, int64_t gemm_k) {
    const int64_t step = Tile::kStepBytes / static_cast<int64_t>(DataTypeSize(dtype));
    return (gemm_k + step - 1) / step;
  }

  static absl::Status CanSplit(DataType dtype, const GemmShape& shape) {
    if constexpr (kSplitK == 1) {
      return absl::OkStatus();
    } else {
      const int64_t k_tiles = KTiles(dtype, shape.k);
      if (k_tiles < 2 * kSplitK) {
        return absl::UnimplementedError(absl::StrCat("the reduction (", shape.k, ") has ", k_tiles,
                                                     " k-steps, fewer than 2 per split of ", kSplitK));
      }
      if (SplitKWorkspaceBytes(shape.m, shape.n, kSplitK) > kMaxSplitKWorkspaceBytes) {
        return absl::UnimplementedError(absl::StrCat("split-K workspace of ", SplitKWorkspaceBytes(shape.m, shape.n,
                                                                                                   kSplitK),
                                                     " bytes exceeds ", kMaxSplitKWorkspaceBytes));
      }
      return absl::OkStatus();
    }
  }

  static size_t WorkspaceBytes(const GemmShape& shape) {
    return static_cast<size_t>(SplitKWorkspaceBytes(shape.m, shape.n, kSplitK));
  }

  static absl::Status CheckWorkspace(const Workspace& workspace, const GemmShape& shape, absl::string_view name) {
    const size_t needed = WorkspaceBytes(shape);
    if (needed == 0) return absl::OkStatus();
    if (workspace.data == nullptr || workspace.bytes < needed || !IsAligned(workspace.data, 16)) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": needs a 16-byte aligned workspace of ", needed,
                                                     " bytes, got ", workspace.bytes));
    }
    return absl::OkStatus();
  }

  // The launch-cost model's estimate on the current device.
  static LaunchEstimate Estimate(DataType dtype, const GemmShape& shape) {
    const GpuModel& gpu = CurrentGpuModel();
    const int split = EffectiveSplitK(static_cast<int>(KTiles(dtype, shape.k)), kSplitK);
    auto estimate = [&](auto tag) {
      using T = decltype(tag);
      return EstimateGemmLaunch(ImplicitGemmDescription<T, Tile, kOneByOne>(split, gpu), shape,
                                ImplicitGemmBlocksPerSm<T, Tile, kOneByOne>(gpu), gpu);
    };
    switch (dtype) {
      case DataType::kFloat16: return estimate(__half{});
      case DataType::kBFloat16: return estimate(__nv_bfloat16{});
      default: return estimate(float{});
    }
  }

  static std::string Describe(DataType dtype, const GemmShape& shape) {
    return absl::StrCat("tile ", Tile::kM, "x", Tile::kN, " (", Tile::kWarps, " warps, ",
                        Tile::kStepBytes / static_cast<int>(DataTypeSize(dtype)),
                        "-element k-step): ", Estimate(dtype, shape).ToString());
  }

  template <typename T>
  static cudaError_t Launch(const ImplicitGemmParams<T>& params, const Workspace& workspace, cudaStream_t stream) {
    return LaunchImplicitGemm<T, Tile, kOneByOne>(params, kSplitK, workspace.data, stream);
  }
};

// The argument checks every tensor-core conv2d/GEMM Run makes before it launches (mma.sync and Hopper kernels):
// the inputs a, b (`inputs` names them: "x and w", "a and b") and y set, the epilogue's operands set, a and b 16-byte
// aligned (16-byte copies, tensor maps). With kPairedStores (the Hopper epilogue) also y aligned to two elements for
// the paired store (8 bytes FP32, 4 FP16/BF16) and the residual 4-byte aligned; the mma.sync epilogue
// (gemm_epilogue.cuh) takes any element-aligned y and residual (16-byte vectors only where aligned).
enum class OutputAlignment { kAnyElement, kPairedStores };
template <typename Args>
absl::Status CheckTensorCoreRunArguments(absl::string_view algorithm, absl::string_view inputs, const void* a,
                                         const void* b, const Args& args, const Epilogue& epilogue, DataType dtype,
                                         OutputAlignment output_alignment) {
  if (a == nullptr || b == nullptr || args.y == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(algorithm, ": ", inputs, " and y must be set"));
  }
  if ((epilogue.has_bias && args.bias == nullptr) || (epilogue.has_scale && args.scale == nullptr) ||
      (epilogue.residual != ResidualMode::kNone && args.residual == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat(algorithm, ": an epilogue operand (bias, scale or residual) is null"));
  }
  if (output_alignment == OutputAlignment::kAnyElement) {
    if (!IsAligned(a, 16) || !IsAligned(b, 16)) {
      return absl::InvalidArgumentError(absl::StrCat(algorithm, ": ", inputs, " must be 16-byte aligned"));
    }
    return absl::OkStatus();
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
  SetConvGeometry(problem, shape);
  shape.gemm_m = problem.n * shape.p * shape.q;
  shape.gemm_k = problem.r * problem.s * problem.c;
  params.x = static_cast<const T*>(args.x);
  params.w = static_cast<const T*>(args.w);
  params.y = static_cast<T*>(args.y);
  params.epilogue = MakeEpilogueOperands<T>(problem.epilogue, args);
  params.vector_store = OutputVectorsAligned<T>(params.y, params.epilogue.residual, shape.k);
  return params;
}

template <typename Tile, bool kOneByOne, int kSplitK = 1>
class CudaConv2dImplicitGemm final : public Conv2dAlgorithm {
  using Config = ImplicitGemmConfig<Tile, kOneByOne, kSplitK>;

 public:
  CudaConv2dImplicitGemm()
      : name_(absl::StrCat(kOneByOne ? "cuda.conv2d.gemm_1x1_" : "cuda.conv2d.implicit_gemm_", Config::Suffix())) {}

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
    if (int64_t{problem.n} * problem.p() * problem.q() >= (int64_t{1} << 31) ||
        int64_t{problem.n} * problem.h * problem.w >= (int64_t{1} << 31) ||
        int64_t{problem.r} * problem.s * problem.c >= (int64_t{1} << 31)) {
      return absl::UnimplementedError("N*P*Q, N*H*W or R*S*C does not fit in 32 bits");
    }
    const bool one_by_one = problem.r == 1 && problem.s == 1 && problem.stride_h == 1 && problem.stride_w == 1 &&
                            problem.pad_top == 0 && problem.pad_bottom == 0 && problem.pad_left == 0 &&
                            problem.pad_right == 0;
    if (kOneByOne && !one_by_one) {
      return absl::UnimplementedError("the 1x1 GEMM needs a 1x1 filter, stride 1 and no padding");
    }
    if (!kOneByOne && one_by_one) {
      return absl::UnimplementedError("a 1x1 stride-1 unpadded conv is the 1x1 GEMM's (the same tiles, no gather)");
    }
    return Config::CanSplit(problem.dtype, GemmShapeOf(problem));
  }

  size_t WorkspaceBytes(const Conv2dProblem& problem) const override {
    return Config::WorkspaceBytes(GemmShapeOf(problem));
  }

  absl::Status Run(const Conv2dProblem& problem, const Conv2dArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override {
    if (absl::Status can = CanImplement(problem); !can.ok()) return can;
    if (absl::Status checked = CheckTensorCoreRunArguments(name_, "x and w", args.x, args.w, args, problem.epilogue,
                                                           problem.dtype,
                                                           OutputAlignment::kAnyElement);
        !checked.ok()) {
      return checked;
    }
    if (absl::Status ws = Config::CheckWorkspace(workspace, GemmShapeOf(problem), name_); !ws.ok()) return ws;
    const auto stream = static_cast<cudaStream_t>(context.cuda_stream);
    return LaunchForFloatType(problem.dtype, "LaunchImplicitGemm", [&](auto tag) {
      using T = decltype(tag);
      return Config::template Launch<T>(MakeImplicitGemmParams<T>(problem, args), workspace, stream);
    });
  }

  int HeuristicScore(const Conv2dProblem& problem) const override { return kTensorCoreScore; }
  double EstimatedMicroseconds(const Conv2dProblem& problem) const override {
    return Config::Estimate(problem.dtype, GemmShapeOf(problem)).total_us;
  }
  std::string LaunchSummary(const Conv2dProblem& problem) const override {
    return Config::Describe(problem.dtype, GemmShapeOf(problem));
  }

 private:
  std::string name_;
};

}  // namespace convoy::cuda

#endif  // CONVOY_KERNELS_CUDA_CONV2D_IMPLICIT_GEMM_ALGORITHM_CUH_
