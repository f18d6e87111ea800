#include "kernels/cpu/convert.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>

#include <tmmintrin.h>
#include <type_traits>

#include "kernels/common/tensor.h"
#include "kernels/cpu/convert_element.h"
#include "kernels/cpu/quantized_vector_loops.h"
#include "kernels/registry/registry.h"

namespace convoy::cpu {
namespace {

constexpr int64_t kChunk = 4096;

// The storage types are passed as objects: the float ones (convert_element.h) are stateless, QuantizedStorage carries
// its scale and zero point.
template <typename Src, typename Dst>
void ConvertFlat(int64_t count, const Src& src, const typename Src::T* x, const Dst& dst, typename Dst::T* y,
                 ThreadPool& pool) {
  pool.ParallelFor((count + kChunk - 1) / kChunk, [&](int64_t begin, int64_t end) {
    for (int64_t chunk = begin; chunk < end; ++chunk) {
      const int64_t first = chunk * kChunk, last = std::min(count, first + kChunk);
      for (int64_t i = first; i < last; ++i) dst.Store(y, i, src.Load(x, i));
    }
  });
}

// Interleaves the three FP32 rows r, g, b of `width` values into `width` pixels at y (y[3 * w + c]), 4 pixels per
// 6 shuffles and 3 stores (SSE).
void InterleaveRgb(const float* r, const float* g, const float* b, int64_t width, float* y) {
  int64_t w = 0;
  for (; w + 4 <= width; w += 4, y += 12) {
    const __m128 vr = _mm_loadu_ps(r + w), vg = _mm_loadu_ps(g + w), vb = _mm_loadu_ps(b + w);
    const __m128 rg_lo = _mm_unpacklo_ps(vr, vg), rg_hi = _mm_unpackhi_ps(vr, vg);  // r0 g0 r1 g1 | r2 g2 r3 g3
    const __m128 gb_lo = _mm_unpacklo_ps(vg, vb), gb_hi = _mm_unpackhi_ps(vg, vb);  // g0 b0 g1 b1 | g2 b2 g3 b3
    const __m128 br_lo = _mm_unpacklo_ps(vb, vr), br_hi = _mm_unpackhi_ps(vb, vr);  // b0 r0 b1 r1 | b2 r2 b3 r3
    _mm_storeu_ps(y, _mm_shuffle_ps(rg_lo, br_lo, _MM_SHUFFLE(3, 0, 1, 0)));      // r0 g0 b0 r1
    _mm_storeu_ps(y + 4, _mm_shuffle_ps(gb_lo, rg_hi, _MM_SHUFFLE(1, 0, 3, 2)));  // g1 b1 r2 g2
    _mm_storeu_ps(y + 8, _mm_shuffle_ps(br_hi, gb_hi, _MM_SHUFFLE(3, 2, 3, 0)));  // b2 r3 g3 b3
  }
  for (; w < width; ++w, y += 3) y[0] = r[w], y[1] = g[w], y[2] = b[w];
}

// NCHW -> NHWC: destination row (n, h) is [W, C]; NHWC -> NCHW: destination rows (n, c, h) are [W]. An FP32 image
// with three channels (an FP32 plan's input) interleaves its rows with InterleaveRgb.
template <typename Src, typename Dst>
void ConvertPlainLayout(const ConvertProblem& p, const Src& src, const typename Src::T* x, const Dst& dst,
                        typename Dst::T* y, ThreadPool& pool) {
  const int64_t C = p.c, H = p.h, W = p.w;
  if constexpr (std::is_same_v<Src, Fp32Storage> && std::is_same_v<Dst, Fp32Storage>) {
    if (p.dst_layout == Layout::kNHWC && C == 3) {
      pool.ParallelFor(p.n * H, [&](int64_t begin, int64_t end) {
        for (int64_t nh = begin; nh < end; ++nh) {
          const float* row = x + ((nh / H) * C * H + nh % H) * W;  // channel 0's; the others H * W apart
          InterleaveRgb(row, row + H * W, row + 2 * H * W, W, y + nh * W * C);
        }
      });
      return;
    }
  }
  if (p.dst_layout == Layout::kNHWC) {
    pool.ParallelFor(p.n * H, [&](int64_t begin, int64_t end) {
      for (int64_t nh = begin; nh < end; ++nh) {
        const int64_t n = nh / H, h = nh % H;
        for (int64_t w = 0; w < W; ++w)
          for (int64_t c = 0; c < C; ++c) dst.Store(y, (nh * W + w) * C + c, src.Load(x, ((n * C + c) * H + h) * W + w));
      }
    });
    return;
  }
  pool.ParallelFor(p.n * C * H, [&](int64_t begin, int64_t end) {
    for (int64_t nch = begin; nch < end; ++nch) {
      const int64_t n = nch / (C * H), c = nch / H % C, h = nch % H;
      for (int64_t w = 0; w < W; ++w) dst.Store(y, nch * W + w, src.Load(x, ((n * H + h) * W + w) * C + c));
    }
  });
}

// A reorder into or out of NCHW8c (FP16 at either end, which oneDNN's reorder does not take): each (n, h) row of
// every channel, both sides addressed through their descriptors' strides.
template <typename Src, typename Dst>
void ConvertBlockedLayout(const ConvertProblem& p, const Src& src_storage, const typename Src::T* x,
                          const Dst& dst_storage, typename Dst::T* y, ThreadPool& pool) {
  const TensorDesc src = TensorDesc::Image(p.src_dtype, p.n, p.c, p.h, p.w, p.src_layout);
  const TensorDesc dst = TensorDesc::Image(p.dst_dtype, p.n, p.c, p.h, p.w, p.dst_layout);
  pool.ParallelFor(int64_t{p.n} * p.h, [&](int64_t begin, int64_t end) {
    for (int64_t nh = begin; nh < end; ++nh) {
      const int64_t n = nh / p.h, h = nh % p.h;
      for (int64_t c = 0; c < p.c; ++c) {
        for (int64_t w = 0; w < p.w; ++w) {
          dst_storage.Store(y, dst.Offset4(n, c, h, w), src_storage.Load(x, src.Offset4(n, c, h, w)));
        }
      }
    }
  });
}

// One conversion between two storages in whichever loop the layouts call for.
template <typename Src, typename Dst>
void ConvertWith(const ConvertProblem& p, const Src& src, const void* x, const Dst& dst, void* y, ThreadPool& pool) {
  const auto* in = static_cast<const typename Src::T*>(x);
  auto* out = static_cast<typename Dst::T*>(y);
  if (p.src_layout == p.dst_layout || (p.h == 1 && p.w == 1) || p.c == 1) {
    ConvertFlat(int64_t{p.n} * p.c * p.h * p.w, src, in, dst, out, pool);  // the layouts coincide in memory
  } else if (p.src_layout == Layout::kNCHW8c || p.dst_layout == Layout::kNCHW8c) {
    ConvertBlockedLayout(p, src, in, dst, out, pool);
  } else {
    ConvertPlainLayout(p, src, in, dst, out, pool);
  }
}

// UINT8 / INT8 elements with one scale and zero point, loaded as ONNX DequantizeLinear and stored as QuantizeLinear
// (ConvertProblem): the quotient in FP32, rounded half to even by rintf in the default rounding mode, the zero point
// added, saturated with comparisons (NaN compares false and lands on qmin), as epilogue.h's QuantizeDequantize.
template <typename Q>
struct QuantizedStorage {
  using T = Q;
  float scale, zero_point, qmin, qmax;

