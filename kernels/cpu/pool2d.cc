#include "kernels/cpu/pool2d.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "kernels/common/pool_window.h"
#include "kernels/common/status_macros.h"
#include "kernels/cpu/convert_element.h"
#include "kernels/registry/registry.h"

namespace convoy::cpu {
namespace {

constexpr int kChannelBlock = 64;

// The taps of output (oy, ox) inside the input, rows then columns, and the average's divisor.
struct Window {
  PoolTaps rows, cols;
  int dilation_h = 1, dilation_w = 1;
  float inverse_divisor = 1.0f;
};

Window WindowAt(const Pool2dProblem& p, int oy, int ox) {
  Window win;
  if (p.mode == PoolMode::kGlobalAverage || p.mode == PoolMode::kGlobalMax) {
    win.rows = {0, p.h, p.h}, win.cols = {0, p.w, p.w};
  } else {
    win.rows = PoolTapsAlong(oy * p.stride_h - p.pad_top, p.r, p.dilation_h, p.h, p.pad_bottom);
    win.cols = PoolTapsAlong(ox * p.stride_w - p.pad_left, p.s, p.dilation_w, p.w, p.pad_right);
    win.dilation_h = p.dilation_h, win.dilation_w = p.dilation_w;
  }
  const int count = p.count_include_pad ? win.rows.padded * win.cols.padded : win.rows.count * win.cols.count;
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
      for (int ty = 0; ty < win.rows.count; ++ty) {
        const int iy = win.rows.first + ty * win.dilation_h;
        for (int tx = 0; tx < win.cols.count; ++tx) {
          const float v = S::Load(x, int64_t{iy} * p.w + win.cols.first + tx * win.dilation_w);
          acc = is_max ? std::max(acc, v) : acc + v;
        }
      }
      S::Store(y, int64_t{oy} * p.q() + ox, is_max ? acc : acc * win.inverse_divisor);
    }
  }
}

// Where the channels of one pixel lie in a channel-innermost layout, in elements: pixel (n, iy, ix) of channel block
// b starts at n * image + iy * row + ix * pixel + b * block and holds `width` contiguous channels (fewer in the last
// block). NHWC: blocks of 64 channels of [N, H, W, C]; NCHW8c: the 8-channel blocks of [N, C/8, H, W, 8].
struct ChannelBlocks {
  int64_t image, row, pixel, block;
  int width;
};

ChannelBlocks ChannelBlocksOf(Layout layout, int c, int h, int w) {
  if (layout == Layout::kNCHW8c) {
    const int64_t b = kLayoutChannelBlock;
    return {int64_t{c} * h * w, w * b, b, int64_t{h} * w * b, kLayoutChannelBlock};
  }
  return {int64_t{h} * w * c, int64_t{w} * c, c, kChannelBlock, kChannelBlock};
}

// Output pixel (n, oy, ox) of channel block `block` (`width` channels).
template <typename S>
void PoolPixelBlock(const Pool2dProblem& p, const typename S::T* x, typename S::T* y, const ChannelBlocks& in,
                    const ChannelBlocks& out, int n, int oy, int ox, int block, int width) {
  const bool is_max = IsMax(p.mode);
  const Window win = WindowAt(p, oy, ox);
  float acc[kChannelBlock];
  std::fill(acc, acc + width, is_max ? -std::numeric_limits<float>::infinity() : 0.0f);
  const typename S::T* image = x + n * in.image + block * in.block;  // x[n, :, :, block's channels]
  for (int ty = 0; ty < win.rows.count; ++ty) {
    const int iy = win.rows.first + ty * win.dilation_h;
    for (int tx = 0; tx < win.cols.count; ++tx) {
      const int ix = win.cols.first + tx * win.dilation_w;
      const typename S::T* tap = image + iy * in.row + ix * in.pixel;  // x[n, iy, ix, block's channels]
      if (is_max) {
        for (int c = 0; c < width; ++c) acc[c] = std::max(acc[c], S::Load(tap, c));
      } else {
        for (int c = 0; c < width; ++c) acc[c] += S::Load(tap, c);
      }
    }
  }
  typename S::T* pixel = y + n * out.image + block * out.block + oy * out.row + ox * out.pixel;  // y[n, oy, ox, :]
  for (int c = 0; c < width; ++c) S::Store(pixel, c, is_max ? acc[c] : acc[c] * win.inverse_divisor);
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
  const ChannelBlocks in = ChannelBlocksOf(p.layout, p.c, p.h, p.w), out = ChannelBlocksOf(p.layout, p.c, p.p(), p.q());
  const int blocks = (p.c + in.width - 1) / in.width;
  pool.ParallelFor(int64_t{p.n} * p.p() * p.q() * blocks, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {  // item = ((n * P + oy) * Q + ox) * blocks + block
      const int block = static_cast<int>(item % blocks);
      const int64_t pixel = item / blocks;
      const int ox = static_cast<int>(pixel % p.q()), oy = static_cast<int>(pixel / p.q() % p.p());
      const int n = static_cast<int>(pixel / (int64_t{p.q()} * p.p()));
      PoolPixelBlock<S>(p, x, y, in, out, n, oy, ox, block, std::min(in.width, p.c - block * in.width));
    }
  });
}

}  // namespace

absl::Status CpuPool2dAlgorithm::CanImplement(const Pool2dProblem& problem) const {
  CONVOY_RETURN_IF_ERROR(problem.Validate());
  if (!IsFloatingPoint(problem.dtype)) {
    return absl::UnimplementedError(absl::StrCat(name(), ": FP32, FP16 or BF16 only (8-bit max pooling runs on "
                                                 "cpu.pool2d.onednn_nhwc), got ", DataTypeName(problem.dtype)));
  }
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
