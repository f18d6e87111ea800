#include "kernels/cpu/pad.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/registry/registry.h"

namespace convoy::cpu {
namespace {

size_t CellBytes(const PadProblem& p) {
  return DataTypeSize(p.dtype) * (p.layout == Layout::kNHWC ? static_cast<size_t>(p.c) : 1);
}

// Source index of padded coordinate i (already shifted by the leading pad), or -1 for the constant.
int SourceIndex(PadMode mode, int i, int size) {
  if (i >= 0 && i < size) return i;
  if (mode == PadMode::kConstant) return -1;
  if (mode == PadMode::kReflect) return i < 0 ? -i : 2 * (size - 1) - i;
  return std::clamp(i, 0, size - 1);
}

// Output row `oy` of one plane: x_plane [H, W] cells -> y_row [W_out] cells.
void PadRow(const PadProblem& p, const char* x_plane, char* y_row, int oy, const char* constant_cell, size_t cell) {
  const int sy = SourceIndex(p.mode, oy - p.pad_top, p.h);
  if (sy < 0) {
    for (int ox = 0; ox < p.out_w(); ++ox) std::memcpy(y_row + ox * cell, constant_cell, cell);
    return;
  }
  const char* x_row = x_plane + static_cast<size_t>(sy) * p.w * cell;
  // The interior: output columns whose source column lies in the row (a negative pad crops it).
  const int first = std::max(p.pad_left, 0), last = std::min(p.pad_left + p.w, p.out_w());
  if (last > first) std::memcpy(y_row + first * cell, x_row + (first - p.pad_left) * cell, (last - first) * cell);
  for (int ox = 0; ox < p.out_w(); ++ox) {
    if (ox >= first && ox < last) continue;
    const int sx = SourceIndex(p.mode, ox - p.pad_left, p.w);
    std::memcpy(y_row + ox * cell, sx < 0 ? constant_cell : x_row + sx * cell, cell);
  }
}

}  // namespace

size_t CpuPadAlgorithm::WorkspaceBytes(const PadProblem& problem) const { return CellBytes(problem); }

absl::Status CpuPadAlgorithm::Run(const PadProblem& p, const PadArgs& args, Workspace workspace,
                                  const ExecutionContext& context) const {
  const size_t cell = CellBytes(p);
  if (workspace.bytes < cell || workspace.data == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(name(), ": expected ", cell, " workspace bytes, got ", workspace.bytes));
  }
  char* constant_cell = static_cast<char*>(workspace.data);
  const size_t elements_per_cell = cell / DataTypeSize(p.dtype);
  for (size_t i = 0; i < elements_per_cell; ++i) StoreFromFloat(constant_cell, p.dtype, i, p.value);
  const int64_t planes = p.layout == Layout::kNCHW ? int64_t{p.n} * p.c : p.n;
  const size_t x_plane_bytes = static_cast<size_t>(p.h) * p.w * cell;
  const size_t y_row_bytes = static_cast<size_t>(p.out_w()) * cell;
  context.thread_pool->ParallelFor(planes * p.out_h(), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {  // row = plane * H_out + oy
      const int64_t plane = row / p.out_h();
      PadRow(p, static_cast<const char*>(args.x) + plane * x_plane_bytes, static_cast<char*>(args.y) + row * y_row_bytes,
             static_cast<int>(row % p.out_h()), constant_cell, cell);
    }
  });
  return absl::OkStatus();
}

CONVOY_REGISTER_ALGORITHM(PadOp, CpuPadAlgorithm);

}  // namespace convoy::cpu
