// Problem descriptors: everything an algorithm needs to know about one operation, and nothing about where the data
// lives. Each descriptor has equality and an Abseil hash over EVERY field (two convolutions that differ only in groups
// or dilation are different problems), a canonical ToString() that is also the algorithm-cache key, Validate(), and
// the argument bundle its kernels take (pointers only: kernels never allocate).
//
// Conventions shared by all ops:
// - Image tensors are 4-D with logical dims (N, C, H, W); `layout` says whether they lie as NCHW or NHWC.
// - Conv weights lie as [K, C/groups, R, S] for NCHW problems and [K, R, S, C/groups] for NHWC problems, in `dtype`.
// - Per-channel epilogue parameters (bias, scale) and batch-norm statistics are always FP32 arrays.
// - A residual tensor has the output's shape, dtype and layout.
#ifndef CONVOY_KERNELS_COMMON_PROBLEMS_H_
#define CONVOY_KERNELS_COMMON_PROBLEMS_H_

#include <array>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "kernels/common/dtype.h"
#include "kernels/common/epilogue.h"
#include "kernels/common/tensor.h"
#include "kernels/common/unary_function.h"

namespace convoy {

enum class OpKind : uint8_t {
  kConv2d = 0,
  kPool2d,
  kGemm,
  kBatchNorm,
  kActivation,
  kBinary,
  kConcat,
  kSplit,
  kChannelShuffle,
  kSoftmax,
  kPad,
  kConvert,
  kPreprocess,
  kTranspose,
  kResize,
  kArgMax,
  kQuantizedConv2d,
  kQuantizedAdd,
  kLayerNorm,
  kConvTranspose2d,
  kUnary,
  kSqueezeExcitation,
};
absl::string_view OpKindName(OpKind kind);

#define CONVOY_PROBLEM_COMPARISONS(Type)                                  \
  bool operator==(const Type& o) const { return Tie() == o.Tie(); }       \
  bool operator!=(const Type& o) const { return !(*this == o); }          \
  template <typename H>                                                   \
  friend H AbslHashValue(H h, const Type& p) {                            \
    return H::combine(std::move(h), p.Tie());                             \
  }

// ---- conv2d ------------------------------------------------------------------------------------------------------
struct Conv2dProblem {
  static constexpr OpKind kKind = OpKind::kConv2d;
  int n = 1, h = 1, w = 1, c = 1;  // input
  int k = 1, r = 1, s = 1;         // output channels, filter height, filter width
  int pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  int stride_h = 1, stride_w = 1;
  int dilation_h = 1, dilation_w = 1;
  int groups = 1;
  DataType dtype = DataType::kFloat32;
  Layout layout = Layout::kNCHW;
  bool allow_tf32 = false;  // FP32 problems may compute products in TF32 on tensor cores
  Epilogue epilogue;

  int p() const { return (h + pad_top + pad_bottom - dilation_h * (r - 1) - 1) / stride_h + 1; }  // output H
  int q() const { return (w + pad_left + pad_right - dilation_w * (s - 1) - 1) / stride_w + 1; }  // output W
  int c_per_group() const { return c / groups; }
  int k_per_group() const { return k / groups; }
  bool is_depthwise() const { return groups == c && groups == k; }
  TensorDesc input_desc() const { return TensorDesc::Image(dtype, n, c, h, w, layout); }
  TensorDesc output_desc() const { return TensorDesc::Image(dtype, n, k, p(), q(), layout); }
  int64_t filter_elements() const { return int64_t{k} * c_per_group() * r * s; }
  int64_t flops() const { return 2 * int64_t{n} * k * p() * q() * c_per_group() * r * s; }
  absl::Status Validate() const;
  std::string ToString() const;
  auto Tie() const {
    return std::tie(n, h, w, c, k, r, s, pad_top, pad_bottom, pad_left, pad_right, stride_h, stride_w, dilation_h,
                    dilation_w, groups, dtype, layout, allow_tf32, epilogue);
  }
  CONVOY_PROBLEM_COMPARISONS(Conv2dProblem)
};

struct Conv2dArgs {
  const void* x = nullptr;        // input, problem.input_desc()
  const void* w = nullptr;        // filter (or the algorithm's packed filter, see Algorithm::PackedFilterBytes)
  const float* bias = nullptr;    // [K] when epilogue.has_bias
  const float* scale = nullptr;   // [K] when epilogue.has_scale
  const void* residual = nullptr; // output-shaped when epilogue.residual != kNone
  void* y = nullptr;              // output, problem.output_desc()
};

// ---- quantized element-wise add (INT8): y = Q_y(DQ_a(a) + DQ_b(b)) -------------------------------------------------
// Two UINT8/INT8 tensors of `count` elements in the same layout, each with its scale and zero point, into a UINT8/INT8
// output: what a QDQ graph's DequantizeLinear, DequantizeLinear -> Add -> QuantizeLinear computes (the residual adds
// of quantized ResNets and MobileNets), in onnxruntime's x86 QLinearAdd arithmetic: with ra = a_scale / y_scale,
// rb = b_scale / y_scale and fixed = y_zp - fma(ra, a_zp, rb * b_zp), y = saturate(round_half_even(fma(a, ra,
// fma(b, rb, fixed)))), in FP32 (quantized_vector_loops.h says why not ONNX's own order of operations).
struct QuantizedAddProblem {
  static constexpr OpKind kKind = OpKind::kQuantizedAdd;
  int64_t count = 1;
  DataType a_type = DataType::kUInt8, b_type = DataType::kUInt8, y_type = DataType::kUInt8;
  float a_scale = 1.0f, b_scale = 1.0f, y_scale = 1.0f;
  int a_zero_point = 0, b_zero_point = 0, y_zero_point = 0;

