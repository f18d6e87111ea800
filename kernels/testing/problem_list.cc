#include "kernels/testing/problem_list.h"

#include <iterator>
#include <utility>

namespace convoy::testing {
namespace {

constexpr Layout kLayouts[] = {Layout::kNCHW, Layout::kNHWC};
constexpr DataType kDtypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16};

// Appends `problem` once per layout, in FP32, and (if `all_dtypes`) in FP16 and BF16 too.
template <typename Problem>
void AddEveryLayout(std::vector<Problem>& out, Problem problem, bool all_dtypes) {
  for (Layout layout : kLayouts) {
    for (DataType dtype : kDtypes) {
      if (!all_dtypes && dtype != DataType::kFloat32) continue;
      problem.layout = layout;
      problem.dtype = dtype;
      out.push_back(problem);
    }
  }
}

Conv2dProblem Conv(int n, int c, int h, int w, int k, int r, int s, int stride, int pad) {
  Conv2dProblem p;
  p.n = n, p.c = c, p.h = h, p.w = w, p.k = k, p.r = r, p.s = s, p.stride_h = p.stride_w = stride;
  p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = pad;
  return p;
}

Epilogue BiasAnd(Activation activation) { return Epilogue{true, false, ResidualMode::kNone, activation}; }

}  // namespace

std::vector<Activation> AllActivations() {
  return {Activation::Identity(),
          Activation::Relu(),
          Activation::Relu6(),
          Activation::LeakyRelu(0.1f),
          Activation::Of(ActivationKind::kSigmoid),
          Activation::Of(ActivationKind::kTanh),
          Activation::Of(ActivationKind::kSilu),
          Activation::Of(ActivationKind::kHardSigmoid, 0.2f, 0.5f),
          Activation::Of(ActivationKind::kHardSwish),
          Activation::Of(ActivationKind::kGelu)};
}

std::vector<Conv2dProblem> Conv2dProblems() {
  std::vector<Conv2dProblem> out;
  Conv2dProblem p = Conv(1, 3, 17, 16, 8, 7, 7, 2, 3);  // ResNet stem, C=3, odd input
  p.epilogue = Epilogue{true, true, ResidualMode::kNone, Activation::Relu()};
  AddEveryLayout(out, p, true);
  p = Conv(2, 8, 9, 9, 16, 3, 3, 1, 1);  // 3x3 s1, batch 2 (Winograd's shape)
  p.epilogue = BiasAnd(Activation::Relu());
  AddEveryLayout(out, p, true);
  p = Conv(1, 32, 9, 10, 16, 3, 3, 1, 1);  // 3x3 s1, channels in blocks of 16, odd rows (a Winograd tile's edge)
  p.epilogue = BiasAnd(Activation::Relu());
  AddEveryLayout(out, p, false);
  p = Conv(2, 16, 7, 6, 32, 3, 3, 1, 1);  // the same with the ResNet residual (before the activation)
  p.epilogue = Epilogue{true, false, ResidualMode::kBeforeActivation, Activation::Relu()};
  AddEveryLayout(out, p, false);
  p = Conv(1, 16, 8, 9, 16, 3, 3, 1, 0);  // 3x3 s1 without padding, identity epilogue
  p.epilogue = BiasAnd(Activation::Identity());
  AddEveryLayout(out, p, false);
  p = Conv(1, 5, 11, 10, 6, 3, 3, 2, 0);  // 3x3 s2, asymmetric padding (TF "SAME")
  p.pad_bottom = p.pad_right = 1;
  AddEveryLayout(out, p, false);
  p = Conv(2, 16, 7, 7, 8, 1, 1, 1, 0);  // 1x1 with folded BN and the ResNet residual
  p.epilogue = Epilogue{true, true, ResidualMode::kBeforeActivation, Activation::Relu()};
  AddEveryLayout(out, p, true);
  p = Conv(1, 8, 8, 9, 12, 1, 1, 2, 0);  // 1x1 s2 downsample
  AddEveryLayout(out, p, false);
  p = Conv(1, 4, 8, 8, 4, 5, 5, 1, 2);  // 5x5
  p.epilogue = BiasAnd(Activation::Identity());
  AddEveryLayout(out, p, false);
  p = Conv(1, 4, 10, 9, 6, 3, 3, 1, 2);  // dilation 2
  p.dilation_h = p.dilation_w = 2;
  AddEveryLayout(out, p, false);
  p = Conv(2, 8, 6, 7, 8, 3, 3, 1, 1);  // grouped (ResNeXt)
  p.groups = 2;
  AddEveryLayout(out, p, true);
  p = Conv(1, 16, 9, 9, 16, 3, 3, 1, 1);  // depthwise s1 with the MobileNetV2 linear-bottleneck residual
  p.groups = 16;
  p.epilogue = Epilogue{true, true, ResidualMode::kAfterActivation, Activation::Relu6()};
  AddEveryLayout(out, p, true);
  p = Conv(2, 8, 10, 11, 8, 3, 3, 2, 1);  // depthwise s2
  p.groups = 8;
  AddEveryLayout(out, p, false);
  p = Conv(1, 13, 11, 19, 13, 3, 3, 2, 0);  // depthwise s2, odd sizes, asymmetric padding, C and W not multiples of 4
  p.groups = 13;
  p.pad_left = p.pad_bottom = 1;
  p.epilogue = Epilogue{true, false, ResidualMode::kNone, Activation::Relu6()};
  AddEveryLayout(out, p, false);
  p = Conv(1, 10, 7, 22, 10, 3, 3, 1, 1);  // depthwise s1, rows of several vectors plus a remainder, residual + relu6
  p.groups = 10;
  p.epilogue = Epilogue{true, false, ResidualMode::kAfterActivation, Activation::Relu6()};
  AddEveryLayout(out, p, false);
  p = Conv(1, 6, 9, 8, 6, 5, 5, 1, 2);  // depthwise 5x5
  p.groups = 6;
  p.epilogue = BiasAnd(Activation::Of(ActivationKind::kHardSwish));
  AddEveryLayout(out, p, false);
  p = Conv(1, 3, 5, 6, 4, 1, 7, 1, 0);  // 1x7 with horizontal padding only
  p.pad_left = p.pad_right = 3;
  AddEveryLayout(out, p, false);
  for (const Activation& a : AllActivations()) {  // every activation on a small 3x3
    p = Conv(1, 4, 5, 5, 4, 3, 3, 1, 1);
    p.epilogue = BiasAnd(a);
    out.push_back(p);
  }
  p = Conv(1, 8, 6, 6, 8, 3, 3, 1, 1);  // TF32 allowed: may compute products in TF32 on tensor cores
  p.allow_tf32 = true;
  out.push_back(p);
  return out;
}