  float Load(const T* p, int64_t i) const { return (static_cast<float>(p[i]) - zero_point) * scale; }
  void Store(T* p, int64_t i, float v) const {
    float q = rintf(v / scale) + zero_point;
    q = q > qmin ? q : qmin;
    q = q < qmax ? q : qmax;
    p[i] = static_cast<T>(q);
  }
};

template <typename Q>
QuantizedStorage<Q> MakeQuantizedStorage(const ConvertProblem& p) {
  return {p.scale, static_cast<float>(p.zero_point), static_cast<float>(std::numeric_limits<Q>::min()),
          static_cast<float>(std::numeric_limits<Q>::max())};
}

// ---- the quantize and dequantize steps through the vector loops (quantized_vector_loops.h) --------------------------

constexpr int64_t kRunBuffer = 512;  // 8-bit values per stack buffer of a strided NCHW <-> NHWC run

// Runs of one quantize (FP32 x -> 8-bit y) or dequantize (8-bit x -> FP32 y) step, offsets and strides in elements.
struct QuantizedRuns {
  bool quantize;
  ByteQuantization q;
  CpuIsa isa;
  const void* x;
  void* y;

  void Run(int64_t x_offset, int64_t x_stride, int64_t y_offset, int64_t y_stride, int64_t runs, int64_t width) const {
    if (quantize) {
      QuantizeRuns(isa, q, static_cast<const float*>(x) + x_offset, x_stride, static_cast<uint8_t*>(y) + y_offset,
                   y_stride, runs, width);
    } else {
      DequantizeRuns(isa, q, static_cast<const uint8_t*>(x) + x_offset, x_stride, static_cast<float*>(y) + y_offset,
                     y_stride, runs, width);
    }
  }
};

// Interleaves `channels` rows of `width` bytes (row c at planes + c * kRunBuffer) into `width` pixels at y
// (y[w * channels + c]). Three channels, an RGB image's, go 16 pixels at a time: each 16-byte piece of the 48 output
// bytes is three byte shuffles of the channels' 16 bytes, OR-ed (SSSE3, which the x86-64-v2 baseline has).
__attribute__((target("ssse3"))) void InterleaveChannels(const uint8_t* planes, int64_t channels, int64_t width,
                                                          uint8_t* y) {
  int64_t w = 0;
  if (channels == 3) {
    // masks[piece][c][t]: output byte j = 16 * piece + t is pixel j / 3's channel j % 3; -1 (high bit) leaves 0.
    static const auto masks = [] {
      std::array<std::array<std::array<int8_t, 16>, 3>, 3> m{};
      for (int piece = 0; piece < 3; ++piece) {
        for (int c = 0; c < 3; ++c) {
          for (int t = 0; t < 16; ++t) {
            const int j = 16 * piece + t;
            m[piece][c][t] = static_cast<int8_t>(j % 3 == c ? j / 3 : -1);
          }
        }
      }
      return m;
    }();
    // In registers for the whole row: the byte stores to y could alias the static table, so the compiler would
    // otherwise load the masks again for every 16 pixels.
    __m128i mask[3][3];
    for (int piece = 0; piece < 3; ++piece) {
      for (int c = 0; c < 3; ++c) {
        mask[piece][c] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(masks[piece][c].data()));
      }
    }
    for (; w + 16 <= width; w += 16) {
      const __m128i b[3] = {_mm_loadu_si128(reinterpret_cast<const __m128i*>(planes + w)),
                            _mm_loadu_si128(reinterpret_cast<const __m128i*>(planes + kRunBuffer + w)),
                            _mm_loadu_si128(reinterpret_cast<const __m128i*>(planes + 2 * kRunBuffer + w))};
      for (int piece = 0; piece < 3; ++piece) {
        __m128i out = _mm_setzero_si128();
        for (int c = 0; c < 3; ++c) out = _mm_or_si128(out, _mm_shuffle_epi8(b[c], mask[piece][c]));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(y + 3 * w + 16 * piece), out);
      }
    }
  }
  for (; w < width; ++w) {
    for (int64_t c = 0; c < channels; ++c) y[w * channels + c] = planes[c * kRunBuffer + w];
  }
}