  absl::Status Validate() const;
  std::string ToString() const;
  auto Tie() const {
    return std::tie(count, a_type, b_type, y_type, a_scale, b_scale, y_scale, a_zero_point, b_zero_point,
                    y_zero_point);
  }
  CONVOY_PROBLEM_COMPARISONS(QuantizedAddProblem)
};

// ---- quantized conv2d (INT8): y = QuantizedEpilogue(sum (x - src_zp) * w) -------------------------------------------
// x is UINT8 or INT8, w INT8 (symmetric, per-output-channel scales folded into args.scale), the accumulator exact
// INT32; y UINT8, INT8 (requantized) or FP32. Same geometry fields and filter conventions as Conv2dProblem.
//
// fused_add: a QDQ plan's residual add after the requantization (QuantizedAddOp's computation, fused). The conv's own
// output, c = saturate(round_half_even(v) + epilogue.dst_zero_point) in its 8-bit type (v as QuantizedEpilogue says,
// after the ReLU), is one operand of `add` (the first, a, for kConvIsA; the second, b, for kConvIsB), args.residual
// the other, and y = the quantized add of the two (QuantizedAddElementwise's formula, onnxruntime's QLinearAdd), in
// dst_type = add.y_type. add.count is not used; the conv operand's type and zero point must be the conv's own.
enum class QuantizedFusedAdd : uint8_t { kNone = 0, kConvIsA = 1, kConvIsB = 2 };

struct QuantizedConv2dProblem {
  static constexpr OpKind kKind = OpKind::kQuantizedConv2d;
  int n = 1, h = 1, w = 1, c = 1;
  int k = 1, r = 1, s = 1;
  int pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  int stride_h = 1, stride_w = 1;
  int dilation_h = 1, dilation_w = 1;
  int groups = 1;
  DataType src_type = DataType::kUInt8;  // kUInt8 or kInt8
  DataType dst_type = DataType::kUInt8;  // kUInt8, kInt8 or kFloat32
  Layout layout = Layout::kNHWC;
  QuantizedEpilogue epilogue;
  QuantizedFusedAdd fused_add = QuantizedFusedAdd::kNone;
  QuantizedAddProblem add;  // when fused_add != kNone