std::vector<GemmProblem> GemmProblems() {
  std::vector<GemmProblem> out;
  struct Shape {
    int m, n, k;
  };
  const Shape shapes[] = {{1, 10, 64}, {4, 17, 33}, {7, 5, 1}, {32, 32, 32}, {3, 1, 9}};
  const Epilogue epilogues[] = {
      Epilogue{},
      BiasAnd(Activation::Identity()),
      Epilogue{true, true, ResidualMode::kBeforeActivation, Activation::Relu()},
      Epilogue{false, false, ResidualMode::kAfterActivation, Activation::Of(ActivationKind::kGelu)},
  };
  for (size_t i = 0; i < std::size(shapes); ++i) {
    for (DataType dtype : kDtypes) {
      GemmProblem p;
      p.m = shapes[i].m, p.n = shapes[i].n, p.k = shapes[i].k, p.dtype = dtype;
      p.epilogue = epilogues[i % std::size(epilogues)];
      out.push_back(p);
    }
  }
  GemmProblem tf32;
  tf32.m = 8, tf32.n = 16, tf32.k = 24, tf32.allow_tf32 = true;
  out.push_back(tf32);
  for (DataType dtype : kDtypes) {
    // ConvNeXt's first Linear layer on [N,H,W,C] (every row of the 4-D tensor): bias and the exact GELU fused.
    GemmProblem linear;
    linear.m = 2 * 7 * 7, linear.n = 64, linear.k = 16, linear.dtype = dtype;
    linear.epilogue = BiasAnd(Activation::Of(ActivationKind::kGelu));
    out.push_back(linear);
  }
  return out;
}

std::vector<Pool2dProblem> Pool2dProblems() {
  std::vector<Pool2dProblem> out;
  auto pool = [](PoolMode mode, int n, int c, int h, int w, int window, int stride, int pad) {
    Pool2dProblem p;
    p.mode = mode, p.n = n, p.c = c, p.h = h, p.w = w, p.r = p.s = window, p.stride_h = p.stride_w = stride;
    p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = pad;
    return p;
  };
  AddEveryLayout(out, pool(PoolMode::kMax, 2, 4, 9, 9, 3, 2, 1), true);  // ResNet max pool
  // Wide enough for whole vectors of 4, 8 and 16 channels and a tail (the NHWC row kernels).
  AddEveryLayout(out, pool(PoolMode::kMax, 2, 37, 7, 8, 3, 2, 1), true);
  Pool2dProblem p = pool(PoolMode::kMax, 1, 3, 7, 7, 2, 2, 0);            // ceil mode, odd input
  p.ceil_mode = true;
  AddEveryLayout(out, p, false);
  p = pool(PoolMode::kAverage, 1, 5, 6, 7, 3, 1, 1);
  AddEveryLayout(out, p, true);
  p.count_include_pad = true;
  AddEveryLayout(out, p, false);
  p = pool(PoolMode::kAverage, 2, 3, 8, 8, 3, 2, 1);  // ceil mode: the last window is clipped by the padded edge
  p.ceil_mode = true, p.count_include_pad = true;
  AddEveryLayout(out, p, false);
  p = pool(PoolMode::kAverage, 1, 4, 8, 6, 2, 2, 0);
  p.pad_bottom = 1;  // asymmetric
  AddEveryLayout(out, p, false);
  // Dilated windows (ONNX's dilations): taps 2 apart with a stride, asymmetric dilation with padding and ceil mode
  // (windows whose taps fall partly in the padding), and an average counting the padded taps.
  p = pool(PoolMode::kMax, 2, 3, 9, 8, 3, 2, 1);
  p.dilation_h = p.dilation_w = 2;
  AddEveryLayout(out, p, true);
  p = pool(PoolMode::kAverage, 1, 4, 10, 9, 3, 3, 2);
  p.dilation_h = 3, p.dilation_w = 2, p.pad_bottom = 1, p.ceil_mode = true;
  AddEveryLayout(out, p, false);
  p.count_include_pad = true;
  AddEveryLayout(out, p, false);
  p = pool(PoolMode::kMax, 1, 2, 7, 11, 2, 1, 0);
  p.s = 3, p.dilation_w = 4, p.ceil_mode = true;
  AddEveryLayout(out, p, false);
  AddEveryLayout(out, pool(PoolMode::kGlobalAverage, 2, 6, 7, 5, 1, 1, 0), true);
  AddEveryLayout(out, pool(PoolMode::kGlobalMax, 1, 5, 4, 9, 1, 1, 0), true);
  AddEveryLayout(out, pool(PoolMode::kGlobalAverage, 3, 17, 1, 1, 1, 1, 0), false);  // 1x1 planes
  return out;
}