constexpr int64_t kMaxPixelChannels = 4;  // channels per pixel that QuantizeImageRows stages on the stack

// NCHW -> NHWC quantize of an image with few channels (the plans' input quantize: C = 3): per (n, h) the C FP32 rows
// are quantized into a stack buffer, one row of bytes per channel, then interleaved into the row's pixels, so each
// thread writes whole NHWC rows.
void QuantizeImageRows(const ConvertProblem& p, const QuantizedRuns& r, ThreadPool& pool) {
  const int64_t C = p.c, H = p.h, W = p.w;
  pool.ParallelFor(int64_t{p.n} * H, [&](int64_t begin, int64_t end) {
    uint8_t buffer[kMaxPixelChannels * kRunBuffer];
    for (int64_t i = begin; i < end; ++i) {  // i = n * H + h: row i of the NHWC side
      const int64_t n = i / H, h = i % H;
      const float* x = static_cast<const float*>(r.x) + (n * C * H + h) * W;  // channel 0's row; then H * W apart
      uint8_t* y = static_cast<uint8_t*>(r.y) + i * W * C;
      for (int64_t w0 = 0; w0 < W; w0 += kRunBuffer) {
        const int64_t width = std::min(kRunBuffer, W - w0);
        QuantizeRuns(r.isa, r.q, x + w0, H * W, buffer, kRunBuffer, C, width);
        InterleaveChannels(buffer, C, width, y + w0 * C);
      }
    }
  });
}

