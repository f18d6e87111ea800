#include "kernels/cpu/convert.h"

#include <algorithm>

#include "kernels/common/tensor.h"
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
void ConvertPlainLayout(const ConvertProblem& p, const typename Src::T* x, typename Dst::T* y, ThreadPool& pool) {
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

// A reorder into or out of NCHW8c (FP16 at either end, which oneDNN's reorder does not take): each (n, h) row of
// every channel, both sides addressed through their descriptors' strides.
template <typename Src, typename Dst>
void ConvertBlockedLayout(const ConvertProblem& p, const typename Src::T* x, typename Dst::T* y, ThreadPool& pool) {
  const TensorDesc src = TensorDesc::Image(p.src_dtype, p.n, p.c, p.h, p.w, p.src_layout);
  const TensorDesc dst = TensorDesc::Image(p.dst_dtype, p.n, p.c, p.h, p.w, p.dst_layout);
  pool.ParallelFor(int64_t{p.n} * p.h, [&](int64_t begin, int64_t end) {
    for (int64_t nh = begin; nh < end; ++nh) {
      const int64_t n = nh / p.h, h = nh % p.h;
      for (int64_t c = 0; c < p.c; ++c) {
        for (int64_t w = 0; w < p.w; ++w) Dst::Store(y, dst.Offset4(n, c, h, w), Src::Load(x, src.Offset4(n, c, h, w)));
      }
    }
  });
}

}  // namespace

absl::Status CpuConvertAlgorithm::CanImplement(const ConvertProblem& problem) const {
  if (absl::Status valid = problem.Validate(); !valid.ok()) return valid;
  if (problem.output_c() != problem.c) {
    return absl::UnimplementedError("channel padding (dst_c) is done by the CUDA kernels only");
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
      } else if (p.src_layout == Layout::kNCHW8c || p.dst_layout == Layout::kNCHW8c) {
        ConvertBlockedLayout<Src, Dst>(p, x, y, pool);
      } else {
        ConvertPlainLayout<Src, Dst>(p, x, y, pool);
      }
      return absl::OkStatus();
    });
  });
}

CONVOY_REGISTER_ALGORITHM(ConvertOp, CpuConvertAlgorithm);

}  // namespace convoy::cpu
