// CPU depthwise conv2d computed directly; see conv2d_depthwise.h.
#include "kernels/cpu/conv2d_depthwise.h"

#include <algorithm>
#include <limits>

#if defined(__SSE2__)
#include <emmintrin.h>
#define CONVOY_DEPTHWISE_SSE 1
#endif

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "kernels/cpu/activation_loops.h"
#include "kernels/cpu/depthwise_nhwc_rows.h"
#include "kernels/cpu/gemm_tile.h"
#include "kernels/cpu/per_isa_registration.h"
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

// ---- The fused epilogue in registers -------------------------------------------------------------------------
//
// The fast paths finish each accumulator before its single store when the epilogue is affine + a clamp (identity,
// relu, clip/relu6) on FP32 output: v = acc * scale + bias (+ r) -> min(max(v, lo), hi) (+ r). Other activations and
// FP16/BF16 outputs store the raw sums and run ApplyChannelEpilogue / ApplyPixelEpilogue on the hot row instead.
struct ClampEpilogue {
  bool fused = false;  // false: the kernels store raw sums (kNone, no clamp, scale 1, bias 0)
  ResidualMode residual = ResidualMode::kNone;
  bool clamp = false;
  float lo = 0.0f, hi = 0.0f;
};

// bf16_ok: the caller also finishes BF16 outputs in registers (the NHWC row kernel).
ClampEpilogue ClassifyEpilogue(const Conv2dProblem& p, bool bf16_ok = false) {
  ClampEpilogue out;
  if (p.dtype != DataType::kFloat32 && !(bf16_ok && p.dtype == DataType::kBFloat16)) return out;
  const Activation& a = p.epilogue.activation;
  switch (a.kind) {
    case ActivationKind::kIdentity: break;
    case ActivationKind::kRelu:
      out.clamp = true, out.lo = 0.0f, out.hi = std::numeric_limits<float>::infinity();
      break;
    case ActivationKind::kClip:
      out.clamp = true, out.lo = a.alpha, out.hi = a.beta;
      break;
    default: return out;
  }
  out.fused = true;
  out.residual = p.epilogue.residual;
  return out;
}

// Clamps like fminf(fmaxf(v, lo), hi) in ApplyActivation (a NaN sum becomes lo), without the libm calls.
template <ResidualMode kRes, bool kClamp>
inline float FinishScalar(float acc, float scale, float bias, float lo, float hi, const float* residual) {
  float v = acc * scale + bias;
  if (kRes == ResidualMode::kBeforeActivation) v += *residual;
  if (kClamp) {
    v = v >= lo ? v : lo;
    v = v > hi ? hi : v;
  }
  if (kRes == ResidualMode::kAfterActivation) v += *residual;
  return v;
}

#ifdef CONVOY_DEPTHWISE_SSE
// _mm_max_ps(v, lo) returns lo when v is NaN, as fmaxf does. residual is ignored when kRes is kNone.
template <ResidualMode kRes, bool kClamp>
inline __m128 FinishVector(__m128 acc, __m128 scale, __m128 bias, __m128 lo, __m128 hi, __m128 residual) {
  __m128 v = _mm_add_ps(_mm_mul_ps(acc, scale), bias);
  if (kRes == ResidualMode::kBeforeActivation) v = _mm_add_ps(v, residual);
  if (kClamp) v = _mm_min_ps(_mm_max_ps(v, lo), hi);
  if (kRes == ResidualMode::kAfterActivation) v = _mm_add_ps(v, residual);
  return v;
}

template <ResidualMode kRes, bool kClamp>
inline __m128 FinishVector(__m128 acc, __m128 scale, __m128 bias, __m128 lo, __m128 hi, const float* residual) {
  return FinishVector<kRes, kClamp>(acc, scale, bias, lo, hi,
                                    kRes == ResidualMode::kNone ? _mm_setzero_ps() : _mm_loadu_ps(residual));
}

