// CUDA transpose of a dense tensor of rank 1..6 (TransposeProblem), any dtype (moved as raw bits). Both algorithms
// run the problem's Coalesced() form, where NCHW <-> NHWC and the H <-> W swap are batched matrix transposes:
//
//   cuda.transpose.tiles     coalesced [rows, cols] -> [cols, rows], optionally batched: 32x33 shared-memory tiles,
//                            so both the reads and the writes are coalesced (the bank-conflict-free +1 column).
//   cuda.transpose.strided   any permutation: one thread per output element in a grid-stride loop (writes
//                            coalesced), the input offset rebuilt from the output coordinate.
//
// Both launch on the context's stream, allocate nothing and need no workspace.
#include "kernels/cuda/elementwise.cuh"
#include "kernels/registry/registry.h"

namespace convoy::cuda {
namespace {

inline constexpr int kTile = 32;
inline constexpr int kTileRows = 8;  // threadIdx.y extent: each thread moves kTile / kTileRows elements per tile
inline constexpr int64_t kMaxGridYZ = 65535;
inline constexpr int kMaxRank = TransposeProblem::kMaxRank;

struct TileParams {
  int64_t batch;  // matrices
  int64_t rows;   // source rows per matrix
  int64_t cols;   // source columns per matrix
};

struct StridedParams {
  int64_t count;                     // elements
  int rank;                          // of the coalesced problem
  int64_t out_dims[kMaxRank];        // output dims, row-major
  int64_t input_strides[kMaxRank];   // input element stride along output dim k
};

// ---- kernels ----
// x: [batch, rows, cols]; y: [batch, cols, rows]. Block (kTile, kTileRows) moves kTile x kTile tiles; the row-tile
// and batch loops depend only on block indices, so every thread reaches each __syncthreads.
template <typename U>
__global__ void __launch_bounds__(kTile * kTileRows)
    TransposeTilesKernel(const U* __restrict__ x, U* __restrict__ y, TileParams p) {
  CONVOY_SHARED_ARRAY(U, tile, [kTile][kTile + 1]);  // [source row in tile][source col in tile]
  const int64_t matrix_size = p.rows * p.cols;
  const int64_t col0 = int64_t{blockIdx.x} * kTile;
  for (int64_t row0 = int64_t{blockIdx.y} * kTile; row0 < p.rows; row0 += int64_t{gridDim.y} * kTile) {
    for (int64_t b = blockIdx.z; b < p.batch; b += gridDim.z) {
      const U* source = x + b * matrix_size;  // [rows, cols]
      U* destination = y + b * matrix_size;   // [cols, rows]
      for (int k = threadIdx.y; k < kTile; k += kTileRows) {
        const int64_t row = row0 + k, col = col0 + threadIdx.x;
        if (row < p.rows && col < p.cols) tile[k][threadIdx.x] = source[row * p.cols + col];
      }
      __syncthreads();
      for (int k = threadIdx.y; k < kTile; k += kTileRows) {
        const int64_t out_row = col0 + k, out_col = row0 + threadIdx.x;  // y[out_row = source col][out_col = row]
        if (out_row < p.cols && out_col < p.rows) destination[out_row * p.rows + out_col] = tile[threadIdx.x][k];
      }
      __syncthreads();  // the next tile overwrites this one
    }
  }
}

// x: coalesced input dims; y: [out_dims[0], ..., out_dims[rank - 1]].
template <typename U>
__global__ void __launch_bounds__(kElementwiseThreads)
    TransposeStridedKernel(const U* __restrict__ x, U* __restrict__ y, StridedParams p) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < p.count; i += stride) {  // y element
    int64_t rest = i, source = 0;
    for (int k = p.rank - 1; k >= 0; --k) {  // output coordinate k = rest % out_dims[k]
      source += (rest % p.out_dims[k]) * p.input_strides[k];
      rest /= p.out_dims[k];
    }
    y[i] = x[source];
  }
}

// ---- launchers ----
template <typename U>
cudaError_t LaunchTransposeTiles(const U* x, U* y, const TileParams& params, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((params.cols + kTile - 1) / kTile),
                  static_cast<unsigned>(std::min<int64_t>((params.rows + kTile - 1) / kTile, kMaxGridYZ)),
                  static_cast<unsigned>(std::min<int64_t>(params.batch, kMaxGridYZ)));
  return CONVOY_LAUNCH_KERNEL((TransposeTilesKernel<U>), grid, dim3(kTile, kTileRows), 0, stream, x, y, params);
}

