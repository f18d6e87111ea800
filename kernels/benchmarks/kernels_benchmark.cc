// Times every registered CPU conv2d algorithm on the conv layers of ResNet-50 and MobileNetV2 (batch 1 and 8, NCHW
// and NHWC), shows which one the algorithm cache picks when it tunes (SelectAlgorithm with kTune on a fresh cache),
// and checks that the pick is within 5% of the fastest candidate measured independently: when they differ, the two
// are re-timed alternately in one pass and compared.
//
//   kernels_benchmark                 the full table (minutes on 2 cores)
//   kernels_benchmark --quick         four small layers at batch 1 (seconds; the test suite's smoke test)
//   kernels_benchmark --list          the layer specs, one per line (read by bench/onnxruntime_compare.py)
//   options: --batches=1,8  --layouts=nchw,nhwc  --models=resnet50,mobilenetv2
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "kernels/benchmarks/layer_benchmarks.h"
#include "kernels/registry/autotuner.h"
#include "kernels/registry/registry.h"

namespace convoy::benchmarks {
namespace {

struct Options {
  bool quick = false;
  bool list = false;
  std::vector<int> batches = {1, 8};
  std::vector<Layout> layouts = {Layout::kNCHW, Layout::kNHWC};
  std::vector<std::string> models = {"resnet50", "mobilenetv2"};
};

bool ParseOptions(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--quick") {
      o.quick = true;
      o.batches = {1};
      o.layouts = {Layout::kNCHW};
    } else if (arg == "--list") {
      o.list = true;
    } else if (absl::ConsumePrefix(&arg, "--batches=")) {
      o.batches.clear();
      for (absl::string_view b : absl::StrSplit(arg, ',')) {
        int v;
        if (!absl::SimpleAtoi(b, &v) || v <= 0) return false;
        o.batches.push_back(v);
      }
    } else if (absl::ConsumePrefix(&arg, "--layouts=")) {
      o.layouts.clear();
      for (absl::string_view l : absl::StrSplit(arg, ',')) {
        if (l != "nchw" && l != "nhwc") return false;
        o.layouts.push_back(l == "nchw" ? Layout::kNCHW : Layout::kNHWC);
      }
    } else if (absl::ConsumePrefix(&arg, "--models=")) {
      o.models = absl::StrSplit(arg, ',');
    } else {
      return false;
    }
  }
  return true;
}

std::vector<ConvLayer> SelectLayers(const Options& o) {
  std::vector<ConvLayer> out;
  for (const ConvLayer& l : ModelConvLayers()) {
    const bool wanted_model = std::find(o.models.begin(), o.models.end(), l.model) != o.models.end();
    const bool quick_layer = l.name == "l4_3x3_512" || l.name == "l4_1x1_2048_512" || l.name == "b6_dw_rep" ||
                             l.name == "head_1x1_320_1280";
    if (wanted_model && (!o.quick || quick_layer)) out.push_back(l);
  }
  return out;
}

absl::string_view ShortName(absl::string_view name) {
  absl::ConsumePrefix(&name, "cpu.conv2d.");
  return name;
}

// Per (model, batch, layout) totals over the model's conv layers, each layer weighted by its use count.
struct ModelTotals {
  double fastest_ms = 0;
  double chosen_ms = 0;
};

struct LayerOutcome {
  bool ok = false;
  bool within_5_percent = false;
  double fastest_ms = 0, chosen_ms = 0;
};