// The first `count` (1-3) lanes of a vector from / to memory, without touching the floats after them.
inline __m128 LoadPartial(const float* x, int64_t count) {
  const __m128 low2 = _mm_loadl_pi(_mm_setzero_ps(), reinterpret_cast<const __m64*>(x));
  if (count == 1) return _mm_load_ss(x);
  return count == 2 ? low2 : _mm_movelh_ps(low2, _mm_load_ss(x + 2));
}

inline void StorePartial(float* y, __m128 v, int64_t count) {
  if (count == 1) {
    _mm_store_ss(y, v);
    return;
  }
  _mm_storel_pi(reinterpret_cast<__m64*>(y), v);
  if (count == 3) _mm_store_ss(y + 2, _mm_movehl_ps(v, v));
}
#endif

// ---- NCHW 3x3, stride 1 or 2, dilation 1: a register-blocked row kernel over a zero-padded plane ---------------
//
// Each (image, channel) plane is first copied (FP16/BF16: converted) into a zero-padded FP32 plane in scratch, wide
// and tall enough that every output column of every row reads inside it, including the last partial 4-wide step.
// The row kernel then has no bounds checks at all: three input rows in flight, four output columns per step.

struct PaddedPlaneShape {
  int64_t rows, pitch;  // [rows, pitch] floats; x[ih, iw] sits at [ih + pad_top, iw + pad_left]
};

int64_t RoundUp4(int64_t v) { return (v + 3) / 4 * 4; }

PaddedPlaneShape PaddedPlane(const Conv2dProblem& p) {
  const int64_t stride = p.stride_w;
  // The last 4-wide step starts at output column RoundUp4(Q) - 4 and reads 3 * stride + 3 input columns from
  // there (stride 1: 6, stride 2: 9; see Row3Taps).
  const int64_t last_step = RoundUp4(p.q()) - 4;
  const int64_t read_end = last_step * stride + (stride == 1 ? 6 : 9);
  return PaddedPlaneShape{int64_t{p.p() - 1} * p.stride_h + 3, std::max<int64_t>(read_end, p.pad_left + p.w)};
}

// padded[i + pad_top, j + pad_left] = x_plane[i, j] for the input rows the output reads. Everything else in the padded
// plane is zero: the slot is zeroed once per ParallelFor chunk (ZeroPaddedPlane) and no plane writes there.
void FillPaddedPlane(const Conv2dProblem& p, const PaddedPlaneShape& shape, const void* x, int64_t plane_offset,
                     float* padded) {
  const int64_t last_row = std::min<int64_t>(p.h, shape.rows - p.pad_top);  // input rows [0, last_row) are read
  for (int64_t ih = 0; ih < last_row; ++ih) {
    float* row = padded + (ih + p.pad_top) * shape.pitch + p.pad_left;
    if (p.dtype != DataType::kFloat32) {
      LoadRowAsFloat(x, p.dtype, plane_offset + ih * p.w, p.w, row);
      continue;
    }
    // An inline copy: rows here are often 7-28 floats, where a memcpy call costs as much as the copy.
    const float* src = static_cast<const float*>(x) + plane_offset + ih * p.w;
    int64_t j = 0;
#ifdef CONVOY_DEPTHWISE_SSE
    for (; j + 4 <= p.w; j += 4) _mm_storeu_ps(row + j, _mm_loadu_ps(src + j));
#endif
    for (; j < p.w; ++j) row[j] = src[j];
  }
}

void ZeroPaddedPlane(const PaddedPlaneShape& shape, float* padded) {
  std::fill(padded, padded + shape.rows * shape.pitch, 0.0f);
}

