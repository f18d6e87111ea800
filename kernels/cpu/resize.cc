#include "kernels/cpu/resize.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "kernels/common/align.h"
#include "kernels/common/resize_sampling.h"
#include "kernels/cpu/convert_element.h"
#include "kernels/registry/registry.h"

namespace convoy::cpu {
namespace {

constexpr int kChannelBlock = 64;  // NHWC channels accumulated together (a stack array)

// Taps per output coordinate of one axis: 1 for nearest, else ResizeTapsOf's count (fixed per axis).
int TapsPerOutput(const ResizeAxis& a) {
  return a.mode == ResizeMode::kNearest ? 1 : ResizeTapsOf(a, 0.0f).count;
}


// One axis's table in the workspace: for output o, taps [o * taps, (o + 1) * taps) of index and weight, and
// extrapolates[o] (tf_crop_and_resize outside the input).
struct AxisTable {
  int taps = 1;
  int* index = nullptr;
  float* weight = nullptr;
  uint8_t* extrapolates = nullptr;

  static size_t Bytes(const ResizeAxis& a) {
    const size_t entries = static_cast<size_t>(a.out) * TapsPerOutput(a);
    return AlignUp(entries * sizeof(int)) + AlignUp(entries * sizeof(float)) + AlignUp(a.out);
  }

  // Carves the table out of `memory` (Bytes(a) bytes) and fills it.
  static AxisTable Build(const ResizeAxis& a, char* memory) {
    AxisTable t;
    t.taps = TapsPerOutput(a);
    const size_t entries = static_cast<size_t>(a.out) * t.taps;
    t.index = reinterpret_cast<int*>(memory);
    t.weight = reinterpret_cast<float*>(memory + AlignUp(entries * sizeof(int)));
    t.extrapolates = reinterpret_cast<uint8_t*>(memory + AlignUp(entries * sizeof(int)) + AlignUp(entries * sizeof(float)));
    for (int o = 0; o < a.out; ++o) {
      const float x = ResizeSourceCoordinate(a, o);
      int* index = t.index + static_cast<size_t>(o) * t.taps;
      float* weight = t.weight + static_cast<size_t>(o) * t.taps;
      t.extrapolates[o] = ResizeExtrapolates(a, x) ? 1 : 0;
      if (a.mode == ResizeMode::kNearest) {
        index[0] = ResizeNearestIndex(a, x), weight[0] = 1.0f;
        continue;
      }
      const ResizeTaps taps = ResizeTapsOf(a, x);
      float sum = 0.0f;
      for (int k = 0; k < t.taps; ++k) {
        index[k] = ResizeTapIndex(a, taps, k), weight[k] = ResizeTapWeight(a, taps, k);
        sum += weight[k];
      }
      for (int k = 0; k < t.taps; ++k) weight[k] = sum != 0.0f ? weight[k] / sum : 0.0f;
    }
    return t;
  }
};

// NCHW: output row oy of one channel plane. x_plane [H, W], y_row [out_w].
template <typename S>
void ResizeRowNchw(const ResizeProblem& p, const AxisTable& th, const AxisTable& tw, const typename S::T* x_plane,
                   typename S::T* y_row, int oy) {
  const int* iy = th.index + static_cast<size_t>(oy) * th.taps;
  const float* wy = th.weight + static_cast<size_t>(oy) * th.taps;
  for (int ox = 0; ox < p.out_w; ++ox) {
    if (th.extrapolates[oy] || tw.extrapolates[ox]) {
      S::Store(y_row, ox, p.extrapolation_value);
      continue;
    }
    const int* ix = tw.index + static_cast<size_t>(ox) * tw.taps;
    const float* wx = tw.weight + static_cast<size_t>(ox) * tw.taps;
    float acc = 0.0f;
    for (int a = 0; a < th.taps; ++a) {
      const typename S::T* x_row = x_plane + static_cast<int64_t>(iy[a]) * p.w;
      float row = 0.0f;
      for (int b = 0; b < tw.taps; ++b) row += wx[b] * S::Load(x_row, ix[b]);
      acc += wy[a] * row;
    }
    S::Store(y_row, ox, acc);
  }
}

// NHWC: output row oy of one image. x_image [H, W, C], y_row [out_w, C].
template <typename S>
void ResizeRowNhwc(const ResizeProblem& p, const AxisTable& th, const AxisTable& tw, const typename S::T* x_image,
                   typename S::T* y_row, int oy) {
  const int* iy = th.index + static_cast<size_t>(oy) * th.taps;
  const float* wy = th.weight + static_cast<size_t>(oy) * th.taps;
  float acc[kChannelBlock];
  for (int ox = 0; ox < p.out_w; ++ox) {
    typename S::T* y_pixel = y_row + static_cast<int64_t>(ox) * p.c;
    if (th.extrapolates[oy] || tw.extrapolates[ox]) {
      for (int c = 0; c < p.c; ++c) S::Store(y_pixel, c, p.extrapolation_value);
      continue;
    }
    const int* ix = tw.index + static_cast<size_t>(ox) * tw.taps;
    const float* wx = tw.weight + static_cast<size_t>(ox) * tw.taps;
    for (int c0 = 0; c0 < p.c; c0 += kChannelBlock) {
      const int width = std::min(kChannelBlock, p.c - c0);
      std::fill(acc, acc + width, 0.0f);
      for (int a = 0; a < th.taps; ++a)
        for (int b = 0; b < tw.taps; ++b) {
          const float weight = wy[a] * wx[b];
          if (weight == 0.0f) continue;
          const typename S::T* x_pixel = x_image + (static_cast<int64_t>(iy[a]) * p.w + ix[b]) * p.c + c0;
          for (int c = 0; c < width; ++c) acc[c] += weight * S::Load(x_pixel, c);
        }
      for (int c = 0; c < width; ++c) S::Store(y_pixel, c0 + c, acc[c]);
    }
  }
}

template <typename S>
void ResizeKernel(const ResizeProblem& p, const AxisTable& th, const AxisTable& tw, const typename S::T* x,
                  typename S::T* y, ThreadPool& pool) {
  const bool nhwc = p.layout == Layout::kNHWC;
  const int64_t planes = nhwc ? p.n : int64_t{p.n} * p.c;  // NCHW: channel planes; NHWC: images
  const int64_t x_plane = int64_t{p.h} * p.w * (nhwc ? p.c : 1);
  const int64_t y_row = int64_t{p.out_w} * (nhwc ? p.c : 1);
  pool.ParallelFor(planes * p.out_h, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {  // row = plane * out_h + oy
      const int64_t plane = row / p.out_h;
      const int oy = static_cast<int>(row % p.out_h);
      if (nhwc) {
        ResizeRowNhwc<S>(p, th, tw, x + plane * x_plane, y + row * y_row, oy);
      } else {
        ResizeRowNchw<S>(p, th, tw, x + plane * x_plane, y + row * y_row, oy);
      }
    }
  });
}

}  // namespace

