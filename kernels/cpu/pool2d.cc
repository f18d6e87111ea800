#include "kernels/cpu/pool2d.h"

#include <algorithm>
#include <limits>

#include "kernels/cpu/convert_element.h"
#include "kernels/registry/registry.h"

namespace convoy::cpu {
namespace {

constexpr int kChannelBlock = 64;

// The input window of output (oy, ox), clipped to the input, and the average's divisor.
struct Window {
  int y0, y1, x0, x1;
  float inverse_divisor;
};

Window WindowAt(const Pool2dProblem& p, int oy, int ox) {
  if (p.mode == PoolMode::kGlobalAverage || p.mode == PoolMode::kGlobalMax) {
    return {0, p.h, 0, p.w, 1.0f / (static_cast<float>(p.h) * p.w)};
  }
  const int py0 = oy * p.stride_h - p.pad_top, px0 = ox * p.stride_w - p.pad_left;
  const int py1 = std::min(py0 + p.r, p.h + p.pad_bottom), px1 = std::min(px0 + p.s, p.w + p.pad_right);
  Window win{std::max(py0, 0), std::min(py1, p.h), std::max(px0, 0), std::min(px1, p.w), 0.0f};
  const int count = p.count_include_pad ? (py1 - py0) * (px1 - px0) : (win.y1 - win.y0) * (win.x1 - win.x0);
  win.inverse_divisor = 1.0f / static_cast<float>(count);
  return win;
}

bool IsMax(PoolMode mode) { return mode == PoolMode::kMax || mode == PoolMode::kGlobalMax; }

// NCHW: one (n, c) plane x [H, W] -> y [P, Q].
template <typename S>
void PoolPlane(const Pool2dProblem& p, const typename S::T* x, typename S::T* y) {
  const bool is_max = IsMax(p.mode);
  for (int oy = 0; oy < p.p(); ++oy) {
    for (int ox = 0; ox < p.q(); ++ox) {
      const Window win = WindowAt(p, oy, ox);
      float acc = is_max ? -std::numeric_limits<float>::infinity() : 0.0f;
      for (int iy = win.y0; iy < win.y1; ++iy)
        for (int ix = win.x0; ix < win.x1; ++ix) {
          const float v = S::Load(x, int64_t{iy} * p.w + ix);
          acc = is_max ? std::max(acc, v) : acc + v;
        }
      S::Store(y, int64_t{oy} * p.q() + ox, is_max ? acc : acc * win.inverse_divisor);
    }
  }
}

// NHWC: output pixel (n, oy, ox), channels [c0, c0 + width).
template <typename S>
void PoolPixelBlock(const Pool2dProblem& p, const typename S::T* x, typename S::T* y, int n, int oy, int ox, int c0,
                    int width) {
  const bool is_max = IsMax(p.mode);
  const Window win = WindowAt(p, oy, ox);
  float acc[kChannelBlock];
  std::fill(acc, acc + width, is_max ? -std::numeric_limits<float>::infinity() : 0.0f);
  for (int iy = win.y0; iy < win.y1; ++iy)
    for (int ix = win.x0; ix < win.x1; ++ix) {
      const typename S::T* in = x + ((int64_t{n} * p.h + iy) * p.w + ix) * p.c + c0;  // x[n, iy, ix, c0:]
      if (is_max) {
        for (int c = 0; c < width; ++c) acc[c] = std::max(acc[c], S::Load(in, c));
      } else {
        for (int c = 0; c < width; ++c) acc[c] += S::Load(in, c);
      }
    }
  typename S::T* out = y + ((int64_t{n} * p.p() + oy) * p.q() + ox) * p.c + c0;  // y[n, oy, ox, c0:]
  for (int c = 0; c < width; ++c) S::Store(out, c, is_max ? acc[c] : acc[c] * win.inverse_divisor);
}

template <typename S>
void PoolKernel(const Pool2dProblem& p, const typename S::T* x, typename S::T* y, ThreadPool& pool) {
  if (p.layout == Layout::kNCHW) {
    const int64_t in_plane = int64_t{p.h} * p.w, out_plane = int64_t{p.p()} * p.q();
    pool.ParallelFor(int64_t{p.n} * p.c, [&](int64_t begin, int64_t end) {
      for (int64_t nc = begin; nc < end; ++nc) PoolPlane<S>(p, x + nc * in_plane, y + nc * out_plane);
    });
    return;
  }
  const int blocks = (p.c + kChannelBlock - 1) / kChannelBlock;
  pool.ParallelFor(int64_t{p.n} * p.p() * p.q() * blocks, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {  // item = ((n * P + oy) * Q + ox) * blocks + block
      const int block = static_cast<int>(item % blocks);
      const int64_t pixel = item / blocks;
      const int ox = static_cast<int>(pixel % p.q()), oy = static_cast<int>(pixel / p.q() % p.p());
      const int n = static_cast<int>(pixel / (int64_t{p.q()} * p.p()));
      const int c0 = block * kChannelBlock;
      PoolPixelBlock<S>(p, x, y, n, oy, ox, c0, std::min(kChannelBlock, p.c - c0));
    }
  });
}

}  // namespace

absl::Status CpuPool2dAlgorithm::CanImplement(const Pool2dProblem& problem) const {
  if (absl::Status valid = problem.Validate(); !valid.ok()) return valid;
  if (problem.layout == Layout::kNCHW8c) return absl::UnimplementedError("cpu.pool2d.direct takes NCHW and NHWC only");
  return absl::OkStatus();
}

absl::Status CpuPool2dAlgorithm::Run(const Pool2dProblem& p, const Pool2dArgs& args, Workspace,
                                     const ExecutionContext& context) const {
  return DispatchFloatStorage(p.dtype, [&](auto storage) {
    using S = decltype(storage);
    PoolKernel<S>(p, static_cast<const typename S::T*>(args.x), static_cast<typename S::T*>(args.y),
                  *context.thread_pool);
    return absl::OkStatus();
  });
}

CONVOY_REGISTER_ALGORITHM(Pool2dOp, CpuPool2dAlgorithm);

}  // namespace convoy::cpu
