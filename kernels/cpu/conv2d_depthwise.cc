// CPU depthwise conv2d computed directly; see conv2d_depthwise.h.
#include "kernels/cpu/conv2d_depthwise.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "kernels/cpu/gemm_tile.h"
#include "kernels/registry/registry.h"

namespace convoy {
namespace cpu {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// Output columns [lo, hi) whose filter column s reads inside the input row.
void ValidColumns(const Conv2dProblem& p, int s, int64_t* lo, int64_t* hi) {
  const int64_t offset = int64_t{s} * p.dilation_w - p.pad_left;  // iw = ow * stride + offset
  *lo = CeilDiv(std::max<int64_t>(0, -offset), p.stride_w);
  *hi = std::max(*lo, std::min<int64_t>(p.q(), FloorDiv(p.w - 1 - offset, p.stride_w) + 1));
}

// Filters wider than this go to im2col: the per-column valid ranges live in a fixed array (Run never allocates).
constexpr int kMaxFilterWidth = 32;

struct DepthwiseCall {
  const Conv2dProblem* p;
  const void* x;
  const float* w;  // FP32: NCHW [C, R, S], NHWC packed [R, S, C]
  void* y;
  EpilogueOperands epilogue;
  int64_t out_h, out_w;
  // Output columns [column_lo[s], column_hi[s]) read inside the input for filter column s (hoisted out of the
  // row loop: computing them per row cost more than the multiply-adds on small feature maps).
  int64_t column_lo[kMaxFilterWidth], column_hi[kMaxFilterWidth];
};

// acc[ow] += w[r, s] * x_plane[ih, ow * stride + s * dilation - pad] over the taps that land in the input.
void AccumulateRow(const DepthwiseCall& call, const float* x_plane, const float* w, int64_t oh, float* acc) {
  const Conv2dProblem& p = *call.p;
  const int64_t stride = p.stride_w;
  for (int r = 0; r < p.r; ++r) {
    const int64_t ih = oh * p.stride_h - p.pad_top + int64_t{r} * p.dilation_h;
    if (ih < 0 || ih >= p.h) continue;
    const float* x_row = x_plane + ih * p.w;  // x[ih, :]
    for (int s = 0; s < p.s; ++s) {
      const float tap = w[r * p.s + s];
      const int64_t lo = call.column_lo[s], hi = call.column_hi[s];
      const float* src = x_row + int64_t{s} * p.dilation_w - p.pad_left;  // src[ow * stride] = x[ih, iw]
      if (stride == 1) {
        for (int64_t ow = lo; ow < hi; ++ow) acc[ow] += tap * src[ow];
      } else if (stride == 2) {
        for (int64_t ow = lo; ow < hi; ++ow) acc[ow] += tap * src[2 * ow];
      } else {
        for (int64_t ow = lo; ow < hi; ++ow) acc[ow] += tap * src[ow * stride];
      }
    }
  }
}

// One (image, channel) plane of an NCHW problem. scratch: [H*W] converted input (reduced precision) + [Q] row.
void RunNchwPlane(const DepthwiseCall& call, int64_t plane, float* scratch) {
  const Conv2dProblem& p = *call.p;
  const int channel = static_cast<int>(plane % p.c);
  const int64_t in_size = int64_t{p.h} * p.w, out_size = call.out_h * call.out_w;
  const bool fp32 = p.dtype == DataType::kFloat32;
  const float* x_plane = static_cast<const float*>(call.x) + plane * in_size;
  float* row = scratch;
  if (!fp32) {
    LoadRowAsFloat(call.x, p.dtype, plane * in_size, in_size, scratch);
    x_plane = scratch;
    row = scratch + in_size;
  }
  for (int64_t oh = 0; oh < call.out_h; ++oh) {
    const int64_t y_offset = plane * out_size + oh * call.out_w;  // y[n, c, oh, 0]
    float* acc = fp32 ? static_cast<float*>(call.y) + y_offset : row;
    std::fill(acc, acc + call.out_w, 0.0f);
    AccumulateRow(call, x_plane, call.w + int64_t{channel} * p.r * p.s, oh, acc);
    ApplyChannelEpilogue(call.epilogue, channel, acc, call.out_w, call.y, y_offset);
  }
}

// One output row (image n, row oh) of an NHWC problem. scratch: [C] accumulators + [C] converted input pixel.
void RunNhwcRow(const DepthwiseCall& call, int64_t n_oh, float* scratch) {
  const Conv2dProblem& p = *call.p;
  const int64_t n = n_oh / call.out_h, oh = n_oh % call.out_h;
  const bool fp32 = p.dtype == DataType::kFloat32;
  float* acc = scratch;
  float* pixel = scratch + p.c;
  for (int64_t ow = 0; ow < call.out_w; ++ow) {
    std::fill(acc, acc + p.c, 0.0f);
    for (int r = 0; r < p.r; ++r) {
      const int64_t ih = oh * p.stride_h - p.pad_top + int64_t{r} * p.dilation_h;
      if (ih < 0 || ih >= p.h) continue;
      for (int s = 0; s < p.s; ++s) {
        const int64_t iw = ow * p.stride_w - p.pad_left + int64_t{s} * p.dilation_w;
        if (iw < 0 || iw >= p.w) continue;
        const int64_t x_offset = ((n * p.h + ih) * p.w + iw) * p.c;  // x[n, ih, iw, 0]
        const float* x = static_cast<const float*>(call.x) + x_offset;
        if (!fp32) {
          LoadRowAsFloat(call.x, p.dtype, x_offset, p.c, pixel);
          x = pixel;
        }
        const float* taps = call.w + (int64_t{r} * p.s + s) * p.c;  // w[r, s, 0]
        for (int c = 0; c < p.c; ++c) acc[c] += taps[c] * x[c];
      }
    }
    ApplyPixelEpilogue(call.epilogue, 0, acc, p.c, call.y, ((n * call.out_h + oh) * call.out_w + ow) * p.c);
  }
}

size_t ScratchFloats(const Conv2dProblem& p) {
  if (p.layout == Layout::kNHWC) return size_t{2} * p.c;
  return (p.dtype == DataType::kFloat32 ? 0 : static_cast<size_t>(p.h) * p.w) + static_cast<size_t>(p.q());
}

}  // namespace

template <Layout kLayout>
absl::string_view Conv2dDepthwise<kLayout>::name() const {
  return kLayout == Layout::kNCHW ? "cpu.conv2d.depthwise_nchw" : "cpu.conv2d.depthwise_nhwc";
}

template <Layout kLayout>
absl::Status Conv2dDepthwise<kLayout>::CanImplement(const Conv2dProblem& problem) const {
  CONVOY_RETURN_IF_ERROR(problem.Validate());
  if (problem.layout != kLayout) {
    return absl::UnimplementedError(absl::StrCat(name(), " takes ", LayoutName(kLayout), " only"));
  }
  if (!problem.is_depthwise()) {
    return absl::UnimplementedError(absl::StrCat(name(), " needs groups == C == K (depthwise), got groups=",
                                                 problem.groups, " C=", problem.c, " K=", problem.k));
  }
  if (problem.s > kMaxFilterWidth) {
    return absl::UnimplementedError(absl::StrCat(name(), " takes filters up to ", kMaxFilterWidth, " wide, got ",
                                                 problem.s));
  }
  return absl::OkStatus();
}

template <Layout kLayout>
size_t Conv2dDepthwise<kLayout>::WorkspaceBytes(const Conv2dProblem& problem) const {
  return ScratchWorkspaceBytes(ScratchFloats(problem));
}

template <Layout kLayout>
size_t Conv2dDepthwise<kLayout>::PackedFilterBytes(const Conv2dProblem& problem) const {
  const bool raw_is_usable = kLayout == Layout::kNCHW && problem.dtype == DataType::kFloat32;
  return raw_is_usable ? 0 : static_cast<size_t>(problem.filter_elements()) * sizeof(float);
}

template <Layout kLayout>
absl::Status Conv2dDepthwise<kLayout>::PackFilter(const Conv2dProblem& p, const void* filter, void* packed,
                                                  const ExecutionContext& context) const {
  float* out = static_cast<float*>(packed);
  if (kLayout == Layout::kNCHW) {
    ConvertFilterToFloat(filter, p.dtype, p.filter_elements(), out);
    return absl::OkStatus();
  }
  for (int c = 0; c < p.c; ++c) {  // [C, R, S, 1] -> [R, S, C]
    for (int rs = 0; rs < p.r * p.s; ++rs) {
      out[int64_t{rs} * p.c + c] = LoadAsFloat(filter, p.dtype, static_cast<size_t>(int64_t{c} * p.r * p.s + rs));
    }
  }
  return absl::OkStatus();
}

template <Layout kLayout>
absl::Status Conv2dDepthwise<kLayout>::Run(const Conv2dProblem& problem, const Conv2dArgs& args, Workspace workspace,
                                           const ExecutionContext& context) const {
  if (context.thread_pool == nullptr) return absl::InvalidArgumentError("CPU conv2d needs a thread pool");
  const size_t scratch_floats = ScratchFloats(problem);
  CONVOY_RETURN_IF_ERROR(ScratchSlots::Check(workspace.bytes, scratch_floats));
  ScratchSlots slots(workspace.data, workspace.bytes, scratch_floats);
  DepthwiseCall call{&problem, args.x, static_cast<const float*>(args.w), args.y,
                     EpilogueOperands{problem.epilogue, args.scale, args.bias, args.residual, problem.dtype},
                     problem.p(), problem.q(), {}, {}};
  for (int s = 0; s < problem.s; ++s) ValidColumns(problem, s, &call.column_lo[s], &call.column_hi[s]);
  const int64_t tasks = kLayout == Layout::kNCHW ? int64_t{problem.n} * problem.c : int64_t{problem.n} * problem.p();
  context.thread_pool->ParallelFor(tasks, [&](int64_t begin, int64_t end) {
    ScratchSlots::Lease lease = slots.Acquire();
    for (int64_t task = begin; task < end; ++task) {
      if (kLayout == Layout::kNCHW) {
        RunNchwPlane(call, task, lease.data());
      } else {
        RunNhwcRow(call, task, lease.data());
      }
    }
  });
  return absl::OkStatus();
}

template class Conv2dDepthwise<Layout::kNCHW>;
template class Conv2dDepthwise<Layout::kNHWC>;

CONVOY_REGISTER_ALGORITHM(Conv2dOp, Conv2dDepthwiseNchw);
CONVOY_REGISTER_ALGORITHM(Conv2dOp, Conv2dDepthwiseNhwc);

}  // namespace cpu
}  // namespace convoy
