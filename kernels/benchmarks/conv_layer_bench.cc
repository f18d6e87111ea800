// Times Convoy on one conv layer, for bench/onnxruntime_compare.py: tunes the layer through SelectAlgorithm (kTune,
// fresh cache), re-times the chosen algorithm, and prints one machine-readable line:
//
//   conv_layer_bench --layer=resnet50:l1_3x3_64:56:56:64:64:3:3:1:1:1:3:0 --batch=1 [--layout=nchw] [--reps=20]
//                    [--dtype=fp32|bf16]
//   CONVOY_LAYER resnet50:l1_3x3_64 batch=1 layout=NCHW algorithm=cpu.conv2d.winograd_f4x4_3x3_nchw ms=1.234
//
// Several --layer flags may be given; each gets its line. --algorithm=NAME times that algorithm instead of tuning.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "kernels/benchmarks/layer_benchmarks.h"
#include "kernels/registry/autotuner.h"
#include "kernels/registry/registry.h"

namespace convoy::benchmarks {
namespace {

int TimeLayer(const std::string& spec, int batch, Layout layout, DataType dtype, int reps, const std::string& forced) {
  auto layer = ParseLayerSpec(spec);
  if (!layer.ok()) {
    std::fprintf(stderr, "%s\n", layer.status().ToString().c_str());
    return 1;
  }
  CpuDevice& device = CpuDevice::Default();
  Conv2dProblem problem = LayerProblem(*layer, batch, layout);
  problem.dtype = dtype;
  AlgorithmCache cache;
  absl::StatusOr<SelectedAlgorithm<Conv2dOp>> chosen;
  if (forced.empty()) {
    chosen = SelectAlgorithm<Conv2dOp>(problem, device, cache, AlgorithmSelection::kTune);
  } else if (const auto* a = OpRegistry<Conv2dOp>::Global().Find(forced); a != nullptr) {
    chosen = SelectedAlgorithm<Conv2dOp>{a};
  } else {
    chosen = absl::NotFoundError(absl::StrCat("no algorithm named ", forced));
  }
  auto buffers = chosen.ok() ? MakeLayerBuffers(problem, device) : chosen.status();
  if (!buffers.ok()) {
    std::fprintf(stderr, "%s: %s\n", spec.c_str(), buffers.status().ToString().c_str());
    return 1;
  }
  auto ms = TimeAlgorithm(*chosen->algorithm, problem, **buffers, device, 2, reps);
  if (!ms.ok()) {
    std::fprintf(stderr, "%s: %s\n", spec.c_str(), ms.status().ToString().c_str());
    return 1;
  }
  std::printf("CONVOY_LAYER %s:%s batch=%d layout=%s dtype=%s algorithm=%s ms=%.4f\n", layer->model.c_str(),
              layer->name.c_str(), batch, std::string(LayoutName(layout)).c_str(),
              std::string(DataTypeName(dtype)).c_str(),
              std::string(chosen->algorithm->name()).c_str(), *ms);
  std::fflush(stdout);
  return 0;
}

}  // namespace
}  // namespace convoy::benchmarks

int main(int argc, char** argv) {
  std::vector<std::string> specs;
  std::string forced;
  int batch = 1, reps = 20;
  convoy::Layout layout = convoy::Layout::kNCHW;
  convoy::DataType dtype = convoy::DataType::kFloat32;
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    bool ok = true;
    if (absl::ConsumePrefix(&arg, "--layer=")) {
      specs.emplace_back(arg);
    } else if (absl::ConsumePrefix(&arg, "--batch=")) {
      ok = absl::SimpleAtoi(arg, &batch) && batch > 0;
    } else if (absl::ConsumePrefix(&arg, "--algorithm=")) {
      forced = std::string(arg);
    } else if (absl::ConsumePrefix(&arg, "--reps=")) {
      ok = absl::SimpleAtoi(arg, &reps) && reps > 0;
    } else if (absl::ConsumePrefix(&arg, "--dtype=")) {
      ok = arg == "fp32" || arg == "bf16";
      dtype = arg == "bf16" ? convoy::DataType::kBFloat16 : convoy::DataType::kFloat32;
    } else if (absl::ConsumePrefix(&arg, "--layout=")) {
      ok = arg == "nchw" || arg == "nhwc";
      layout = arg == "nhwc" ? convoy::Layout::kNHWC : convoy::Layout::kNCHW;
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "usage: %s --layer=SPEC... [--batch=N] [--layout=nchw|nhwc] [--dtype=fp32|bf16] [--reps=N] "
                   "[--algorithm=NAME]\n", argv[0]);
      return 2;
    }
  }
  int failures = 0;
  for (const std::string& spec : specs) failures += convoy::benchmarks::TimeLayer(spec, batch, layout, dtype, reps, forced);
  return failures == 0 && !specs.empty() ? 0 : 1;
}