std::vector<BatchNormProblem> BatchNormProblems() {
  std::vector<BatchNormProblem> out;
  BatchNormProblem p;
  p.n = 2, p.c = 5, p.h = 3, p.w = 7;
  AddEveryLayout(out, p, true);
  p.n = 1, p.c = 16, p.h = 4, p.w = 4, p.activation = Activation::Relu(), p.epsilon = 1e-3f;
  AddEveryLayout(out, p, true);
  p.n = 3, p.c = 1, p.h = 1, p.w = 9, p.activation = Activation::Of(ActivationKind::kSilu);
  AddEveryLayout(out, p, false);
  return out;
}

std::vector<ActivationProblem> ActivationProblems() {
  std::vector<ActivationProblem> out;
  const int64_t counts[] = {1, 37, 1031};
  std::vector<Activation> activations = AllActivations();
  // QDQ models' quantize-dequantize (standalone only: never fused into a conv): a fine step (many levels, both ends
  // saturating on inputs of magnitude 1) and a coarse one with an off-center zero point.
  activations.push_back(Activation::QuantizeDequantizeU8(1.0f / 200, 57));
  activations.push_back(Activation::QuantizeDequantizeS8(0.0625f, -5));
  for (const Activation& a : activations) {
    for (DataType dtype : kDtypes) {
      for (int64_t count : counts) {
        ActivationProblem p;
        p.count = count, p.dtype = dtype, p.activation = a;
        out.push_back(p);
      }
    }
  }
  return out;
}

std::vector<BinaryProblem> BinaryProblems() {
  std::vector<BinaryProblem> out;
  const BinaryOp ops[] = {BinaryOp::kAdd, BinaryOp::kSub, BinaryOp::kMul, BinaryOp::kDiv};
  const BinaryBroadcast broadcasts[] = {BinaryBroadcast::kNone, BinaryBroadcast::kPerImageChannel,
                                        BinaryBroadcast::kPerChannel, BinaryBroadcast::kScalar};
  for (BinaryOp op : ops) {
    for (BinaryBroadcast broadcast : broadcasts) {
      BinaryProblem p;
      p.op = op, p.broadcast = broadcast, p.n = 2, p.c = 5, p.h = 3, p.w = 7;
      AddEveryLayout(out, p, op == BinaryOp::kAdd || op == BinaryOp::kMul);
    }
  }
  BinaryProblem se;  // squeeze-excitation scale, then an activation
  se.op = BinaryOp::kMul, se.broadcast = BinaryBroadcast::kPerImageChannel, se.n = 1, se.c = 16, se.h = se.w = 5;
  se.activation = Activation::Of(ActivationKind::kHardSwish);
  AddEveryLayout(out, se, true);
  BinaryProblem residual;  // the standalone residual add + relu
  residual.n = 1, residual.c = 8, residual.h = 6, residual.w = 6, residual.activation = Activation::Relu();
  AddEveryLayout(out, residual, false);
  // The planner's row views of N-D tensors (row-major, so NCHW): a vector along the last axis of [2,3,4,5] as
  // [24,5,1,1] per channel, and one value per row of [2,3,7] ([2,3,1] onto it) as [6,1,1,7] per image channel.
  BinaryProblem last_axis;
  last_axis.op = BinaryOp::kAdd, last_axis.broadcast = BinaryBroadcast::kPerChannel;
  last_axis.n = 24, last_axis.c = 5, last_axis.h = 1, last_axis.w = 1;
  out.push_back(last_axis);
  BinaryProblem per_row;
  per_row.op = BinaryOp::kSub, per_row.broadcast = BinaryBroadcast::kPerImageChannel;
  per_row.n = 6, per_row.c = 1, per_row.h = 1, per_row.w = 7;
  out.push_back(per_row);
  // Vector bodies and their tails at every width (4, 8, 16 floats): 40 channels per NHWC pixel, 25-pixel planes.
  for (BinaryOp op : ops) {
    BinaryProblem wide;
    wide.op = op, wide.broadcast = BinaryBroadcast::kPerImageChannel, wide.n = 2, wide.c = 40, wide.h = wide.w = 5;
    AddEveryLayout(out, wide, false);
  }
  // EfficientNet's squeeze-excitation multiply, large enough for several thread-pool tasks and activation pieces
  // (tasks of 8192 outputs: NHWC tasks cross the image boundary), then a ReLU.
  BinaryProblem se_large;
  se_large.op = BinaryOp::kMul, se_large.broadcast = BinaryBroadcast::kPerImageChannel;
  se_large.n = 2, se_large.c = 24, se_large.h = se_large.w = 20, se_large.activation = Activation::Relu();
  AddEveryLayout(out, se_large, false);
  BinaryProblem flat_large = se_large;  // same-shape b over a flat buffer of several tasks
  flat_large.op = BinaryOp::kAdd, flat_large.broadcast = BinaryBroadcast::kNone;
  AddEveryLayout(out, flat_large, false);
  return out;
}