// One channel plane: y[oh, ow] = epilogue(sum_{r,s} w[r, s] * padded[oh * stride_h + r, ow * kStride + s]).
struct Plane3x3 {
  const float* padded;    // the zero-padded input plane
  int64_t pitch;          // floats per padded row
  int64_t stride_h;
  const float* w;         // [3, 3] this channel's filter
  float* y;               // [P, Q] the output plane (FP32), or scratch for raw sums
  const float* residual;  // [P, Q] the residual plane when fused with a residual, else null
  int64_t out_h, out_w;
  float scale, bias, clamp_lo, clamp_hi;
};

template <int kStride>
inline float Taps3x3(const float* const rows[3], const float* w, int64_t ow) {
  float acc = 0.0f;
  for (int r = 0; r < 3; ++r) {
    for (int s = 0; s < 3; ++s) acc += w[r * 3 + s] * rows[r][ow * kStride + s];
  }
  return acc;
}

#ifdef CONVOY_DEPTHWISE_SSE
// w0 * x[j * kStride] + w1 * x[j * kStride + 1] + w2 * x[j * kStride + 2] for the four columns j = 0..3 of a step.
template <int kStride>
inline __m128 Row3Taps(const float* x, __m128 w0, __m128 w1, __m128 w2) {
  __m128 t0, t1, t2;
  if (kStride == 1) {
    t0 = _mm_loadu_ps(x), t1 = _mm_loadu_ps(x + 1), t2 = _mm_loadu_ps(x + 2);
  } else {
    const __m128 lo4 = _mm_loadu_ps(x), hi4 = _mm_loadu_ps(x + 4), tail = _mm_loadu_ps(x + 5);
    t0 = _mm_shuffle_ps(lo4, hi4, _MM_SHUFFLE(2, 0, 2, 0));  // x[0, 2, 4, 6]
    t1 = _mm_shuffle_ps(lo4, hi4, _MM_SHUFFLE(3, 1, 3, 1));  // x[1, 3, 5, 7]
    t2 = _mm_shuffle_ps(t0, tail, _MM_SHUFFLE(3, 1, 2, 1));  // x[2, 4, 6, 8]
  }
  return _mm_add_ps(_mm_add_ps(_mm_mul_ps(w0, t0), _mm_mul_ps(w1, t1)), _mm_mul_ps(w2, t2));
}
#endif

template <int kStride, ResidualMode kRes, bool kClamp>
void RunPlane3x3(const Plane3x3& a) {
#ifdef CONVOY_DEPTHWISE_SSE
  const __m128 w00 = _mm_set1_ps(a.w[0]), w01 = _mm_set1_ps(a.w[1]), w02 = _mm_set1_ps(a.w[2]);
  const __m128 w10 = _mm_set1_ps(a.w[3]), w11 = _mm_set1_ps(a.w[4]), w12 = _mm_set1_ps(a.w[5]);
  const __m128 w20 = _mm_set1_ps(a.w[6]), w21 = _mm_set1_ps(a.w[7]), w22 = _mm_set1_ps(a.w[8]);
  const __m128 scale = _mm_set1_ps(a.scale), bias = _mm_set1_ps(a.bias);
  const __m128 lo = _mm_set1_ps(a.clamp_lo), hi = _mm_set1_ps(a.clamp_hi);
#endif
  for (int64_t oh = 0; oh < a.out_h; ++oh) {
    const float* rows[3];  // padded[oh * stride_h + r, 0]
    for (int r = 0; r < 3; ++r) rows[r] = a.padded + (oh * a.stride_h + r) * a.pitch;
    float* y = a.y + oh * a.out_w;                                                       // y[oh, 0]
    const float* res = kRes == ResidualMode::kNone ? nullptr : a.residual + oh * a.out_w;  // residual[oh, 0]
    int64_t ow = 0;
#ifdef CONVOY_DEPTHWISE_SSE
    const float* x0 = rows[0];
    const float* x1 = rows[1];
    const float* x2 = rows[2];
    for (; ow < a.out_w; ow += 4) {
      // Written out per row (not a loop over r) so the nine weights and three row pointers stay in registers.
      const __m128 sum0 = Row3Taps<kStride>(x0 + ow * kStride, w00, w01, w02);
      const __m128 sum1 = Row3Taps<kStride>(x1 + ow * kStride, w10, w11, w12);
      const __m128 sum2 = Row3Taps<kStride>(x2 + ow * kStride, w20, w21, w22);
      const __m128 acc = _mm_add_ps(_mm_add_ps(sum0, sum1), sum2);
      if (ow + 4 <= a.out_w) {
        _mm_storeu_ps(y + ow, FinishVector<kRes, kClamp>(acc, scale, bias, lo, hi,
                                                          kRes == ResidualMode::kNone ? nullptr : res + ow));
      } else {  // the last partial step: finish in registers, load and store only the columns that exist
        const int64_t count = a.out_w - ow;
        const __m128 r = kRes == ResidualMode::kNone ? _mm_setzero_ps() : LoadPartial(res + ow, count);
        StorePartial(y + ow, FinishVector<kRes, kClamp>(acc, scale, bias, lo, hi, r), count);
      }
    }
#else
    for (; ow < a.out_w; ++ow) {
      y[ow] = FinishScalar<kRes, kClamp>(Taps3x3<kStride>(rows, a.w, ow), a.scale, a.bias, a.clamp_lo, a.clamp_hi,
                                         kRes == ResidualMode::kNone ? nullptr : res + ow);
    }
#endif
  }
}

