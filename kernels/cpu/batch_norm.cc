#include "kernels/cpu/batch_norm.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/activation.h"
#include "kernels/cpu/convert_element.h"
#include "kernels/registry/registry.h"

namespace convoy::cpu {
namespace {

constexpr int64_t kChunk = 512;

// y[i] = act(x[i] * scale[i or 0] + shift[i or 0]) over one contiguous row; `per_element` selects the NHWC form
// (scale/shift indexed by channel = position) over the NCHW form (one scale/shift for the whole plane).
template <typename S>
void NormalizeRow(const typename S::T* x, typename S::T* y, int64_t n, const float* scale, const float* shift,
                  bool per_element, const Activation& activation) {
  float staged[kChunk];
  for (int64_t first = 0; first < n; first += kChunk) {
    const int64_t m = std::min(kChunk, n - first);
    LoadRow<S>(x + first, m, staged);
    if (per_element) {
      for (int64_t i = 0; i < m; ++i) staged[i] = staged[i] * scale[first + i] + shift[first + i];
    } else {
      const float s = scale[0], t = shift[0];
      for (int64_t i = 0; i < m; ++i) staged[i] = staged[i] * s + t;
    }
    ApplyActivationInPlace(staged, m, activation);
    StoreRow<S>(staged, m, y + first);
  }
}

template <typename S>
void BatchNormKernel(const BatchNormProblem& p, const typename S::T* x, typename S::T* y, const float* scale,
                     const float* shift, ThreadPool& pool) {
  const int64_t plane = int64_t{p.h} * p.w;
  if (p.layout == Layout::kNCHW) {
    pool.ParallelFor(int64_t{p.n} * p.c, [&](int64_t begin, int64_t end) {
      for (int64_t nc = begin; nc < end; ++nc) {  // nc = n * C + c
        const int64_t c = nc % p.c;
        NormalizeRow<S>(x + nc * plane, y + nc * plane, plane, scale + c, shift + c, false, p.activation);
      }
    });
  } else {
    pool.ParallelFor(int64_t{p.n} * plane, [&](int64_t begin, int64_t end) {
      for (int64_t pixel = begin; pixel < end; ++pixel) {  // rows of C channels
        NormalizeRow<S>(x + pixel * p.c, y + pixel * p.c, p.c, scale, shift, true, p.activation);
      }
    });
  }
}

}  // namespace

size_t CpuBatchNormAlgorithm::WorkspaceBytes(const BatchNormProblem& problem) const {
  return 2 * sizeof(float) * static_cast<size_t>(problem.c);
}

absl::Status CpuBatchNormAlgorithm::Run(const BatchNormProblem& p, const BatchNormArgs& args, Workspace workspace,
                                        const ExecutionContext& context) const {
  if (workspace.bytes < WorkspaceBytes(p) || workspace.data == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(name(), ": expected ", WorkspaceBytes(p),
                                                   " workspace bytes, got ", workspace.bytes));
  }
  float* scale = static_cast<float*>(workspace.data);  // [C] then shift [C]
  float* shift = scale + p.c;
  for (int c = 0; c < p.c; ++c) {
    scale[c] = args.gamma[c] / std::sqrt(args.var[c] + p.epsilon);
    shift[c] = args.beta[c] - args.mean[c] * scale[c];
  }
  return DispatchFloatStorage(p.dtype, [&](auto storage) {
    using S = decltype(storage);
    BatchNormKernel<S>(p, static_cast<const typename S::T*>(args.x), static_cast<typename S::T*>(args.y), scale,
                       shift, *context.thread_pool);
    return absl::OkStatus();
  });
}

CONVOY_REGISTER_ALGORITHM(BatchNormOp, CpuBatchNormAlgorithm);

}  // namespace convoy::cpu
