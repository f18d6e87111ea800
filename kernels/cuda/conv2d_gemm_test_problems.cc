#include "kernels/cuda/conv2d_gemm_test_problems.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "kernels/testing/problem_list.h"

namespace convoy::testing {
namespace {

Conv2dProblem Conv(int n, int c, int h, int w, int k, int r, int s, int stride, int pad) {
  Conv2dProblem p;
  p.n = n, p.c = c, p.h = h, p.w = w, p.k = k, p.r = r, p.s = s, p.stride_h = p.stride_w = stride;
  p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = pad;
  p.layout = Layout::kNHWC;
  return p;
}

// FP16, BF16 and FP32-as-TF32 copies of `p`.
void AddTensorCoreDtypes(std::vector<Conv2dProblem>& out, Conv2dProblem p) {
  for (DataType dtype : {DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32}) {
    p.dtype = dtype;
    p.allow_tf32 = dtype == DataType::kFloat32;
    out.push_back(p);
  }
}

}  // namespace

std::vector<Conv2dProblem> CudaConvExtraProblems() {
  std::vector<Conv2dProblem> out;
  // 3x3 s1: 180 output pixels (2 tiles of 128, 3 of 64), K = 72 (2 tiles of 64), R*S*C = 144 (4.5 slices of 32).
  Conv2dProblem p = Conv(2, 16, 9, 10, 72, 3, 3, 1, 1);
  p.epilogue = Epilogue{true, false, ResidualMode::kNone, Activation::Relu()};
  AddTensorCoreDtypes(out, p);
  // 1x1 bottleneck expansion with folded BN and the ResNet residual; M = 144, C = 40 (1.25 slices of 32).
  p = Conv(1, 40, 12, 12, 48, 1, 1, 1, 0);
  p.epilogue = Epilogue{true, true, ResidualMode::kBeforeActivation, Activation::Relu()};
  AddTensorCoreDtypes(out, p);
  // 3x3 s2 with asymmetric padding and dilation 2; residual after a SiLU.
  p = Conv(1, 8, 13, 12, 10, 3, 3, 2, 1);
  p.pad_bottom = 2, p.pad_right = 0, p.dilation_h = p.dilation_w = 2;
  p.epilogue = Epilogue{false, true, ResidualMode::kAfterActivation, Activation::Of(ActivationKind::kSilu)};
  AddTensorCoreDtypes(out, p);
  // 7x7 s2 stem-like gather with C = 8 (padded RGB).
  p = Conv(1, 8, 15, 14, 16, 7, 7, 2, 3);
  p.epilogue = Epilogue{true, false, ResidualMode::kNone, Activation::Relu()};
  AddTensorCoreDtypes(out, p);
  // Deep reductions with few output tiles, where the split-K candidates run (every split factor needs 2 k-steps
  // per split: R*S*C = 1152 is 36 FP16 / 72 FP32 steps): 3x3, 20 output pixels, K = 72 (ragged last channel tile of
  // 64 and an odd number of 16-byte vectors), residual after a ReLU6.
  p = Conv(1, 128, 4, 5, 72, 3, 3, 1, 1);
  p.epilogue = Epilogue{true, true, ResidualMode::kAfterActivation, Activation::Relu6()};
  AddTensorCoreDtypes(out, p);
  // 1x1 with a 1040-long reduction and K = 42 (not a multiple of the 8-element output vector: element stores), two
  // images so the split blocks cover several GEMM rows.
  p = Conv(2, 1040, 3, 3, 42, 1, 1, 1, 0);
  p.epilogue = Epilogue{true, false, ResidualMode::kBeforeActivation, Activation::Relu()};
  AddTensorCoreDtypes(out, p);
  // Depthwise 3x3 s2 and a grouped conv, so the direct kernels run on this list too.
  p = Conv(1, 24, 9, 9, 24, 3, 3, 2, 1);
  p.groups = 24;
  p.dtype = DataType::kFloat16;
  p.epilogue = Epilogue{true, false, ResidualMode::kNone, Activation::Relu6()};
  out.push_back(p);
  p = Conv(1, 8, 6, 6, 12, 3, 3, 1, 1);
  p.groups = 4;
  p.layout = Layout::kNCHW;
  out.push_back(p);
  return out;
}

std::vector<GemmProblem> CudaGemmExtraProblems() {
  std::vector<GemmProblem> out;
  for (DataType dtype : {DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32}) {
    GemmProblem p;  // 2 tiles of 128 rows (ragged), 2 of 64 columns (ragged), k = 40 (1.25 slices of 32)
    p.m = 130, p.n = 72, p.k = 40, p.dtype = dtype, p.allow_tf32 = dtype == DataType::kFloat32;
    p.epilogue = Epilogue{true, true, ResidualMode::kBeforeActivation, Activation::Relu()};
    out.push_back(p);
  }
  for (DataType dtype : {DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32}) {
    GemmProblem p;  // an FC layer at a small batch: one row tile, 2 column tiles, k = 1024 (every split factor)
    p.m = 3, p.n = 70, p.k = 1024, p.dtype = dtype, p.allow_tf32 = dtype == DataType::kFloat32;
    p.epilogue = Epilogue{true, false, ResidualMode::kNone, Activation::Identity()};
    out.push_back(p);
  }
  GemmProblem odd;  // only the SIMT GEMM takes it
  odd.m = 5, odd.n = 7, odd.k = 19, odd.dtype = DataType::kFloat32;
  odd.epilogue = Epilogue{true, false, ResidualMode::kNone, Activation::Of(ActivationKind::kTanh)};
  out.push_back(odd);
  return out;
}

std::vector<Conv2dProblem> HopperConvExtraProblems() {
  std::vector<Conv2dProblem> out;
  // 3x3 stride 2, asymmetric padding (top 0, bottom 1, left 1, right 0): M = 2 * 9 * 9 = 162 (one full and one
  // partial 128-row tile), C = 96 (1.5 FP16 channel blocks, 3 FP32), K = 80 (a 16-wide tail past 64).
  Conv2dProblem p = Conv(2, 96, 18, 17, 80, 3, 3, 2, 0);
  p.pad_bottom = 1, p.pad_left = 1;
  p.epilogue = Epilogue{true, false, ResidualMode::kNone, Activation::Relu()};
  AddTensorCoreDtypes(out, p);
  // 3x3 dilation 2, padding 2: M = 11 * 11 = 121 (under one 128-row tile, two 64-row tiles), C = 72, K = 136 (a
  // tail past 128), residual before the ReLU.
  p = Conv(1, 72, 11, 11, 136, 3, 3, 1, 2);
  p.dilation_h = p.dilation_w = 2;
  p.epilogue = Epilogue{true, true, ResidualMode::kBeforeActivation, Activation::Relu()};
  AddTensorCoreDtypes(out, p);
  // 3x3 stride 2 and dilation 2 with asymmetric padding (top 2, bottom 1, left 1, right 2): M = 2 * 6 * 6 = 72,
  // C = 40 (under one channel block), K = 24.
  p = Conv(2, 40, 13, 12, 24, 3, 3, 2, 0);
  p.pad_top = 2, p.pad_bottom = 1, p.pad_left = 1, p.pad_right = 2;
  p.dilation_h = p.dilation_w = 2;
  p.epilogue = Epilogue{false, false, ResidualMode::kNone, Activation::Of(ActivationKind::kSilu)};
  AddTensorCoreDtypes(out, p);
  // 1x1 (the tiled path): M = 13 * 11 = 143, C = 200 (3.125 FP16 channel blocks), K = 66.
  p = Conv(1, 200, 13, 11, 66, 1, 1, 1, 0);
  p.epilogue = Epilogue{true, true, ResidualMode::kAfterActivation, Activation::Relu6()};
  AddTensorCoreDtypes(out, p);
  return out;
}

std::vector<GemmProblem> HopperGemmExtraProblems() {
  std::vector<GemmProblem> out;
  for (DataType dtype : {DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32}) {
    GemmProblem p;  // m = 200 (not a multiple of 64), n = 136 (tail past 128), k = 104 (1.6 FP16 row steps)
    p.m = 200, p.n = 136, p.k = 104, p.dtype = dtype, p.allow_tf32 = dtype == DataType::kFloat32;
    p.epilogue = Epilogue{true, false, ResidualMode::kNone, Activation::Relu()};
    out.push_back(p);
  }
  return out;
}

std::vector<Conv2dProblem> CudaConvTestProblems() {
  std::vector<Conv2dProblem> out = Conv2dProblems();
  for (const Conv2dProblem& p : CudaConvExtraProblems()) out.push_back(p);
  return out;
}

std::vector<GemmProblem> CudaGemmTestProblems() {
  std::vector<GemmProblem> out = GemmProblems();
  for (const GemmProblem& p : CudaGemmExtraProblems()) out.push_back(p);
  return out;
}

std::vector<ResNetLayer> ResNet50ConvLayers(int batch, DataType dtype, Layout layout) {
  struct Layer {
    const char* name;
    int c, hw, k, rs, stride, pad;
  };
  // (input channels, input size, output channels, filter, stride, padding) of each distinct layer.
  const Layer layers[] = {
      {"conv1_7x7s2", 8, 224, 64, 7, 2, 3},  // the 3 RGB channels padded to 8 (16-byte vectors)
      {"res2_1x1_64", 64, 56, 64, 1, 1, 0},      {"res2_3x3_64", 64, 56, 64, 3, 1, 1},
      {"res2_1x1_256", 64, 56, 256, 1, 1, 0},    {"res2_1x1_reduce", 256, 56, 64, 1, 1, 0},
      {"res3_1x1_128", 256, 56, 128, 1, 1, 0},   {"res3_3x3s2_128", 128, 56, 128, 3, 2, 1},
      {"res3_3x3_128", 128, 28, 128, 3, 1, 1},   {"res3_1x1_512", 128, 28, 512, 1, 1, 0},
      {"res3_ds_1x1s2", 256, 56, 512, 1, 2, 0},  {"res4_1x1_256", 512, 28, 256, 1, 1, 0},
      {"res4_3x3s2_256", 256, 28, 256, 3, 2, 1}, {"res4_3x3_256", 256, 14, 256, 3, 1, 1},
      {"res4_1x1_1024", 256, 14, 1024, 1, 1, 0}, {"res4_ds_1x1s2", 512, 28, 1024, 1, 2, 0},
      {"res5_1x1_512", 1024, 14, 512, 1, 1, 0},  {"res5_3x3s2_512", 512, 14, 512, 3, 2, 1},
      {"res5_3x3_512", 512, 7, 512, 3, 1, 1},    {"res5_1x1_2048", 512, 7, 2048, 1, 1, 0},
  };
  std::vector<ResNetLayer> out;
  for (const Layer& l : layers) {
    Conv2dProblem p = Conv(batch, l.c, l.hw, l.hw, l.k, l.rs, l.rs, l.stride, l.pad);
    p.dtype = dtype;
    p.layout = layout;
    p.allow_tf32 = dtype == DataType::kFloat32;
    p.epilogue = Epilogue{true, false, ResidualMode::kNone, Activation::Relu()};
    out.push_back({absl::StrCat(l.name, "_b", batch), p});
  }
  return out;
}

namespace {

// One distinct conv layer of a model: input channels, output channels, filter, stride, groups (1, or depthwise).
struct LayerShape {
  std::string name;
  int c, k, rs, stride;
  bool depthwise;
  Epilogue epilogue;
};

Epilogue BiasAct(Activation a) { return Epilogue{true, false, ResidualMode::kNone, a}; }
// ResNet's bottleneck expansion: the shortcut added before the ReLU (scale: BN kept unfolded).
Epilogue ResNetExpansion() { return Epilogue{true, true, ResidualMode::kBeforeActivation, Activation::Relu()}; }
// MobileNet/EfficientNet's linear bottleneck: no activation, the shortcut added after it.
Epilogue LinearResidual() { return Epilogue{true, false, ResidualMode::kAfterActivation, Activation::Identity()}; }
Epilogue Linear() { return Epilogue{true, false, ResidualMode::kNone, Activation::Identity()}; }

std::vector<LayerShape> ResNet50Shapes() {
  const Epilogue relu = BiasAct(Activation::Relu());
  return {
      {"conv1_7x7s2", 8, 64, 7, 2, false, relu},  // RGB padded to 8 channels, as the planner pads it
      {"res2_1x1_64", 64, 64, 1, 1, false, relu},        {"res2_3x3_64", 64, 64, 3, 1, false, relu},
      {"res2_1x1_256", 64, 256, 1, 1, false, ResNetExpansion()}, {"res2_1x1_reduce", 256, 64, 1, 1, false, relu},
      {"res3_1x1_128", 256, 128, 1, 1, false, relu},     {"res3_3x3s2_128", 128, 128, 3, 2, false, relu},
      {"res3_3x3_128", 128, 128, 3, 1, false, relu},     {"res3_1x1_512", 128, 512, 1, 1, false, ResNetExpansion()},
      {"res3_ds_1x1s2", 256, 512, 1, 2, false, Linear()}, {"res4_1x1_256", 512, 256, 1, 1, false, relu},
      {"res4_3x3s2_256", 256, 256, 3, 2, false, relu},   {"res4_3x3_256", 256, 256, 3, 1, false, relu},
      {"res4_1x1_1024", 256, 1024, 1, 1, false, ResNetExpansion()},
      {"res4_ds_1x1s2", 512, 1024, 1, 2, false, Linear()}, {"res5_1x1_512", 1024, 512, 1, 1, false, relu},
      {"res5_3x3s2_512", 512, 512, 3, 2, false, relu},   {"res5_3x3_512", 512, 512, 3, 1, false, relu},
      {"res5_1x1_2048", 512, 2048, 1, 1, false, ResNetExpansion()},
      {"res5_ds_1x1s2", 1024, 2048, 1, 2, false, Linear()},
  };
}

// Inverted-residual blocks: the first block of a stage (expand, depthwise with the stage's stride, project) and, when
// the stage repeats, the repeated block (project with the residual).
void AddInvertedResidual(std::vector<LayerShape>& out, const char* stage, int cin, int t, int cout, int kernel,
                         int stride, bool repeats, Activation act) {
  for (int block = 0; block < (repeats ? 2 : 1); ++block) {
    const int in = block == 0 ? cin : cout, hidden = in * t;
    const bool rep = block == 1;
    auto name = [&](const char* what) { return absl::StrCat(stage, "_", what, rep ? "_rep" : ""); };
    if (t != 1) out.push_back({name("expand"), in, hidden, 1, 1, false, BiasAct(act)});
    out.push_back({name("dw"), hidden, hidden, kernel, rep ? 1 : stride, true, BiasAct(act)});
    out.push_back({name("project"), hidden, cout, 1, 1, false, rep ? LinearResidual() : Linear()});
  }
}

std::vector<LayerShape> MobileNetV2Shapes() {
  const Activation relu6 = Activation::Relu6();
  std::vector<LayerShape> out = {{"stem_3x3s2", 8, 32, 3, 2, false, BiasAct(relu6)}};
  AddInvertedResidual(out, "b1", 32, 1, 16, 3, 1, false, relu6);
  AddInvertedResidual(out, "b2", 16, 6, 24, 3, 2, true, relu6);
  AddInvertedResidual(out, "b3", 24, 6, 32, 3, 2, true, relu6);
  AddInvertedResidual(out, "b4", 32, 6, 64, 3, 2, true, relu6);
  AddInvertedResidual(out, "b5", 64, 6, 96, 3, 1, true, relu6);
  AddInvertedResidual(out, "b6", 96, 6, 160, 3, 2, true, relu6);
  AddInvertedResidual(out, "b7", 160, 6, 320, 3, 1, false, relu6);
  out.push_back({"head_1x1", 320, 1280, 1, 1, false, BiasAct(relu6)});
  return out;
}

// EfficientNet-Lite0 (EfficientNet-B0's stages without squeeze-excite, ReLU6).
std::vector<LayerShape> EfficientNetLite0Shapes() {
  const Activation relu6 = Activation::Relu6();
  std::vector<LayerShape> out = {{"stem_3x3s2", 8, 32, 3, 2, false, BiasAct(relu6)}};
  AddInvertedResidual(out, "b1", 32, 1, 16, 3, 1, false, relu6);
  AddInvertedResidual(out, "b2", 16, 6, 24, 3, 2, true, relu6);
  AddInvertedResidual(out, "b3", 24, 6, 40, 5, 2, true, relu6);
  AddInvertedResidual(out, "b4", 40, 6, 80, 3, 2, true, relu6);
  AddInvertedResidual(out, "b5", 80, 6, 112, 5, 1, true, relu6);
  AddInvertedResidual(out, "b6", 112, 6, 192, 5, 2, true, relu6);
  AddInvertedResidual(out, "b7", 192, 6, 320, 3, 1, false, relu6);
  out.push_back({"head_1x1", 320, 1280, 1, 1, false, BiasAct(relu6)});
  return out;
}

std::vector<LayerShape> ShapesOf(const std::string& model) {
  if (model == "resnet50") return ResNet50Shapes();
  if (model == "mobilenetv2") return MobileNetV2Shapes();
  if (model == "efficientnet_lite0") return EfficientNetLite0Shapes();
  return {};
}

}  // namespace

std::vector<std::string> TestModels() { return {"resnet50", "mobilenetv2", "efficientnet_lite0"}; }

std::vector<ResNetLayer> ModelConvLayerProblems(const std::string& model, int batch, int output_hw, DataType dtype) {
  std::vector<ResNetLayer> out;
  for (const LayerShape& l : ShapesOf(model)) {
    const int pad = l.rs / 2;
    // The smallest input with an output_hw x output_hw output at this filter, stride and padding.
    const int hw = std::max(1, (output_hw - 1) * l.stride + l.rs - 2 * pad);
    Conv2dProblem p = Conv(batch, l.c, hw, hw, l.k, l.rs, l.rs, l.stride, pad);
    if (l.depthwise) p.groups = l.c;
    p.dtype = dtype;
    p.allow_tf32 = dtype == DataType::kFloat32;
    p.epilogue = l.epilogue;
    out.push_back({absl::StrCat(model, "/", l.name, "_b", batch), p});
  }
  return out;
}

std::vector<ResNetLayer> NetworkConvLayerShapes(int spatial, int batch, DataType dtype) {
  std::vector<ResNetLayer> out;
  for (ResNetLayer& layer : ResNet50ConvLayers(batch, dtype, Layout::kNHWC)) {
    layer.problem.h = layer.problem.w = spatial * layer.problem.stride_h;  // strided layers halve it
    layer.name = absl::StrCat("resnet50_", layer.name);
    out.push_back(layer);
  }
  struct Pointwise {
    const char* net;
    int c, k;
    bool residual;
  };
  const Pointwise pointwise[] = {
      // MobileNetV2 (expand 6x, project, residual where the block keeps its width), head 320 -> 1280.
      {"mobilenetv2", 32, 16, false},  {"mobilenetv2", 16, 96, false},   {"mobilenetv2", 96, 24, false},
      {"mobilenetv2", 24, 144, false}, {"mobilenetv2", 144, 24, true},   {"mobilenetv2", 144, 32, false},
      {"mobilenetv2", 32, 192, false}, {"mobilenetv2", 192, 32, true},   {"mobilenetv2", 192, 64, false},
      {"mobilenetv2", 64, 384, false}, {"mobilenetv2", 384, 64, true},   {"mobilenetv2", 384, 96, false},
      {"mobilenetv2", 96, 576, false}, {"mobilenetv2", 576, 96, true},   {"mobilenetv2", 576, 160, false},
      {"mobilenetv2", 160, 960, false}, {"mobilenetv2", 960, 160, true}, {"mobilenetv2", 960, 320, false},
      {"mobilenetv2", 320, 1280, false},
      // EfficientNet-Lite0 (MBConv expand 6x / project), head 320 -> 1280.
      {"efficientnet_lite0", 32, 16, false},   {"efficientnet_lite0", 24, 144, false},
      {"efficientnet_lite0", 144, 40, false},  {"efficientnet_lite0", 40, 240, false},
      {"efficientnet_lite0", 240, 40, true},   {"efficientnet_lite0", 240, 80, false},
      {"efficientnet_lite0", 80, 480, false},  {"efficientnet_lite0", 480, 80, true},
      {"efficientnet_lite0", 480, 112, false}, {"efficientnet_lite0", 112, 672, false},
      {"efficientnet_lite0", 672, 112, true},  {"efficientnet_lite0", 672, 192, false},
      {"efficientnet_lite0", 192, 1152, false}, {"efficientnet_lite0", 1152, 192, true},
      {"efficientnet_lite0", 1152, 320, false}, {"efficientnet_lite0", 320, 1280, false},
  };
  for (const Pointwise& l : pointwise) {
    Conv2dProblem p = Conv(batch, l.c, spatial, spatial, l.k, 1, 1, 1, 0);
    p.dtype = dtype;
    p.layout = Layout::kNHWC;
    p.allow_tf32 = dtype == DataType::kFloat32;
    p.epilogue = Epilogue{true, false, l.residual ? ResidualMode::kAfterActivation : ResidualMode::kNone,
                          l.residual ? Activation::Identity() : Activation::Relu()};
    out.push_back({absl::StrCat(l.net, "_1x1_", l.c, "_", l.k), p});
  }
  return out;
}

std::vector<GemmProblem> ModelFcProblems(const std::string& model, int batch, DataType dtype) {
  GemmProblem p;  // the classifier: [batch, features] x [1000, features]^T + bias
  p.m = batch, p.n = 1000, p.k = model == "resnet50" ? 2048 : 1280;
  p.dtype = dtype;
  p.allow_tf32 = dtype == DataType::kFloat32;
  p.epilogue = Linear();
  return {p};
}

}  // namespace convoy::testing