  int p() const { return (h + pad_top + pad_bottom - dilation_h * (r - 1) - 1) / stride_h + 1; }
  int q() const { return (w + pad_left + pad_right - dilation_w * (s - 1) - 1) / stride_w + 1; }
  int c_per_group() const { return c / groups; }
  int k_per_group() const { return k / groups; }
  TensorDesc input_desc() const { return TensorDesc::Image(src_type, n, c, h, w, layout); }
  TensorDesc output_desc() const { return TensorDesc::Image(dst_type, n, k, p(), q(), layout); }
  int64_t filter_elements() const { return int64_t{k} * c_per_group() * r * s; }
  int64_t flops() const { return 2 * int64_t{n} * k * p() * q() * c_per_group() * r * s; }
  absl::Status Validate() const;
  std::string ToString() const;
  auto Tie() const {
    return std::tie(n, h, w, c, k, r, s, pad_top, pad_bottom, pad_left, pad_right, stride_h, stride_w, dilation_h,
                    dilation_w, groups, src_type, dst_type, layout, epilogue, fused_add, add);
  }
  // The conv's own 8-bit output type (dst_type unless an add is fused after it).
  DataType conv_type() const {
    if (fused_add == QuantizedFusedAdd::kNone) return dst_type;
    return fused_add == QuantizedFusedAdd::kConvIsA ? add.a_type : add.b_type;
  }
  CONVOY_PROBLEM_COMPARISONS(QuantizedConv2dProblem)
};

struct QuantizedConv2dArgs {
  const void* x = nullptr;         // input, problem.input_desc()
  const int8_t* w = nullptr;       // INT8 filter, Conv2dProblem's convention for the layout (or the packed filter)
  const int32_t* bias = nullptr;   // [K] when epilogue.has_bias
  const float* scale = nullptr;    // [K] requantization multipliers when epilogue.scales is empty (else unread)
  const void* residual = nullptr;  // output-shaped: dst_type when epilogue.residual != kNone; the add's other
                                   // operand's type when fused_add != kNone
  void* y = nullptr;               // output, problem.output_desc(); may equal residual
};

// The INT8 add's arguments (QuantizedAddProblem is above, before the convolution that may fuse it).
struct QuantizedAddArgs {
  const void* a = nullptr;
  const void* b = nullptr;
  void* y = nullptr;  // may equal a or b
};

// ---- pooling -----------------------------------------------------------------------------------------------------
enum class PoolMode : uint8_t { kMax = 0, kAverage, kGlobalAverage, kGlobalMax };

struct Pool2dProblem {
  static constexpr OpKind kKind = OpKind::kPool2d;
  PoolMode mode = PoolMode::kMax;
  int n = 1, c = 1, h = 1, w = 1;
  int r = 1, s = 1;  // window (ignored by global modes)
  int pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  int stride_h = 1, stride_w = 1;
  // Taps r apart by dilation_h rows (ONNX's dilations): the window spans (r - 1) * dilation_h + 1 rows.
  int dilation_h = 1, dilation_w = 1;
  // average: divide by the taps within the padded input (PyTorch's rule) instead of the taps within the input
  bool count_include_pad = false;
  bool ceil_mode = false;
  DataType dtype = DataType::kFloat32;
  Layout layout = Layout::kNCHW;

  int p() const;  // output H (1 for global modes)
  int q() const;  // output W
  int window_h() const { return (r - 1) * dilation_h + 1; }  // rows one window spans, taps and gaps
  int window_w() const { return (s - 1) * dilation_w + 1; }
  TensorDesc input_desc() const { return TensorDesc::Image(dtype, n, c, h, w, layout); }
  TensorDesc output_desc() const { return TensorDesc::Image(dtype, n, c, p(), q(), layout); }
  absl::Status Validate() const;
  std::string ToString() const;
  auto Tie() const {
    return std::tie(mode, n, c, h, w, r, s, pad_top, pad_bottom, pad_left, pad_right, stride_h, stride_w,
                    dilation_h, dilation_w, count_include_pad, ceil_mode, dtype, layout);
  }
  CONVOY_PROBLEM_COMPARISONS(Pool2dProblem)
};

struct Pool2dArgs {
  const void* x = nullptr;
  void* y = nullptr;
};

// ---- GEMM / fully connected: Y[m, n] = epilogue(A[m, k] * B[n, k]^T) -------------------------------------------
struct GemmProblem {
  static constexpr OpKind kKind = OpKind::kGemm;
  int m = 1, n = 1, k = 1;
  DataType dtype = DataType::kFloat32;
  bool allow_tf32 = false;
  Epilogue epilogue;  // bias and scale index the n dimension; residual is [m, n]

  int64_t flops() const { return 2 * int64_t{m} * n * k; }
  absl::Status Validate() const;
  std::string ToString() const;
  auto Tie() const { return std::tie(m, n, k, dtype, allow_tf32, epilogue); }
  CONVOY_PROBLEM_COMPARISONS(GemmProblem)
};

struct GemmArgs {
  const void* a = nullptr;  // [m, k] row-major
  const void* b = nullptr;  // [n, k] row-major (the FC weight as ONNX Gemm transB=1 stores it), or packed
  const float* bias = nullptr;
  const float* scale = nullptr;
  const void* residual = nullptr;
  void* y = nullptr;        // [m, n] row-major
};

// ---- batch norm (inference): y = act(gamma * (x - mean) / sqrt(var + eps) + beta) ---------------------------------
struct BatchNormProblem {
  static constexpr OpKind kKind = OpKind::kBatchNorm;
  int n = 1, c = 1, h = 1, w = 1;
  float epsilon = 1e-5f;
  DataType dtype = DataType::kFloat32;
  Layout layout = Layout::kNCHW;
  Activation activation;

