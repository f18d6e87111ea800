// CUDA layout and dtype conversion of a 4-D tensor (FP32/FP16/BF16 in any pair, NCHW/NHWC in any pair), and the
// quantize and dequantize steps of INT8 plans (ConvertProblem::quantized(): FP32 <-> UINT8/INT8 with one scale and
// zero point, ONNX's QuantizeLinear / DequantizeLinear as cpu.convert.elementwise computes them). Two algorithms:
//
//   cuda.convert.elementwise       same layout: a flat conversion, four elements per vector access when both
//                                  pointers allow it (checked per Run), the remainder one by one.
//   cuda.convert.transpose_tiles   layout change: per image a [rows, cols] -> [cols, rows] transposition (NCHW->NHWC:
//                                  [C, H*W] -> [H*W, C]; NHWC->NCHW the reverse) through 32x33 shared-memory tiles,
//                                  so both the reads and the writes are coalesced; the dtype converts on the way.
//                                  Into NHWC it can pad the channels with zeros (dst_c: RGB -> 8 for the stem).
//
// Both kernels read and write elements through a codec (FloatCodec, QuantizedCodec): the value in between is FP32.
// A quantize is saturate(rint(x / scale) + zero_point), NaN -> the type's minimum; a dequantize (x - zero_point) *
// scale; each FP32 operation explicitly rounded (__fdiv_rn, __fadd_rn, __fsub_rn, __fmul_rn), so the GPU and the
// emulation compute the CPU's values bit for bit.
#include <cstdint>
#include <limits>

#include "kernels/cuda/elementwise.cuh"
#include "kernels/registry/registry.h"

namespace convoy::cuda {
namespace {

inline constexpr int kTile = 32;
inline constexpr int kTileRows = 8;  // threadIdx.y extent: each thread moves kTile / kTileRows elements per tile
inline constexpr int64_t kMaxGridY = 65535;

struct TransposeParams {
  int64_t images;    // n
  int64_t rows;      // source rows per image
  int64_t cols;      // source columns per image
  int64_t out_rows;  // destination row length (>= rows): rows [rows, out_rows) of each destination row are zeros
};

// ---- element codecs ----
// FP32 / FP16 / BF16 elements, loaded into and stored from float (round to nearest even).
template <typename T>
struct FloatCodec {
  using Element = T;
  __device__ __forceinline__ float Load(T value) const { return ElementToFloat(value); }
  __device__ __forceinline__ T Store(float value) const { return FloatToElement<T>(value); }
};

// UINT8 / INT8 elements with one scale and zero point: DequantizeLinear on load, QuantizeLinear on store. The clamp
// compares (q > qmin ? q : qmin), so a NaN quotient lands on qmin as on the CPU.
template <typename Q>
struct QuantizedCodec {
  using Element = Q;
  float scale, zero_point, qmin, qmax;

