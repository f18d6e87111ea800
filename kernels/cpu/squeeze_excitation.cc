#include "kernels/cpu/squeeze_excitation.h"

#include <algorithm>
#include <cstdint>
#include <memory>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "kernels/cpu/activation_loops.h"
#include "kernels/cpu/binary_rows.h"
#include "kernels/cpu/per_isa_registration.h"
#include "kernels/cpu/squeeze_excitation_rows.h"
#include "kernels/registry/registry.h"

namespace convoy::cpu {
namespace {

constexpr int kMultiply = 2;                // BinaryRowKernels' index of the multiply
constexpr int64_t kMinTaskElements = 8192;  // a pool task reads at least this many elements of x
constexpr int64_t kBlock = kLayoutChannelBlock;

const BinaryRowKernels& BinaryRowsFor(CpuIsa isa) {
  return ForCpuIsa(isa, kBinaryRowKernelsBaseline, kBinaryRowKernelsAvx2, kBinaryRowKernelsAvx512);
}

const SqueezeExcitationRowKernels& ReductionsFor(CpuIsa isa) {
  return ForCpuIsa(isa, kSqueezeExcitationRowKernelsBaseline, kSqueezeExcitationRowKernelsAvx2,
                   kSqueezeExcitationRowKernelsAvx512);
}

// Pass 1 for one piece: adds elements [first, last) of image x (its layout's own order, in units of pixels for NHWC,
// rows of 8 channels for NCHW8c, channel planes for NCHW) into sums[C], which the caller zeroed.
void SumPiece(const SqueezeExcitationProblem& p, const SqueezeExcitationRowKernels& k, const float* x, int64_t first,
              int64_t last, float* sums) {
  const int64_t c = p.c, plane = int64_t{p.h} * p.w;
  switch (p.layout) {
    case Layout::kNHWC:
      k.sum_rows(x + first * c, last - first, c, sums);
      return;
    case Layout::kNCHW8c:
      // Rows of 8 channels: block b holds rows [b * plane, (b + 1) * plane).
      for (int64_t row = first; row < last;) {
        const int64_t block = row / plane, end = std::min(last, (block + 1) * plane);
        k.sum_rows(x + row * kBlock, end - row, kBlock, sums + block * kBlock);
        row = end;
      }
      return;
    case Layout::kNCHW:
      for (int64_t channel = first; channel < last; ++channel) sums[channel] = k.sum(x + channel * plane, plane);
      return;
  }
}

// Units pass 1 splits an image into (see SumPiece) and the elements of x in each.
int64_t UnitsPerImage(const SqueezeExcitationProblem& p) {
  const int64_t plane = int64_t{p.h} * p.w;
  switch (p.layout) {
    case Layout::kNHWC: return plane;
    case Layout::kNCHW8c: return p.c / kBlock * plane;
    case Layout::kNCHW: break;
  }
  return p.c;
}

// The calling thread's part: gate[i, :] from the pieces' sums of every image i.
void ComputeGates(const SqueezeExcitationProblem& p, const SqueezeExcitationRowKernels& kernels,
                  const SqueezeExcitationArgs& args, int pieces, float* partial, float* hidden, float* gate) {
  const int64_t c = p.c, s = p.squeeze;
  const float inverse_pixels = 1.0f / static_cast<float>(int64_t{p.h} * p.w);
  for (int64_t i = 0; i < p.n; ++i) {
    float* mean = partial + i * pieces * c;  // piece 0's sums of image i become its means
    for (int piece = 1; piece < pieces; ++piece) {
      const float* other = mean + piece * c;
      for (int64_t k = 0; k < c; ++k) mean[k] += other[k];
    }
    for (int64_t k = 0; k < c; ++k) mean[k] *= inverse_pixels;
    float* h = hidden + i * s;
    for (int64_t j = 0; j < s; ++j) {
      h[j] = kernels.dot(args.w1 + j * c, mean, c) + (p.has_hidden_bias ? args.b1[j] : 0.0f);
    }
    ApplyActivationInPlace(h, s, p.hidden_activation);
    // The second product along C: one row of the transposed filter [S, C] per hidden channel.
    float* g = gate + i * c;
    for (int64_t k = 0; k < c; ++k) g[k] = p.has_gate_bias ? args.b2[k] : 0.0f;
    for (int64_t j = 0; j < s; ++j) kernels.axpy(h[j], args.w2 + j * c, g, c);
    ApplyActivationInPlace(g, c, p.gate_activation);
  }
}

// Pass 2: y = x * gate over the pool, in rows the binary op's kernels take.
void MultiplyByGate(const SqueezeExcitationProblem& p, const BinaryRowKernels& kernels, const float* x,
                    const float* gate, float* y, ThreadPool& pool) {
  const auto repeated = kernels.repeated[kMultiply];
  const auto scalar = kernels.scalar[kMultiply];
  const int64_t c = p.c, plane = int64_t{p.h} * p.w;
  switch (p.layout) {
    case Layout::kNHWC:
      // Pixels of C channels; pixel r belongs to image r / plane.
      pool.ParallelFor(p.n * plane, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end;) {
          const int64_t image = r / plane, last = std::min(end, (image + 1) * plane);
          repeated(x + r * c, gate + image * c, y + r * c, last - r, c);
          r = last;
        }
      }, std::max<int64_t>(1, kMinTaskElements / c));
      return;
    case Layout::kNCHW8c:
      // Rows of 8 channels; row r belongs to block r / plane counted over all images, whose gates are gate[8 * that].
      pool.ParallelFor(p.n * (c / kBlock) * plane, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end;) {
          const int64_t block = r / plane, last = std::min(end, (block + 1) * plane);
          repeated(x + r * kBlock, gate + block * kBlock, y + r * kBlock, last - r, kBlock);
          r = last;
        }
      }, std::max<int64_t>(1, kMinTaskElements / kBlock));
      return;
    case Layout::kNCHW:
      // Planes; plane q is channel q % C of image q / C, whose gate is gate[q].
      pool.ParallelFor(p.n * c, [&](int64_t begin, int64_t end) {
        for (int64_t q = begin; q < end; ++q) scalar(x + q * plane, gate[q], y + q * plane, plane);
      }, std::max<int64_t>(1, kMinTaskElements / plane));
      return;
  }
}

}  // namespace