  TensorDesc desc() const { return TensorDesc::Image(dtype, n, c, h, w, layout); }
  absl::Status Validate() const;
  std::string ToString() const;
  auto Tie() const { return std::tie(n, c, h, w, epsilon, dtype, layout, activation); }
  CONVOY_PROBLEM_COMPARISONS(BatchNormProblem)
};

struct BatchNormArgs {
  const void* x = nullptr;
  const float* gamma = nullptr;  // [C]
  const float* beta = nullptr;   // [C]
  const float* mean = nullptr;   // [C]
  const float* var = nullptr;    // [C]
  void* y = nullptr;
};

// ---- standalone activation over `count` elements --------------------------------------------------------------
struct ActivationProblem {
  static constexpr OpKind kKind = OpKind::kActivation;
  int64_t count = 1;
  DataType dtype = DataType::kFloat32;
  Activation activation;

  absl::Status Validate() const;
  std::string ToString() const;
  auto Tie() const { return std::tie(count, dtype, activation); }
  CONVOY_PROBLEM_COMPARISONS(ActivationProblem)
};

struct ActivationArgs {
  const void* x = nullptr;
  void* y = nullptr;  // may equal x
};

// ---- binary element-wise: y = act(a OP b), b broadcast per BinaryBroadcast ----------------------------------------
enum class BinaryOp : uint8_t { kAdd = 0, kSub, kMul, kDiv };
enum class BinaryBroadcast : uint8_t {
  kNone = 0,         // b has a's shape
  kPerImageChannel,  // b is [N, C, 1, 1] (squeeze-excitation)
  kPerChannel,       // b is [1, C, 1, 1], FP32 or dtype
  kScalar,           // b is one element
};

struct BinaryProblem {
  static constexpr OpKind kKind = OpKind::kBinary;
  BinaryOp op = BinaryOp::kAdd;
  BinaryBroadcast broadcast = BinaryBroadcast::kNone;
  int n = 1, c = 1, h = 1, w = 1;  // a and y
  DataType dtype = DataType::kFloat32;
  Layout layout = Layout::kNCHW;
  Activation activation;

  TensorDesc desc() const { return TensorDesc::Image(dtype, n, c, h, w, layout); }
  int64_t b_elements() const;
  absl::Status Validate() const;
  std::string ToString() const;
  auto Tie() const { return std::tie(op, broadcast, n, c, h, w, dtype, layout, activation); }
  CONVOY_PROBLEM_COMPARISONS(BinaryProblem)
};

struct BinaryArgs {
  const void* a = nullptr;
  const void* b = nullptr;  // in dtype; for kPerImageChannel [N, C] contiguous, kPerChannel [C], kScalar [1]
  void* y = nullptr;        // may equal a
};

// ---- channel concat / split / shuffle --------------------------------------------------------------------------
struct ConcatProblem {
  static constexpr OpKind kKind = OpKind::kConcat;
  int n = 1, h = 1, w = 1;
  std::vector<int> channels;  // channels of each input, in order
  DataType dtype = DataType::kFloat32;
  Layout layout = Layout::kNCHW;

  int total_channels() const;
  absl::Status Validate() const;
  std::string ToString() const;
  auto Tie() const { return std::tie(n, h, w, channels, dtype, layout); }
  CONVOY_PROBLEM_COMPARISONS(ConcatProblem)
};

struct ConcatArgs {
  std::vector<const void*> inputs;
  void* y = nullptr;
};

struct SplitProblem {
  static constexpr OpKind kKind = OpKind::kSplit;
  int n = 1, h = 1, w = 1;
  std::vector<int> channels;  // channels of each output, in order
  DataType dtype = DataType::kFloat32;
  Layout layout = Layout::kNCHW;

  int total_channels() const;
  absl::Status Validate() const;
  std::string ToString() const;
  auto Tie() const { return std::tie(n, h, w, channels, dtype, layout); }
  CONVOY_PROBLEM_COMPARISONS(SplitProblem)
};

struct SplitArgs {
  const void* x = nullptr;
  std::vector<void*> outputs;
};

// y[:, j * groups + g] = x[:, g * (C / groups) + j]: ShuffleNet's reshape-transpose-reshape.
struct ChannelShuffleProblem {
  static constexpr OpKind kKind = OpKind::kChannelShuffle;
  int n = 1, c = 1, h = 1, w = 1;
  int groups = 1;
  DataType dtype = DataType::kFloat32;
  Layout layout = Layout::kNCHW;

  absl::Status Validate() const;
  std::string ToString() const;
  auto Tie() const { return std::tie(n, c, h, w, groups, dtype, layout); }
  CONVOY_PROBLEM_COMPARISONS(ChannelShuffleProblem)
};

struct ChannelShuffleArgs {
  const void* x = nullptr;
  void* y = nullptr;
};

// ---- softmax over the middle axis of a dense [outer, axis, inner] tensor -----------------------------------------
struct SoftmaxProblem {
  static constexpr OpKind kKind = OpKind::kSoftmax;
  int64_t outer = 1, axis = 1, inner = 1;
  DataType dtype = DataType::kFloat32;

