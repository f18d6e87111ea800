#include "kernels/cpu/transpose.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "kernels/registry/registry.h"

namespace convoy::cpu {
namespace {

constexpr int64_t kTile = 32;

// The coalesced problem as a batched matrix swap [batch, rows, cols] -> [batch, cols, rows], when it is one.
struct MatrixSwap {
  int64_t batch = 1, rows = 1, cols = 1;
};

bool AsMatrixSwap(const TransposeProblem& coalesced, MatrixSwap& swap) {
  const std::vector<int>& perm = coalesced.perm;
  const std::vector<int64_t>& dims = coalesced.dims;
  if (perm == std::vector<int>{1, 0}) {
    swap = {1, dims[0], dims[1]};
    return true;
  }
  if (perm == std::vector<int>{0, 2, 1}) {
    swap = {dims[0], dims[1], dims[2]};
    return true;
  }
  return false;
}

// Calls fn(T{}) with T an unsigned integer of the element's size.
template <typename Fn>
void DispatchElementSize(DataType dtype, Fn&& fn) {
  switch (DataTypeSize(dtype)) {
    case 1: fn(uint8_t{}); break;
    case 2: fn(uint16_t{}); break;
    case 4: fn(uint32_t{}); break;
    default: fn(uint64_t{}); break;
  }
}

// x: [batch, rows, cols]; y: [batch, cols, rows]. One work item is one kTile-row strip of one matrix.
template <typename T>
void SwapTiles(const MatrixSwap& s, const T* x, T* y, ThreadPool& pool) {
  const int64_t strips = (s.rows + kTile - 1) / kTile;
  pool.ParallelFor(s.batch * strips, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t b = item / strips, row0 = (item % strips) * kTile;
      const int64_t row_end = std::min(s.rows, row0 + kTile);
      const T* in = x + b * s.rows * s.cols;  // [rows, cols]
      T* out = y + b * s.rows * s.cols;       // [cols, rows]
      for (int64_t col0 = 0; col0 < s.cols; col0 += kTile) {
        const int64_t col_end = std::min(s.cols, col0 + kTile);
        for (int64_t c = col0; c < col_end; ++c)
          for (int64_t r = row0; r < row_end; ++r) out[c * s.rows + r] = in[r * s.cols + c];
      }
    }
  });
}

// Any permutation of the coalesced problem p. Work items are output rows (all output dims but the last).
template <typename T>
void GatherRows(const TransposeProblem& p, const T* x, T* y, ThreadPool& pool) {
  const int rank = p.rank();
  std::vector<int64_t> input_strides(rank, 1);
  for (int d = rank - 2; d >= 0; --d) input_strides[d] = input_strides[d + 1] * p.dims[d + 1];
  const std::vector<int64_t> out_dims = p.output_dims();
  const int64_t row_length = out_dims[rank - 1];
  const int64_t inner_stride = input_strides[p.perm[rank - 1]];  // input step along the output's last dim
  const int64_t rows = p.num_elements() / row_length;
  pool.ParallelFor(rows, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      int64_t source = 0;
      for (int64_t k = rank - 2, rest = row; k >= 0; --k) {  // output coordinate k of this row
        source += (rest % out_dims[k]) * input_strides[p.perm[k]];
        rest /= out_dims[k];
      }
      T* out = y + row * row_length;
      if (inner_stride == 1) {
        std::memcpy(out, x + source, row_length * sizeof(T));
      } else {
        for (int64_t i = 0; i < row_length; ++i) out[i] = x[source + i * inner_stride];
      }
    }
  }, std::max<int64_t>(1, 4096 / row_length));
}

absl::Status CheckRunArgs(const TransposeProblem& problem, const TransposeArgs& args) {
  if (args.x == nullptr || args.y == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(problem.ToString(), ": args.x and args.y must be non-null"));
  }
  if (args.x == args.y) return absl::InvalidArgumentError(problem.ToString() + ": cannot transpose in place");
  return absl::OkStatus();
}

}  // namespace

absl::Status CpuTransposeTiledAlgorithm::CanImplement(const TransposeProblem& problem) const {
  CONVOY_RETURN_IF_ERROR(problem.Validate());
  MatrixSwap swap;
  if (!AsMatrixSwap(problem.Coalesced(), swap)) {
    return absl::UnimplementedError(absl::StrCat(name(), ": only a (batched) swap of the two innermost dim groups"));
  }
  return absl::OkStatus();
}

absl::Status CpuTransposeTiledAlgorithm::Run(const TransposeProblem& problem, const TransposeArgs& args, Workspace,
                                             const ExecutionContext& context) const {
  CONVOY_RETURN_IF_ERROR(CanImplement(problem));
  CONVOY_RETURN_IF_ERROR(CheckRunArgs(problem, args));
  MatrixSwap swap;
  AsMatrixSwap(problem.Coalesced(), swap);
  DispatchElementSize(problem.dtype, [&](auto tag) {
    using T = decltype(tag);
    SwapTiles(swap, static_cast<const T*>(args.x), static_cast<T*>(args.y), *context.thread_pool);
  });
  return absl::OkStatus();
}

absl::Status CpuTransposeStridedAlgorithm::CanImplement(const TransposeProblem& problem) const {
  return problem.Validate();
}

absl::Status CpuTransposeStridedAlgorithm::Run(const TransposeProblem& problem, const TransposeArgs& args, Workspace,
                                               const ExecutionContext& context) const {
  CONVOY_RETURN_IF_ERROR(CanImplement(problem));
  CONVOY_RETURN_IF_ERROR(CheckRunArgs(problem, args));
  const TransposeProblem coalesced = problem.Coalesced();
  DispatchElementSize(problem.dtype, [&](auto tag) {
    using T = decltype(tag);
    GatherRows(coalesced, static_cast<const T*>(args.x), static_cast<T*>(args.y), *context.thread_pool);
  });
  return absl::OkStatus();
}

CONVOY_REGISTER_ALGORITHM(TransposeOp, CpuTransposeTiledAlgorithm);
CONVOY_REGISTER_ALGORITHM(TransposeOp, CpuTransposeStridedAlgorithm);

}  // namespace convoy::cpu