// NCHW <-> NHWC with the FP32 side NCHW (the plans' input quantize and output dequantize): per (n, c, h) the FP32 row
// of W values is contiguous and the 8-bit values lie C apart; they pass through a buffer on the stack.
void RunPlainLayout(const ConvertProblem& p, const QuantizedRuns& r, ThreadPool& pool) {
  if (r.quantize && p.c <= kMaxPixelChannels) return QuantizeImageRows(p, r, pool);
  const int64_t C = p.c, H = p.h, W = p.w;
  pool.ParallelFor(int64_t{p.n} * C * H, [&](int64_t begin, int64_t end) {
    uint8_t buffer[kRunBuffer];
    for (int64_t i = begin; i < end; ++i) {  // i = (n * C + c) * H + h: row i of the NCHW side
      const int64_t n = i / (C * H), c = i / H % C, h = i % H;
      const int64_t first_byte = (n * H + h) * W * C + c;  // then every C-th
      for (int64_t w0 = 0; w0 < W; w0 += kRunBuffer) {
        const int64_t width = std::min(kRunBuffer, W - w0);
        if (r.quantize) {
          QuantizeRuns(r.isa, r.q, static_cast<const float*>(r.x) + i * W + w0, 0, buffer, 0, 1, width);
          uint8_t* y = static_cast<uint8_t*>(r.y) + first_byte + w0 * C;
          for (int64_t w = 0; w < width; ++w) y[w * C] = buffer[w];
        } else {
          const uint8_t* x = static_cast<const uint8_t*>(r.x) + first_byte + w0 * C;
          for (int64_t w = 0; w < width; ++w) buffer[w] = x[w * C];
          DequantizeRuns(r.isa, r.q, buffer, 0, static_cast<float*>(r.y) + i * W + w0, 0, 1, width);
        }
      }
    }
  });
}

