#include "kernels/cpu/argmax.h"

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/convert_element.h"
#include "kernels/registry/registry.h"

namespace convoy::cpu {
namespace {

constexpr int64_t kInnerBlock = 64;

void StoreIndex(void* y, DataType index_dtype, int64_t i, int64_t index) {
  switch (index_dtype) {
    case DataType::kUInt8: static_cast<uint8_t*>(y)[i] = static_cast<uint8_t>(index); return;
    case DataType::kInt32: static_cast<int32_t*>(y)[i] = static_cast<int32_t>(index); return;
    case DataType::kInt64: static_cast<int64_t*>(y)[i] = index; return;
    default: StoreFromFloat(y, index_dtype, i, static_cast<float>(index)); return;
  }
}

// The argmax of `width` adjacent inner positions starting at x (axis stride `inner`), stored from y index `first`.
template <typename S>
void ArgMaxBlock(const ArgMaxProblem& p, const typename S::T* x, void* y, int64_t first, int64_t width) {
  float best[kInnerBlock];
  int64_t index[kInnerBlock];
  for (int64_t i = 0; i < width; ++i) best[i] = S::Load(x, i), index[i] = 0;
  for (int64_t a = 1; a < p.axis; ++a) {
    const typename S::T* row = x + a * p.inner;
    for (int64_t i = 0; i < width; ++i) {
      const float v = S::Load(row, i);
      const bool take = p.select_last_index ? v >= best[i] : v > best[i];
      best[i] = take ? v : best[i];
      index[i] = take ? a : index[i];
    }
  }
  for (int64_t i = 0; i < width; ++i) StoreIndex(y, p.index_dtype, first + i, index[i]);
}

template <typename S>
void ArgMaxKernel(const ArgMaxProblem& p, const typename S::T* x, void* y, ThreadPool& pool) {
  const int64_t blocks_per_outer = (p.inner + kInnerBlock - 1) / kInnerBlock;
  pool.ParallelFor(p.outer * blocks_per_outer, [&](int64_t begin, int64_t end) {
    for (int64_t block = begin; block < end; ++block) {
      const int64_t o = block / blocks_per_outer, first = block % blocks_per_outer * kInnerBlock;
      ArgMaxBlock<S>(p, x + o * p.axis * p.inner + first, y, o * p.inner + first,
                     std::min(kInnerBlock, p.inner - first));
    }
  });
}

}  // namespace

absl::Status CpuArgMaxAlgorithm::Run(const ArgMaxProblem& p, const ArgMaxArgs& args, Workspace,
                                     const ExecutionContext& context) const {
  if (absl::Status valid = p.Validate(); !valid.ok()) return valid;
  if (args.x == nullptr || args.y == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(name(), ": ", p.ToString(), ": null x or y"));
  }
  return DispatchFloatStorage(p.dtype, [&](auto storage) {
    using S = decltype(storage);
    ArgMaxKernel<S>(p, static_cast<const typename S::T*>(args.x), args.y, *context.thread_pool);
    return absl::OkStatus();
  });
}

CONVOY_REGISTER_ALGORITHM(ArgMaxOp, CpuArgMaxAlgorithm);

}  // namespace convoy::cpu
