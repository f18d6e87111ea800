#include "kernels/cpu/softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/convert_element.h"
#include "kernels/registry/registry.h"

namespace convoy::cpu {
namespace {

constexpr int64_t kInnerBlock = 64;

// Softmax of `width` adjacent inner positions starting at x (axis stride `inner`). width == 1 is a plain row.
template <typename S>
void SoftmaxBlock(const typename S::T* x, typename S::T* y, int64_t axis, int64_t inner, int64_t width) {
  float max_value[kInnerBlock], sum[kInnerBlock];
  std::fill(max_value, max_value + width, -std::numeric_limits<float>::infinity());
  std::fill(sum, sum + width, 0.0f);
  for (int64_t a = 0; a < axis; ++a)
    for (int64_t i = 0; i < width; ++i) max_value[i] = std::max(max_value[i], S::Load(x, a * inner + i));
  for (int64_t a = 0; a < axis; ++a)
    for (int64_t i = 0; i < width; ++i) sum[i] += std::exp(S::Load(x, a * inner + i) - max_value[i]);
  for (int64_t i = 0; i < width; ++i) sum[i] = 1.0f / sum[i];
  for (int64_t a = 0; a < axis; ++a)
    for (int64_t i = 0; i < width; ++i) S::Store(y, a * inner + i, std::exp(S::Load(x, a * inner + i) - max_value[i]) * sum[i]);
}

template <typename S>
void SoftmaxKernel(const SoftmaxProblem& p, const typename S::T* x, typename S::T* y, ThreadPool& pool) {
  const int64_t blocks_per_outer = (p.inner + kInnerBlock - 1) / kInnerBlock;
  pool.ParallelFor(p.outer * blocks_per_outer, [&](int64_t begin, int64_t end) {
    for (int64_t block = begin; block < end; ++block) {
      const int64_t o = block / blocks_per_outer, first = block % blocks_per_outer * kInnerBlock;
      const int64_t offset = o * p.axis * p.inner + first;
      SoftmaxBlock<S>(x + offset, y + offset, p.axis, p.inner, std::min(kInnerBlock, p.inner - first));
    }
  });
}

}  // namespace

absl::Status CpuSoftmaxAlgorithm::Run(const SoftmaxProblem& p, const SoftmaxArgs& args, Workspace,
                                      const ExecutionContext& context) const {
  return DispatchFloatStorage(p.dtype, [&](auto storage) {
    using S = decltype(storage);
    SoftmaxKernel<S>(p, static_cast<const typename S::T*>(args.x), static_cast<typename S::T*>(args.y),
                     *context.thread_pool);
    return absl::OkStatus();
  });
}

CONVOY_REGISTER_ALGORITHM(SoftmaxOp, CpuSoftmaxAlgorithm);

}  // namespace convoy::cpu