// The quantize and dequantize steps where the layouts give whole runs: one layout on both sides (flat chunks),
// NHWC <-> NCHW8c (runs of 8 channels: contiguous in the blocked tensor, C apart in NHWC), NCHW <-> NHWC with the
// FP32 side NCHW. Returns false for the pairs left to the generic loops.
bool RunQuantizedRuns(const ConvertProblem& p, const ConvertArgs& args, ThreadPool& pool) {
  const bool quantize = ConvertProblem::IsQuantizedType(p.dst_dtype);
  const DataType bytes = quantize ? p.dst_dtype : p.src_dtype;
  const QuantizedRuns r{quantize, {p.scale, p.zero_point, bytes == DataType::kUInt8}, BestCpuIsa(), args.x, args.y};
  const Layout src = StoredLayout(p.src_layout, p.c), dst = StoredLayout(p.dst_layout, p.c);
  const int64_t N = p.n, C = p.c, H = p.h, W = p.w;
  if (src == dst || H * W == 1 || C == 1) {
    const int64_t count = N * C * H * W;
    pool.ParallelFor((count + kChunk - 1) / kChunk, [&](int64_t begin, int64_t end) {
      const int64_t first = begin * kChunk, last = std::min(count, end * kChunk);
      r.Run(first, 0, first, 0, 1, last - first);
    });
    return true;
  }
  if ((src == Layout::kNHWC && dst == Layout::kNCHW8c) || (src == Layout::kNCHW8c && dst == Layout::kNHWC)) {
    const int64_t blocks = C / kLayoutChannelBlock;
    pool.ParallelFor(N * blocks * H, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {  // i = (n * blocks + block) * H + h
        const int64_t n = i / (blocks * H), block = i / H % blocks, h = i % H;
        const int64_t blocked = i * W * kLayoutChannelBlock, nhwc = (n * H + h) * W * C + block * kLayoutChannelBlock;
        if (src == Layout::kNCHW8c) {
          r.Run(blocked, kLayoutChannelBlock, nhwc, C, W, kLayoutChannelBlock);
        } else {
          r.Run(nhwc, C, blocked, kLayoutChannelBlock, W, kLayoutChannelBlock);
        }
      }
    });
    return true;
  }
  const Layout fp32_side = quantize ? src : dst, byte_side = quantize ? dst : src;
  if (fp32_side == Layout::kNCHW && byte_side == Layout::kNHWC) {
    RunPlainLayout(p, r, pool);
    return true;
  }
  return false;
}

void RunQuantized(const ConvertProblem& p, const ConvertArgs& args, ThreadPool& pool) {
  if (RunQuantizedRuns(p, args, pool)) return;
  const Fp32Storage fp32;
  if (p.dst_dtype == DataType::kUInt8) {
    ConvertWith(p, fp32, args.x, MakeQuantizedStorage<uint8_t>(p), args.y, pool);
  } else if (p.dst_dtype == DataType::kInt8) {
    ConvertWith(p, fp32, args.x, MakeQuantizedStorage<int8_t>(p), args.y, pool);
  } else if (p.src_dtype == DataType::kUInt8) {
    ConvertWith(p, MakeQuantizedStorage<uint8_t>(p), args.x, fp32, args.y, pool);
  } else {
    ConvertWith(p, MakeQuantizedStorage<int8_t>(p), args.x, fp32, args.y, pool);
  }
}

}  // namespace

absl::Status CpuConvertAlgorithm::CanImplement(const ConvertProblem& problem) const {
  if (absl::Status valid = problem.Validate(); !valid.ok()) return valid;
  if (problem.output_c() != problem.c) {
    return absl::UnimplementedError("channel padding (dst_c) is done by the CUDA kernels only");
  }
  return absl::OkStatus();
}

int CpuConvertAlgorithm::HeuristicScore(const ConvertProblem& p) const {
  const bool fp32_image_to_nhwc = p.src_dtype == DataType::kFloat32 && p.dst_dtype == DataType::kFloat32 &&
                                  p.src_layout == Layout::kNCHW && p.dst_layout == Layout::kNHWC && p.c == 3 &&
                                  p.h * p.w > 1;
  return fp32_image_to_nhwc ? 30 : 0;
}

absl::Status CpuConvertAlgorithm::Run(const ConvertProblem& p, const ConvertArgs& args, Workspace,
                                      const ExecutionContext& context) const {
  ThreadPool& pool = *context.thread_pool;
  if (p.quantized()) {
    RunQuantized(p, args, pool);
    return absl::OkStatus();
  }
  return DispatchFloatStorage(p.src_dtype, [&](auto src_storage) {
    return DispatchFloatStorage(p.dst_dtype, [&](auto dst_storage) {
      ConvertWith(p, src_storage, args.x, dst_storage, args.y, pool);
      return absl::OkStatus();
    });
  });
}

CONVOY_REGISTER_ALGORITHM(ConvertOp, CpuConvertAlgorithm);

}  // namespace convoy::cpu
