// Convoy's graph IR: the model as the importers produce it and the passes rewrite it, before the planner maps each
// node onto one kernel.
//
// A Graph holds named float32 tensors: graph inputs (with a symbolic batch dimension), constants (owned data), and
// the outputs of nodes. Each Node has an op kind and one typed attribute struct; fused nodes (Conv2d with bias,
// per-channel scale, residual add and activation) are shaped to map 1:1 onto the kernel library's fused ops, but
// this file depends on nothing in kernels/.
//
//   Graph graph;
//   CONVOY_RETURN_IF_ERROR(graph.AddInput("images", {kBatch, 3, 32, 32}));
//   CONVOY_RETURN_IF_ERROR(graph.AddConstant("w", std::move(weights)));
//   CONVOY_RETURN_IF_ERROR(graph.AddNode(MakeNode("conv1", Conv2dAttrs{...}, {"images", "w"}, {"y"})));
//   CONVOY_RETURN_IF_ERROR(graph.AddOutput("y"));
//   CONVOY_RETURN_IF_ERROR(graph.Finalize());  // topological order + shape inference
//   std::cout << graph.ToString();
#ifndef CONVOY_SERVER_RUNTIME_GRAPH_H_
#define CONVOY_SERVER_RUNTIME_GRAPH_H_

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace convoy::runtime {

// A tensor shape. Dimension 0 of a graph input may be kBatch, the symbolic batch size fixed at run time; it
// propagates to every tensor computed from that input.
using Shape = std::vector<int64_t>;
inline constexpr int64_t kBatch = -1;

// "[N,3,224,224]" (N for the symbolic batch).
std::string ShapeToString(const Shape& shape);
// Number of elements with the batch dimension counted as `batch_size`.
int64_t NumElements(const Shape& shape, int64_t batch_size = 1);
// Replaces kBatch by `batch_size`.
Shape ConcreteShape(const Shape& shape, int64_t batch_size);

// A dense row-major float32 tensor with a concrete shape: constants and the reference interpreter's values.
struct Tensor {
  Shape shape;
  std::vector<float> data;

  static Tensor Zeros(Shape shape);
};

enum class ActivationKind {
  kIdentity,
  kRelu,
  kClip,         // min(max(x, alpha), beta); relu6 is Clip(0, 6)
  kLeakyRelu,    // x if x >= 0 else alpha * x
  kSigmoid,
  kTanh,
  kSilu,         // x * sigmoid(x)
  kHardSigmoid,  // clamp(alpha * x + beta, 0, 1)
  kHardSwish,    // x * clamp(x / 6 + 1 / 2, 0, 1)
  kGelu,         // exact (erf) form
  // ONNX QuantizeLinear + DequantizeLinear with one scale (alpha) and integer zero point (beta):
  // (saturate(round_half_even(x / scale) + zero_point) - zero_point) * scale, saturating to [0, 255] (U8) or
  // [-128, 127] (S8). The QDQ importer (onnx_quantization.h) emits it for each Q -> DQ pair on an activation.
  kQuantizeDequantizeU8,
  kQuantizeDequantizeS8,
};
const char* ActivationKindName(ActivationKind kind);

struct Activation {
  ActivationKind kind = ActivationKind::kIdentity;
  float alpha = 0.0f;
  float beta = 0.0f;

  static Activation Relu() { return {ActivationKind::kRelu, 0, 0}; }
  static Activation Clip(float min, float max) { return {ActivationKind::kClip, min, max}; }
};
float ApplyActivation(const Activation& activation, float x);

// Where a fused residual tensor is added: before the activation (ResNet: relu(conv + x)) or after it.
enum class ResidualPosition { kNone, kBeforeActivation, kAfterActivation };

// Spatial window parameters shared by Conv2d and Pool2d. Padding may be asymmetric.
struct Window2d {
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  int64_t dilation_h = 1, dilation_w = 1;
};

// Inputs, in order: x [N,C,H,W], weight [K,C/groups,R,S] (constant), then the optional ones flagged below:
// bias [K], channel_scale [K], residual (same shape as the output).
// y = act(conv(x, w) * channel_scale + bias (+ residual if before)) (+ residual if after).
struct Conv2dAttrs {
  Window2d window;
  int64_t groups = 1;
  bool has_bias = false;
  bool has_channel_scale = false;
  ResidualPosition residual = ResidualPosition::kNone;
  Activation activation;
};

enum class PoolKind { kMax, kAverage };
// Inputs: x [N,C,H,W]. Global pooling ignores the window and yields [N,C,1,1].
struct Pool2dAttrs {
  PoolKind kind = PoolKind::kMax;
  bool global = false;
  Window2d window;
  bool ceil_mode = false;
  bool count_include_pad = false;  // average pooling only
};

// Inference batch norm. Inputs: x [N,C,...], scale [C], bias [C], mean [C], variance [C] (all constant).
struct BatchNormAttrs {
  float epsilon = 1e-5f;
};

struct ActivationAttrs {
  Activation activation;
};

enum class BinaryKind { kAdd, kSub, kMul, kDiv };
// Two inputs with numpy (multidirectional) broadcasting, e.g. [N,C,H,W] * [N,C,1,1].
struct BinaryAttrs {
  BinaryKind kind = BinaryKind::kAdd;
};

struct ConcatAttrs {
  int64_t axis = 1;
};

// One input, one output per entry of `sizes` along `axis`.
struct SplitAttrs {
  int64_t axis = 1;
  std::vector<int64_t> sizes;
};

// [N,C,H,W] -> view as [N,groups,C/groups,H,W], swap axes 1 and 2, view back (ShuffleNet).
struct ChannelShuffleAttrs {
  int64_t groups = 1;
};

struct SoftmaxAttrs {
  int64_t axis = -1;
};

// y = act(alpha * A' * B' + beta * C) with A' = transpose_a ? A^T : A; inputs A [M,K], B [K,N] (or [N,K]), optional C
// broadcastable to [M,N]. ONNX MatMul of N-D tensors: A [..., M, K] (no transpose_a) times a 2-D B shared by every
// matrix of A (a Linear layer on [N,H,W,C]), or a B [..., K, N] with A's leading dims, one matrix each; y
// [..., M, N], C then a per-column vector.
struct GemmAttrs {
  float alpha = 1.0f;
  float beta = 1.0f;
  bool transpose_a = false;
  bool transpose_b = false;
  bool has_bias = false;
  Activation activation;  // fused by the passes (a following activation, e.g. the Linear + GELU of ConvNeXt)
};

enum class PadMode { kConstant, kReflect, kEdge };
// pads holds begin values for every axis, then end values (ONNX order). Negative pads crop.
struct PadAttrs {
  PadMode mode = PadMode::kConstant;
  std::vector<int64_t> pads;
  float value = 0.0f;
};

// [d0, ..., dk-1, dk, ...] -> [d0*...*dk-1, dk*...]; axis 1 keeps the batch.
struct FlattenAttrs {
  int64_t axis = 1;
};

// ONNX Reshape semantics: 0 copies the input dimension at that index, -1 is inferred.
struct ReshapeAttrs {
  std::vector<int64_t> shape;
};

struct TransposeAttrs {
  std::vector<int64_t> perm;
};

// ONNX Resize (and Upsample) over H and W of [N,C,H,W]; the fields mirror ONNX's attributes and the kernel
// library's ResizeProblem (kernels/common/problems.h), which server/runtime/resize_lowering.h builds from them.
enum class ResizeMode { kNearest, kLinear, kCubic };
enum class ResizeCoordinates {
  kHalfPixel,
  kHalfPixelSymmetric,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfCropAndResize,
};
// kSimple: Resize-10 and Upsample's nearest (floor when upscaling, ceil when downscaling).
enum class ResizeNearest { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil, kSimple };
struct ResizeAttrs {
  ResizeMode mode = ResizeMode::kNearest;
  ResizeCoordinates coordinates = ResizeCoordinates::kHalfPixel;
  ResizeNearest nearest = ResizeNearest::kRoundPreferFloor;
  float cubic_a = -0.75f;
  bool exclude_outside = false;
  bool antialias = false;
  int64_t out_h = 1, out_w = 1;
  // The axis scales (ONNX's scales, or out / in for sizes) and the resized lengths the coordinate transforms use
  // (in * scale for scales, out for sizes).
  float scale_h = 1.0f, scale_w = 1.0f, length_h = 1.0f, length_w = 1.0f;
  // tf_crop_and_resize only.
  float roi_top = 0.0f, roi_left = 0.0f, roi_bottom = 1.0f, roi_right = 1.0f;
  float extrapolation_value = 0.0f;
};

// ONNX ArgMax: the index of the largest value along `axis` (a float in the graph; `>` from index 0, `>=` with
// select_last_index), the axis kept with extent 1 or dropped.
struct ArgMaxAttrs {
  int64_t axis = 0;
  bool keepdims = true;
  bool select_last_index = false;
};

// Layer normalization (ONNX LayerNormalization; a LayerNorm over the channels of an image). Inputs: x, scale and,
// with has_bias, bias (constants with one value per normalized element, [prod of the normalized extents]). The
// normalized axes are `axis` and the num_axes - 1 after it, or every axis from `axis` on when num_axes is 0 (ONNX).
// y = (x - mean) / sqrt(variance + epsilon) * scale + bias over each set of normalized elements. With
// write_stats the node has two more outputs, ONNX's Mean and InvStdDev: x's shape with the normalized axes 1.
struct LayerNormAttrs {
  int64_t axis = -1;
  int64_t num_axes = 0;
  float epsilon = 1e-5f;
  bool has_bias = false;
  bool write_stats = false;
};

// Transposed 2-D convolution (ONNX ConvTranspose). Inputs: x [N,C,H,W], weight [C, K/groups, kernel_h, kernel_w]
// (constant) and, with has_bias, bias [K]. The output [N, K, out_h, out_w] (out_h and out_w resolved by the importer
// from output_shape, output_padding and the pads) places input row iy at output rows
// iy * stride_h - pad_top + r * dilation_h; pad_top and pad_left may be negative (SAME padding of a larger output).
struct ConvTranspose2dAttrs {
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t pad_top = 0, pad_left = 0;
  int64_t out_h = 1, out_w = 1;
  int64_t groups = 1;
  bool has_bias = false;
};

// Element-wise functions outside the fused activations (ONNX Elu, Selu, Celu, Softplus, Softsign, Mish,
// ThresholdedRelu, Gelu's tanh form, Erf, Exp, Log, Abs, Neg, Sqrt, Reciprocal, Floor, Ceil, Round, Sign): one input,
// one output of its shape. alpha and beta are the function's parameters (Selu: alpha and gamma). The passes never
// fuse them into a convolution; the kernel library's unary op (kernels/common/unary_function.h) runs them.
enum class UnaryKind {
  kElu,
  kSelu,
  kCelu,
  kSoftplus,
  kSoftsign,
  kMish,
  kThresholdedRelu,
  kGeluTanh,
  kErf,
  kExp,
  kLog,
  kAbs,
  kNeg,
  kSqrt,
  kReciprocal,
  kFloor,
  kCeil,
  kRound,
  kSign,
};
const char* UnaryKindName(UnaryKind kind);

struct UnaryAttrs {
  UnaryKind kind = UnaryKind::kExp;
  float alpha = 0.0f;
  float beta = 0.0f;
};

struct IdentityAttrs {};

using NodeAttrs = std::variant<Conv2dAttrs, Pool2dAttrs, BatchNormAttrs, ActivationAttrs, BinaryAttrs, ConcatAttrs,
                               SplitAttrs, ChannelShuffleAttrs, SoftmaxAttrs, GemmAttrs, PadAttrs, FlattenAttrs,
                               ReshapeAttrs, TransposeAttrs, ResizeAttrs, ArgMaxAttrs, LayerNormAttrs,
                               ConvTranspose2dAttrs, UnaryAttrs, IdentityAttrs>;

// The op kind is the attribute type; this enum follows the variant order so switch statements stay readable.
enum class OpKind {
  kConv2d,
  kPool2d,
  kBatchNorm,
  kActivation,
  kBinary,
  kConcat,
  kSplit,
  kChannelShuffle,
  kSoftmax,
  kGemm,
  kPad,
  kFlatten,
  kReshape,
  kTranspose,
  kResize,
  kArgMax,
  kLayerNorm,
  kConvTranspose2d,
  kUnary,
  kIdentity,
};
const char* OpKindName(OpKind op);

struct Node {
  std::string name;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  NodeAttrs attrs;

  OpKind op() const { return static_cast<OpKind>(attrs.index()); }
  template <typename T>
  const T& As() const { return std::get<T>(attrs); }
  template <typename T>
  T& As() { return std::get<T>(attrs); }
};

// Builds a node; the op kind follows from the attribute type.
Node MakeNode(std::string name, NodeAttrs attrs, std::vector<std::string> inputs, std::vector<std::string> outputs);

// How an FP32 constant was made at import by a DequantizeLinear of integers (QDQ models): value.data[i] is exactly
// float(q[i] - zero_points[j]) * scales[j], j the index along `axis` (-1: one scale and zero point for the whole
// tensor). The INT8 planning (quantized_conv_folding.h) recovers q from it; it checks that the data still dequantize
// exactly, so a pass that rewrote the constant leaves a stale record that simply does not apply.
struct ConstantQuantization {
  bool is_signed = true;  // INT8 (true) or UINT8 integers
  int64_t axis = -1;
  std::vector<float> scales;
  std::vector<int64_t> zero_points;
};

struct GraphInput {
  std::string name;
  Shape shape;
};

class Graph {
 public:
  // Each name must be new to the graph (inputs, constants and node outputs share one namespace).
  absl::Status AddInput(const std::string& name, Shape shape);
  absl::Status AddConstant(const std::string& name, Tensor value);
  // Checks that output names are new; inputs are checked by Finalize (they may be produced by later nodes).
  absl::Status AddNode(Node node);
  absl::Status AddOutput(const std::string& name);

  // Sorts the nodes topologically, checks every edge has a producer, and infers every tensor's shape.
  // Passes call it again after rewriting the graph.
  absl::Status Finalize();

  const std::vector<GraphInput>& inputs() const { return inputs_; }
  const std::vector<std::string>& outputs() const { return outputs_; }
  std::vector<std::string>& mutable_outputs() { return outputs_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  // Passes rewrite nodes in place, then call Finalize.
  std::vector<Node>& mutable_nodes() { return nodes_; }
  const std::map<std::string, Tensor>& constants() const { return constants_; }
  std::map<std::string, Tensor>& mutable_constants() { return constants_; }

  // Records how constant `name` was dequantized at import (the importer of QDQ models calls it).
  void SetConstantQuantization(const std::string& name, ConstantQuantization quantization) {
    constant_quantization_[name] = std::move(quantization);
  }
  // The record for constant `name`, or null (also when the constant no longer exists).
  const ConstantQuantization* FindConstantQuantization(const std::string& name) const;

  bool IsConstant(const std::string& name) const { return constants_.count(name) > 0; }
  const Tensor* FindConstant(const std::string& name) const;
  // Shape of any tensor, valid after Finalize.
  absl::StatusOr<Shape> ShapeOf(const std::string& name) const;
  // A fresh tensor name starting with `stem`.
  std::string UniqueName(const std::string& stem) const;

  // Index of the node producing `tensor`, or -1 for inputs and constants.
  int ProducerIndex(const std::string& tensor) const;
  // Indices of the nodes reading `tensor` (a node reading it twice appears once).
  std::vector<int> ConsumerIndices(const std::string& tensor) const;
  bool IsGraphOutput(const std::string& tensor) const;

  // Human-readable dump: inputs, constants (shape only), nodes with attributes and shapes, outputs.
  std::string ToString() const;

 private:
  bool NameTaken(const std::string& name) const;
  absl::Status SortTopologically();
  absl::Status InferAllShapes();

  std::vector<GraphInput> inputs_;
  std::map<std::string, Tensor> constants_;
  std::map<std::string, ConstantQuantization> constant_quantization_;
  std::vector<Node> nodes_;
  std::vector<std::string> outputs_;
  std::map<std::string, Shape> shapes_;
};

// The output shapes of `node` given its input shapes, with errors naming the node, the tensor and the numbers.
absl::StatusOr<std::vector<Shape>> InferOutputShapes(const Node& node, const std::vector<Shape>& input_shapes);

}  // namespace convoy::runtime

#endif  // CONVOY_SERVER_RUNTIME_GRAPH_H_
