// CUDA layout and dtype conversion of a 4-D tensor (FP32/FP16/BF16 in any pair, NCHW/NHWC in any pair). Two
// algorithms:
//
//   cuda.convert.elementwise       same layout: a flat conversion, four elements per vector access when both
//                                  pointers allow it (checked per Run), the remainder one by one.
//   cuda.convert.transpose_tiles   layout change: per image a [rows, cols] -> [cols, rows] transposition (NCHW->NHWC:
//                                  [C, H*W] -> [H*W, C]; NHWC->NCHW the reverse) through 32x33 shared-memory tiles,
//                                  so both the reads and the writes are coalesced; the dtype converts on the way.
//                                  Into NHWC it can pad the channels with zeros (dst_c: RGB -> 8 for the stem).
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

// ---- kernels ----
// x: [count] of S; y: [count] of D.
template <typename S, typename D, bool kPacked>
__global__ void __launch_bounds__(kElementwiseThreads)
    ConvertFlatKernel(const S* __restrict__ x, D* __restrict__ y, int64_t count) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  const int64_t first = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const int64_t packs = kPacked ? count / 4 : 0;
  for (int64_t p = first; p < packs; p += stride) {  // p: pack index, elements [4p, 4p + 4)
    const Pack4<S> in = reinterpret_cast<const Pack4<S>*>(x)[p];
    Pack4<D> out;
#pragma unroll
    for (int j = 0; j < 4; ++j) out.v[j] = FloatToElement<D>(ElementToFloat(in.v[j]));
    reinterpret_cast<Pack4<D>*>(y)[p] = out;
  }
  for (int64_t i = packs * 4 + first; i < count; i += stride) y[i] = FloatToElement<D>(ElementToFloat(x[i]));
}

// x: [images, rows, cols] of S; y: [images, cols, out_rows] of D (zeros past `rows`). Block (kTile, kTileRows) moves
// one kTile x kTile tile.
template <typename S, typename D>
__global__ void __launch_bounds__(kTile * kTileRows)
    ConvertTransposeKernel(const S* __restrict__ x, D* __restrict__ y, TransposeParams p) {
  CONVOY_SHARED_ARRAY(float, tile, [kTile][kTile + 1]);  // [source row in tile][source col in tile], +1: no conflicts
  const int64_t row0 = int64_t{blockIdx.y} * kTile, col0 = int64_t{blockIdx.x} * kTile;
  for (int64_t image = blockIdx.z; image < p.images; image += gridDim.z) {
    const S* source = x + image * p.rows * p.cols;          // [rows, cols]
    D* destination = y + image * p.cols * p.out_rows;       // [cols, out_rows]
    for (int k = threadIdx.y; k < kTile; k += kTileRows) {
      const int64_t row = row0 + k, col = col0 + threadIdx.x;
      if (row < p.rows && col < p.cols) tile[k][threadIdx.x] = ElementToFloat(source[row * p.cols + col]);
    }
    __syncthreads();
    for (int k = threadIdx.y; k < kTile; k += kTileRows) {
      const int64_t out_row = col0 + k, out_col = row0 + threadIdx.x;  // y[out_row = source col][out_col = row]
      if (out_row < p.cols && out_col < p.out_rows) {
        const float value = out_col < p.rows ? tile[threadIdx.x][k] : 0.0f;  // padded channels are zeros
        destination[out_row * p.out_rows + out_col] = FloatToElement<D>(value);
      }
    }
    __syncthreads();  // the next image overwrites the tile
  }
}

// ---- launchers ----
template <typename S, typename D>
cudaError_t LaunchConvertFlat(const S* x, D* y, int64_t count, cudaStream_t stream) {
  return LaunchPackedOrScalar(IsPack4Aligned<S>({x}) && IsPack4Aligned<D>({y}), count, ConvertFlatKernel<S, D, true>,
                              ConvertFlatKernel<S, D, false>, stream, x, y, count);
}

template <typename S, typename D>
cudaError_t LaunchConvertTranspose(const S* x, D* y, const TransposeParams& params, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((params.cols + kTile - 1) / kTile),
                  static_cast<unsigned>((params.out_rows + kTile - 1) / kTile),
                  static_cast<unsigned>(std::min<int64_t>(params.images, kMaxGridY)));
  return CONVOY_LAUNCH_KERNEL((ConvertTransposeKernel<S, D>), grid, dim3(kTile, kTileRows), 0, stream, x, y, params);
}

// fn(S{}, D{}) for the problem's source and destination element types.
template <typename Fn>
absl::Status DispatchConvertTypes(const ConvertProblem& problem, Fn&& fn) {
  return DispatchFloatType(problem.src_dtype, [&](auto source_tag) {
    return DispatchFloatType(problem.dst_dtype, [&](auto destination_tag) { return fn(source_tag, destination_tag); });
  });
}

absl::Status CheckConvertProblem(const ConvertProblem& problem) {
  if (absl::Status valid = problem.Validate(); !valid.ok()) return valid;
  if (!IsFloatingPoint(problem.src_dtype) || !IsFloatingPoint(problem.dst_dtype)) {
    return absl::UnimplementedError("convert: FP32, FP16 or BF16 only");
  }
  return absl::OkStatus();
}

// ---- entries ----
class CudaConvertElementwise final : public ConvertAlgorithm {
 public:
  absl::string_view name() const override { return "cuda.convert.elementwise"; }
  Backend backend() const override { return Backend::kCuda; }
  absl::Status CanImplement(const ConvertProblem& problem) const override {
    if (absl::Status s = CheckConvertProblem(problem); !s.ok()) return s;
    if (problem.src_layout != problem.dst_layout) return absl::UnimplementedError("elementwise: same layout only");
    if (problem.output_c() != problem.c) return absl::UnimplementedError("elementwise: no channel padding");
    return absl::OkStatus();
  }
  absl::Status Run(const ConvertProblem& problem, const ConvertArgs& args, Workspace,
                   const ExecutionContext& context) const override {
    if (absl::Status s = CanImplement(problem); !s.ok()) return s;
    if (absl::Status s = CheckArgs(problem, {{"x", args.x}, {"y", args.y}}); !s.ok()) return s;
    const int64_t count = int64_t{problem.n} * problem.c * problem.h * problem.w;
    return DispatchConvertTypes(problem, [&](auto source_tag, auto destination_tag) {
      using S = decltype(source_tag);
      using D = decltype(destination_tag);
      return LaunchStatus(
          LaunchConvertFlat(static_cast<const S*>(args.x), static_cast<D*>(args.y), count, StreamOf(context)),
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
    if (absl::Status s = CheckConvertProblem(problem); !s.ok()) return s;
    if (problem.src_layout == problem.dst_layout) return absl::UnimplementedError("transpose_tiles: layout change only");
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
    return DispatchConvertTypes(problem, [&](auto source_tag, auto destination_tag) {
      using S = decltype(source_tag);
      using D = decltype(destination_tag);
      return LaunchStatus(
          LaunchConvertTranspose(static_cast<const S*>(args.x), static_cast<D*>(args.y), params, StreamOf(context)),
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
