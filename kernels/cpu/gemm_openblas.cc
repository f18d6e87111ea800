// CPU GEMM on OpenBLAS sgemm with the fused epilogue; see gemm_openblas.h.
#include "kernels/cpu/gemm_openblas.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "kernels/cpu/gemm_tile.h"
#include "kernels/registry/registry.h"

namespace convoy {
namespace cpu {
namespace {

constexpr int kRowTile = 64;
constexpr int kMinColumnTile = 64;

int CeilDiv(int a, int b) { return (a + b - 1) / b; }

struct GemmTiling {
  int row_tile, row_blocks, column_tile, column_blocks;
  size_t scratch_floats;
};

// FP32: exactly `threads` big pieces, each one sgemm (single-threaded OpenBLAS is only fast on long GEMMs): over
// rows when there are at least 16 per piece, else over columns (an FC layer at batch 1-8). FP16/BF16 (converted
// into per-thread scratch, sized for the default pool, so the plan must not depend on the pool at hand): rows in
// blocks of 64, columns split until every pool thread has about two tiles.
GemmTiling PlanGemmTiling(const GemmProblem& p, int threads) {
  GemmTiling t;
  if (p.dtype == DataType::kFloat32) {
    const int pieces = std::max(1, threads);
    t.row_blocks = 1;
    t.column_blocks = 1;
    if (p.m >= 16 * pieces) {
      t.row_blocks = pieces;
    } else {
      t.column_blocks = std::clamp(p.n / 16, 1, pieces);
    }
    t.row_tile = CeilDiv(p.m, t.row_blocks);
    t.row_blocks = CeilDiv(p.m, t.row_tile);
    t.column_tile = CeilDiv(p.n, t.column_blocks);
    t.column_blocks = CeilDiv(p.n, t.column_tile);
    t.scratch_floats = 0;
    return t;
  }
  t.row_blocks = CeilDiv(p.m, kRowTile);
  t.row_tile = CeilDiv(p.m, t.row_blocks);
  const int wanted_columns = CeilDiv(2 * ScratchSlotCount(), t.row_blocks);
  t.column_blocks = std::clamp(wanted_columns, 1, std::max(1, p.n / kMinColumnTile));
  t.column_tile = CeilDiv(p.n, t.column_blocks);
  t.column_blocks = CeilDiv(p.n, t.column_tile);
  t.scratch_floats = static_cast<size_t>(t.row_tile) * p.k + static_cast<size_t>(t.row_tile) * t.column_tile;
  return t;
}

}  // namespace

absl::Status GemmOpenBlas::CanImplement(const GemmProblem& problem) const { return problem.Validate(); }

size_t GemmOpenBlas::WorkspaceBytes(const GemmProblem& problem) const {
  const GemmTiling tiling = PlanGemmTiling(problem, ScratchSlotCount());
  return tiling.scratch_floats == 0 ? 0 : ScratchWorkspaceBytes(tiling.scratch_floats);
}

size_t GemmOpenBlas::PackedFilterBytes(const GemmProblem& p) const {
  return p.dtype == DataType::kFloat32 ? 0 : static_cast<size_t>(p.n) * p.k * sizeof(float);
}

absl::Status GemmOpenBlas::PackFilter(const GemmProblem& p, const void* filter, void* packed,
                                      const ExecutionContext& context) const {
  ConvertFilterToFloat(filter, p.dtype, int64_t{p.n} * p.k, static_cast<float*>(packed));
  return absl::OkStatus();
}

absl::Status GemmOpenBlas::Run(const GemmProblem& p, const GemmArgs& args, Workspace workspace,
                               const ExecutionContext& context) const {
  if (context.thread_pool == nullptr) return absl::InvalidArgumentError("CPU GEMM needs a thread pool");
  const GemmTiling t = PlanGemmTiling(p, context.thread_pool->num_threads());
  if (t.scratch_floats > 0) CONVOY_RETURN_IF_ERROR(ScratchSlots::Check(workspace.bytes, t.scratch_floats));
  ScratchSlots slots(workspace.data, workspace.bytes, t.scratch_floats);
  const EpilogueOperands ops{p.epilogue, args.scale, args.bias, args.residual, p.dtype};
  const bool fp32 = p.dtype == DataType::kFloat32;
  const float* b = static_cast<const float*>(args.b);  // [n, k] FP32
  context.thread_pool->ParallelFor(int64_t{t.row_blocks} * t.column_blocks, [&](int64_t begin, int64_t end) {
    ScratchSlots::Lease lease = slots.Acquire();
    for (int64_t tile = begin; tile < end; ++tile) {
      const int m0 = static_cast<int>(tile / t.column_blocks) * t.row_tile;
      const int n0 = static_cast<int>(tile % t.column_blocks) * t.column_tile;
      const int mt = std::min(t.row_tile, p.m - m0), nt = std::min(t.column_tile, p.n - n0);
      const float* a = static_cast<const float*>(args.a) + int64_t{m0} * p.k;  // A[m0, 0]
      float* acc = static_cast<float*>(args.y) + int64_t{m0} * p.n + n0;       // Y[m0, n0]
      int ldc = p.n;
      if (!fp32) {
        LoadRowAsFloat(args.a, p.dtype, int64_t{m0} * p.k, int64_t{mt} * p.k, lease.data());
        a = lease.data();
        acc = lease.data() + int64_t{mt} * p.k;
        ldc = nt;
      }
      SgemmRowMajor(false, true, mt, nt, p.k, a, p.k, b + int64_t{n0} * p.k, p.k, acc, ldc);
      for (int i = 0; i < mt; ++i) {
        ApplyPixelEpilogue(ops, n0, acc + int64_t{i} * ldc, nt, args.y, int64_t{m0 + i} * p.n + n0);
      }
    }
  });
  return absl::OkStatus();
}

CONVOY_REGISTER_ALGORITHM(GemmOp, GemmOpenBlas);

}  // namespace cpu
}  // namespace convoy
