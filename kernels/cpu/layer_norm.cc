#include "kernels/cpu/layer_norm.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/convert_element.h"
#include "kernels/registry/registry.h"

namespace convoy::cpu {
namespace {

constexpr int64_t kInnerBlock = 64;

// Normalizes `width` adjacent inner positions starting at element (o, 0, first) of x (axis stride `inner`).
// width == 1 is a plain row.
template <typename S>
void LayerNormBlock(const LayerNormProblem& p, const LayerNormArgs& args, int64_t o, int64_t first, int64_t width) {
  const int64_t offset = o * p.axis * p.inner + first;
  const typename S::T* x = static_cast<const typename S::T*>(args.x) + offset;  // [axis] with stride inner
  typename S::T* y = static_cast<typename S::T*>(args.y) + offset;
  float mean[kInnerBlock], squares[kInnerBlock];
  std::fill(mean, mean + width, 0.0f);
  std::fill(squares, squares + width, 0.0f);
  for (int64_t a = 0; a < p.axis; ++a)
    for (int64_t i = 0; i < width; ++i) mean[i] += S::Load(x, a * p.inner + i);
  const float inv_axis = 1.0f / static_cast<float>(p.axis);
  for (int64_t i = 0; i < width; ++i) mean[i] *= inv_axis;
  for (int64_t a = 0; a < p.axis; ++a)
    for (int64_t i = 0; i < width; ++i) {
      const float d = S::Load(x, a * p.inner + i) - mean[i];
      squares[i] += d * d;
    }
  float inv_std_dev[kInnerBlock];
  for (int64_t i = 0; i < width; ++i) inv_std_dev[i] = 1.0f / std::sqrt(squares[i] * inv_axis + p.epsilon);
  for (int64_t a = 0; a < p.axis; ++a) {
    const float scale = args.scale[a], bias = p.has_bias ? args.bias[a] : 0.0f;
    for (int64_t i = 0; i < width; ++i) {
      S::Store(y, a * p.inner + i, (S::Load(x, a * p.inner + i) - mean[i]) * inv_std_dev[i] * scale + bias);
    }
  }
  if (p.write_stats) {
    typename S::T* mean_out = static_cast<typename S::T*>(args.mean) + o * p.inner + first;  // [outer, inner]
    typename S::T* inv_out = static_cast<typename S::T*>(args.inv_std_dev) + o * p.inner + first;
    for (int64_t i = 0; i < width; ++i) {
      S::Store(mean_out, i, mean[i]);
      S::Store(inv_out, i, inv_std_dev[i]);
    }
  }
}

template <typename S>
void LayerNormKernel(const LayerNormProblem& p, const LayerNormArgs& args, ThreadPool& pool) {
  const int64_t blocks_per_outer = (p.inner + kInnerBlock - 1) / kInnerBlock;
  pool.ParallelFor(p.outer * blocks_per_outer, [&](int64_t begin, int64_t end) {
    for (int64_t block = begin; block < end; ++block) {
      const int64_t o = block / blocks_per_outer, first = block % blocks_per_outer * kInnerBlock;
      LayerNormBlock<S>(p, args, o, first, std::min(kInnerBlock, p.inner - first));
    }
  });
}

}  // namespace

absl::Status CpuLayerNormAlgorithm::Run(const LayerNormProblem& p, const LayerNormArgs& args, Workspace,
                                        const ExecutionContext& context) const {
  if (absl::Status valid = p.Validate(); !valid.ok()) return valid;
  if (args.x == nullptr || args.scale == nullptr || args.y == nullptr || (p.has_bias && args.bias == nullptr) ||
      (p.write_stats && (args.mean == nullptr || args.inv_std_dev == nullptr))) {
    return absl::InvalidArgumentError(
        absl::StrCat(name(), ": ", p.ToString(), ": null x, scale or y, or a null bias or stats output it asks for"));
  }
  return DispatchFloatStorage(p.dtype, [&](auto storage) {
    using S = decltype(storage);
    LayerNormKernel<S>(p, args, *context.thread_pool);
    return absl::OkStatus();
  });
}

CONVOY_REGISTER_ALGORITHM(LayerNormOp, CpuLayerNormAlgorithm);

}  // namespace convoy::cpu