// Measures one layer and prints its row.
LayerOutcome BenchmarkLayer(const ConvLayer& layer, int batch, Layout layout, CpuDevice& device, const Options& o) {
  LayerOutcome outcome;
  const Conv2dProblem problem = LayerProblem(layer, batch, layout);
  auto buffers = MakeLayerBuffers(problem, device);
  if (!buffers.ok()) {
    std::printf("%-12s %-22s ERROR %s\n", layer.model.c_str(), layer.name.c_str(), buffers.status().ToString().c_str());
    return outcome;
  }
  const int reps = o.quick ? 3 : 5;
  std::string row;
  const Conv2dAlgorithm* fastest = nullptr;
  double fastest_ms = 0;
  for (const Conv2dAlgorithm* a : OpRegistry<Conv2dOp>::Global().Candidates(problem, Backend::kCpu)) {
    auto ms = TimeAlgorithm(*a, problem, **buffers, device, 1, reps);
    if (!ms.ok()) {
      absl::StrAppend(&row, " ", ShortName(a->name()), "=failed");
      continue;
    }
    absl::StrAppendFormat(&row, " %s=%.3f", ShortName(a->name()), *ms);
    if (fastest == nullptr || *ms < fastest_ms) fastest = a, fastest_ms = *ms;
  }
  AlgorithmCache cache;
  auto chosen = SelectAlgorithm<Conv2dOp>(problem, device, cache, AlgorithmSelection::kTune);
  if (fastest == nullptr || !chosen.ok()) {
    std::printf("%-12s %-22s ERROR no algorithm ran%s\n", layer.model.c_str(), layer.name.c_str(), row.c_str());
    return outcome;
  }
  double chosen_ms = fastest_ms, best_ms = fastest_ms;
  if (chosen->algorithm != fastest) {
    auto side = TimeSideBySide(*chosen->algorithm, *fastest, problem, **buffers, device, o.quick ? 2 : 3);
    if (side.ok()) chosen_ms = side->first, best_ms = side->second;
  }
  outcome.ok = true;
  outcome.chosen_ms = chosen_ms;
  outcome.fastest_ms = std::min(best_ms, chosen_ms);
  outcome.within_5_percent = chosen_ms <= 1.05 * best_ms;
  std::printf("%-12s %-22s n=%d %s |%s | chosen %s %.3f ms, fastest %s %.3f ms, ratio %.2f %s\n", layer.model.c_str(),
              layer.name.c_str(), batch, std::string(LayoutName(layout)).c_str(), row.c_str(),
              std::string(ShortName(chosen->algorithm->name())).c_str(), chosen_ms,
              std::string(ShortName(fastest->name())).c_str(), best_ms, chosen_ms / best_ms,
              outcome.within_5_percent ? "OK" : "SLOWER");
  std::fflush(stdout);
  return outcome;
}

int Run(const Options& o) {
  const std::vector<ConvLayer> layers = SelectLayers(o);
  if (o.list) {
    for (const ConvLayer& l : layers) std::printf("%s\n", FormatLayerSpec(l).c_str());
    return 0;
  }
  CpuDevice& device = CpuDevice::Default();
  std::printf("device %s; times are medians in ms; epilogue bias+relu (relu6 / none for MobileNetV2 projections)\n",
              device.Identity().c_str());
  int checked = 0, within = 0, failed = 0;
  std::map<std::string, ModelTotals> totals;
  for (Layout layout : o.layouts) {
    for (int batch : o.batches) {
      for (const ConvLayer& layer : layers) {
        const LayerOutcome r = BenchmarkLayer(layer, batch, layout, device, o);
        if (!r.ok) {
          ++failed;
          continue;
        }
        ++checked;
        within += r.within_5_percent;
        ModelTotals& t = totals[absl::StrCat(layer.model, " n=", batch, " ", LayoutName(layout))];
        t.fastest_ms += layer.count * r.fastest_ms;
        t.chosen_ms += layer.count * r.chosen_ms;
      }
    }
  }
  for (const auto& [key, t] : totals) {
    std::printf("TOTAL %-28s sum over conv layers (x use count): chosen %.2f ms, fastest %.2f ms\n", key.c_str(),
                t.chosen_ms, t.fastest_ms);
  }
  std::printf("SUMMARY chosen within 5%% of the fastest on %d of %d layer runs; %d failed\n", within, checked, failed);
  return failed == 0 && checked > 0 ? 0 : 1;
}

}  // namespace
}  // namespace convoy::benchmarks

int main(int argc, char** argv) {
  convoy::benchmarks::Options options;
  if (!convoy::benchmarks::ParseOptions(argc, argv, options)) {
    std::fprintf(stderr, "usage: %s [--quick] [--list] [--batches=1,8] [--layouts=nchw,nhwc] [--models=...]\n",
                 argv[0]);
    return 2;
  }
  return convoy::benchmarks::Run(options);
}
