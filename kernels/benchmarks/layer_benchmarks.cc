// The conv layers the CPU benchmarks time, and how they time them; see layer_benchmarks.h.
#include "kernels/benchmarks/layer_benchmarks.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "kernels/common/status_macros.h"
#include "kernels/registry/autotuner.h"

namespace convoy::benchmarks {
namespace {

ConvLayer Layer(const char* model, const char* name, int hw, int c, int k, int rs, int stride, int groups, int count,
                bool linear = false) {
  ConvLayer l;
  l.model = model, l.name = name, l.h = l.w = hw, l.c = c, l.k = k, l.r = l.s = rs, l.stride = stride;
  l.pad = rs / 2, l.groups = groups, l.count = count, l.linear = linear;
  return l;
}

void AddResNet50(std::vector<ConvLayer>& out) {
  const char* m = "resnet50";
  out.push_back(Layer(m, "stem_7x7", 224, 3, 64, 7, 2, 1, 1));
  // stage 1 at 56x56
  out.push_back(Layer(m, "l1_1x1_64_64", 56, 64, 64, 1, 1, 1, 1));
  out.push_back(Layer(m, "l1_3x3_64", 56, 64, 64, 3, 1, 1, 3));
  out.push_back(Layer(m, "l1_1x1_64_256", 56, 64, 256, 1, 1, 1, 4));  // 3 expansions + the downsample
  out.push_back(Layer(m, "l1_1x1_256_64", 56, 256, 64, 1, 1, 1, 2));
  // stage 2, 56 -> 28
  out.push_back(Layer(m, "l2_1x1_256_128", 56, 256, 128, 1, 1, 1, 1));
  out.push_back(Layer(m, "l2_3x3_128_s2", 56, 128, 128, 3, 2, 1, 1));
  out.push_back(Layer(m, "l2_down_256_512_s2", 56, 256, 512, 1, 2, 1, 1));
  out.push_back(Layer(m, "l2_1x1_128_512", 28, 128, 512, 1, 1, 1, 4));
  out.push_back(Layer(m, "l2_1x1_512_128", 28, 512, 128, 1, 1, 1, 3));
  out.push_back(Layer(m, "l2_3x3_128", 28, 128, 128, 3, 1, 1, 3));
  // stage 3, 28 -> 14
  out.push_back(Layer(m, "l3_1x1_512_256", 28, 512, 256, 1, 1, 1, 1));
  out.push_back(Layer(m, "l3_3x3_256_s2", 28, 256, 256, 3, 2, 1, 1));
  out.push_back(Layer(m, "l3_down_512_1024_s2", 28, 512, 1024, 1, 2, 1, 1));
  out.push_back(Layer(m, "l3_1x1_256_1024", 14, 256, 1024, 1, 1, 1, 6));
  out.push_back(Layer(m, "l3_1x1_1024_256", 14, 1024, 256, 1, 1, 1, 5));
  out.push_back(Layer(m, "l3_3x3_256", 14, 256, 256, 3, 1, 1, 5));
  // stage 4, 14 -> 7
  out.push_back(Layer(m, "l4_1x1_1024_512", 14, 1024, 512, 1, 1, 1, 1));
  out.push_back(Layer(m, "l4_3x3_512_s2", 14, 512, 512, 3, 2, 1, 1));
  out.push_back(Layer(m, "l4_down_1024_2048_s2", 14, 1024, 2048, 1, 2, 1, 1));
  out.push_back(Layer(m, "l4_1x1_512_2048", 7, 512, 2048, 1, 1, 1, 3));
  out.push_back(Layer(m, "l4_1x1_2048_512", 7, 2048, 512, 1, 1, 1, 2));
  out.push_back(Layer(m, "l4_3x3_512", 7, 512, 512, 3, 1, 1, 2));
}

// One inverted-residual stage of MobileNetV2: expansion t, output channels, repeats, first stride.
void AddInvertedResidualStage(std::vector<ConvLayer>& out, int& hw, int& cin, int t, int cout, int repeats,
                              int stride, const std::string& stage) {
  const char* m = "mobilenetv2";
  auto name = [&](const char* what, int block) { return absl::StrCat(stage, "_", what, block == 0 ? "" : "_rep"); };
  for (int block = 0; block < std::min(repeats, 2); ++block) {
    const int count = block == 0 ? 1 : repeats - 1;
    const int in = block == 0 ? cin : cout, hidden = in * t, s = block == 0 ? stride : 1;
    if (t != 1) out.push_back(Layer(m, name("expand", block).c_str(), hw, in, hidden, 1, 1, 1, count));
    out.push_back(Layer(m, name("dw", block).c_str(), hw, hidden, hidden, 3, s, hidden, count));
    const int hw_out = block == 0 ? (hw + s - 1) / s : hw;
    out.push_back(Layer(m, name("project", block).c_str(), hw_out, hidden, cout, 1, 1, 1, count, /*linear=*/true));
    if (block == 0) hw = hw_out;
  }
  cin = cout;
}

void AddMobileNetV2(std::vector<ConvLayer>& out) {
  out.push_back(Layer("mobilenetv2", "stem_3x3_s2", 224, 3, 32, 3, 2, 1, 1));
  int hw = 112, cin = 32;
  AddInvertedResidualStage(out, hw, cin, 1, 16, 1, 1, "b1");
  AddInvertedResidualStage(out, hw, cin, 6, 24, 2, 2, "b2");
  AddInvertedResidualStage(out, hw, cin, 6, 32, 3, 2, "b3");
  AddInvertedResidualStage(out, hw, cin, 6, 64, 4, 2, "b4");
  AddInvertedResidualStage(out, hw, cin, 6, 96, 3, 1, "b5");
  AddInvertedResidualStage(out, hw, cin, 6, 160, 3, 2, "b6");
  AddInvertedResidualStage(out, hw, cin, 6, 320, 1, 1, "b7");
  out.push_back(Layer("mobilenetv2", "head_1x1_320_1280", 7, 320, 1280, 1, 1, 1, 1));
}

}  // namespace

std::vector<ConvLayer> ModelConvLayers() {
  std::vector<ConvLayer> out;
  AddResNet50(out);
  AddMobileNetV2(out);
  return out;
}

std::string FormatLayerSpec(const ConvLayer& l) {
  return absl::StrCat(l.model, ":", l.name, ":", l.h, ":", l.w, ":", l.c, ":", l.k, ":", l.r, ":", l.s, ":", l.stride,
                      ":", l.pad, ":", l.groups, ":", l.count, ":", l.linear ? 1 : 0);
}

absl::StatusOr<ConvLayer> ParseLayerSpec(const std::string& spec) {
  const std::vector<std::string> parts = absl::StrSplit(spec, ':');
  if (parts.size() != 13) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer spec '", spec, "' has ", parts.size(),
                     " fields, expected 13: model:name:h:w:c:k:r:s:stride:pad:groups:count:linear"));
  }
  ConvLayer l;
  l.model = parts[0];
  l.name = parts[1];
  int values[11];
  for (int i = 0; i < 11; ++i) {
    if (!absl::SimpleAtoi(parts[i + 2], &values[i])) {
      return absl::InvalidArgumentError(absl::StrCat("layer spec '", spec, "': field ", i + 3, " '", parts[i + 2],
                                                     "' is not an integer"));
    }
  }
  l.h = values[0], l.w = values[1], l.c = values[2], l.k = values[3], l.r = values[4], l.s = values[5];
  l.stride = values[6], l.pad = values[7], l.groups = values[8], l.count = values[9], l.linear = values[10] != 0;
  return l;
}