std::vector<ConcatProblem> ConcatProblems() {
  std::vector<ConcatProblem> out;
  const std::vector<int> channel_lists[] = {{3, 1, 6}, {8, 8}, {5}, {1, 2, 3, 4}};
  for (const std::vector<int>& channels : channel_lists) {
    ConcatProblem p;
    p.n = 2, p.h = 3, p.w = 5, p.channels = channels;
    AddEveryLayout(out, p, channels.size() == 3);
  }
  return out;
}

std::vector<SplitProblem> SplitProblems() {
  std::vector<SplitProblem> out;
  const std::vector<int> channel_lists[] = {{3, 1, 6}, {8, 8}, {5}, {4, 3, 2, 1}};
  for (const std::vector<int>& channels : channel_lists) {
    SplitProblem p;
    p.n = 2, p.h = 5, p.w = 3, p.channels = channels;
    AddEveryLayout(out, p, channels.size() == 3);
  }
  return out;
}

std::vector<ChannelShuffleProblem> ChannelShuffleProblems() {
  std::vector<ChannelShuffleProblem> out;
  struct Shape {
    int c, groups;
  };
  for (Shape shape : {Shape{12, 3}, Shape{8, 2}, Shape{6, 1}, Shape{5, 5}}) {
    ChannelShuffleProblem p;
    p.n = 2, p.c = shape.c, p.groups = shape.groups, p.h = 3, p.w = 4;
    AddEveryLayout(out, p, shape.groups == 2);
  }
  return out;
}

std::vector<SoftmaxProblem> SoftmaxProblems() {
  std::vector<SoftmaxProblem> out;
  struct Shape {
    int64_t outer, axis, inner;
  };
  // [N, C] classifier heads, a single row, and NCHW along C (inner = H * W).
  for (Shape shape : {Shape{2, 10, 1}, Shape{1, 1000, 1}, Shape{3, 1, 1}, Shape{2, 5, 12}, Shape{1, 21, 7}}) {
    for (DataType dtype : kDtypes) {
      SoftmaxProblem p;
      p.outer = shape.outer, p.axis = shape.axis, p.inner = shape.inner, p.dtype = dtype;
      out.push_back(p);
    }
  }
  return out;
}

std::vector<PadProblem> PadProblems() {
  std::vector<PadProblem> out;
  for (PadMode mode : {PadMode::kConstant, PadMode::kReflect, PadMode::kEdge}) {
    PadProblem p;
    p.mode = mode, p.n = 2, p.c = 3, p.h = 5, p.w = 6, p.value = -1.25f;
    p.pad_top = 2, p.pad_bottom = 1, p.pad_left = 0, p.pad_right = 3;
    AddEveryLayout(out, p, mode == PadMode::kConstant);
    p.n = 1, p.c = 4, p.h = 4, p.w = 4, p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = 1;
    AddEveryLayout(out, p, mode == PadMode::kReflect);
    // Negative pads crop: top and right cropped, bottom and left padded (ONNX Pad with negative pads, Slice of H/W).
    p.n = 2, p.c = 3, p.h = 7, p.w = 6, p.pad_top = -2, p.pad_bottom = 1, p.pad_left = 2, p.pad_right = -3;
    AddEveryLayout(out, p, mode == PadMode::kEdge);
  }
  PadProblem crop;  // a pure crop, as the importer maps a spatial Slice
  crop.n = 1, crop.c = 5, crop.h = 9, crop.w = 8, crop.pad_top = -1, crop.pad_bottom = -3, crop.pad_left = -2,
  crop.pad_right = 0;
  AddEveryLayout(out, crop, true);
  return out;
}

std::vector<ConvertProblem> ConvertProblems() {
  std::vector<ConvertProblem> out;
  for (DataType src : kDtypes) {
    for (DataType dst : kDtypes) {
      for (Layout src_layout : kLayouts) {
        for (Layout dst_layout : kLayouts) {
          ConvertProblem p;
          p.n = 2, p.c = 5, p.h = 3, p.w = 7;
          p.src_dtype = src, p.dst_dtype = dst, p.src_layout = src_layout, p.dst_layout = dst_layout;
          out.push_back(p);
        }
      }
      ConvertProblem flat;  // a flat array: n = count
      flat.n = 101, flat.src_dtype = src, flat.dst_dtype = dst;
      out.push_back(flat);
      ConvertProblem rgb;  // an RGB image into NHWC padded to 8 channels (the planner's tensor-core stem input)
      rgb.n = 2, rgb.c = 3, rgb.h = 5, rgb.w = 9, rgb.dst_c = 8;
      rgb.src_dtype = src, rgb.dst_dtype = dst, rgb.src_layout = Layout::kNCHW, rgb.dst_layout = Layout::kNHWC;
      out.push_back(rgb);
      ConvertProblem pixels = rgb;  // the same image into plain NHWC (an FP32 NHWC plan's input), 4-pixel pieces + 3
      pixels.dst_c = 0, pixels.w = 11;
      out.push_back(pixels);
    }
  }
  return out;
}