CpuSqueezeExcitation::CpuSqueezeExcitation(CpuIsa isa)
    : isa_(isa),
      name_(isa == CpuIsa::kBaseline ? "cpu.squeeze_excitation.direct"
                                     : absl::StrCat("cpu.squeeze_excitation.direct_", CpuIsaName(isa))) {}

int CpuSqueezeExcitation::HeuristicScore(const SqueezeExcitationProblem&) const {
  switch (isa_) {
    case CpuIsa::kAvx512: return 20;
    case CpuIsa::kAvx2: return 10;
    case CpuIsa::kBaseline: break;
  }
  return 0;
}

absl::Status CpuSqueezeExcitation::CanImplement(const SqueezeExcitationProblem& problem) const {
  CONVOY_RETURN_IF_ERROR(problem.Validate());
  if (problem.dtype != DataType::kFloat32) {
    return absl::UnimplementedError(
        absl::StrCat(name(), " runs FP32 only, got ", DataTypeName(problem.dtype)));
  }
  return absl::OkStatus();
}

size_t CpuSqueezeExcitation::WorkspaceBytes(const SqueezeExcitationProblem& p) const {
  // The pieces' sums, the hidden activations and the gates.
  const int64_t floats = int64_t{p.n} * (kMaxPieces * int64_t{p.c} + p.squeeze + p.c);
  return static_cast<size_t>(floats) * sizeof(float);
}

absl::Status CpuSqueezeExcitation::Run(const SqueezeExcitationProblem& p, const SqueezeExcitationArgs& args,
                                       Workspace workspace, const ExecutionContext& context) const {
  if (workspace.bytes < WorkspaceBytes(p)) {
    return absl::InvalidArgumentError(absl::StrCat(name(), ": workspace of ", workspace.bytes, " bytes, needs ",
                                                   WorkspaceBytes(p), " for ", p.ToString()));
  }
  ThreadPool& pool = *context.thread_pool;
  const int64_t c = p.c, image_elements = c * p.h * p.w;
  const int64_t units = UnitsPerImage(p);
  // Pieces per image: enough to give every thread work at batch 1, none smaller than kMinTaskElements.
  const int64_t threads_per_image = (pool.num_threads() + p.n - 1) / p.n;
  const int pieces = static_cast<int>(std::max<int64_t>(
      1, std::min<int64_t>({kMaxPieces, threads_per_image, image_elements / kMinTaskElements, units})));
  float* partial = static_cast<float*>(workspace.data);             // [n, pieces, C]
  float* hidden = partial + int64_t{p.n} * kMaxPieces * c;          // [n, squeeze]
  float* gate = hidden + int64_t{p.n} * p.squeeze;                  // [n, C]
  const float* x = static_cast<const float*>(args.x);
  const SqueezeExcitationRowKernels& reductions = ReductionsFor(isa_);
  pool.ParallelFor(int64_t{p.n} * pieces, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t image = task / pieces, piece = task % pieces;
      float* sums = partial + task * c;
      std::fill(sums, sums + c, 0.0f);
      SumPiece(p, reductions, x + image * image_elements, piece * units / pieces, (piece + 1) * units / pieces, sums);
    }
  });
  ComputeGates(p, reductions, args, pieces, partial, hidden, gate);
  MultiplyByGate(p, BinaryRowsFor(isa_), x, gate, static_cast<float*>(args.y), pool);
  return absl::OkStatus();
}

CONVOY_REGISTER_PER_ISA_ALGORITHM(SqueezeExcitationOp, CpuSqueezeExcitation);

}  // namespace convoy::cpu