  __device__ __forceinline__ float Load(Q value) const {
    return __fmul_rn(__fsub_rn(static_cast<float>(value), zero_point), scale);
  }
  __device__ __forceinline__ Q Store(float value) const {
    float q = __fadd_rn(rintf(__fdiv_rn(value, scale)), zero_point);
    q = q > qmin ? q : qmin;
    q = q < qmax ? q : qmax;
    return static_cast<Q>(q);
  }
};

// ---- kernels ----
// x: [count] of In::Element; y: [count] of Out::Element.
template <typename In, typename Out, bool kPacked>
__global__ void __launch_bounds__(kElementwiseThreads)
    ConvertFlatKernel(const typename In::Element* __restrict__ x, typename Out::Element* __restrict__ y,
                      int64_t count, In in, Out out) {
  using S = typename In::Element;
  using D = typename Out::Element;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  const int64_t first = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const int64_t packs = kPacked ? count / 4 : 0;
  for (int64_t p = first; p < packs; p += stride) {  // p: pack index, elements [4p, 4p + 4)
    const Pack4<S> loaded = reinterpret_cast<const Pack4<S>*>(x)[p];
    Pack4<D> stored;
#pragma unroll
    for (int j = 0; j < 4; ++j) stored.v[j] = out.Store(in.Load(loaded.v[j]));
    reinterpret_cast<Pack4<D>*>(y)[p] = stored;
  }
  for (int64_t i = packs * 4 + first; i < count; i += stride) y[i] = out.Store(in.Load(x[i]));
}

// x: [images, rows, cols] of In::Element; y: [images, cols, out_rows] of Out::Element (zeros past `rows`). Block
// (kTile, kTileRows) moves one kTile x kTile tile.
template <typename In, typename Out>
__global__ void __launch_bounds__(kTile * kTileRows)
    ConvertTransposeKernel(const typename In::Element* __restrict__ x, typename Out::Element* __restrict__ y,
                           TransposeParams p, In in, Out out) {
  using S = typename In::Element;
  using D = typename Out::Element;
  CONVOY_SHARED_ARRAY(float, tile, [kTile][kTile + 1]);  // [source row in tile][source col in tile], +1: no conflicts
  const int64_t row0 = int64_t{blockIdx.y} * kTile, col0 = int64_t{blockIdx.x} * kTile;
  for (int64_t image = blockIdx.z; image < p.images; image += gridDim.z) {
    const S* source = x + image * p.rows * p.cols;          // [rows, cols]
    D* destination = y + image * p.cols * p.out_rows;       // [cols, out_rows]
    for (int k = threadIdx.y; k < kTile; k += kTileRows) {
      const int64_t row = row0 + k, col = col0 + threadIdx.x;
      if (row < p.rows && col < p.cols) tile[k][threadIdx.x] = in.Load(source[row * p.cols + col]);
    }
    __syncthreads();
    for (int k = threadIdx.y; k < kTile; k += kTileRows) {
      const int64_t out_row = col0 + k, out_col = row0 + threadIdx.x;  // y[out_row = source col][out_col = row]
      if (out_row < p.cols && out_col < p.out_rows) {
        const float value = out_col < p.rows ? tile[threadIdx.x][k] : 0.0f;  // padded channels are zeros
        destination[out_row * p.out_rows + out_col] = out.Store(value);
      }
    }
    __syncthreads();  // the next image overwrites the tile
  }
}

// ---- launchers ----
template <typename In, typename Out>
cudaError_t LaunchConvertFlat(const typename In::Element* x, typename Out::Element* y, int64_t count, In in, Out out,
                              cudaStream_t stream) {
  const bool packed = IsPack4Aligned<typename In::Element>({x}) && IsPack4Aligned<typename Out::Element>({y});
  return LaunchPackedOrScalar(packed, count, ConvertFlatKernel<In, Out, true>, ConvertFlatKernel<In, Out, false>,
                              stream, x, y, count, in, out);
}

template <typename In, typename Out>
cudaError_t LaunchConvertTranspose(const typename In::Element* x, typename Out::Element* y,
                                   const TransposeParams& params, In in, Out out, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((params.cols + kTile - 1) / kTile),
                  static_cast<unsigned>((params.out_rows + kTile - 1) / kTile),
                  static_cast<unsigned>(std::min<int64_t>(params.images, kMaxGridY)));
  return CONVOY_LAUNCH_KERNEL((ConvertTransposeKernel<In, Out>), grid, dim3(kTile, kTileRows), 0, stream, x, y, params,
                              in, out);
}

template <typename Q>
QuantizedCodec<Q> MakeQuantizedCodec(const ConvertProblem& problem) {
  return {problem.scale, static_cast<float>(problem.zero_point), static_cast<float>(std::numeric_limits<Q>::min()),
          static_cast<float>(std::numeric_limits<Q>::max())};
}

// fn(in_codec, out_codec) for the problem's source and destination: two float types, or FP32 and a quantized type
// (Validate admits no other quantized pair).
template <typename Fn>
absl::Status DispatchConvertCodecs(const ConvertProblem& problem, Fn&& fn) {
  switch (problem.dst_dtype) {
    case DataType::kUInt8:
      return fn(FloatCodec<float>{}, MakeQuantizedCodec<uint8_t>(problem));
    case DataType::kInt8:
      return fn(FloatCodec<float>{}, MakeQuantizedCodec<int8_t>(problem));
    default:
      break;
  }
  switch (problem.src_dtype) {
    case DataType::kUInt8:
      return fn(MakeQuantizedCodec<uint8_t>(problem), FloatCodec<float>{});
    case DataType::kInt8:
      return fn(MakeQuantizedCodec<int8_t>(problem), FloatCodec<float>{});
    default:
      break;
  }
  return DispatchFloatType(problem.src_dtype, [&](auto source_tag) {
    return DispatchFloatType(problem.dst_dtype, [&](auto destination_tag) {
      return fn(FloatCodec<decltype(source_tag)>{}, FloatCodec<decltype(destination_tag)>{});
    });
  });
}

bool IsPlainLayout(Layout layout) { return layout == Layout::kNCHW || layout == Layout::kNHWC; }

// ---- entries ----
class CudaConvertElementwise final : public ConvertAlgorithm {
 public:
  absl::string_view name() const override { return "cuda.convert.elementwise"; }
  Backend backend() const override { return Backend::kCuda; }
  absl::Status CanImplement(const ConvertProblem& problem) const override {
    if (absl::Status s = problem.Validate(); !s.ok()) return s;
    if (problem.src_layout != problem.dst_layout) return absl::UnimplementedError("elementwise: same layout only");
    if (problem.output_c() != problem.c) return absl::UnimplementedError("elementwise: no channel padding");
    return absl::OkStatus();
  }
  absl::Status Run(const ConvertProblem& problem, const ConvertArgs& args, Workspace,
                   const ExecutionContext& context) const override {
    if (absl::Status s = CanImplement(problem); !s.ok()) return s;
    if (absl::Status s = CheckArgs(problem, {{"x", args.x}, {"y", args.y}}); !s.ok()) return s;
    const int64_t count = int64_t{problem.n} * problem.c * problem.h * problem.w;
    return DispatchConvertCodecs(problem, [&](auto in, auto out) {
      using S = typename decltype(in)::Element;
      using D = typename decltype(out)::Element;
      return LaunchStatus(LaunchConvertFlat(static_cast<const S*>(args.x), static_cast<D*>(args.y), count, in, out,
                                            StreamOf(context)),
                          "ConvertFlatKernel");
    });
  }
  int HeuristicScore(const ConvertProblem&) const override { return 10; }
};

class CudaConvertTransposeTiles final : public ConvertAlgorithm {
 public:
  absl::string_view name() const override { return "cuda.convert.transpose_tiles"; }
  Backend backend() const override { return Backend::kCuda; }
  absl::Status CanImplement(const ConvertProblem& problem) const override {
    if (absl::Status s = problem.Validate(); !s.ok()) return s;
    if (problem.src_layout == problem.dst_layout) return absl::UnimplementedError("transpose_tiles: layout change only");
    if (!IsPlainLayout(problem.src_layout) || !IsPlainLayout(problem.dst_layout)) {
      return absl::UnimplementedError(absl::StrCat("transpose_tiles: NCHW <-> NHWC only, got ",
                                                   LayoutName(problem.src_layout), " -> ",
                                                   LayoutName(problem.dst_layout)));
    }
    if (problem.output_c() != problem.c && problem.dst_layout != Layout::kNHWC) {
      return absl::UnimplementedError("transpose_tiles: channel padding only into NHWC");
    }
    const TransposeParams params = Params(problem);
    if ((params.out_rows + kTile - 1) / kTile > kMaxGridY) {
      return absl::UnimplementedError(absl::StrCat("transpose_tiles: ", params.out_rows, " rows exceed the grid"));
    }
    return absl::OkStatus();
  }
  absl::Status Run(const ConvertProblem& problem, const ConvertArgs& args, Workspace,
                   const ExecutionContext& context) const override {
    if (absl::Status s = CanImplement(problem); !s.ok()) return s;
    if (absl::Status s = CheckArgs(problem, {{"x", args.x}, {"y", args.y}}); !s.ok()) return s;
    const TransposeParams params = Params(problem);
    return DispatchConvertCodecs(problem, [&](auto in, auto out) {
      using S = typename decltype(in)::Element;
      using D = typename decltype(out)::Element;
      return LaunchStatus(LaunchConvertTranspose(static_cast<const S*>(args.x), static_cast<D*>(args.y), params, in,
                                                 out, StreamOf(context)),
                          "ConvertTransposeKernel");
    });
  }
  int HeuristicScore(const ConvertProblem&) const override { return 10; }

 private:
  static TransposeParams Params(const ConvertProblem& problem) {
    const int64_t plane = int64_t{problem.h} * problem.w;
    const bool to_channels_last = problem.dst_layout == Layout::kNHWC;
    const int64_t rows = to_channels_last ? problem.c : plane;
    return TransposeParams{problem.n, rows, to_channels_last ? plane : problem.c,
                           to_channels_last ? problem.output_c() : rows};
  }
};

CONVOY_REGISTER_ALGORITHM(ConvertOp, CudaConvertElementwise);
CONVOY_REGISTER_ALGORITHM(ConvertOp, CudaConvertTransposeTiles);

}  // namespace
}  // namespace convoy::cuda
