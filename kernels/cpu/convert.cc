#include "kernels/cpu/convert.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/common/tensor.h"
#include "kernels/cpu/convert_element.h"
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

// NCHW -> NHWC: destination row (n, h) is [W, C]; NHWC -> NCHW: destination rows (n, c, h) are [W].
template <typename Src, typename Dst>
void ConvertPlainLayout(const ConvertProblem& p, const Src& src, const typename Src::T* x, const Dst& dst,
                        typename Dst::T* y, ThreadPool& pool) {
  const int64_t C = p.c, H = p.h, W = p.w;
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

void RunQuantized(const ConvertProblem& p, const ConvertArgs& args, ThreadPool& pool) {
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