  absl::Status Validate() const;
  std::string ToString() const;
  auto Tie() const { return std::tie(outer, axis, inner, dtype); }
  CONVOY_PROBLEM_COMPARISONS(SoftmaxProblem)
};

struct SoftmaxArgs {
  const void* x = nullptr;
  void* y = nullptr;
};

// ---- spatial padding -------------------------------------------------------------------------------------------
enum class PadMode : uint8_t { kConstant = 0, kReflect, kEdge };

struct PadProblem {
  static constexpr OpKind kKind = OpKind::kPad;
  int n = 1, c = 1, h = 1, w = 1;
  int pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  PadMode mode = PadMode::kConstant;
  float value = 0.0f;
  DataType dtype = DataType::kFloat32;
  Layout layout = Layout::kNCHW;

  int out_h() const { return h + pad_top + pad_bottom; }
  int out_w() const { return w + pad_left + pad_right; }
  absl::Status Validate() const;
  std::string ToString() const;
  auto Tie() const { return std::tie(n, c, h, w, pad_top, pad_bottom, pad_left, pad_right, mode, value, dtype, layout); }
  CONVOY_PROBLEM_COMPARISONS(PadProblem)
};

struct PadArgs {
  const void* x = nullptr;
  void* y = nullptr;
};

// ---- layout and dtype conversion of a 4-D tensor (a flat array is n=count, c=h=w=1) -----------------------------
// Between floating-point types, or an ONNX QuantizeLinear / DequantizeLinear with one scale and zero point (per
// tensor) between FP32 and UINT8 / INT8: quantize y = saturate(round_half_even(x / scale) + zero_point) (NaN -> the
// type's minimum), dequantize y = float(x - zero_point) * scale, each in FP32 as ONNX and onnxruntime compute it.
// The planner quantizes and dequantizes this way at the edges of the INT8 steps of a QDQ model.
struct ConvertProblem {
  static constexpr OpKind kKind = OpKind::kConvert;
  int n = 1, c = 1, h = 1, w = 1;
  DataType src_dtype = DataType::kFloat32, dst_dtype = DataType::kFloat32;
  Layout src_layout = Layout::kNCHW, dst_layout = Layout::kNCHW;
  // Channels of the destination when it is padded (> c; the extra channels are written as zeros), or 0: c. The
  // planner pads few-channel images (RGB) to 16 bytes of channels so the first conv can run on tensor cores.
  int dst_c = 0;
  // The quantization of the UINT8 / INT8 side (quantized() problems only; 0 and 0 otherwise).
  float scale = 0.0f;
  int zero_point = 0;

  int output_c() const { return dst_c > 0 ? dst_c : c; }
  // One side is UINT8 or INT8: a quantize (dst) or dequantize (src) with scale and zero_point.
  bool quantized() const { return IsQuantizedType(src_dtype) || IsQuantizedType(dst_dtype); }
  static bool IsQuantizedType(DataType dtype) { return dtype == DataType::kUInt8 || dtype == DataType::kInt8; }
  absl::Status Validate() const;
  std::string ToString() const;
  auto Tie() const {
    return std::tie(n, c, h, w, src_dtype, dst_dtype, src_layout, dst_layout, dst_c, scale, zero_point);
  }
  CONVOY_PROBLEM_COMPARISONS(ConvertProblem)
};

struct ConvertArgs {
  const void* x = nullptr;
  void* y = nullptr;
};

// ---- general transpose of a dense row-major tensor of rank 1..6: y dim i is x dim perm[i] ------------------------
// The graph's Transpose (ONNX semantics). Elements move bit for bit, so every data type works (FP32, FP16, BF16,
// UINT8, INT64, ...). Coalesced() gives the equivalent lowest-rank problem the kernels dispatch on: NCHW -> NHWC of
// [N, C, H, W] becomes the batched matrix swap [N, C, H*W] perm (0, 2, 1).
struct TransposeProblem {
  static constexpr OpKind kKind = OpKind::kTranspose;
  static constexpr int kMaxRank = 6;
  std::vector<int64_t> dims;  // input dims, row-major
  std::vector<int> perm;      // output dim i is input dim perm[i]
  DataType dtype = DataType::kFloat32;

