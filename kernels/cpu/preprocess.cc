#include "kernels/cpu/preprocess.h"

#include "kernels/cpu/convert_element.h"
#include "kernels/registry/registry.h"

namespace convoy::cpu {
namespace {

template <typename S>
void PreprocessKernel(const PreprocessProblem& p, const uint8_t* x, typename S::T* y, ThreadPool& pool) {
  float a[PreprocessProblem::kMaxChannels], b[PreprocessProblem::kMaxChannels];
  for (int c = 0; c < p.c; ++c) {
    a[c] = static_cast<float>((p.scale_to_unit ? 1.0 / 255.0 : 1.0) / p.stddev[c]);
    b[c] = static_cast<float>(-double{p.mean[c]} / p.stddev[c]);
  }
  const int64_t H = p.h, W = p.w, C = p.c;
  const bool nchw = p.dst_layout == Layout::kNCHW;
  pool.ParallelFor(p.n * H, [&](int64_t begin, int64_t end) {
    for (int64_t nh = begin; nh < end; ++nh) {
      const uint8_t* in = x + nh * W * C;  // x[n, h, :, :]
      if (!nchw) {
        for (int64_t i = 0; i < W * C; ++i) S::Store(y + nh * W * C, i, in[i] * a[i % C] + b[i % C]);
        continue;
      }
      const int64_t n = nh / H, h = nh % H;
      for (int64_t c = 0; c < C; ++c) {
        typename S::T* out = y + ((n * C + c) * H + h) * W;  // y[n, c, h, :]
        for (int64_t w = 0; w < W; ++w) S::Store(out, w, in[w * C + c] * a[c] + b[c]);
      }
    }
  });
}

}  // namespace

absl::Status CpuPreprocessAlgorithm::Run(const PreprocessProblem& p, const PreprocessArgs& args, Workspace,
                                         const ExecutionContext& context) const {
  return DispatchFloatStorage(p.dst_dtype, [&](auto storage) {
    using S = decltype(storage);
    PreprocessKernel<S>(p, args.x, static_cast<typename S::T*>(args.y), *context.thread_pool);
    return absl::OkStatus();
  });
}

CONVOY_REGISTER_ALGORITHM(PreprocessOp, CpuPreprocessAlgorithm);

}  // namespace convoy::cpu