using Plane3x3Kernel = void (*)(const Plane3x3&);

template <int kStride>
Plane3x3Kernel PickPlane3x3(const ClampEpilogue& e) {
  switch (e.residual) {
    case ResidualMode::kNone:
      return e.clamp ? RunPlane3x3<kStride, ResidualMode::kNone, true> : RunPlane3x3<kStride, ResidualMode::kNone, false>;
    case ResidualMode::kBeforeActivation:
      return e.clamp ? RunPlane3x3<kStride, ResidualMode::kBeforeActivation, true>
                     : RunPlane3x3<kStride, ResidualMode::kBeforeActivation, false>;
    case ResidualMode::kAfterActivation:
      return e.clamp ? RunPlane3x3<kStride, ResidualMode::kAfterActivation, true>
                     : RunPlane3x3<kStride, ResidualMode::kAfterActivation, false>;
  }
  return nullptr;
}

bool IsRowKernelShape(const Conv2dProblem& p) {
  return p.r == 3 && p.s == 3 && p.dilation_h == 1 && p.dilation_w == 1 && (p.stride_w == 1 || p.stride_w == 2);
}

// Scratch floats of the row-kernel path: the padded plane, plus [P, Q] raw sums when the epilogue is not fused.
size_t Plane3x3ScratchFloats(const Conv2dProblem& p) {
  const PaddedPlaneShape shape = PaddedPlane(p);
  const size_t raw = ClassifyEpilogue(p).fused ? 0 : static_cast<size_t>(p.p()) * p.q();
  return static_cast<size_t>(shape.rows * shape.pitch) + raw;
}