  int rank() const { return static_cast<int>(dims.size()); }
  std::vector<int64_t> output_dims() const;
  int64_t num_elements() const;
  // Unit dims dropped and input dims that stay adjacent and in order in the output merged (rank >= 1; the identity
  // permutation coalesces to one dim).
  TransposeProblem Coalesced() const;
  absl::Status Validate() const;
  std::string ToString() const;
  auto Tie() const { return std::tie(dims, perm, dtype); }
  CONVOY_PROBLEM_COMPARISONS(TransposeProblem)
};

struct TransposeArgs {
  const void* x = nullptr;  // dims
  void* y = nullptr;        // output_dims(); must not overlap x
};

// ---- image pre-processing: UINT8 [N, H, W, C] -> (x / 255 - mean[c]) / stddev[c] in dst dtype and layout ---------------
struct PreprocessProblem {
  static constexpr int kMaxChannels = 4;
  static constexpr OpKind kKind = OpKind::kPreprocess;
  int n = 1, h = 1, w = 1, c = 3;
  std::array<float, kMaxChannels> mean = {0, 0, 0, 0};
  std::array<float, kMaxChannels> stddev = {1, 1, 1, 1};
  bool scale_to_unit = true;  // divide by 255 before subtracting the mean
  DataType dst_dtype = DataType::kFloat32;
  Layout dst_layout = Layout::kNCHW;
  // Channels of the output when it is padded (> c; zeros), or 0: c. As ConvertProblem::dst_c.
  int dst_c = 0;

  int output_c() const { return dst_c > 0 ? dst_c : c; }
  absl::Status Validate() const;
  std::string ToString() const;
  auto Tie() const { return std::tie(n, h, w, c, mean, stddev, scale_to_unit, dst_dtype, dst_layout, dst_c); }
  CONVOY_PROBLEM_COMPARISONS(PreprocessProblem)
};

struct PreprocessArgs {
  const uint8_t* x = nullptr;
  void* y = nullptr;
};

// ---- spatial resize (ONNX Resize / Upsample over H and W) ---------------------------------------------------------
// Each output coordinate maps to a source coordinate (`coordinates`, ONNX's coordinate_transformation_mode), then
// the output is the nearest source element (`nearest` rounding) or a weighted sum of the source elements around it
// (linear: 2 taps per axis, cubic: 4; with `antialias` a downscaled axis widens the filter by 1 / scale). Source
// indices outside the input are clamped to the edge, or (cubic `exclude_outside`) dropped with the weights
// renormalised. kernels/common/resize_sampling.h holds the arithmetic every implementation shares.
enum class ResizeMode : uint8_t { kNearest = 0, kLinear, kCubic };
enum class ResizeCoordinates : uint8_t {
  kHalfPixel = 0,
  kHalfPixelSymmetric,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfCropAndResize,
};
// kSimple is Resize-10's and Upsample's rule: floor when the axis is upscaled, ceil when it is downscaled.
enum class ResizeNearest : uint8_t { kRoundPreferFloor = 0, kRoundPreferCeil, kFloor, kCeil, kSimple };

struct ResizeProblem {
  static constexpr OpKind kKind = OpKind::kResize;
  int n = 1, c = 1, h = 1, w = 1;
  int out_h = 1, out_w = 1;
  // The scale of each axis (ONNX's scales, or out / in when sizes are given) and the resized length the coordinate
  // transforms divide by (in * scale when scales are given, which need not be an integer; out when sizes are).
  float scale_h = 1.0f, scale_w = 1.0f;
  float length_h = 1.0f, length_w = 1.0f;
  ResizeMode mode = ResizeMode::kNearest;
  ResizeCoordinates coordinates = ResizeCoordinates::kHalfPixel;
  ResizeNearest nearest = ResizeNearest::kRoundPreferFloor;
  float cubic_a = -0.75f;
  bool exclude_outside = false;
  bool antialias = false;
  // tf_crop_and_resize: the crop (fractions of the input, start and end per axis) and the value of outputs whose
  // source lies outside the input.
  float roi_top = 0.0f, roi_left = 0.0f, roi_bottom = 1.0f, roi_right = 1.0f;
  float extrapolation_value = 0.0f;
  DataType dtype = DataType::kFloat32;
  Layout layout = Layout::kNCHW;

