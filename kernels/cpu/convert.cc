#include "kernels/cpu/convert.h"

#include <algorithm>

#include "kernels/cpu/convert_element.h"
#include "kernels/registry/registry.h"

namespace convoy::cpu {
namespace {

constexpr int64_t kChunk = 4096;

template <typename Src, typename Dst>
void ConvertFlat(int64_t count, const typename Src::T* x, typename Dst::T* y, ThreadPool& pool) {
  pool.ParallelFor((count + kChunk - 1) / kChunk, [&](int64_t begin, int64_t end) {
    for (int64_t chunk = begin; chunk < end; ++chunk) {
      const int64_t first = chunk * kChunk, last = std::min(count, first + kChunk);
      for (int64_t i = first; i < last; ++i) Dst::Store(y, i, Src::Load(x, i));
    }
  });
}

// NCHW -> NHWC: destination row (n, h) is [W, C]; NHWC -> NCHW: destination rows (n, c, h) are [W].
template <typename Src, typename Dst>
void ConvertLayout(const ConvertProblem& p, const typename Src::T* x, typename Dst::T* y, ThreadPool& pool) {
  const int64_t C = p.c, H = p.h, W = p.w;
  if (p.dst_layout == Layout::kNHWC) {
    pool.ParallelFor(p.n * H, [&](int64_t begin, int64_t end) {
      for (int64_t nh = begin; nh < end; ++nh) {
        const int64_t n = nh / H, h = nh % H;
        for (int64_t w = 0; w < W; ++w)
          for (int64_t c = 0; c < C; ++c) Dst::Store(y, (nh * W + w) * C + c, Src::Load(x, ((n * C + c) * H + h) * W + w));
      }
    });
    return;
  }
  pool.ParallelFor(p.n * C * H, [&](int64_t begin, int64_t end) {
    for (int64_t nch = begin; nch < end; ++nch) {
      const int64_t n = nch / (C * H), c = nch / H % C, h = nch % H;
      for (int64_t w = 0; w < W; ++w) Dst::Store(y, nch * W + w, Src::Load(x, ((n * H + h) * W + w) * C + c));
    }
  });
}

}  // namespace

absl::Status CpuConvertAlgorithm::CanImplement(const ConvertProblem& problem) const {
  if (absl::Status valid = problem.Validate(); !valid.ok()) return valid;
  if (problem.output_c() != problem.c) {
    return absl::UnimplementedError("channel padding (dst_c) is done by the CUDA kernels only");
  }
  const bool blocked = problem.src_layout == Layout::kNCHW8c || problem.dst_layout == Layout::kNCHW8c;
  const bool same_layout = problem.src_layout == problem.dst_layout || (problem.h == 1 && problem.w == 1);
  if (blocked && !same_layout) {
    return absl::UnimplementedError("cpu.convert.elementwise does not reorder to or from NCHW8c");
  }
  return absl::OkStatus();
}

absl::Status CpuConvertAlgorithm::Run(const ConvertProblem& p, const ConvertArgs& args, Workspace,
                                      const ExecutionContext& context) const {
  ThreadPool& pool = *context.thread_pool;
  return DispatchFloatStorage(p.src_dtype, [&](auto src_storage) {
    return DispatchFloatStorage(p.dst_dtype, [&](auto dst_storage) {
      using Src = decltype(src_storage);
      using Dst = decltype(dst_storage);
      const auto* x = static_cast<const typename Src::T*>(args.x);
      auto* y = static_cast<typename Dst::T*>(args.y);
      if (p.src_layout == p.dst_layout || (p.h == 1 && p.w == 1) || p.c == 1) {
        ConvertFlat<Src, Dst>(int64_t{p.n} * p.c * p.h * p.w, x, y, pool);  // the layouts coincide in memory
      } else {
        ConvertLayout<Src, Dst>(p, x, y, pool);
      }
      return absl::OkStatus();
    });
  });
}

CONVOY_REGISTER_ALGORITHM(ConvertOp, CpuConvertAlgorithm);

}  // namespace convoy::cpu