// One (image, channel) plane through the 3x3 row kernel; scratch as Plane3x3ScratchFloats says.
// The padded plane at the start of scratch must be zero outside its data region (ZeroPaddedPlane once per slot).
void RunNchwPlane3x3(const DepthwiseCall& call, const ClampEpilogue& e, const PaddedPlaneShape& shape, int64_t plane,
                     float* scratch) {
  const Conv2dProblem& p = *call.p;
  const int channel = static_cast<int>(plane % p.c);
  const int64_t out_size = call.out_h * call.out_w;
  FillPaddedPlane(p, shape, call.x, plane * int64_t{p.h} * p.w, scratch);
  const EpilogueOperands& ops = call.epilogue;
  Plane3x3 a{};
  a.padded = scratch, a.pitch = shape.pitch, a.stride_h = p.stride_h;
  a.w = call.w + int64_t{channel} * 9;
  // Fused: straight into y (FP32); otherwise raw sums into y (FP32) or scratch, then the shared epilogue.
  const bool fp32 = p.dtype == DataType::kFloat32;
  a.y = fp32 ? static_cast<float*>(call.y) + plane * out_size : scratch + shape.rows * shape.pitch;
  a.residual = e.fused && e.residual != ResidualMode::kNone
                   ? static_cast<const float*>(ops.residual) + plane * out_size
                   : nullptr;
  a.out_h = call.out_h, a.out_w = call.out_w;
  a.scale = e.fused && ops.epilogue.has_scale ? ops.scale[channel] : 1.0f;
  a.bias = e.fused && ops.epilogue.has_bias ? ops.bias[channel] : 0.0f;
  a.clamp_lo = e.lo, a.clamp_hi = e.hi;
  (p.stride_w == 1 ? PickPlane3x3<1>(e) : PickPlane3x3<2>(e))(a);
  if (!e.fused) ApplyChannelEpilogue(ops, channel, a.y, out_size, call.y, plane * out_size);
}

// ---- NHWC FP32 and BF16: the row kernel compiled for the instruction set (depthwise_nhwc_rows.h) ---------------

const DepthwiseNhwcRowKernels& DepthwiseNhwcRowsFor(CpuIsa isa) {
  return ForCpuIsa(isa, kDepthwiseNhwcRowsBaseline, kDepthwiseNhwcRowsAvx2, kDepthwiseNhwcRowsAvx512);
}

// Activations the row kernel does not clamp to (sigmoid, SiLU, ...) on an FP32 output with no residual after them:
// the kernel applies the scale, bias and a residual before the activation in registers, then ApplyActivationInPlace
// runs over the whole output row (out_w * C contiguous floats) while it is in cache.
bool ActivationOverRow(const Conv2dProblem& p, const ClampEpilogue& e) {
  return p.dtype == DataType::kFloat32 && !e.fused && p.epilogue.residual != ResidualMode::kAfterActivation;
}

// Whether the row kernel runs `p`: at most kMaxDepthwiseNhwcTaps taps, FP32, or BF16 with an epilogue it finishes
// in registers (e from ClassifyEpilogue(p, /*bf16_ok=*/true)).
bool RowKernelRuns(const Conv2dProblem& p, const ClampEpilogue& e) {
  if (p.r * p.s > kMaxDepthwiseNhwcTaps) return false;
  return p.dtype == DataType::kFloat32 || (p.dtype == DataType::kBFloat16 && e.fused);
}

// One output row (image n, row oh) of an NHWC problem the row kernel runs. No scratch.
void RunNhwcRowKernel(const DepthwiseCall& call, const ClampEpilogue& e, const DepthwiseNhwcRowKernels& kernels,
                      int64_t n_oh) {
  const Conv2dProblem& p = *call.p;
  const int64_t n = n_oh / call.out_h, oh = n_oh % call.out_h;
  const int64_t y_offset = n_oh * call.out_w * p.c;  // y[n, oh, 0, 0]
  const size_t element = DataTypeSize(p.dtype);
  DepthwiseNhwcRow row;
  row.x = static_cast<const char*>(call.x) + n * p.h * p.w * p.c * element;
  row.w = call.w;
  row.y = static_cast<char*>(call.y) + y_offset * element;
  const bool activation_over_row = ActivationOverRow(p, e);
  if (e.fused || activation_over_row) {
    row.scale = call.epilogue.epilogue.has_scale ? call.epilogue.scale : nullptr;
    row.bias = call.epilogue.epilogue.has_bias ? call.epilogue.bias : nullptr;
    if (p.epilogue.residual != ResidualMode::kNone) {
      row.residual = static_cast<const char*>(call.epilogue.residual) + y_offset * element;
      row.residual_mode = p.epilogue.residual == ResidualMode::kBeforeActivation ? 1 : 2;
    }
    row.clamp = e.clamp, row.lo = e.lo, row.hi = e.hi;
  }
  row.h = p.h, row.w_in = p.w, row.c = p.c, row.out_w = call.out_w, row.oh = oh;
  row.r = p.r, row.s = p.s, row.stride_h = p.stride_h, row.stride_w = p.stride_w;
  row.dilation_h = p.dilation_h, row.dilation_w = p.dilation_w, row.pad_top = p.pad_top, row.pad_left = p.pad_left;
  if (p.dtype == DataType::kBFloat16) {
    kernels.bf16_row(row);  // RowKernelRuns: the epilogue is finished in registers
    return;
  }
  kernels.fp32_row(row);
  if (e.fused) return;
  if (activation_over_row) {
    ApplyActivationInPlace(static_cast<float*>(row.y), call.out_w * p.c, p.epilogue.activation);
    return;
  }
  for (int64_t ow = 0; ow < call.out_w; ++ow) {
    const int64_t offset = y_offset + ow * p.c;
    ApplyPixelEpilogue(call.epilogue, 0, static_cast<float*>(call.y) + offset, p.c, call.y, offset);
  }
}