  absl::Status Validate() const;
  std::string ToString() const;
  auto Tie() const {
    return std::tie(n, c, h, w, out_h, out_w, scale_h, scale_w, length_h, length_w, mode, coordinates, nearest,
                    cubic_a, exclude_outside, antialias, roi_top, roi_left, roi_bottom, roi_right,
                    extrapolation_value, dtype, layout);
  }
  CONVOY_PROBLEM_COMPARISONS(ResizeProblem)
};

struct ResizeArgs {
  const void* x = nullptr;  // [N, C, H, W] in layout
  void* y = nullptr;        // [N, C, out_h, out_w] in layout
};

// ---- index of the maximum along the middle axis of a dense [outer, axis, inner] tensor -----------------------------
// ONNX ArgMax and a segmentation model's class map: over the channels of NCHW (outer N, inner H*W) or of NHWC (outer
// N*H*W, inner 1). Ties (and runs of NaN-free equal values) go to the first index, or the last with
// select_last_index; a NaN is never greater than anything, so it is picked only when every value is NaN (index 0).
// The indices are written as index_dtype: UINT8 (axis <= 256), INT32, INT64, or a float type holding the index
// exactly (FP32 up to 2^24, FP16 2048, BF16 256): the graph's float tensors.
struct ArgMaxProblem {
  static constexpr OpKind kKind = OpKind::kArgMax;
  int64_t outer = 1, axis = 1, inner = 1;
  DataType dtype = DataType::kFloat32;
  DataType index_dtype = DataType::kInt64;
  bool select_last_index = false;

  absl::Status Validate() const;
  std::string ToString() const;
  auto Tie() const { return std::tie(outer, axis, inner, dtype, index_dtype, select_last_index); }
  CONVOY_PROBLEM_COMPARISONS(ArgMaxProblem)
};

struct ArgMaxArgs {
  const void* x = nullptr;  // [outer, axis, inner] in dtype
  void* y = nullptr;        // [outer, inner] in index_dtype
};

// ---- normalization over the middle axis of a dense [outer, axis, inner] tensor ------------------------------------
// ONNX LayerNormalization (every axis from `axis` on flattened into the middle, inner 1) and a LayerNorm over the
// channels of an image: NCHW (outer N, inner H*W) or NHWC (outer N*H*W, inner 1), ConvNeXt's form. For each
// (outer, inner) column: mean and variance (the mean of the squared deviations) in FP32,
// y = (x - mean) / sqrt(variance + epsilon) * scale[a] + bias[a]. With write_stats the column's mean and
// 1 / sqrt(variance + epsilon) are written too (ONNX's optional outputs Mean and InvStdDev).
struct LayerNormProblem {
  static constexpr OpKind kKind = OpKind::kLayerNorm;
  int64_t outer = 1, axis = 1, inner = 1;
  float epsilon = 1e-5f;
  bool has_bias = false;
  bool write_stats = false;
  DataType dtype = DataType::kFloat32;

  absl::Status Validate() const;
  std::string ToString() const;
  auto Tie() const { return std::tie(outer, axis, inner, epsilon, has_bias, write_stats, dtype); }
  CONVOY_PROBLEM_COMPARISONS(LayerNormProblem)
};

struct LayerNormArgs {
  const void* x = nullptr;        // [outer, axis, inner] in dtype
  const float* scale = nullptr;   // [axis]
  const float* bias = nullptr;    // [axis], or null without has_bias
  void* y = nullptr;              // [outer, axis, inner] in dtype
  void* mean = nullptr;           // [outer, inner] in dtype, with write_stats
  void* inv_std_dev = nullptr;    // [outer, inner] in dtype, with write_stats
};

// ---- 2-D transposed convolution (ONNX ConvTranspose, the gradient of a convolution with respect to its input) --------
// x [N, C, H, W], filter [C, K/groups, R, S] (ONNX's layout, whatever the activations' layout), y [N, K, out_h, out_w]
// in NCHW or NHWC:
//   y[n, k, oy, ox] = bias[k] + sum over c of k's group, r, s with oy + pad_top - r * dilation_h = iy * stride_h
//                     and ox + pad_left - s * dilation_w = ix * stride_w (iy, ix inside the input) of
//                     x[n, c, iy, ix] * filter[c, k % (K/groups), r, s].
// out_h and out_w are given (ONNX's output_shape, or stride * (H - 1) + output_padding + dilated kernel - pads);
// the pads at the bottom and right follow from them. pad_top / pad_left may be negative (SAME padding of an
// output_shape larger than the natural output).
struct ConvTranspose2dProblem {
  static constexpr OpKind kKind = OpKind::kConvTranspose2d;
  int n = 1, c = 1, h = 1, w = 1;  // input
  int k = 1, r = 1, s = 1;         // output channels, filter extent
  int out_h = 1, out_w = 1;
  int pad_top = 0, pad_left = 0;
  int stride_h = 1, stride_w = 1;
  int dilation_h = 1, dilation_w = 1;
  int groups = 1;
  bool has_bias = false;
  DataType dtype = DataType::kFloat32;
  Layout layout = Layout::kNCHW;