std::vector<PreprocessProblem> PreprocessProblems() {
  std::vector<PreprocessProblem> out;
  PreprocessProblem imagenet;
  imagenet.n = 2, imagenet.h = 5, imagenet.w = 7, imagenet.c = 3;
  imagenet.mean = {0.485f, 0.456f, 0.406f, 0}, imagenet.stddev = {0.229f, 0.224f, 0.225f, 1};
  PreprocessProblem gray;
  gray.n = 1, gray.h = 4, gray.w = 9, gray.c = 1, gray.mean = {127.5f, 0, 0, 0}, gray.stddev = {127.5f, 1, 1, 1};
  gray.scale_to_unit = false;
  PreprocessProblem rgba;
  rgba.n = 1, rgba.h = 3, rgba.w = 3, rgba.c = 4, rgba.mean = {0.5f, 0.5f, 0.5f, 0.5f};
  rgba.stddev = {0.5f, 0.25f, 2.0f, 1.0f};
  for (const PreprocessProblem& base : {imagenet, gray, rgba}) {
    for (Layout layout : kLayouts) {
      for (DataType dtype : kDtypes) {
        PreprocessProblem p = base;
        p.dst_layout = layout, p.dst_dtype = dtype;
        out.push_back(p);
      }
    }
  }
  for (DataType dtype : kDtypes) {  // UINT8 RGB into NHWC padded with zero channels (the tensor-core stem's input)
    PreprocessProblem p = imagenet;
    p.dst_layout = Layout::kNHWC, p.dst_dtype = dtype;
    p.dst_c = dtype == DataType::kFloat32 ? 4 : 8;
    out.push_back(p);
  }
  return out;
}

std::vector<TransposeProblem> TransposeProblems() {
  std::vector<TransposeProblem> out;
  auto add = [&out](std::vector<int64_t> dims, std::vector<int> perm, std::vector<DataType> dtypes) {
    for (DataType dtype : dtypes) {
      TransposeProblem p;
      p.dims = dims, p.perm = perm, p.dtype = dtype;
      out.push_back(p);
    }
  };
  const std::vector<DataType> every_float(std::begin(kDtypes), std::end(kDtypes));
  const std::vector<DataType> fp32 = {DataType::kFloat32};
  // Rank 4: NCHW -> NHWC, NHWC -> NCHW (TF-converted models), the H <-> W swap, the reverse, inner blocks moved.
  add({2, 3, 5, 7}, {0, 2, 3, 1}, every_float);
  add({2, 5, 7, 3}, {0, 3, 1, 2}, every_float);
  add({3, 8, 9, 5}, {0, 3, 1, 2}, fp32);  // batch 3, more channels than pixels per row
  add({2, 3, 5, 7}, {0, 1, 3, 2}, every_float);
  add({2, 3, 5, 7}, {3, 2, 1, 0}, fp32);
  add({2, 3, 5, 7}, {1, 0, 2, 3}, fp32);
  add({2, 3, 5, 7}, {0, 2, 1, 3}, fp32);
  add({1, 4, 6, 3}, {0, 3, 1, 2}, {DataType::kUInt8});
  // Rank 2 and 3: tiles with ragged edges, several tiles per matrix and several matrices, 3-cycles, unit dims.
  add({33, 40}, {1, 0}, {DataType::kFloat32, DataType::kFloat16});
  add({1, 17}, {1, 0}, fp32);  // coalesces to a copy
  add({3, 37, 65}, {0, 2, 1}, {DataType::kFloat32, DataType::kBFloat16});
  add({3, 37, 65}, {2, 0, 1}, fp32);
  add({4, 5, 6}, {1, 2, 0}, fp32);
  add({2, 3, 4}, {2, 1, 0}, {DataType::kInt64});
  // Rank 1, 5 and 6: the identity, ShuffleNet's [N, g, C/g, H, W] transpose, the reverse, a scattered permutation.
  add({9}, {0}, fp32);
  add({2, 3, 2, 4, 5}, {0, 2, 1, 3, 4}, fp32);
  add({2, 3, 2, 4, 5}, {4, 3, 2, 1, 0}, {DataType::kFloat16});
  add({2, 1, 3, 2, 3, 2}, {5, 0, 4, 1, 3, 2}, fp32);
  add({2, 3, 1, 2, 2, 3}, {0, 1, 2, 3, 5, 4}, fp32);
  return out;
}

namespace {

// Each NCHW problem of `shared` whose channel counts (`channels(p)`) are multiples of the block, as NCHW8c, at its
// own batch and at batch 3.
template <typename Problem, typename Channels>
std::vector<Problem> Blocked(const std::vector<Problem>& shared, Channels channels) {
  std::vector<Problem> out;
  for (Problem p : shared) {
    bool fits = p.layout == Layout::kNCHW;
    for (int c : channels(p)) fits = fits && c % kLayoutChannelBlock == 0;
    if (!fits) continue;
    p.layout = Layout::kNCHW8c;
    out.push_back(p);
    p.n = 3;
    out.push_back(p);
  }
  return out;
}

}  // namespace

std::vector<Conv2dProblem> Conv2dProblemsInBlockedLayout() {
  // The output channels decide: an input channel count the block does not divide (the 3-channel stems) lies NCHW.
  std::vector<Conv2dProblem> shared = Conv2dProblems();
  Conv2dProblem stem = Conv(1, 3, 15, 14, 16, 3, 3, 2, 1);  // MobileNetV2 / EfficientNet stem: 3x3 s2, NCHW in
  stem.epilogue = Epilogue{true, true, ResidualMode::kNone, Activation::Of(ActivationKind::kSilu)};
  shared.push_back(stem);
  return Blocked(shared, [](const Conv2dProblem& p) { return std::vector<int>{p.k}; });
}

std::vector<BinaryProblem> BinaryProblemsInBlockedLayout() {
  std::vector<BinaryProblem> shared;
  for (BinaryProblem p : BinaryProblems()) {  // every op and broadcast of the shared list with 16 channels
    if (p.layout != Layout::kNCHW) continue;
    p.c = 16;
    shared.push_back(p);
  }
  return Blocked(shared, [](const BinaryProblem& p) { return std::vector<int>{p.c}; });
}