template <typename U>
cudaError_t LaunchTransposeStrided(const U* x, U* y, const StridedParams& params, cudaStream_t stream) {
  return CONVOY_LAUNCH_KERNEL((TransposeStridedKernel<U>), dim3(GridStrideBlocks(params.count)),
                              dim3(kElementwiseThreads), 0, stream, x, y, params);
}

// ---- entries ----
absl::Status CheckTransposeArgs(const TransposeProblem& problem, const TransposeArgs& args) {
  if (absl::Status s = CheckArgs(problem, {{"x", args.x}, {"y", args.y}}); !s.ok()) return s;
  if (args.x == args.y) return absl::InvalidArgumentError(problem.ToString() + ": cannot transpose in place");
  return absl::OkStatus();
}

// The coalesced problem as a batched [rows, cols] -> [cols, rows] swap, when it is one.
bool AsTiles(const TransposeProblem& coalesced, TileParams& params) {
  const std::vector<int64_t>& d = coalesced.dims;
  if (coalesced.perm == std::vector<int>{1, 0}) {
    params = TileParams{1, d[0], d[1]};
    return true;
  }
  if (coalesced.perm == std::vector<int>{0, 2, 1}) {
    params = TileParams{d[0], d[1], d[2]};
    return true;
  }
  return false;
}

class CudaTransposeTiles final : public TransposeAlgorithm {
 public:
  absl::string_view name() const override { return "cuda.transpose.tiles"; }
  Backend backend() const override { return Backend::kCuda; }
  absl::Status CanImplement(const TransposeProblem& problem) const override {
    if (absl::Status s = problem.Validate(); !s.ok()) return s;
    TileParams params;
    if (!AsTiles(problem.Coalesced(), params)) {
      return absl::UnimplementedError("transpose.tiles: only a (batched) swap of the two innermost dim groups");
    }
    if ((params.cols + kTile - 1) / kTile > int64_t{0x7fffffff}) {
      return absl::UnimplementedError(absl::StrCat("transpose.tiles: ", params.cols, " columns exceed the grid"));
    }
    return absl::OkStatus();
  }
  absl::Status Run(const TransposeProblem& problem, const TransposeArgs& args, Workspace,
                   const ExecutionContext& context) const override {
    if (absl::Status s = CanImplement(problem); !s.ok()) return s;
    if (absl::Status s = CheckTransposeArgs(problem, args); !s.ok()) return s;
    TileParams params;
    AsTiles(problem.Coalesced(), params);
    return DispatchElementSize(problem.dtype, [&](auto tag) {
      using U = decltype(tag);
      return LaunchStatus(
          LaunchTransposeTiles(static_cast<const U*>(args.x), static_cast<U*>(args.y), params, StreamOf(context)),
          "TransposeTilesKernel");
    });
  }
  int HeuristicScore(const TransposeProblem&) const override { return 10; }
};

class CudaTransposeStrided final : public TransposeAlgorithm {
 public:
  absl::string_view name() const override { return "cuda.transpose.strided"; }
  Backend backend() const override { return Backend::kCuda; }
  absl::Status CanImplement(const TransposeProblem& problem) const override { return problem.Validate(); }
  absl::Status Run(const TransposeProblem& problem, const TransposeArgs& args, Workspace,
                   const ExecutionContext& context) const override {
    if (absl::Status s = CheckTransposeArgs(problem, args); !s.ok()) return s;
    const TransposeProblem coalesced = problem.Coalesced();
    StridedParams params{};
    params.count = coalesced.num_elements();
    params.rank = coalesced.rank();
    int64_t strides[kMaxRank];  // row-major strides of the coalesced input
    strides[params.rank - 1] = 1;
    for (int d = params.rank - 2; d >= 0; --d) strides[d] = strides[d + 1] * coalesced.dims[d + 1];
    for (int k = 0; k < params.rank; ++k) {
      params.out_dims[k] = coalesced.dims[coalesced.perm[k]];
      params.input_strides[k] = strides[coalesced.perm[k]];
    }
    return DispatchElementSize(problem.dtype, [&](auto tag) {
      using U = decltype(tag);
      return LaunchStatus(
          LaunchTransposeStrided(static_cast<const U*>(args.x), static_cast<U*>(args.y), params, StreamOf(context)),
          "TransposeStridedKernel");
    });
  }
  int HeuristicScore(const TransposeProblem&) const override { return 0; }
};

CONVOY_REGISTER_ALGORITHM(TransposeOp, CudaTransposeTiles);
CONVOY_REGISTER_ALGORITHM(TransposeOp, CudaTransposeStrided);

}  // namespace
}  // namespace convoy::cuda
