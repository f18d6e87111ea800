#include "kernels/common/problems.h"

#include <cmath>
#include <functional>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/common/pool_window.h"

namespace convoy {
namespace {

absl::Status Invalid(const std::string& problem, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(problem, ": ", what));
}

std::string ImageString(int n, int c, int h, int w) { return absl::StrCat("n=", n, " c=", c, " h=", h, " w=", w); }

std::string PadString(int t, int b, int l, int r) { return absl::StrCat("pad=", t, ",", b, ",", l, ",", r); }

absl::Status CheckPositive(const std::string& name, std::initializer_list<std::pair<const char*, int64_t>> fields) {
  for (const auto& [field, value] : fields) {
    if (value <= 0) return Invalid(name, absl::StrCat(field, " must be positive, got ", value));
  }
  return absl::OkStatus();
}

absl::Status CheckNonNegative(const std::string& name, std::initializer_list<std::pair<const char*, int64_t>> fields) {
  for (const auto& [field, value] : fields) {
    if (value < 0) return Invalid(name, absl::StrCat(field, " must be >= 0, got ", value));
  }
  return absl::OkStatus();
}

// The four paddings of conv2d, pool2d and pad: each >= 0.
absl::Status CheckPads(const std::string& name, int pad_top, int pad_bottom, int pad_left, int pad_right) {
  return CheckNonNegative(name, {{"pad_top", pad_top}, {"pad_bottom", pad_bottom}, {"pad_left", pad_left},
                                 {"pad_right", pad_right}});
}

absl::Status CheckComputeType(const std::string& name, DataType dtype) {
  if (!IsFloatingPoint(dtype)) {
    return Invalid(name, absl::StrCat("data type must be FP32, FP16 or BF16, got ", DataTypeName(dtype)));
  }
  return absl::OkStatus();
}

std::string ChannelList(const std::vector<int>& channels) { return absl::StrJoin(channels, ","); }

// The blocked layout (NCHW8c) is taken by conv2d, pool2d, binary and convert only, and only for channel counts that
// are multiples of the block (no padded channels; a conv2d input is the one exception). Every other op lies NCHW or
// NHWC.
absl::Status CheckBlockedLayout(const std::string& name, Layout layout, bool op_takes_blocked,
                                std::initializer_list<int> channel_counts) {
  if (layout != Layout::kNCHW8c) return absl::OkStatus();
  if (!op_takes_blocked) return Invalid(name, "the NCHW8c layout is taken only by conv2d, pool2d, binary and convert");
  for (int c : channel_counts) {
    if (c % kLayoutChannelBlock != 0) {
      return Invalid(name, absl::StrCat("NCHW8c needs channel counts that are multiples of ", kLayoutChannelBlock,
                                        ", got ", c));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::string_view OpKindName(OpKind kind) {
  switch (kind) {
    case OpKind::kConv2d: return "conv2d";
    case OpKind::kPool2d: return "pool2d";
    case OpKind::kGemm: return "gemm";
    case OpKind::kBatchNorm: return "batch_norm";
    case OpKind::kActivation: return "activation";
    case OpKind::kBinary: return "binary";
    case OpKind::kConcat: return "concat";
    case OpKind::kSplit: return "split";
    case OpKind::kChannelShuffle: return "channel_shuffle";
    case OpKind::kSoftmax: return "softmax";
    case OpKind::kPad: return "pad";
    case OpKind::kConvert: return "convert";
    case OpKind::kPreprocess: return "preprocess";
    case OpKind::kTranspose: return "transpose";
    case OpKind::kResize: return "resize";
    case OpKind::kArgMax: return "argmax";
    case OpKind::kQuantizedConv2d: return "quantized_conv2d";
    case OpKind::kQuantizedAdd: return "quantized_add";
    case OpKind::kLayerNorm: return "layer_norm";
    case OpKind::kConvTranspose2d: return "conv_transpose2d";
    case OpKind::kUnary: return "unary";
    case OpKind::kSqueezeExcitation: return "squeeze_excitation";
  }
  return "unknown";
}

// ---- conv2d ----
std::string Conv2dProblem::ToString() const {
  return absl::StrCat("conv2d n=", n, " h=", h, " w=", w, " c=", c, " k=", k, " r=", r, " s=", s, " ",
                      PadString(pad_top, pad_bottom, pad_left, pad_right), " stride=", stride_h, ",", stride_w,
                      " dilation=", dilation_h, ",", dilation_w, " groups=", groups, " ", DataTypeName(dtype), " ",
                      LayoutName(layout), allow_tf32 ? " tf32" : "", " epilogue=", convoy::ToString(epilogue));
}

std::string QuantizedConv2dProblem::ToString() const {
  return absl::StrCat("quantized_conv2d n=", n, " h=", h, " w=", w, " c=", c, " k=", k, " r=", r, " s=", s, " ",
                      PadString(pad_top, pad_bottom, pad_left, pad_right), " stride=", stride_h, ",", stride_w,
                      " dilation=", dilation_h, ",", dilation_w, " groups=", groups, " ", DataTypeName(src_type),
                      "->", DataTypeName(dst_type), " ", LayoutName(layout),
                      " epilogue=", convoy::ToString(epilogue),
                      fused_add == QuantizedFusedAdd::kNone ? ""
                      : absl::StrCat(fused_add == QuantizedFusedAdd::kConvIsA ? " +add(conv=a: " : " +add(conv=b: ",
                                     add.ToString(), ")"));
}

absl::Status QuantizedConv2dProblem::Validate() const {
  const std::string name = ToString();
  if (auto st = CheckPositive(name, {{"n", n}, {"h", h}, {"w", w}, {"c", c}, {"k", k}, {"r", r}, {"s", this->s},
                                    {"stride_h", stride_h}, {"stride_w", stride_w}, {"dilation_h", dilation_h},
                                    {"dilation_w", dilation_w}, {"groups", groups}});
      !st.ok()) {
    return st;
  }
  if (auto st = CheckPads(name, pad_top, pad_bottom, pad_left, pad_right); !st.ok()) return st;
  if (src_type != DataType::kUInt8 && src_type != DataType::kInt8) {
    return Invalid(name, absl::StrCat("the input must be UINT8 or INT8, got ", DataTypeName(src_type)));
  }
  if (dst_type != DataType::kUInt8 && dst_type != DataType::kInt8 && dst_type != DataType::kFloat32) {
    return Invalid(name, absl::StrCat("the output must be UINT8, INT8 or FP32, got ", DataTypeName(dst_type)));
  }
  auto in_range = [](int v, DataType t) { return t == DataType::kUInt8 ? v >= 0 && v <= 255 : v >= -128 && v <= 127; };
  if (!in_range(epilogue.src_zero_point, src_type)) {
    return Invalid(name, absl::StrCat("src zero point ", epilogue.src_zero_point, " is outside ", DataTypeName(src_type)));
  }
  if (conv_type() == DataType::kFloat32 ? epilogue.dst_zero_point != 0
                                        : !in_range(epilogue.dst_zero_point, conv_type())) {
    return Invalid(name, absl::StrCat("dst zero point ", epilogue.dst_zero_point, " does not fit ",
                                      DataTypeName(conv_type())));
  }
  if (epilogue.residual == ResidualMode::kAfterActivation) {
    return Invalid(name, "a quantized residual is added before the activation only");
  }
  if (!epilogue.scales.empty() && epilogue.scales.size() != static_cast<size_t>(k)) {
    return Invalid(name, absl::StrCat("epilogue.scales: expected k=", k, " multipliers, got ", epilogue.scales.size()));
  }
  for (size_t i = 0; i < epilogue.scales.size(); ++i) {
    if (!std::isfinite(epilogue.scales[i])) {
      return Invalid(name, absl::StrCat("epilogue.scales[", i, "] is ", epilogue.scales[i], ", not a finite number"));
    }
  }
  if (fused_add != QuantizedFusedAdd::kNone) {
    if (auto st = add.Validate(); !st.ok()) return Invalid(name, absl::StrCat("the fused add: ", st.message()));
    const bool conv_is_a = fused_add == QuantizedFusedAdd::kConvIsA;
    const int conv_zero_point = conv_is_a ? add.a_zero_point : add.b_zero_point;
    if (dst_type != add.y_type) {
      return Invalid(name, absl::StrCat("with a fused add the output is the add's ", DataTypeName(add.y_type),
                                        ", got ", DataTypeName(dst_type)));
    }
    if (conv_zero_point != epilogue.dst_zero_point) {
      return Invalid(name, absl::StrCat("the fused add's operand ", conv_is_a ? "a" : "b", " has zero point ",
                                        conv_zero_point, ", the convolution's output ", epilogue.dst_zero_point));
    }
    if (epilogue.residual != ResidualMode::kNone) {
      return Invalid(name, "a fused add and a residual sum cannot both follow the convolution");
    }
  }
  if (c % groups != 0 || k % groups != 0) {
    return Invalid(name, absl::StrCat("groups=", groups, " must divide c=", c, " and k=", k));
  }
  if (p() <= 0 || q() <= 0) {
    return Invalid(name, absl::StrCat("output would be ", p(), "x", q(), ": the dilated filter is larger than the padded input"));
  }
  return CheckBlockedLayout(name, layout, true, {k});
}

std::string QuantizedAddProblem::ToString() const {
  return absl::StrCat("quantized_add count=", count, " ", DataTypeName(a_type), "(", a_scale, ",", a_zero_point, ") + ",
                      DataTypeName(b_type), "(", b_scale, ",", b_zero_point, ") -> ", DataTypeName(y_type), "(",
                      y_scale, ",", y_zero_point, ")");
}

absl::Status QuantizedAddProblem::Validate() const {
  const std::string name = ToString();
  if (count <= 0) return Invalid(name, absl::StrCat("count must be positive, got ", count));
  const struct {
    const char* what;
    DataType type;
    float scale;
    int zero_point;
  } operands[] = {{"a", a_type, a_scale, a_zero_point}, {"b", b_type, b_scale, b_zero_point},
                  {"y", y_type, y_scale, y_zero_point}};
  for (const auto& o : operands) {
    if (o.type != DataType::kUInt8 && o.type != DataType::kInt8) {
      return Invalid(name, absl::StrCat(o.what, " must be UINT8 or INT8, got ", DataTypeName(o.type)));
    }
    if (!(o.scale > 0.0f) || !std::isfinite(o.scale)) {
      return Invalid(name, absl::StrCat(o.what, "'s scale must be positive and finite, got ", o.scale));
    }
    const int lo = o.type == DataType::kUInt8 ? 0 : -128, hi = o.type == DataType::kUInt8 ? 255 : 127;
    if (o.zero_point < lo || o.zero_point > hi) {
      return Invalid(name, absl::StrCat(o.what, "'s zero point ", o.zero_point, " is outside ", DataTypeName(o.type)));
    }
  }
  return absl::OkStatus();
}

absl::Status Conv2dProblem::Validate() const {
  const std::string name = ToString();
  if (auto st = CheckPositive(name, {{"n", n}, {"h", h}, {"w", w}, {"c", c}, {"k", k}, {"r", r}, {"s", this->s},
                                    {"stride_h", stride_h}, {"stride_w", stride_w}, {"dilation_h", dilation_h},
                                    {"dilation_w", dilation_w}, {"groups", groups}});
      !st.ok()) {
    return st;
  }
  if (auto st = CheckPads(name, pad_top, pad_bottom, pad_left, pad_right); !st.ok()) return st;
  if (auto st = CheckComputeType(name, dtype); !st.ok()) return st;
  if (c % groups != 0 || k % groups != 0) {
    return Invalid(name, absl::StrCat("groups=", groups, " must divide c=", c, " and k=", k));
  }
  if (p() <= 0 || q() <= 0) {
    return Invalid(name, absl::StrCat("output would be ", p(), "x", q(), ": the dilated filter is larger than the padded input"));
  }
  // A blocked convolution's input may have any channel count: one that is not a multiple of the block lies NCHW
  // (StoredLayout), e.g. a 3-channel image read by the blocked stem.
  return CheckBlockedLayout(name, layout, true, {k});
}

// ---- pool2d ----
int Pool2dProblem::p() const {
  if (mode == PoolMode::kGlobalAverage || mode == PoolMode::kGlobalMax) return 1;
  const int span = h + pad_top + pad_bottom - window_h();
  int out = (ceil_mode ? (span + stride_h - 1) / stride_h : span / stride_h) + 1;
  // With ceil mode the last window must start inside the input or the top padding (PyTorch and ONNX agree).
  if (ceil_mode && (out - 1) * stride_h >= h + pad_top) --out;
  return out;
}

int Pool2dProblem::q() const {
  if (mode == PoolMode::kGlobalAverage || mode == PoolMode::kGlobalMax) return 1;
  const int span = w + pad_left + pad_right - window_w();
  int out = (ceil_mode ? (span + stride_w - 1) / stride_w : span / stride_w) + 1;
  if (ceil_mode && (out - 1) * stride_w >= w + pad_left) --out;
  return out;
}

std::string Pool2dProblem::ToString() const {
  static constexpr const char* kModes[] = {"max", "avg", "global_avg", "global_max"};
  return absl::StrCat("pool2d ", kModes[static_cast<int>(mode)], " ", ImageString(n, c, h, w), " r=", r, " s=", s,
                      " ", PadString(pad_top, pad_bottom, pad_left, pad_right), " stride=", stride_h, ",", stride_w,
                      // Undilated windows keep the key they had before pooling took dilation.
                      dilation_h != 1 || dilation_w != 1 ? absl::StrCat(" dilation=", dilation_h, ",", dilation_w) : "",
                      count_include_pad ? " count_include_pad" : "", ceil_mode ? " ceil" : "", " ",
                      DataTypeName(dtype), " ", LayoutName(layout));
}

absl::Status Pool2dProblem::Validate() const {
  const std::string name = ToString();
  if (auto st = CheckPositive(name, {{"n", n}, {"c", c}, {"h", h}, {"w", w}, {"r", r}, {"s", s},
                                     {"stride_h", stride_h}, {"stride_w", stride_w}, {"dilation_h", dilation_h},
                                     {"dilation_w", dilation_w}});
      !st.ok()) {
    return st;
  }
  if (auto st = CheckPads(name, pad_top, pad_bottom, pad_left, pad_right); !st.ok()) return st;
  // Max pooling also takes 8-bit tensors (the INT8 max pool of QDQ models: the maximum of the integers is the
  // integer of the maximum, and no arithmetic rounds); averages need a floating-point type.
  const bool eight_bit_max = (mode == PoolMode::kMax || mode == PoolMode::kGlobalMax) &&
                             (dtype == DataType::kUInt8 || dtype == DataType::kInt8);
  if (!eight_bit_max) {
    if (auto st = CheckComputeType(name, dtype); !st.ok()) return st;
  }
  const bool windowed = mode == PoolMode::kMax || mode == PoolMode::kAverage;
  if (windowed && (pad_top >= window_h() || pad_bottom >= window_h() || pad_left >= window_w() ||
                   pad_right >= window_w())) {
    return Invalid(name, absl::StrCat("padding must be smaller than the ", window_h(), "x", window_w(), " window"));
  }
  if (p() <= 0 || q() <= 0) return Invalid(name, absl::StrCat("output would be ", p(), "x", q()));
  if (windowed) {
    // A dilated window can step over a small input: each window needs a tap inside it (else max and mean are empty).
    for (int oy = 0; oy < p(); ++oy) {
      if (PoolTapsAlong(oy * stride_h - pad_top, r, dilation_h, h, pad_bottom).count == 0) {
        return Invalid(name, absl::StrCat("output row ", oy, "'s window has no tap inside the ", h, " input rows"));
      }
    }
    for (int ox = 0; ox < q(); ++ox) {
      if (PoolTapsAlong(ox * stride_w - pad_left, s, dilation_w, w, pad_right).count == 0) {
        return Invalid(name, absl::StrCat("output column ", ox, "'s window has no tap inside the ", w,
                                          " input columns"));
      }
    }
  }
  return CheckBlockedLayout(name, layout, true, {c});
}

// ---- gemm ----
std::string GemmProblem::ToString() const {
  return absl::StrCat("gemm m=", m, " n=", n, " k=", k, " ", DataTypeName(dtype), allow_tf32 ? " tf32" : "",
                      " epilogue=", convoy::ToString(epilogue));
}

absl::Status GemmProblem::Validate() const {
  const std::string name = ToString();
  if (auto st = CheckPositive(name, {{"m", m}, {"n", n}, {"k", k}}); !st.ok()) return st;
  return CheckComputeType(name, dtype);
}

// ---- batch norm ----
std::string BatchNormProblem::ToString() const {
  return absl::StrCat("batch_norm ", ImageString(n, c, h, w), " eps=", epsilon, " ", DataTypeName(dtype), " ",
                      LayoutName(layout), " act=", convoy::ToString(activation));
}

absl::Status BatchNormProblem::Validate() const {
  const std::string name = ToString();
  if (auto st = CheckPositive(name, {{"n", n}, {"c", c}, {"h", h}, {"w", w}}); !st.ok()) return st;
  if (!(epsilon >= 0)) return Invalid(name, absl::StrCat("epsilon must be >= 0, got ", epsilon));
  if (auto st = CheckBlockedLayout(name, layout, false, {}); !st.ok()) return st;
  return CheckComputeType(name, dtype);
}

// ---- activation ----
std::string ActivationProblem::ToString() const {
  return absl::StrCat("activation ", convoy::ToString(activation), " count=", count, " ", DataTypeName(dtype));
}

absl::Status ActivationProblem::Validate() const {
  const std::string name = ToString();
  if (auto st = CheckPositive(name, {{"count", count}}); !st.ok()) return st;
  return CheckComputeType(name, dtype);
}

// ---- binary ----
int64_t BinaryProblem::b_elements() const {
  switch (broadcast) {
    case BinaryBroadcast::kNone: return int64_t{n} * c * h * w;
    case BinaryBroadcast::kPerImageChannel: return int64_t{n} * c;
    case BinaryBroadcast::kPerChannel: return c;
    case BinaryBroadcast::kScalar: return 1;
  }
  return 0;
}

std::string BinaryProblem::ToString() const {
  static constexpr const char* kOps[] = {"add", "sub", "mul", "div"};
  static constexpr const char* kBroadcasts[] = {"same", "nc11", "c", "scalar"};
  return absl::StrCat("binary ", kOps[static_cast<int>(op)], " b=", kBroadcasts[static_cast<int>(broadcast)], " ",
                      ImageString(n, c, h, w), " ", DataTypeName(dtype), " ", LayoutName(layout),
                      " act=", convoy::ToString(activation));
}

absl::Status BinaryProblem::Validate() const {
  const std::string name = ToString();
  if (auto st = CheckPositive(name, {{"n", n}, {"c", c}, {"h", h}, {"w", w}}); !st.ok()) return st;
  if (auto st = CheckBlockedLayout(name, layout, true, {c}); !st.ok()) return st;
  return CheckComputeType(name, dtype);
}

// ---- concat / split / shuffle ----
namespace {

// What concat and split both check: positive n, h, w and at least one part, each with a positive channel count
// (`part` is "input" for concat, "output" for split).
absl::Status ValidateChannelParts(const std::string& name, int n, int h, int w, const std::vector<int>& channels,
                                  absl::string_view part) {
  if (auto st = CheckPositive(name, {{"n", n}, {"h", h}, {"w", w}}); !st.ok()) return st;
  if (channels.empty()) return Invalid(name, absl::StrCat("needs at least one ", part));
  for (size_t i = 0; i < channels.size(); ++i) {
    if (channels[i] <= 0) return Invalid(name, absl::StrCat(part, " ", i, " has ", channels[i], " channels"));
  }
  return absl::OkStatus();
}

}  // namespace

int ConcatProblem::total_channels() const { return std::accumulate(channels.begin(), channels.end(), 0); }

std::string ConcatProblem::ToString() const {
  return absl::StrCat("concat n=", n, " h=", h, " w=", w, " channels=", ChannelList(channels), " ",
                      DataTypeName(dtype), " ", LayoutName(layout));
}

absl::Status ConcatProblem::Validate() const {
  if (auto st = CheckBlockedLayout(ToString(), layout, false, {}); !st.ok()) return st;
  return ValidateChannelParts(ToString(), n, h, w, channels, "input");
}

int SplitProblem::total_channels() const { return std::accumulate(channels.begin(), channels.end(), 0); }

std::string SplitProblem::ToString() const {
  return absl::StrCat("split n=", n, " h=", h, " w=", w, " channels=", ChannelList(channels), " ",
                      DataTypeName(dtype), " ", LayoutName(layout));
}

absl::Status SplitProblem::Validate() const {
  if (auto st = CheckBlockedLayout(ToString(), layout, false, {}); !st.ok()) return st;
  return ValidateChannelParts(ToString(), n, h, w, channels, "output");
}

std::string ChannelShuffleProblem::ToString() const {
  return absl::StrCat("channel_shuffle ", ImageString(n, c, h, w), " groups=", groups, " ", DataTypeName(dtype), " ",
                      LayoutName(layout));
}

absl::Status ChannelShuffleProblem::Validate() const {
  const std::string name = ToString();
  if (auto st = CheckPositive(name, {{"n", n}, {"c", c}, {"h", h}, {"w", w}, {"groups", groups}}); !st.ok()) {
    return st;
  }
  if (c % groups != 0) return Invalid(name, absl::StrCat("groups=", groups, " must divide c=", c));
  return CheckBlockedLayout(name, layout, false, {});
}

// ---- softmax ----
std::string SoftmaxProblem::ToString() const {
  return absl::StrCat("softmax outer=", outer, " axis=", axis, " inner=", inner, " ", DataTypeName(dtype));
}

absl::Status SoftmaxProblem::Validate() const {
  const std::string name = ToString();
  if (auto st = CheckPositive(name, {{"outer", outer}, {"axis", axis}, {"inner", inner}}); !st.ok()) return st;
  return CheckComputeType(name, dtype);
}

// ---- pad ----
std::string PadProblem::ToString() const {
  static constexpr const char* kModes[] = {"constant", "reflect", "edge"};
  return absl::StrCat("pad ", kModes[static_cast<int>(mode)], " ", ImageString(n, c, h, w), " ",
                      PadString(pad_top, pad_bottom, pad_left, pad_right), " value=", value, " ",
                      DataTypeName(dtype), " ", LayoutName(layout));
}

absl::Status PadProblem::Validate() const {
  const std::string name = ToString();
  if (auto st = CheckPositive(name, {{"n", n}, {"c", c}, {"h", h}, {"w", w}}); !st.ok()) return st;
  // Negative pads crop (ONNX Pad); the output must keep at least one row and column.
  if (out_h() < 1 || out_w() < 1) {
    return Invalid(name, absl::StrCat("the pads leave a ", out_h(), "x", out_w(), " output"));
  }
  if (mode == PadMode::kReflect && (pad_top >= h || pad_bottom >= h || pad_left >= w || pad_right >= w)) {
    return Invalid(name, absl::StrCat("reflect padding must be smaller than the ", h, "x", w, " input"));
  }
  if (auto st = CheckBlockedLayout(name, layout, false, {}); !st.ok()) return st;
  return CheckComputeType(name, dtype);
}

// ---- convert ----
std::string ConvertProblem::ToString() const {
  return absl::StrCat("convert ", ImageString(n, c, h, w), " ", DataTypeName(src_dtype), " ", LayoutName(src_layout),
                      " -> ", DataTypeName(dst_dtype), " ", LayoutName(dst_layout),
                      dst_c > 0 ? absl::StrCat(" padded to c=", dst_c) : "",
                      quantized() || scale != 0.0f || zero_point != 0
                          ? absl::StrCat(" scale ", scale, " zero_point ", zero_point)
                          : "");
}

absl::Status ConvertProblem::Validate() const {
  const std::string name = ToString();
  if (auto st = CheckPositive(name, {{"n", n}, {"c", c}, {"h", h}, {"w", w}}); !st.ok()) return st;
  if (dst_c != 0 && dst_c < c) return Invalid(name, absl::StrCat("dst_c ", dst_c, " is below c ", c));
  if (quantized()) {
    const DataType q = IsQuantizedType(src_dtype) ? src_dtype : dst_dtype;
    const DataType other = IsQuantizedType(src_dtype) ? dst_dtype : src_dtype;
    if (other != DataType::kFloat32) {
      return Invalid(name, absl::StrCat("a quantize or dequantize converts between FP32 and ", DataTypeName(q),
                                        ", got ", DataTypeName(other)));
    }
    if (!(scale > 0.0f) || !std::isfinite(scale)) {
      return Invalid(name, absl::StrCat("scale must be positive and finite, got ", scale));
    }
    const int lo = q == DataType::kUInt8 ? 0 : -128, hi = q == DataType::kUInt8 ? 255 : 127;
    if (zero_point < lo || zero_point > hi) {
      return Invalid(name, absl::StrCat("zero_point ", zero_point, " is outside ", DataTypeName(q), " [", lo, ", ",
                                        hi, "]"));
    }
    if (dst_c != 0) return Invalid(name, "a quantize or dequantize pads no channels");
    if (auto st = CheckBlockedLayout(name, src_layout, true, {c}); !st.ok()) return st;
    return CheckBlockedLayout(name, dst_layout, true, {c});
  }
  if (scale != 0.0f || zero_point != 0) {
    return Invalid(name, "scale and zero_point apply only to a UINT8 or INT8 side");
  }
  if (auto st = CheckComputeType(name, src_dtype); !st.ok()) return st;
  if (auto st = CheckBlockedLayout(name, src_layout, true, {c}); !st.ok()) return st;
  if (auto st = CheckBlockedLayout(name, dst_layout, true, {c}); !st.ok()) return st;
  return CheckComputeType(name, dst_dtype);
}

// ---- transpose ----
std::vector<int64_t> TransposeProblem::output_dims() const {
  std::vector<int64_t> out;
  for (int p : perm) out.push_back(p >= 0 && p < rank() ? dims[p] : 0);
  return out;
}

int64_t TransposeProblem::num_elements() const {
  return std::accumulate(dims.begin(), dims.end(), int64_t{1}, std::multiplies<int64_t>());
}

TransposeProblem TransposeProblem::Coalesced() const {
  // Drop unit dims: `kept[d]` is the new index of input dim d (-1 when dropped).
  std::vector<int> kept(dims.size(), -1);
  std::vector<int64_t> reduced_dims;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] != 1) {
      kept[d] = static_cast<int>(reduced_dims.size());
      reduced_dims.push_back(dims[d]);
    }
  }
  std::vector<int> reduced_perm;
  for (int p : perm) {
    if (kept[p] >= 0) reduced_perm.push_back(kept[p]);
  }
  TransposeProblem out;
  out.dtype = dtype;
  if (reduced_dims.empty()) {
    out.dims = {1}, out.perm = {0};
    return out;
  }
  // Runs of output positions reading consecutive input dims become one dim. `run_of_input[d]` is the run starting
  // at input dim d (runs start at the input dim of their first output position).
  std::vector<int> run_of_input(reduced_dims.size(), -1);
  std::vector<int> run_starts;  // input dim each run starts at, in output order
  for (size_t i = 0; i < reduced_perm.size(); ++i) {
    if (i == 0 || reduced_perm[i] != reduced_perm[i - 1] + 1) {
      run_of_input[reduced_perm[i]] = static_cast<int>(run_starts.size());
      run_starts.push_back(reduced_perm[i]);
    }
  }
  // Input order of the runs: walk input dims, a run's extent is the product of its dims.
  std::vector<int> input_index_of_run(run_starts.size());
  for (size_t d = 0; d < reduced_dims.size(); ++d) {
    if (run_of_input[d] < 0) {
      out.dims.back() *= reduced_dims[d];
      continue;
    }
    input_index_of_run[run_of_input[d]] = static_cast<int>(out.dims.size());
    out.dims.push_back(reduced_dims[d]);
  }
  out.perm = input_index_of_run;
  return out;
}

std::string TransposeProblem::ToString() const {
  return absl::StrCat("transpose dims=", absl::StrJoin(dims, ","), " perm=", absl::StrJoin(perm, ","), " ",
                      DataTypeName(dtype));
}

absl::Status TransposeProblem::Validate() const {
  const std::string name = ToString();
  if (dims.empty() || rank() > kMaxRank) {
    return Invalid(name, absl::StrCat("rank must be 1..", kMaxRank, ", got ", rank()));
  }
  for (int d = 0; d < rank(); ++d) {
    if (dims[d] <= 0) return Invalid(name, absl::StrCat("dim ", d, " must be positive, got ", dims[d]));
  }
  if (perm.size() != dims.size()) {
    return Invalid(name, absl::StrCat("perm has ", perm.size(), " entries for rank ", rank()));
  }
  std::vector<bool> seen(dims.size(), false);
  for (int p : perm) {
    if (p < 0 || p >= rank() || seen[p]) return Invalid(name, "perm is not a permutation of 0..rank-1");
    seen[p] = true;
  }
  const size_t element = DataTypeSize(dtype);
  if (element != 1 && element != 2 && element != 4 && element != 8) {
    return Invalid(name, absl::StrCat("elements of ", element, " bytes"));
  }
  return absl::OkStatus();
}

// ---- preprocess ----
std::string PreprocessProblem::ToString() const {
  std::string s = absl::StrCat("preprocess n=", n, " h=", h, " w=", w, " c=", c, " mean=");
  for (int i = 0; i < kMaxChannels; ++i) absl::StrAppend(&s, i ? "," : "", mean[i]);
  absl::StrAppend(&s, " std=");
  for (int i = 0; i < kMaxChannels; ++i) absl::StrAppend(&s, i ? "," : "", stddev[i]);
  absl::StrAppend(&s, scale_to_unit ? " unit" : "", " -> ", DataTypeName(dst_dtype), " ", LayoutName(dst_layout));
  if (dst_c > 0) absl::StrAppend(&s, " padded to c=", dst_c);
  return s;
}

absl::Status PreprocessProblem::Validate() const {
  const std::string name = ToString();
  if (auto st = CheckPositive(name, {{"n", n}, {"h", h}, {"w", w}, {"c", c}}); !st.ok()) return st;
  if (c > kMaxChannels) return Invalid(name, absl::StrCat("at most ", kMaxChannels, " channels, got ", c));
  if (dst_c != 0 && dst_c < c) return Invalid(name, absl::StrCat("dst_c ", dst_c, " is below c ", c));
  for (int i = 0; i < c; ++i) {
    if (!(stddev[i] != 0)) return Invalid(name, absl::StrCat("std[", i, "] must be non-zero"));
  }
  if (auto st = CheckBlockedLayout(name, dst_layout, false, {}); !st.ok()) return st;
  return CheckComputeType(name, dst_dtype);
}

// ---- resize ----
std::string ResizeProblem::ToString() const {
  static constexpr const char* kModes[] = {"nearest", "linear", "cubic"};
  static constexpr const char* kCoordinates[] = {"half_pixel",    "half_pixel_symmetric", "pytorch_half_pixel",
                                                 "align_corners", "asymmetric",           "tf_crop_and_resize"};
  static constexpr const char* kNearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple"};
  std::string s = absl::StrCat("resize ", kModes[static_cast<int>(mode)], " ", ImageString(n, c, h, w), " -> ", out_h,
                               "x", out_w, " scale=", scale_h, ",", scale_w, " length=", length_h, ",", length_w, " ",
                               kCoordinates[static_cast<int>(coordinates)]);
  if (mode == ResizeMode::kNearest) absl::StrAppend(&s, " ", kNearest[static_cast<int>(nearest)]);
  if (mode == ResizeMode::kCubic) absl::StrAppend(&s, " a=", cubic_a, exclude_outside ? " exclude_outside" : "");
  if (antialias) absl::StrAppend(&s, " antialias");
  if (coordinates == ResizeCoordinates::kTfCropAndResize) {
    absl::StrAppend(&s, " roi=", roi_top, ",", roi_left, ",", roi_bottom, ",", roi_right, " extrapolation=",
                    extrapolation_value);
  }
  return absl::StrCat(s, " ", DataTypeName(dtype), " ", LayoutName(layout));
}

absl::Status ResizeProblem::Validate() const {
  const std::string name = ToString();
  if (auto st = CheckPositive(name, {{"n", n}, {"c", c}, {"h", h}, {"w", w}, {"out_h", out_h}, {"out_w", out_w}});
      !st.ok()) {
    return st;
  }
  if (!(scale_h > 0.0f) || !(scale_w > 0.0f) || !(length_h > 0.0f) || !(length_w > 0.0f)) {
    return Invalid(name, "scales and resized lengths must be positive");
  }
  if (static_cast<int>(mode) > 2 || static_cast<int>(coordinates) > 5 || static_cast<int>(nearest) > 4) {
    return Invalid(name, "unknown mode, coordinate transformation or nearest rounding");
  }
  if (auto st = CheckBlockedLayout(name, layout, false, {}); !st.ok()) return st;
  return CheckComputeType(name, dtype);
}

// ---- argmax ----
std::string ArgMaxProblem::ToString() const {
  return absl::StrCat("argmax outer=", outer, " axis=", axis, " inner=", inner, " ", DataTypeName(dtype), " -> ",
                      DataTypeName(index_dtype), select_last_index ? " select_last_index" : "");
}

absl::Status ArgMaxProblem::Validate() const {
  const std::string name = ToString();
  if (auto st = CheckPositive(name, {{"outer", outer}, {"axis", axis}, {"inner", inner}}); !st.ok()) return st;
  if (auto st = CheckComputeType(name, dtype); !st.ok()) return st;
  // The largest index each index type holds exactly.
  int64_t limit = 0;
  switch (index_dtype) {
    case DataType::kUInt8: limit = 256; break;
    case DataType::kInt32: limit = int64_t{1} << 31; break;
    case DataType::kInt64: limit = int64_t{1} << 62; break;
    case DataType::kFloat32: limit = int64_t{1} << 24; break;
    case DataType::kFloat16: limit = 2048; break;
    case DataType::kBFloat16: limit = 256; break;
    default: return Invalid(name, "indices are written as UINT8, INT32, INT64, FP32, FP16 or BF16");
  }
  if (axis > limit) {
    return Invalid(name, absl::StrCat(DataTypeName(index_dtype), " holds indices up to ", limit - 1, ", the axis has ",
                                      axis));
  }
  return absl::OkStatus();
}

// ---- layer norm ----
std::string LayerNormProblem::ToString() const {
  return absl::StrCat("layer_norm outer=", outer, " axis=", axis, " inner=", inner, " epsilon=", epsilon,
                      has_bias ? " bias" : "", write_stats ? " stats" : "", " ", DataTypeName(dtype));
}

absl::Status LayerNormProblem::Validate() const {
  const std::string name = ToString();
  if (auto st = CheckPositive(name, {{"outer", outer}, {"axis", axis}, {"inner", inner}}); !st.ok()) return st;
  if (!(epsilon >= 0.0f)) return Invalid(name, absl::StrCat("epsilon must be >= 0, got ", epsilon));
  return CheckComputeType(name, dtype);
}

// ---- conv transpose 2d ----
std::string ConvTranspose2dProblem::ToString() const {
  return absl::StrCat("conv_transpose2d ", ImageString(n, c, h, w), " k=", k, " r=", r, " s=", s, " out=", out_h, "x",
                      out_w, " pad=", pad_top, ",", pad_left, " stride=", stride_h, ",", stride_w, " dilation=",
                      dilation_h, ",", dilation_w, " groups=", groups, has_bias ? " bias" : "", " ",
                      DataTypeName(dtype), " ", LayoutName(layout));
}

absl::Status ConvTranspose2dProblem::Validate() const {
  const std::string name = ToString();
  if (auto st = CheckPositive(name, {{"n", n}, {"c", c}, {"h", h}, {"w", w}, {"k", k}, {"r", r}, {"s", s},
                                     {"out_h", out_h}, {"out_w", out_w}, {"stride_h", stride_h},
                                     {"stride_w", stride_w}, {"dilation_h", dilation_h}, {"dilation_w", dilation_w},
                                     {"groups", groups}});
      !st.ok()) {
    return st;
  }
  if (c % groups != 0 || k % groups != 0) {
    return Invalid(name, absl::StrCat("groups ", groups, " must divide c ", c, " and k ", k));
  }
  if (layout == Layout::kNCHW8c) return Invalid(name, "the layout must be NCHW or NHWC");
  return CheckComputeType(name, dtype);
}

// ---- unary ----
absl::string_view UnaryKindName(UnaryKind kind) {
  switch (kind) {
    case UnaryKind::kElu: return "elu";
    case UnaryKind::kSelu: return "selu";
    case UnaryKind::kCelu: return "celu";
    case UnaryKind::kSoftplus: return "softplus";
    case UnaryKind::kSoftsign: return "softsign";
    case UnaryKind::kMish: return "mish";
    case UnaryKind::kThresholdedRelu: return "thresholded_relu";
    case UnaryKind::kGeluTanh: return "gelu_tanh";
    case UnaryKind::kErf: return "erf";
    case UnaryKind::kExp: return "exp";
    case UnaryKind::kLog: return "log";
    case UnaryKind::kAbs: return "abs";
    case UnaryKind::kNeg: return "neg";
    case UnaryKind::kSqrt: return "sqrt";
    case UnaryKind::kReciprocal: return "reciprocal";
    case UnaryKind::kFloor: return "floor";
    case UnaryKind::kCeil: return "ceil";
    case UnaryKind::kRound: return "round";
    case UnaryKind::kSign: return "sign";
  }
  return "unknown";
}

std::string UnaryProblem::ToString() const {
  return absl::StrCat("unary ", UnaryKindName(kind), " count=", count, " alpha=", alpha, " beta=", beta, " ",
                      DataTypeName(dtype));
}

absl::Status UnaryProblem::Validate() const {
  const std::string name = ToString();
  if (auto st = CheckPositive(name, {{"count", count}}); !st.ok()) return st;
  if (kind == UnaryKind::kCelu && alpha == 0.0f) return Invalid(name, "celu's alpha must not be 0");
  return CheckComputeType(name, dtype);
}

// ---- squeeze-and-excitation ----
std::string SqueezeExcitationProblem::ToString() const {
  return absl::StrCat("squeeze_excitation ", ImageString(n, c, h, w), " squeeze=", squeeze,
                      " hidden=", convoy::ToString(hidden_activation), has_hidden_bias ? "+bias" : "",
                      " gate=", convoy::ToString(gate_activation), has_gate_bias ? "+bias" : "", " ",
                      DataTypeName(dtype), " ", LayoutName(layout));
}

absl::Status SqueezeExcitationProblem::Validate() const {
  const std::string name = ToString();
  if (auto st = CheckPositive(name, {{"n", n}, {"c", c}, {"h", h}, {"w", w}, {"squeeze", squeeze}}); !st.ok()) {
    return st;
  }
  if (auto st = CheckComputeType(name, dtype); !st.ok()) return st;
  return CheckBlockedLayout(name, layout, true, {c});
}

}  // namespace convoy