std::vector<Pool2dProblem> Pool2dProblemsInBlockedLayout() {
  std::vector<Pool2dProblem> shared = Pool2dProblems();
  for (Pool2dProblem p : Pool2dProblems()) {  // the shared shapes again with 16 channels, so every mode is covered
    p.c = 16;
    shared.push_back(p);
  }
  return Blocked(shared, [](const Pool2dProblem& p) { return std::vector<int>{p.c}; });
}

std::vector<ConvertProblem> ConvertProblemsInBlockedLayout() {
  // Every pair of float types (FP16 at either end is cpu.convert.elementwise's, e.g. a blocked plan's FP16 output):
  // the reorders between each plain layout and NCHW8c, both ways, and the type-only conversions of a blocked tensor.
  constexpr DataType kTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16};
  std::vector<ConvertProblem> out;
  for (DataType src : kTypes) {
    for (DataType dst : kTypes) {
      ConvertProblem p;
      p.n = 2, p.c = 16, p.h = 3, p.w = 5, p.src_dtype = src, p.dst_dtype = dst;
      for (Layout plain : kLayouts) {
        p.src_layout = plain, p.dst_layout = Layout::kNCHW8c;
        out.push_back(p);
        std::swap(p.src_layout, p.dst_layout);
        out.push_back(p);
      }
      if (src != dst) {
        p.src_layout = p.dst_layout = Layout::kNCHW8c;
        out.push_back(p);
      }
    }
  }
  return out;
}

namespace {

// A resize of [n, c, h, w] by scales (ONNX's scales input: out = floor(in * scale), the resized length in * scale).
ResizeProblem ResizeByScales(int n, int c, int h, int w, float scale_h, float scale_w) {
  ResizeProblem p;
  p.n = n, p.c = c, p.h = h, p.w = w;
  p.scale_h = scale_h, p.scale_w = scale_w;
  p.length_h = h * scale_h, p.length_w = w * scale_w;
  p.out_h = static_cast<int>(p.length_h), p.out_w = static_cast<int>(p.length_w);
  return p;
}

// A resize of [n, c, h, w] to out_h x out_w (ONNX's sizes input: scale = out / in, the resized length out).
ResizeProblem ResizeToSizes(int n, int c, int h, int w, int out_h, int out_w) {
  ResizeProblem p;
  p.n = n, p.c = c, p.h = h, p.w = w, p.out_h = out_h, p.out_w = out_w;
  p.scale_h = static_cast<float>(out_h) / h, p.scale_w = static_cast<float>(out_w) / w;
  p.length_h = static_cast<float>(out_h), p.length_w = static_cast<float>(out_w);
  return p;
}

}  // namespace

std::vector<ResizeProblem> ResizeProblems() {
  std::vector<ResizeProblem> out;
  constexpr ResizeCoordinates kCoordinates[] = {
      ResizeCoordinates::kHalfPixel,     ResizeCoordinates::kHalfPixelSymmetric, ResizeCoordinates::kPytorchHalfPixel,
      ResizeCoordinates::kAlignCorners,  ResizeCoordinates::kAsymmetric,         ResizeCoordinates::kTfCropAndResize};
  // Every mode under every coordinate transformation: a non-integer upscale by scales, a downscale to sizes.
  for (ResizeMode mode : {ResizeMode::kNearest, ResizeMode::kLinear, ResizeMode::kCubic}) {
    for (ResizeCoordinates coordinates : kCoordinates) {
      for (ResizeProblem p : {ResizeByScales(2, 3, 5, 4, 1.7f, 2.5f), ResizeToSizes(1, 5, 9, 7, 4, 3)}) {
        p.mode = mode, p.coordinates = coordinates;
        if (coordinates == ResizeCoordinates::kTfCropAndResize) {
          p.roi_top = 0.2f, p.roi_left = -0.1f, p.roi_bottom = 0.9f, p.roi_right = 1.2f, p.extrapolation_value = 3.5f;
        }
        AddEveryLayout(out, p, mode == ResizeMode::kLinear && coordinates == ResizeCoordinates::kHalfPixel);
      }
    }
  }
  // Every nearest rounding, upscaling and downscaling (kSimple is floor up, ceil down).
  for (ResizeNearest nearest : {ResizeNearest::kRoundPreferFloor, ResizeNearest::kRoundPreferCeil,
                                ResizeNearest::kFloor, ResizeNearest::kCeil, ResizeNearest::kSimple}) {
    for (ResizeProblem p : {ResizeByScales(1, 3, 4, 6, 2.0f, 1.5f), ResizeToSizes(2, 2, 8, 9, 3, 5)}) {
      p.mode = ResizeMode::kNearest, p.coordinates = ResizeCoordinates::kAsymmetric, p.nearest = nearest;
      AddEveryLayout(out, p, nearest == ResizeNearest::kRoundPreferCeil);
      p.coordinates = ResizeCoordinates::kAlignCorners;  // exact .5 source coordinates
      AddEveryLayout(out, p, false);
    }
  }
  // Cubic's coefficient and exclude_outside; antialiased downscaling (wider filters) and its upscaling no-op.
  ResizeProblem cubic = ResizeByScales(1, 2, 6, 5, 1.6f, 0.7f);
  cubic.mode = ResizeMode::kCubic, cubic.cubic_a = -0.5f, cubic.exclude_outside = true;
  AddEveryLayout(out, cubic, true);
  for (ResizeMode mode : {ResizeMode::kLinear, ResizeMode::kCubic}) {
    for (ResizeProblem p : {ResizeToSizes(1, 3, 11, 13, 3, 5), ResizeByScales(2, 2, 7, 6, 0.6f, 1.4f)}) {
      p.mode = mode, p.antialias = true;
      AddEveryLayout(out, p, mode == ResizeMode::kLinear);
    }
  }
  // A DeepLab/LR-ASPP head's upsampling: 8x bilinear of a 21-class map; more channels than one NHWC block (64).
  ResizeProblem head = ResizeToSizes(1, 21, 4, 3, 32, 24);
  head.mode = ResizeMode::kLinear;
  AddEveryLayout(out, head, true);
  ResizeProblem wide = ResizeByScales(1, 70, 3, 2, 2.0f, 2.0f);
  wide.mode = ResizeMode::kLinear, wide.coordinates = ResizeCoordinates::kPytorchHalfPixel;
  AddEveryLayout(out, wide, false);
  // Output 1 along an axis (pytorch_half_pixel and align_corners special cases).
  ResizeProblem single = ResizeToSizes(1, 2, 5, 6, 1, 3);
  single.mode = ResizeMode::kLinear;
  for (ResizeCoordinates coordinates : kCoordinates) {
    single.coordinates = coordinates;
    AddEveryLayout(out, single, false);
  }
  return out;
}

