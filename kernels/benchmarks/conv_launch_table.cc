// The launch-shape table of the CUDA conv heuristic for the ResNet-50 conv layers at batch 1, 8 and 32 (FP16 NHWC,
// bias + ReLU), before and after the split-K and wave-aware launch shapes, computed by the launch-cost model on the
// emulated H200 (132 SMs, sm_90 limits; the same numbers the heuristic uses on a real H200, where the occupancy comes
// from cudaOccupancyMaxActiveBlocksPerMultiprocessor instead):
//
//   before   the old rule: the 1x1 GEMM when it applies, else the implicit GEMM; the 128x128 tile when it makes at
//            least 264 tiles ("two waves"), otherwise 64x64 (128x64 never won); no split-K. Old kernels' occupancy:
//            128x128 2 blocks/SM (217 registers), 128x64 4, 64x64 7 (ptxas -v, sm_90, FP16), 32-element k-steps.
//   after    the registry's heuristic now: every tensor-core candidate (5 tiles incl. the 8-warp ones, split-K 2..16)
//            ranked by the cost model's estimate; the chosen one's tiles, blocks, blocks/SM, waves, tail efficiency,
//            split factor and estimated time.
//
//   bazel run //kernels/benchmarks:conv_launch_table [-- --markdown]
// No kernel runs: this is the heuristic's view, a model. The GPU check (tests/gpu) measures the kernels.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "kernels/cuda/conv2d_gemm_test_problems.h"
#include "kernels/cuda/launch_cost_model.h"
#include "kernels/registry/registry.h"