size_t CpuResizeAlgorithm::WorkspaceBytes(const ResizeProblem& p) const {
  return AxisTable::Bytes(ResizeAxisH(p)) + AxisTable::Bytes(ResizeAxisW(p));
}

absl::Status CpuResizeAlgorithm::Run(const ResizeProblem& p, const ResizeArgs& args, Workspace workspace,
                                     const ExecutionContext& context) const {
  if (absl::Status valid = p.Validate(); !valid.ok()) return valid;
  const size_t needed = WorkspaceBytes(p);
  if (workspace.bytes < needed || workspace.data == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(name(), ": expected ", needed, " workspace bytes, got ", workspace.bytes));
  }
  if (args.x == nullptr || args.y == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(name(), ": ", p.ToString(), ": null x or y"));
  }
  char* memory = static_cast<char*>(workspace.data);
  const ResizeAxis axis_h = ResizeAxisH(p);
  const AxisTable th = AxisTable::Build(axis_h, memory);
  const AxisTable tw = AxisTable::Build(ResizeAxisW(p), memory + AxisTable::Bytes(axis_h));
  return DispatchFloatStorage(p.dtype, [&](auto storage) {
    using S = decltype(storage);
    ResizeKernel<S>(p, th, tw, static_cast<const typename S::T*>(args.x), static_cast<typename S::T*>(args.y),
                    *context.thread_pool);
    return absl::OkStatus();
  });
}

CONVOY_REGISTER_ALGORITHM(ResizeOp, CpuResizeAlgorithm);

}  // namespace convoy::cpu