std::vector<ArgMaxProblem> ArgMaxProblems() {
  std::vector<ArgMaxProblem> out;
  struct Shape {
    int64_t outer, axis, inner;
  };
  // NCHW channels of a 21-class map (inner H*W, more than one 64-position block), NHWC channels (inner 1), a
  // classifier's [N, C] rows, a single class, and a wide axis whose BF16 values repeat (ties for select_last_index).
  for (Shape s : {Shape{2, 21, 70}, Shape{24, 21, 1}, Shape{3, 1000, 1}, Shape{2, 1, 9}, Shape{1, 300, 5}}) {
    for (DataType dtype : kDtypes) {
      for (DataType index_dtype : {DataType::kUInt8, DataType::kInt32, DataType::kInt64, DataType::kFloat32}) {
        if (index_dtype == DataType::kUInt8 && s.axis > 256) continue;
        for (bool last : {false, true}) {
          if (last && dtype == DataType::kFloat32 && s.axis != 300) continue;
          ArgMaxProblem p;
          p.outer = s.outer, p.axis = s.axis, p.inner = s.inner;
          p.dtype = dtype, p.index_dtype = index_dtype, p.select_last_index = last;
          out.push_back(p);
        }
      }
    }
  }
  ArgMaxProblem half_indices;  // float indices in the compute type of an FP16 plan
  half_indices.outer = 2, half_indices.axis = 21, half_indices.inner = 13;
  half_indices.dtype = half_indices.index_dtype = DataType::kFloat16;
  out.push_back(half_indices);
  return out;
}

std::vector<LayerNormProblem> LayerNormProblems() {
  std::vector<LayerNormProblem> out;
  struct Shape {
    int64_t outer, axis, inner;
  };
  // ONNX's last-axes form (inner 1: a [2,3,4,5] tensor over its last 3 axes, ConvNeXt's 96 channels of 7x7 NHWC
  // pixels, a row longer than a warp's 32 lanes that is not a multiple of them), the channels of NCHW (inner H*W,
  // more than one 64-position block), and a single-element axis (variance 0: y = bias).
  for (Shape s : {Shape{2, 60, 1}, Shape{49, 96, 1}, Shape{3, 77, 1}, Shape{2, 24, 70}, Shape{4, 1, 3}}) {
    for (DataType dtype : kDtypes) {
      for (int variant = 0; variant < 3; ++variant) {
        LayerNormProblem p;
        p.outer = s.outer, p.axis = s.axis, p.inner = s.inner, p.dtype = dtype;
        p.has_bias = variant != 1;
        p.write_stats = variant == 2;
        p.epsilon = variant == 2 ? 0.1f : 1e-5f;
        out.push_back(p);
      }
    }
  }
  return out;
}

std::vector<ConvTranspose2dProblem> ConvTranspose2dProblems() {
  std::vector<ConvTranspose2dProblem> out;
  auto add = [&out](int c, int h, int w, int k, int r, int s, int stride, int pad, int dilation, int groups,
                    int output_padding) {
    for (Layout layout : {Layout::kNCHW, Layout::kNHWC}) {
      for (DataType dtype : kDtypes) {
        ConvTranspose2dProblem p;
        p.n = 2, p.c = c, p.h = h, p.w = w, p.k = k, p.r = r, p.s = s;
        p.stride_h = stride, p.stride_w = stride == 3 ? 2 : stride;  // stride 3 runs as 3x2 (unequal)
        p.dilation_h = p.dilation_w = dilation;
        p.pad_top = pad, p.pad_left = pad > 0 ? pad - 1 : 0;
        p.groups = groups;
        p.has_bias = (c + k) % 2 == 0;
        // ONNX's output size: stride * (in - 1) + output_padding + dilated kernel - pads (begin and end equal).
        p.out_h = p.stride_h * (h - 1) + output_padding + (r - 1) * dilation + 1 - 2 * p.pad_top;
        p.out_w = p.stride_w * (w - 1) + output_padding + (s - 1) * dilation + 1 - 2 * p.pad_left;
        p.dtype = dtype, p.layout = layout;
        out.push_back(p);
      }
    }
  };
  add(3, 5, 6, 4, 3, 3, 1, 0, 1, 1, 0);   // stride 1: a full correlation
  add(8, 7, 7, 6, 4, 4, 2, 1, 1, 1, 0);   // FCN's 2x upsampling (kernel 4, stride 2, pad 1)
  add(4, 4, 5, 8, 3, 3, 3, 1, 1, 1, 2);   // strides 3 and 2, output_padding
  add(6, 5, 5, 4, 3, 2, 2, 0, 2, 2, 1);   // dilation 2, 2 groups
  add(4, 3, 3, 4, 3, 3, 2, 0, 1, 4, 0);   // depthwise (groups = C = K)
  add(16, 2, 3, 5, 2, 2, 2, 0, 1, 1, 0);  // many input channels, few pixels
  // Negative begin padding (SAME_UPPER with an output larger than the natural one): the first row and column are
  // reached by no tap.
  ConvTranspose2dProblem shifted;
  shifted.n = 1, shifted.c = 2, shifted.h = 3, shifted.w = 3, shifted.k = 3, shifted.r = shifted.s = 3;
  shifted.stride_h = shifted.stride_w = 2, shifted.pad_top = shifted.pad_left = -1;
  shifted.out_h = shifted.out_w = 9, shifted.has_bias = true;
  out.push_back(shifted);
  return out;
}