namespace convoy::benchmarks {
namespace {

struct Launch {
  std::string algorithm;
  int64_t blocks = 0;
  int blocks_per_sm = 0;
  double waves = 0, tail = 0;
  int split = 1;
  double us = 0;
};

// The old heuristic's choice and its launch (see the file comment).
Launch Before(const Conv2dProblem& p, const cuda::GpuModel& gpu) {
  const int64_t m = int64_t{p.n} * p.p() * p.q();
  const bool one_by_one = p.r == 1 && p.s == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad_top == 0 &&
                          p.pad_left == 0 && p.pad_bottom == 0 && p.pad_right == 0;
  struct Old {
    int tm, tn, blocks_per_sm, registers, shared;
    bool one_by_one;
  };
  const Old old[] = {{128, 128, 2, 217, 61440, false}, {128, 64, 4, 128, 46080, false},
                     {64, 64, 7, 71, 30720, false},     {128, 128, 2, 209, 61440, true},
                     {64, 64, 7, 70, 30720, true}};
  const Old* best = nullptr;
  int best_score = 0;
  for (const Old& o : old) {
    if (o.one_by_one && !one_by_one) continue;
    const int64_t tiles = ((m + o.tm - 1) / o.tm) * ((p.k + o.tn - 1) / o.tn);
    int score = 40 + (o.one_by_one ? 5 : 0);
    if (tiles >= 264) {
      score += o.tm * o.tn / 4096;
    } else if (o.tm == 64) {
      score += 4;
    }
    if (best == nullptr || score > best_score) best = &o, best_score = score;
  }
  cuda::GemmKernelDescription d;
  d.tile_m = best->tm, d.tile_n = best->tn, d.k_step = 32, d.warps = 4, d.warp_tile_m = best->tm / 2;
  d.warp_tile_n = best->tn / 2, d.gathers = !best->one_by_one;
  d.resources = {128, best->registers, best->shared};
  cuda::GemmShape shape{m, p.k, int64_t{p.r} * p.s * p.c, 2, 2};
  const cuda::LaunchEstimate e = cuda::EstimateGemmLaunch(d, shape, best->blocks_per_sm, gpu);
  return {absl::StrFormat("%s_%dx%d", best->one_by_one ? "gemm_1x1" : "implicit_gemm", best->tm, best->tn),
          e.blocks, e.blocks_per_sm, e.waves, e.tail_efficiency, 1, e.total_us};
}

// The value after `label` in a LaunchSummary ("..., 4/SM, 0.24 waves, tail 24%, ..., est 9.8 us").
double Field(const std::string& summary, absl::string_view label, bool label_before) {
  for (absl::string_view part : absl::StrSplit(summary, absl::ByAnyChar(",:"))) {
    part = absl::StripAsciiWhitespace(part);
    absl::string_view number = part;
    if (label_before) {
      if (!absl::ConsumePrefix(&number, label)) continue;
    } else {
      if (!absl::ConsumeSuffix(&number, label)) continue;
    }
    number = absl::StripAsciiWhitespace(number);
    absl::ConsumeSuffix(&number, "%");
    absl::ConsumeSuffix(&number, " us");
    double value = 0;
    if (absl::SimpleAtod(number, &value)) return value;
  }
  return NAN;
}

Launch After(const Conv2dProblem& p) {
  auto chosen = OpRegistry<Conv2dOp>::Global().Heuristic(p, Backend::kCuda);
  if (!chosen.ok()) return {"(none)"};
  const std::string summary = (*chosen)->LaunchSummary(p);
  Launch l;
  absl::string_view name = (*chosen)->name();
  absl::ConsumePrefix(&name, "cuda.conv2d.");
  l.algorithm = std::string(name);
  l.blocks = static_cast<int64_t>(Field(summary, "blocks", false));
  l.blocks_per_sm = static_cast<int>(Field(summary, "/SM", false));
  l.waves = Field(summary, "waves", false);
  l.tail = Field(summary, "tail", true) / 100;
  l.split = static_cast<int>(Field(summary, "split", true));
  l.us = Field(summary, "est", true);
  return l;
}

int Run(bool markdown) {
  const cuda::GpuModel gpu = cuda::GpuModel::H200();
  const char* header = "| layer | batch | before: algorithm | blocks | /SM | waves | tail | split | est us | "
                       "after: algorithm | blocks | /SM | waves | tail | split | est us | speedup |";
  if (markdown) {
    absl::PrintF("%s\n", header);
    absl::PrintF("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | "
                 "--- |\n");
  }
  double before_total = 0, after_total = 0;
  for (int batch : {1, 8, 32}) {
    for (const testing::ResNetLayer& layer : testing::ResNet50ConvLayers(batch, DataType::kFloat16, Layout::kNHWC)) {
      const Launch b = Before(layer.problem, gpu), a = After(layer.problem);
      before_total += b.us, after_total += a.us;
      absl::string_view name = layer.name;
      const std::string suffix = absl::StrCat("_b", batch);
      absl::ConsumeSuffix(&name, suffix);
      if (markdown) {
        absl::PrintF("| %s | %d | %s | %d | %d | %.2f | %.0f%% | %d | %.1f | %s | %d | %d | %.2f | %.0f%% | %d | %.1f | "
                    "%.2fx |\n",
                    name, batch, b.algorithm, b.blocks, b.blocks_per_sm, b.waves, 100 * b.tail, b.split, b.us,
                    a.algorithm, a.blocks, a.blocks_per_sm, a.waves, 100 * a.tail, a.split, a.us, b.us / a.us);
      } else {
        absl::PrintF("%-16s b%-2d before %-22s %5d blocks %d/SM %5.2f waves tail %3.0f%% split %d %8.1f us | after "
                    "%-28s %5d blocks %d/SM %5.2f waves tail %3.0f%% split %2d %8.1f us  %.2fx\n",
                    name, batch, b.algorithm, b.blocks, b.blocks_per_sm, b.waves, 100 * b.tail, b.split, b.us,
                    a.algorithm, a.blocks, a.blocks_per_sm, a.waves, 100 * a.tail, a.split, a.us, b.us / a.us);
      }
    }
  }
  absl::PrintF("%sTOTAL estimated (each distinct layer once, batches 1+8+32): before %.1f us, after %.1f us, %.2fx\n",
              markdown ? "\n" : "", before_total, after_total, before_total / after_total);
  return 0;
}

}  // namespace
}  // namespace convoy::benchmarks

int main(int argc, char** argv) {
  bool markdown = false;
  for (int i = 1; i < argc; ++i) {
    if (absl::string_view(argv[i]) == "--markdown") {
      markdown = true;
    } else {
      std::fprintf(stderr, "usage: %s [--markdown]\n", argv[0]);
      return 2;
    }
  }
  return convoy::benchmarks::Run(markdown);
}