size_t ScratchFloats(const Conv2dProblem& p) {
  if (p.layout == Layout::kNHWC) return size_t{2} * p.c;
  if (IsRowKernelShape(p)) return Plane3x3ScratchFloats(p);
  return (p.dtype == DataType::kFloat32 ? 0 : static_cast<size_t>(p.h) * p.w) + static_cast<size_t>(p.q());
}

}  // namespace

template <Layout kLayout>
Conv2dDepthwise<kLayout>::Conv2dDepthwise(CpuIsa isa)
    : isa_(kLayout == Layout::kNCHW ? CpuIsa::kBaseline : isa),
      name_(kLayout == Layout::kNCHW      ? std::string("cpu.conv2d.depthwise_nchw")
            : isa_ == CpuIsa::kBaseline ? std::string("cpu.conv2d.depthwise_nhwc")
                                        : absl::StrCat("cpu.conv2d.depthwise_nhwc_", CpuIsaName(isa_))) {}

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
  const ClampEpilogue clamp = ClassifyEpilogue(problem, /*bf16_ok=*/kLayout == Layout::kNHWC);
  const bool row_kernel = kLayout == Layout::kNCHW && IsRowKernelShape(problem);
  const bool nhwc_row_kernel = kLayout == Layout::kNHWC && RowKernelRuns(problem, clamp);
  const DepthwiseNhwcRowKernels& nhwc_rows = DepthwiseNhwcRowsFor(isa_);
  // NCHW: one task per (image, channel) plane; NHWC: one per (image, output row), every channel vectorized.
  const int64_t tasks = kLayout == Layout::kNCHW ? int64_t{problem.n} * problem.c : int64_t{problem.n} * problem.p();
  const PaddedPlaneShape padded = row_kernel ? PaddedPlane(problem) : PaddedPlaneShape{0, 0};
  context.thread_pool->ParallelFor(tasks, [&](int64_t begin, int64_t end) {
    ScratchSlots::Lease lease = slots.Acquire();
    if (row_kernel) ZeroPaddedPlane(padded, lease.data());
    for (int64_t task = begin; task < end; ++task) {
      if (row_kernel) {
        RunNchwPlane3x3(call, clamp, padded, task, lease.data());
      } else if (kLayout == Layout::kNCHW) {
        RunNchwPlane(call, task, lease.data());
      } else if (nhwc_row_kernel) {
        RunNhwcRowKernel(call, clamp, nhwc_rows, task);
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
CONVOY_REGISTER_PER_ISA_ALGORITHM(Conv2dOp, Conv2dDepthwiseNhwc);

}  // namespace cpu
}  // namespace convoy