Conv2dProblem LayerProblem(const ConvLayer& l, int batch, Layout layout) {
  Conv2dProblem p;
  p.n = batch, p.h = l.h, p.w = l.w, p.c = l.c, p.k = l.k, p.r = l.r, p.s = l.s;
  p.stride_h = p.stride_w = l.stride;
  p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = l.pad;
  p.groups = l.groups;
  p.layout = layout;
  p.epilogue.has_bias = true;
  if (!l.linear) p.epilogue.activation = l.model == "mobilenetv2" ? Activation::Relu6() : Activation::Relu();
  return p;
}

absl::StatusOr<std::unique_ptr<LayerBuffers>> MakeLayerBuffers(const Conv2dProblem& problem, CpuDevice& device) {
  return TuningBuffers<Conv2dOp>::Create(problem, device);
}

absl::StatusOr<double> TimeAlgorithm(const Conv2dAlgorithm& algorithm, const Conv2dProblem& problem,
                                     LayerBuffers& buffers, CpuDevice& device, int warmup, int reps) {
  TuningOptions options;
  options.warmup_runs = warmup;
  options.timed_runs = reps;
  const CandidateTiming timing = TimeCandidate<Conv2dOp>(algorithm, problem, buffers, device, options);
  if (!timing.ok) return absl::InternalError(absl::StrCat(algorithm.name(), ": ", timing.skip_reason));
  return timing.time_ms;
}

absl::StatusOr<std::pair<double, double>> TimeSideBySide(const Conv2dAlgorithm& a, const Conv2dAlgorithm& b,
                                                         const Conv2dProblem& problem, LayerBuffers& buffers,
                                                         CpuDevice& device, int rounds) {
  std::vector<double> times_a, times_b;
  for (int i = 0; i < rounds; ++i) {
    CONVOY_ASSIGN_OR_RETURN(const double ta, TimeAlgorithm(a, problem, buffers, device, 1, 3));
    CONVOY_ASSIGN_OR_RETURN(const double tb, TimeAlgorithm(b, problem, buffers, device, 1, 3));
    times_a.push_back(ta);
    times_b.push_back(tb);
  }
  return std::make_pair(autotuner_internal::Median(times_a), autotuner_internal::Median(times_b));
}

}  // namespace convoy::benchmarks
