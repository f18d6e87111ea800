// The entry (host side) of the Hopper conv2d and GEMM algorithms over conv2d_hopper_kernel.cuh: the compute-
// capability gate, the tensor maps the bulk tensor copies read, and the checks every Hopper algorithm shares.
//
// Hopper algorithms are candidates only on a compute capability 9.0 device (sm_90a code runs nowhere else; the
// emulated device reports 9.0) and unless CONVOY_CUDA_DISABLE_HOPPER=1 is set (an operator's switch back to the
// mma.sync kernels). The tensor maps are encoded on the host in Run (no allocation, no device work: graph capture
// records them as kernel parameters).
#ifndef CONVOY_KERNELS_CUDA_CONV2D_HOPPER_ALGORITHM_CUH_
#define CONVOY_KERNELS_CUDA_CONV2D_HOPPER_ALGORITHM_CUH_

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "kernels/cuda/conv2d_hopper_kernel.cuh"
#include "kernels/cuda/conv2d_implicit_gemm_algorithm.cuh"
#include "kernels/cuda_emulation/tensor_map_host.h"

namespace convoy::cuda {

// OK when the current CUDA device can run the sm_90a kernels (compute capability 9.0) and they are not disabled.
inline absl::Status HopperDeviceSupported() {
  const char* disabled = std::getenv("CONVOY_CUDA_DISABLE_HOPPER");
  if (disabled != nullptr && std::strcmp(disabled, "1") == 0) {
    return absl::UnimplementedError("Hopper kernels disabled by CONVOY_CUDA_DISABLE_HOPPER=1");
  }
  int device = 0, major = 0, minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return absl::UnimplementedError("the Hopper kernels need a CUDA device of compute capability 9.0; none found");
  }
  if (major != 9 || minor != 0) {
    return absl::UnimplementedError(absl::StrCat("the Hopper (sm_90a) kernels need compute capability 9.0, the device ",
                                                 "has ", major, ".", minor));
  }
  return absl::OkStatus();
}

template <typename T>
constexpr CUtensorMapDataType TensorMapDataType() {
  if constexpr (std::is_same<T, __half>::value) {
    return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  } else if constexpr (std::is_same<T, __nv_bfloat16>::value) {
    return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  } else if constexpr (sizeof(T) == 1) {
    return CU_TENSOR_MAP_DATA_TYPE_UINT8;  // the INT8 kernels' bytes (the copy moves them as they are)
  } else {
    return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  }
}

inline absl::Status TensorMapStatus(CUresult result, absl::string_view what) {
  if (result == CUDA_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("encoding the tensor map of ", what, " failed (CUresult ",
                                          static_cast<int>(result), ") ", TensorMapErrorDetail()));
}

// A 2D map over a row-major [rows, cols] matrix read in boxes of box_cols x box_rows with the 128-byte swizzle.
template <typename T>
absl::Status EncodeMatrixMap(CUtensorMap* map, const void* data, int64_t rows, int64_t cols, int box_rows,
                             absl::string_view what) {
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(cols) * sizeof(T)};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(128 / sizeof(T)), static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  return TensorMapStatus(EncodeTensorMapTiled(map, TensorMapDataType<T>(), 2, const_cast<void*>(data), dims, strides,
                                              box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                              CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
                         what);
}