  absl::Status Validate() const;
  std::string ToString() const;
  auto Tie() const {
    return std::tie(n, c, h, w, k, r, s, out_h, out_w, pad_top, pad_left, stride_h, stride_w, dilation_h, dilation_w,
                    groups, has_bias, dtype, layout);
  }
  CONVOY_PROBLEM_COMPARISONS(ConvTranspose2dProblem)
};

struct ConvTranspose2dArgs {
  const void* x = nullptr;        // [N, C, H, W] in layout
  const void* w = nullptr;        // [C, K/groups, R, S] in dtype
  const float* bias = nullptr;    // [K], or null without has_bias
  void* y = nullptr;              // [N, K, out_h, out_w] in layout
};

// ---- unary element-wise functions beyond the epilogue's activations (unary_function.h) ------------------------------
// Over `count` elements of a dense buffer in any layout (the function does not depend on the position). alpha and
// beta are the function's parameters (Elu/Celu/ThresholdedRelu alpha; Selu alpha and gamma as beta).
struct UnaryProblem {
  static constexpr OpKind kKind = OpKind::kUnary;
  int64_t count = 1;
  UnaryKind kind = UnaryKind::kExp;
  float alpha = 0.0f, beta = 0.0f;
  DataType dtype = DataType::kFloat32;

  absl::Status Validate() const;
  std::string ToString() const;
  auto Tie() const { return std::tie(count, kind, alpha, beta, dtype); }
  CONVOY_PROBLEM_COMPARISONS(UnaryProblem)
};

struct UnaryArgs {
  const void* x = nullptr;
  void* y = nullptr;  // may equal x
};
absl::string_view UnaryKindName(UnaryKind kind);

// ---- squeeze-and-excitation: y = x * gate(x), one step for the whole branch ----------------------------------------
// The channel attention of EfficientNet, MobileNetV3 and RegNetY, per image i and channel c of x [N,C,H,W]:
//   mean[i,c]   = sum over h, w of x[i,c,h,w] / (H*W)                       (the global average pool)
//   hidden[i,j] = hidden_activation(sum_c w1[j,c] * mean[i,c] + b1[j])       (a 1x1 conv C -> squeeze, j < squeeze)
//   gate[i,c]   = gate_activation(sum_j w2t[j,c] * hidden[i,j] + b2[c])      (a 1x1 conv squeeze -> C)
//   y[i,c,h,w]  = x[i,c,h,w] * gate[i,c]
// w1 is [squeeze, C] (the first 1x1 filter's [K, C, 1, 1] order) and w2t [squeeze, C] (the second filter's
// [C, squeeze, 1, 1] transposed, so both products run along C), FP32 like every epilogue parameter;
// b1 / b2 are read only when has_hidden_bias / has_gate_bias. x and y share the layout (NCHW, NHWC, or NCHW8c for
// channel counts that are multiples of the block).
struct SqueezeExcitationProblem {
  static constexpr OpKind kKind = OpKind::kSqueezeExcitation;
  int n = 1, c = 1, h = 1, w = 1;
  int squeeze = 1;  // the hidden channels
  bool has_hidden_bias = false;
  bool has_gate_bias = false;
  Activation hidden_activation;  // SiLU in EfficientNet, ReLU in MobileNetV3 and RegNetY
  Activation gate_activation;    // sigmoid (EfficientNet, RegNetY) or hard sigmoid (MobileNetV3)
  DataType dtype = DataType::kFloat32;
  Layout layout = Layout::kNCHW;

  TensorDesc input_desc() const { return TensorDesc::Image(dtype, n, c, h, w, layout); }
  TensorDesc output_desc() const { return input_desc(); }
  absl::Status Validate() const;
  std::string ToString() const;
  auto Tie() const {
    return std::tie(n, c, h, w, squeeze, has_hidden_bias, has_gate_bias, hidden_activation, gate_activation, dtype,
                    layout);
  }
  CONVOY_PROBLEM_COMPARISONS(SqueezeExcitationProblem)
};

struct SqueezeExcitationArgs {
  const void* x = nullptr;      // problem.input_desc()
  const float* w1 = nullptr;    // [squeeze, C]
  const float* b1 = nullptr;    // [squeeze] when has_hidden_bias
  const float* w2 = nullptr;    // [squeeze, C]: the second filter transposed
  const float* b2 = nullptr;    // [C] when has_gate_bias
  void* y = nullptr;            // problem.output_desc(); may equal x
};

#undef CONVOY_PROBLEM_COMPARISONS

}  // namespace convoy

#endif  // CONVOY_KERNELS_COMMON_PROBLEMS_H_
