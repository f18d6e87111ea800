// Shapes and host-side checks shared by the direct (non-tensor-core) conv2d kernels: conv2d_simt.cu (any problem)
// and conv2d_depthwise.cu (groups == C == K). Both give each thread one output element, enumerated in memory order
// of the output's layout, and accumulate in FP32.
#ifndef CONVOY_KERNELS_CUDA_CONV2D_DIRECT_COMMON_CUH_
#define CONVOY_KERNELS_CUDA_CONV2D_DIRECT_COMMON_CUH_

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/common/problems.h"
#include "kernels/cuda/conv2d_common.cuh"

namespace convoy::cuda {

// Run-time shape of a direct convolution, passed to the kernels by value.
struct DirectConvShape {
  int n = 1, c = 1, h = 1, w = 1;  // input, logical [N, C, H, W]
  int k = 1, r = 1, s = 1;         // filter [K, C/g, R, S] (NCHW) or [K, R, S, C/g] (NHWC)
  int p = 1, q = 1;                // output, logical [N, K, P, Q]
  int pad_h = 0, pad_w = 0;        // top and left padding
  int stride_h = 1, stride_w = 1;
  int dilation_h = 1, dilation_w = 1;
  int groups = 1;
  bool nhwc = false;
  int64_t outputs = 0;  // N * K * P * Q
};

template <typename T>
struct DirectConvParams {
  DirectConvShape shape;
  const T* x = nullptr;
  const T* w = nullptr;
  T* y = nullptr;
  EpilogueOperands<T> epilogue;
};

// Output element `index` (memory order of the layout) as logical (n, k, p, q).
__device__ __forceinline__ void DecomposeOutputIndex(const DirectConvShape& shape, int64_t index, int& n, int& k,
                                                     int& p, int& q) {
  if (shape.nhwc) {  // [N, P, Q, K]
    k = static_cast<int>(index % shape.k);
    index /= shape.k;
    q = static_cast<int>(index % shape.q);
    index /= shape.q;
    p = static_cast<int>(index % shape.p);
    n = static_cast<int>(index / shape.p);
  } else {  // [N, K, P, Q]
    q = static_cast<int>(index % shape.q);
    index /= shape.q;
    p = static_cast<int>(index % shape.p);
    index /= shape.p;
    k = static_cast<int>(index % shape.k);
    n = static_cast<int>(index / shape.k);
  }
}

template <typename T>
DirectConvParams<T> MakeDirectConvParams(const Conv2dProblem& problem, const Conv2dArgs& args) {
  DirectConvParams<T> params;
  DirectConvShape& shape = params.shape;
  SetConvGeometry(problem, shape);
  shape.groups = problem.groups;
  shape.nhwc = problem.layout == Layout::kNHWC;
  shape.outputs = int64_t{problem.n} * problem.k * shape.p * shape.q;
  params.x = static_cast<const T*>(args.x);
  params.w = static_cast<const T*>(args.w);
  params.y = static_cast<T*>(args.y);
  params.epilogue = MakeEpilogueOperands<T>(problem.epilogue, args);
  return params;
}

// The pointer checks every conv2d entry makes before launching.
inline absl::Status CheckConv2dArgs(absl::string_view algorithm, const Conv2dProblem& problem,
                                    const Conv2dArgs& args) {
  if (args.x == nullptr || args.w == nullptr || args.y == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(algorithm, ": x, w and y must be set"));
  }
  if (problem.epilogue.has_bias && args.bias == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(algorithm, ": the epilogue has a bias but args.bias is null"));
  }
  if (problem.epilogue.has_scale && args.scale == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(algorithm, ": the epilogue has a scale but args.scale is null"));
  }
  if (problem.epilogue.residual != ResidualMode::kNone && args.residual == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(algorithm, ": the epilogue has a residual but it is null"));
  }
  return absl::OkStatus();
}

// A 1-D grid of 256-thread blocks, capped (the kernels stride over the rest).
inline dim3 DirectConvGrid(int64_t outputs) {
  const int64_t blocks = (outputs + 255) / 256;
  return dim3(static_cast<unsigned>(std::min<int64_t>(std::max<int64_t>(blocks, 1), 65535 * 8)));
}

}  // namespace convoy::cuda

#endif  // CONVOY_KERNELS_CUDA_CONV2D_DIRECT_COMMON_CUH_