// The im2col map over the NHWC input (the bounding box walks the output pixels: lower corner -pad, upper corner
// pad - (filter - 1) * dilation, traversal stride = conv stride) and the 3D map over the [K][R*S][C] filter, into
// params->a_map and b_map (HopperGemmParams<T>, or the INT8 kernel's parameters with T = int8_t).
template <typename T, typename Tile, typename Params>
absl::Status EncodeConvMaps(const ImplicitGemmShape& s, int pad_right, int pad_bottom, const void* x, const void* w,
                            Params* params) {
  constexpr int kBlockK = 128 / static_cast<int>(sizeof(T));
  const cuuint64_t e = sizeof(T);
  const cuuint64_t x_dims[4] = {cuuint64_t(s.c), cuuint64_t(s.w), cuuint64_t(s.h), cuuint64_t(s.n)};
  const cuuint64_t x_strides[3] = {s.c * e, s.c * e * s.w, s.c * e * s.w * s.h};
  const int lower[2] = {-s.pad_w, -s.pad_h};
  const int upper[2] = {pad_right - (s.s - 1) * s.dilation_w, pad_bottom - (s.r - 1) * s.dilation_h};
  const cuuint32_t x_element_strides[4] = {1, cuuint32_t(s.stride_w), cuuint32_t(s.stride_h), 1};
  CONVOY_RETURN_IF_ERROR(TensorMapStatus(
      EncodeTensorMapIm2col(&params->a_map, TensorMapDataType<T>(), 4, const_cast<void*>(x), x_dims, x_strides, lower,
                            upper, kBlockK, Tile::kM, x_element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
      "x (im2col)"));
  const cuuint64_t w_dims[3] = {cuuint64_t(s.c), cuuint64_t(s.r) * s.s, cuuint64_t(s.k)};
  const cuuint64_t w_strides[2] = {s.c * e, s.c * e * s.r * s.s};
  const cuuint32_t w_box[3] = {kBlockK, 1, Tile::kN};
  const cuuint32_t w_element_strides[3] = {1, 1, 1};
  return TensorMapStatus(EncodeTensorMapTiled(&params->b_map, TensorMapDataType<T>(), 3, const_cast<void*>(w), w_dims,
                                              w_strides, w_box, w_element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                              CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
                         "w");
}

// The limits of the im2col tensor map for a 4D tensor: corners in [-128, 127], filter offsets in [0, 254] (8 bits,
// below the all-ones 255, as CUTLASS's sm90 implicit GEMM requires), traversal strides in [1, 8]. Problem: a
// Conv2dProblem or a QuantizedConv2dProblem.
template <typename Problem>
absl::Status Im2colLimits(const Problem& p) {
  const int upper_w = p.pad_right - (p.s - 1) * p.dilation_w, upper_h = p.pad_bottom - (p.r - 1) * p.dilation_h;
  for (const int corner : {-p.pad_left, -p.pad_top, upper_w, upper_h}) {
    if (corner < -128 || corner > 127) {
      return absl::UnimplementedError(absl::StrCat("an im2col bounding-box corner of ", corner,
                                                   " is outside [-128, 127] (padding or filter extent too large)"));
    }
  }
  if ((p.s - 1) * p.dilation_w >= 255 || (p.r - 1) * p.dilation_h >= 255) {
    return absl::UnimplementedError(absl::StrCat("the filter extent (size - 1) * dilation = ",
                                                 std::max((p.s - 1) * p.dilation_w, (p.r - 1) * p.dilation_h),
                                                 " is not below the im2col offset limit 255"));
  }
  if (p.stride_h > 8 || p.stride_w > 8) return absl::UnimplementedError("strides above 8 exceed the copy's limit");
  return absl::OkStatus();
}

// The heuristic's view of a Hopper kernel (launch_cost_model.h): FP16/BF16 candidates score kTensorCoreScore like the
// mma.sync ones and compete with them (split-K included) by the launch-cost model's estimate, at the wgmma rate, the
// occupancy of the kernel's shared memory and launch bound, and no split (these kernels do not split the reduction,
// so at batch 1 a split-K mma.sync candidate with more blocks can win). FP32-as-TF32 scores below every mma.sync
// candidate (kTensorCoreScore - 30): wgmma reads the FP32 values from shared memory and the tensor core ignores their
// low 13 mantissa bits (truncation), where the mma.sync path rounds with cvt.rna, so its error is about twice as
// large (whole-model TF32 outputs reached 5.8e-3 against the mma.sync path's 3.1e-3); the autotuner still times them.
inline int HopperHeuristicScore(DataType dtype) {
  return dtype == DataType::kFloat32 ? kTensorCoreScore - 30 : kTensorCoreScore;
}

template <typename Tile>
GemmKernelDescription HopperDescription(DataType dtype, const GpuModel& gpu) {
  GemmKernelDescription kernel;
  kernel.tile_m = Tile::kM;
  kernel.tile_n = Tile::kN;
  kernel.k_step = Tile::kRowBytes / static_cast<int>(DataTypeSize(dtype));
  kernel.warps = 4 * Tile::kConsumers;
  kernel.warp_tile_m = 16;  // a warpgroup's 64 rows and its whole kN-wide B tile, per warp
  kernel.warp_tile_n = Tile::kN / 4;
  kernel.stages = Tile::kStages;
  kernel.wgmma = true;
  kernel.resources.threads = Tile::kThreads;
  kernel.resources.registers_per_thread = LaunchBoundsRegisterCap(Tile::kThreads, 1, gpu);
  kernel.resources.shared_bytes = Tile::kSharedBytes;
  return kernel;
}

template <typename Tile>
LaunchEstimate HopperEstimate(DataType dtype, const GemmShape& shape) {
  const GpuModel& gpu = CurrentGpuModel();
  const GemmKernelDescription kernel = HopperDescription<Tile>(dtype, gpu);
  return EstimateGemmLaunch(kernel, shape, OccupancyBlocksPerSm(kernel.resources, gpu), gpu);
}

template <typename Tile>
std::string HopperLaunchSummary(DataType dtype, const GemmShape& shape) {
  return absl::StrCat("wgmma tile ", Tile::kM, "x", Tile::kN, " (", Tile::kConsumers, " consumer warpgroups, ",
                      Tile::kStages, " stages): ", HopperEstimate<Tile>(dtype, shape).ToString());
}

template <typename Tile, bool kIm2col>
class CudaConv2dHopper final : public Conv2dAlgorithm {
 public:
  CudaConv2dHopper()
      : name_(absl::StrCat(kIm2col ? "cuda.conv2d.hopper_implicit_gemm_" : "cuda.conv2d.hopper_gemm_1x1_", Tile::kM,
                           "x", Tile::kN)) {}

  absl::string_view name() const override { return name_; }
  Backend backend() const override { return Backend::kCuda; }

  absl::Status CanImplement(const Conv2dProblem& problem) const override {
    if (absl::Status valid = problem.Validate(); !valid.ok()) return valid;
    if (problem.layout != Layout::kNHWC) return absl::UnimplementedError("needs NHWC");
    if (problem.groups != 1) return absl::UnimplementedError("needs groups == 1");
    CONVOY_RETURN_IF_ERROR(TensorCoreDtypeSupported(problem.dtype, problem.allow_tf32, problem.c, "C"));
    if (problem.k % 2 != 0) return absl::UnimplementedError(absl::StrCat("K = ", problem.k, " is odd"));
    if (int64_t{problem.n} * problem.p() * problem.q() >= (int64_t{1} << 31) ||
        int64_t{problem.r} * problem.s * problem.c >= (int64_t{1} << 31)) {
      return absl::UnimplementedError("N*P*Q or R*S*C does not fit in 32 bits");
    }
    const bool one_by_one = problem.r == 1 && problem.s == 1 && problem.stride_h == 1 && problem.stride_w == 1 &&
                            problem.pad_top == 0 && problem.pad_bottom == 0 && problem.pad_left == 0 &&
                            problem.pad_right == 0;
    if (kIm2col) {
      CONVOY_RETURN_IF_ERROR(Im2colLimits(problem));
    } else if (!one_by_one) {
      return absl::UnimplementedError("the 1x1 GEMM needs a 1x1 filter, stride 1 and no padding");
    }
    return HopperDeviceSupported();
  }

  absl::Status Run(const Conv2dProblem& problem, const Conv2dArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override {
    CONVOY_RETURN_IF_ERROR(CanImplement(problem));
    CONVOY_RETURN_IF_ERROR(
        CheckTensorCoreRunArguments(name_, "x and w", args.x, args.w, args, problem.epilogue, problem.dtype,
                                                    OutputAlignment::kPairedStores));
    const auto stream = static_cast<cudaStream_t>(context.cuda_stream);
    absl::Status encoded = absl::OkStatus();
    absl::Status launched = LaunchForFloatType(problem.dtype, "LaunchHopperGemm", [&](auto tag) -> cudaError_t {
      using T = decltype(tag);
      constexpr int kBlockK = 128 / static_cast<int>(sizeof(T));
      const ImplicitGemmParams<T> base = MakeImplicitGemmParams<T>(problem, args);
      // Thread-local rather than on the stack: the tensor maps need 64-byte alignment, which ASan's fake stack frames
      // (detect_stack_use_after_return) do not keep. Every field is set below; the launch copies the parameters.
      static thread_local HopperGemmParams<T> params;
      params.shape = base.shape;
      params.y = base.y;
      params.epilogue = base.epilogue;
      params.channel_blocks = (problem.c + kBlockK - 1) / kBlockK;
      if (kIm2col) {
        params.k_iterations = problem.r * problem.s * params.channel_blocks;
        encoded.Update(
            EncodeConvMaps<T, Tile>(params.shape, problem.pad_right, problem.pad_bottom, args.x, args.w, &params));
      } else {
        params.k_iterations = params.channel_blocks;
        encoded.Update(EncodeMatrixMap<T>(&params.a_map, args.x, params.shape.gemm_m, problem.c, Tile::kM, "x"));
        if (encoded.ok()) {
          encoded.Update(EncodeMatrixMap<T>(&params.b_map, args.w, problem.k, problem.c, Tile::kN, "w"));
        }
      }
      if (!encoded.ok()) return cudaSuccess;
      return LaunchHopperGemm<T, Tile, kIm2col>(params, stream);
    });
    CONVOY_RETURN_IF_ERROR(encoded);
    return launched;
  }

  int HeuristicScore(const Conv2dProblem& problem) const override { return HopperHeuristicScore(problem.dtype); }
  double EstimatedMicroseconds(const Conv2dProblem& problem) const override {
    return HopperEstimate<Tile>(problem.dtype, GemmShapeOf(problem)).total_us;
  }
  std::string LaunchSummary(const Conv2dProblem& problem) const override {
    return HopperLaunchSummary<Tile>(problem.dtype, GemmShapeOf(problem));
  }

 private:
  std::string name_;
};

}  // namespace convoy::cuda

#endif  // CONVOY_KERNELS_CUDA_CONV2D_HOPPER_ALGORITHM_CUH_