std::vector<UnaryProblem> UnaryProblems() {
  std::vector<UnaryProblem> out;
  struct Function {
    UnaryKind kind;
    float alpha, beta;
  };
  // ONNX's defaults (Selu's alpha and gamma, Elu's and Celu's alpha 1) and a non-default alpha each.
  const Function functions[] = {
      {UnaryKind::kElu, 1.0f, 0.0f},       {UnaryKind::kElu, 0.5f, 0.0f},
      {UnaryKind::kSelu, 1.67326319f, 1.05070102f}, {UnaryKind::kCelu, 2.0f, 0.0f},
      {UnaryKind::kSoftplus, 0.0f, 0.0f},  {UnaryKind::kSoftsign, 0.0f, 0.0f},
      {UnaryKind::kMish, 0.0f, 0.0f},      {UnaryKind::kThresholdedRelu, 1.5f, 0.0f},
      {UnaryKind::kGeluTanh, 0.0f, 0.0f},  {UnaryKind::kErf, 0.0f, 0.0f},
      {UnaryKind::kExp, 0.0f, 0.0f},       {UnaryKind::kLog, 0.0f, 0.0f},
      {UnaryKind::kAbs, 0.0f, 0.0f},       {UnaryKind::kNeg, 0.0f, 0.0f},
      {UnaryKind::kSqrt, 0.0f, 0.0f},      {UnaryKind::kReciprocal, 0.0f, 0.0f},
      {UnaryKind::kFloor, 0.0f, 0.0f},     {UnaryKind::kCeil, 0.0f, 0.0f},
      {UnaryKind::kRound, 0.0f, 0.0f},     {UnaryKind::kSign, 0.0f, 0.0f},
  };
  for (const Function& f : functions) {
    for (DataType dtype : kDtypes) {
      UnaryProblem p;
      p.count = dtype == DataType::kFloat32 ? 5003 : 1031;  // odd sizes: no whole chunks or vectors
      p.kind = f.kind, p.alpha = f.alpha, p.beta = f.beta, p.dtype = dtype;
      out.push_back(p);
    }
  }
  return out;
}

template <>
std::vector<Conv2dProblem> ProblemsFor<Conv2dProblem>() { return Conv2dProblems(); }
template <>
std::vector<GemmProblem> ProblemsFor<GemmProblem>() { return GemmProblems(); }
template <>
std::vector<Pool2dProblem> ProblemsFor<Pool2dProblem>() { return Pool2dProblems(); }
template <>
std::vector<BatchNormProblem> ProblemsFor<BatchNormProblem>() { return BatchNormProblems(); }
template <>
std::vector<ActivationProblem> ProblemsFor<ActivationProblem>() { return ActivationProblems(); }
template <>
std::vector<BinaryProblem> ProblemsFor<BinaryProblem>() { return BinaryProblems(); }
template <>
std::vector<ConcatProblem> ProblemsFor<ConcatProblem>() { return ConcatProblems(); }
template <>
std::vector<SplitProblem> ProblemsFor<SplitProblem>() { return SplitProblems(); }
template <>
std::vector<ChannelShuffleProblem> ProblemsFor<ChannelShuffleProblem>() { return ChannelShuffleProblems(); }
template <>
std::vector<SoftmaxProblem> ProblemsFor<SoftmaxProblem>() { return SoftmaxProblems(); }
template <>
std::vector<PadProblem> ProblemsFor<PadProblem>() { return PadProblems(); }
template <>
std::vector<ConvertProblem> ProblemsFor<ConvertProblem>() { return ConvertProblems(); }
template <>
std::vector<PreprocessProblem> ProblemsFor<PreprocessProblem>() { return PreprocessProblems(); }
template <>
std::vector<TransposeProblem> ProblemsFor<TransposeProblem>() { return TransposeProblems(); }
template <>
std::vector<ResizeProblem> ProblemsFor<ResizeProblem>() { return ResizeProblems(); }
template <>
std::vector<ArgMaxProblem> ProblemsFor<ArgMaxProblem>() { return ArgMaxProblems(); }
template <>
std::vector<LayerNormProblem> ProblemsFor<LayerNormProblem>() { return LayerNormProblems(); }
template <>
std::vector<ConvTranspose2dProblem> ProblemsFor<ConvTranspose2dProblem>() { return ConvTranspose2dProblems(); }
template <>
std::vector<UnaryProblem> ProblemsFor<UnaryProblem>() { return UnaryProblems(); }

}  // namespace convoy::testing
