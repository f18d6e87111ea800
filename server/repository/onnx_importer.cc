// ONNX -> graph IR. One OnnxImporter walks the (already topologically ordered) ONNX nodes once: a node whose inputs
// are all known is evaluated by the load-time evaluator (onnx_constant_evaluator.h) when it knows the op; otherwise
// the op's handler emits IR nodes (or, for a float op on constants, evaluates it with the reference interpreter).
// See onnx_importer.h for what is supported.
#include "server/repository/onnx_importer.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/common/status_macros.h"
#include "server/repository/onnx_constant_evaluator.h"
#include "server/repository/onnx_layer_norm_pattern.h"
#include "server/repository/onnx_proto_reader.h"
#include "server/repository/onnx_qoperator.h"
#include "server/repository/onnx_quantization.h"
#include "server/repository/onnx_resize_import.h"
#include "server/runtime/reference_interpreter.h"

namespace convoy::repository {
namespace {

using runtime::Graph;
using runtime::Shape;

constexpr int64_t kMinOpset = 1;
constexpr int64_t kMaxOpset = 21;

class OnnxImporter {
 public:
  OnnxImporter(std::string source, const OnnxImportOptions& options) : source_(std::move(source)), options_(options) {}

  absl::StatusOr<Graph> Import(const onnx::ModelProto& model);

 private:
  using Handler = absl::Status (OnnxImporter::*)(const onnx::NodeProto&, const OnnxAttributes&);

  absl::Status ImportOpset(const onnx::ModelProto& model);
  absl::Status ImportInputs(const onnx::GraphProto& g);
  absl::Status ImportNode(const onnx::NodeProto& node, int index);
  absl::Status ImportOutputs(const onnx::GraphProto& g);

  // Tensor bookkeeping.
  const KnownValue* Known(const std::string& name) const;
  absl::StatusOr<Shape> ShapeOf(const std::string& name) const;
  absl::StatusOr<std::string> GraphTensor(const std::string& name);
  absl::StatusOr<const KnownValue*> RequireKnown(const OnnxAttributes& a, const onnx::NodeProto& n, int input,
                                                 bool want_int);
  absl::StatusOr<std::vector<int64_t>> KnownInts(const OnnxAttributes& a, const onnx::NodeProto& n, int input);
  // Input 0 of `n` with shape `target` (0 copies the batch): a known value is reshaped here, runtime data becomes a
  // Reshape node (named `default_name` when the node has no name). Squeeze and Unsqueeze end here.
  absl::Status ReshapeTo(const onnx::NodeProto& n, const std::vector<int64_t>& target, const char* default_name);
  // Adds an IR node, or evaluates it right away when every input is a known float constant.
  absl::Status Emit(const std::string& name, runtime::NodeAttrs attrs, const std::vector<std::string>& inputs,
                    const std::vector<std::string>& outputs);
  std::string FreshNodeName(const std::string& stem);
  absl::Status ExpectInputs(const OnnxAttributes& a, const onnx::NodeProto& n, int min, int max);
  absl::Status OnlyFirstOutput(const OnnxAttributes& a, const onnx::NodeProto& n);
  // BatchNormalization and Dropout before opset 7 run in training mode unless is_test is nonzero (its default is 0).
  absl::Status InferenceModeBeforeOpset7(const OnnxAttributes& a);

  // Op handlers.
  absl::Status Conv(const onnx::NodeProto& n, const OnnxAttributes& a);
  absl::Status Pool(const onnx::NodeProto& n, const OnnxAttributes& a);
  // 1-D pooling and transposed convolution as 2-D with H = 1, and 3-D pooling as two 2-D poolings (H,W, then D):
  // the window is a box, so the max and the average (whose divisor is a product of per-axis counts in every
  // count_include_pad and ceil_mode) separate. Reshapes around them keep the ONNX shapes.
  absl::Status Pool1dOr3d(const onnx::NodeProto& n, const OnnxAttributes& a, const Shape& x);
  absl::Status ConvTranspose1d(const onnx::NodeProto& n, const OnnxAttributes& a, const Shape& x);
  // Runs `handler` on a copy of `n` reading `input` (and `weight` as input 1 when not empty), writing `output`, named
  // `name`, with the integer attributes in `ints` replaced (present ones only; absent ones keep their default).
  absl::Status ImportRewritten(const onnx::NodeProto& n, const OnnxAttributes& a, Handler handler,
                               const std::string& name, const std::string& input, const std::string& weight,
                               const std::string& output, const std::map<std::string, std::vector<int64_t>>& ints);
  absl::Status GlobalPool(const onnx::NodeProto& n, const OnnxAttributes& a);
  absl::Status SpatialReduce(const onnx::NodeProto& n, const OnnxAttributes& a);
  absl::Status MeanAsProduct(const onnx::NodeProto& n, const OnnxAttributes& a, const Shape& x,
                             const std::vector<int64_t>& axes, bool keepdims, const std::string& name);
  // Reduce* axes: the `axes` attribute, or input 1 (a constant) from the opset where the op takes it as an input
  // (ReduceSum 13, the others 18). `noop` reports noop_with_empty_axes.
  absl::StatusOr<std::vector<int64_t>> ReduceAxes(const onnx::NodeProto& n, const OnnxAttributes& a, bool& noop);
  // A constant int64 input that replaced an attribute at some opset (axes of Reduce*, Squeeze, Unsqueeze, Pad):
  // a tensor computed at run time fails naming the node, op, opset and input.
  absl::StatusOr<std::vector<int64_t>> ConstantAxesInput(const OnnxAttributes& a, const onnx::NodeProto& n, int input,
                                                         const char* what);
  absl::Status BatchNorm(const onnx::NodeProto& n, const OnnxAttributes& a);
  absl::Status ActivationOp(const onnx::NodeProto& n, const OnnxAttributes& a);
  absl::Status Clip(const onnx::NodeProto& n, const OnnxAttributes& a);
  absl::Status BinaryOp(const onnx::NodeProto& n, const OnnxAttributes& a);
  absl::Status ConcatOp(const onnx::NodeProto& n, const OnnxAttributes& a);
  absl::Status SplitOp(const onnx::NodeProto& n, const OnnxAttributes& a);
  absl::Status FlattenOp(const onnx::NodeProto& n, const OnnxAttributes& a);
  absl::Status ReshapeOp(const onnx::NodeProto& n, const OnnxAttributes& a);
  absl::Status TransposeOp(const onnx::NodeProto& n, const OnnxAttributes& a);
  absl::Status GemmOp(const onnx::NodeProto& n, const OnnxAttributes& a);
  absl::Status MatMulOp(const onnx::NodeProto& n, const OnnxAttributes& a);
  absl::Status SoftmaxOp(const onnx::NodeProto& n, const OnnxAttributes& a);
  absl::Status IdentityOp(const onnx::NodeProto& n, const OnnxAttributes& a);
  absl::Status PadOp(const onnx::NodeProto& n, const OnnxAttributes& a);
  absl::Status ResizeOp(const onnx::NodeProto& n, const OnnxAttributes& a);
  absl::Status ArgMaxOp(const onnx::NodeProto& n, const OnnxAttributes& a);
  absl::Status LayerNormalizationOp(const onnx::NodeProto& n, const OnnxAttributes& a);
  absl::Status InstanceOrGroupNormalizationOp(const onnx::NodeProto& n, const OnnxAttributes& a);
  absl::Status DepthSpaceOp(const onnx::NodeProto& n, const OnnxAttributes& a);
  absl::Status UnaryFunctionOp(const onnx::NodeProto& n, const OnnxAttributes& a);
  absl::Status PReluOp(const onnx::NodeProto& n, const OnnxAttributes& a);
  // A tensor name new to the model, starting with `stem`.
  std::string FreshTensorName(const std::string& stem) const;
  // Float constant input `input` of `n` ([C], or [G] for GroupNormalization-18's per-group form expanded to [C])
  // as a known value of shape [1, C, 1, ...] for a rank-`rank` image: broadcastable per channel.
  absl::StatusOr<std::string> PerChannelConstant(const OnnxAttributes& a, const onnx::NodeProto& n, int input,
                                                 int64_t channels, int64_t groups, size_t rank, const char* role);
  absl::Status ConvTransposeOp(const onnx::NodeProto& n, const OnnxAttributes& a);
  // The constant input `input` of `n` broadcast (numpy, right-aligned) to `target`: its own name when it already
  // has target's element count and broadcasts to it, else a new known value holding the expanded values.
  absl::StatusOr<std::string> ConstantBroadcastTo(const OnnxAttributes& a, const onnx::NodeProto& n, int input,
                                                  const Shape& target, const char* role);
  // The decomposed layer normalization `p` (onnx_layer_norm_pattern.h) as one LayerNorm node, emitted when the
  // importer reaches the pattern's last node (its other nodes are skipped).
  absl::Status EmitLayerNormPattern(const LayerNormPattern& p);
  absl::Status ShapeOp(const onnx::NodeProto& n, const OnnxAttributes& a);
  absl::Status UnsqueezeOp(const onnx::NodeProto& n, const OnnxAttributes& a);
  absl::Status SqueezeOp(const onnx::NodeProto& n, const OnnxAttributes& a);
  absl::Status CastOp(const onnx::NodeProto& n, const OnnxAttributes& a);
  absl::Status CastLikeOp(const onnx::NodeProto& n, const OnnxAttributes& a);
  absl::Status SliceOp(const onnx::NodeProto& n, const OnnxAttributes& a);
  absl::Status SliceRuntimeTensor(const onnx::NodeProto& n, const OnnxAttributes& a, const std::vector<int64_t>& starts,
                                  const std::vector<int64_t>& ends, const std::vector<int64_t>& axes,
                                  const std::vector<int64_t>& steps);

  // QuantizeLinear / DequantizeLinear (onnx_quantization.h).
  absl::Status QuantizeLinearOp(const onnx::NodeProto& n, const OnnxAttributes& a);
  absl::Status DequantizeLinearOp(const onnx::NodeProto& n, const OnnxAttributes& a);

  absl::StatusOr<runtime::Window2d> ResolveWindow(const OnnxAttributes& a, const Shape& x, int64_t kernel_h,
                                                  int64_t kernel_w, bool allow_dilation);

  static const std::map<std::string, Handler>& Handlers();

  std::string source_;
  const OnnxImportOptions& options_;
  int64_t opset_ = 0;
  Graph graph_;
  std::map<std::string, KnownValue> known_;
  std::map<std::string, Shape> shapes_;  // runtime tensors (graph inputs and IR node outputs)
  std::set<std::string> constants_in_graph_;
  std::set<std::string> node_names_;
  std::string current_label_;  // the node being imported, for errors raised below its handler
  // Decomposed layer normalizations found before the nodes are imported: node index -> the pattern it belongs to.
  std::vector<LayerNormPattern> layer_norms_;
  std::map<int, const LayerNormPattern*> layer_norm_nodes_;
  // Outputs of QuantizeLinear on runtime tensors: only a DequantizeLinear may read them (onnx_quantization.h).
  struct QuantizedTensor {
    std::string source;  // the float tensor quantized
    QuantizationParams params;
    std::string producer;  // the QuantizeLinear's label
  };
  std::map<std::string, QuantizedTensor> quantized_;
  // Float constants made by a DequantizeLinear of INT8/UINT8 constants, with their quantization.
  std::map<std::string, runtime::ConstantQuantization> dequantized_;
  absl::Status QuantizedTensorError(const std::string& name) const;
};

const std::map<std::string, OnnxImporter::Handler>& OnnxImporter::Handlers() {
  static const auto* handlers = new std::map<std::string, Handler>{
      {"Conv", &OnnxImporter::Conv},
      {"MaxPool", &OnnxImporter::Pool},
      {"AveragePool", &OnnxImporter::Pool},
      {"GlobalAveragePool", &OnnxImporter::GlobalPool},
      {"GlobalMaxPool", &OnnxImporter::GlobalPool},
      {"ReduceMean", &OnnxImporter::SpatialReduce},
      {"ReduceMax", &OnnxImporter::SpatialReduce},
      {"BatchNormalization", &OnnxImporter::BatchNorm},
      {"Relu", &OnnxImporter::ActivationOp},
      {"Sigmoid", &OnnxImporter::ActivationOp},
      {"Tanh", &OnnxImporter::ActivationOp},
      {"LeakyRelu", &OnnxImporter::ActivationOp},
      {"HardSigmoid", &OnnxImporter::ActivationOp},
      {"HardSwish", &OnnxImporter::ActivationOp},
      {"Clip", &OnnxImporter::Clip},
      {"Add", &OnnxImporter::BinaryOp},
      {"Sub", &OnnxImporter::BinaryOp},
      {"Mul", &OnnxImporter::BinaryOp},
      {"Div", &OnnxImporter::BinaryOp},
      {"Concat", &OnnxImporter::ConcatOp},
      {"Split", &OnnxImporter::SplitOp},
      {"Flatten", &OnnxImporter::FlattenOp},
      {"Reshape", &OnnxImporter::ReshapeOp},
      {"Transpose", &OnnxImporter::TransposeOp},
      {"Gemm", &OnnxImporter::GemmOp},
      {"MatMul", &OnnxImporter::MatMulOp},
      {"Softmax", &OnnxImporter::SoftmaxOp},
      {"Identity", &OnnxImporter::IdentityOp},
      {"Dropout", &OnnxImporter::IdentityOp},
      {"Pad", &OnnxImporter::PadOp},
      {"Resize", &OnnxImporter::ResizeOp},
      {"Upsample", &OnnxImporter::ResizeOp},
      {"ArgMax", &OnnxImporter::ArgMaxOp},
      {"LayerNormalization", &OnnxImporter::LayerNormalizationOp},
      {"InstanceNormalization", &OnnxImporter::InstanceOrGroupNormalizationOp},
      {"GroupNormalization", &OnnxImporter::InstanceOrGroupNormalizationOp},
      {"DepthToSpace", &OnnxImporter::DepthSpaceOp},
      {"Elu", &OnnxImporter::UnaryFunctionOp},
      {"Selu", &OnnxImporter::UnaryFunctionOp},
      {"Celu", &OnnxImporter::UnaryFunctionOp},
      {"Softplus", &OnnxImporter::UnaryFunctionOp},
      {"Softsign", &OnnxImporter::UnaryFunctionOp},
      {"Mish", &OnnxImporter::UnaryFunctionOp},
      {"ThresholdedRelu", &OnnxImporter::UnaryFunctionOp},
      {"Gelu", &OnnxImporter::UnaryFunctionOp},
      {"Erf", &OnnxImporter::UnaryFunctionOp},
      {"Exp", &OnnxImporter::UnaryFunctionOp},
      {"Log", &OnnxImporter::UnaryFunctionOp},
      {"Abs", &OnnxImporter::UnaryFunctionOp},
      {"Neg", &OnnxImporter::UnaryFunctionOp},
      {"Sqrt", &OnnxImporter::UnaryFunctionOp},
      {"Reciprocal", &OnnxImporter::UnaryFunctionOp},
      {"Floor", &OnnxImporter::UnaryFunctionOp},
      {"Ceil", &OnnxImporter::UnaryFunctionOp},
      {"Round", &OnnxImporter::UnaryFunctionOp},
      {"Sign", &OnnxImporter::UnaryFunctionOp},
      {"PRelu", &OnnxImporter::PReluOp},
      {"SpaceToDepth", &OnnxImporter::DepthSpaceOp},
      {"ConvTranspose", &OnnxImporter::ConvTransposeOp},
      {"Shape", &OnnxImporter::ShapeOp},
      {"Unsqueeze", &OnnxImporter::UnsqueezeOp},
      {"Squeeze", &OnnxImporter::SqueezeOp},
      {"Cast", &OnnxImporter::CastOp},
      {"CastLike", &OnnxImporter::CastLikeOp},
      {"Slice", &OnnxImporter::SliceOp},
      {"QuantizeLinear", &OnnxImporter::QuantizeLinearOp},
      {"DequantizeLinear", &OnnxImporter::DequantizeLinearOp},
  };
  return *handlers;
}

absl::StatusOr<Graph> OnnxImporter::Import(const onnx::ModelProto& model) {
  CONVOY_RETURN_IF_ERROR(ImportOpset(model));
  const onnx::GraphProto& g = model.graph();
  for (const onnx::TensorProto& init : g.initializer()) {
    CONVOY_ASSIGN_OR_RETURN(KnownValue v, DecodeTensor(init, absl::StrCat("initializer '", init.name(), "'")));
    known_[init.name()] = std::move(v);
  }
  CONVOY_RETURN_IF_ERROR(ImportInputs(g));
  layer_norms_ = FindLayerNormPatterns(g);
  for (const LayerNormPattern& p : layer_norms_) {
    for (int i : p.nodes) layer_norm_nodes_[i] = &p;
  }
  for (int i = 0; i < g.node_size(); ++i) {
    auto folded = layer_norm_nodes_.find(i);
    if (folded == layer_norm_nodes_.end()) {
      CONVOY_RETURN_IF_ERROR(ImportNode(g.node(i), i));
    } else if (i == folded->second->nodes.back()) {
      CONVOY_RETURN_IF_ERROR(EmitLayerNormPattern(*folded->second));
    }
  }
  CONVOY_RETURN_IF_ERROR(ImportOutputs(g));
  CONVOY_RETURN_IF_ERROR(graph_.Finalize());
  return std::move(graph_);
}

absl::Status OnnxImporter::ImportOpset(const onnx::ModelProto& model) {
  for (const auto& entry : model.opset_import()) {
    if (entry.domain().empty() || entry.domain() == "ai.onnx") opset_ = entry.version();
  }
  if (opset_ < kMinOpset || opset_ > kMaxOpset) {
    return absl::UnimplementedError(absl::StrCat(source_, ": ONNX opset ", opset_, " is not supported (", kMinOpset,
                                                 " to ", kMaxOpset, ")"));
  }
  if (!model.has_graph()) return absl::InvalidArgumentError(absl::StrCat(source_, ": the model has no graph"));
  return absl::OkStatus();
}

absl::Status OnnxImporter::ImportInputs(const onnx::GraphProto& g) {
  for (const onnx::ValueInfoProto& in : g.input()) {
    if (known_.count(in.name())) continue;  // IR v3 lists initializers as inputs too
    const std::string what = absl::StrCat(source_, ": input '", in.name(), "'");
    if (!in.type().has_tensor_type()) return absl::InvalidArgumentError(absl::StrCat(what, " is not a tensor"));
    const auto& tt = in.type().tensor_type();
    if (tt.elem_type() != onnx::TensorProto::FLOAT) {
      return absl::UnimplementedError(absl::StrCat(what, " has element type ",
                                                   onnx::TensorProto::DataType_Name(tt.elem_type()),
                                                   "; only FLOAT inputs are supported"));
    }
    Shape shape;
    auto override_it = options_.input_shapes.find(in.name());
    if (override_it != options_.input_shapes.end()) {
      shape = override_it->second;
    } else {
      for (int d = 0; d < tt.shape().dim_size(); ++d) {
        const auto& dim = tt.shape().dim(d);
        if (dim.has_dim_value() && dim.dim_value() > 0) {
          shape.push_back(dim.dim_value());
        } else if (d == 0) {
          shape.push_back(runtime::kBatch);
        } else {
          return absl::InvalidArgumentError(absl::StrCat(what, ": dimension ", d, " is symbolic ('", dim.dim_param(),
                                                         "'); give the input's dims in the model config"));
        }
      }
    }
    CONVOY_RETURN_IF_ERROR(graph_.AddInput(in.name(), shape));
    shapes_[in.name()] = shape;
  }
  return absl::OkStatus();
}

absl::Status OnnxImporter::ImportNode(const onnx::NodeProto& node, int index) {
  std::string name = node.name().empty() ? absl::StrCat(node.op_type(), "_", index) : node.name();
  OnnxAttributes attrs(node, absl::StrCat(source_, ": node '", name, "' (", node.op_type(), ")"));
  if (!node.domain().empty() && node.domain() != "ai.onnx") {
    return absl::UnimplementedError(absl::StrCat(attrs.label(), ": domain '", node.domain(), "' is not supported"));
  }
  if (node.output_size() == 0) return attrs.Error("has no outputs");
  for (const std::string& out : node.output()) {
    if (!out.empty() && (known_.count(out) || shapes_.count(out))) {
      return attrs.Error(absl::StrCat("output '", out, "' is produced twice"));
    }
  }
  // A node whose inputs are all known is evaluated here, whatever its element types (shape arithmetic, padding
  // computations, constant weights rearranged).
  const bool evaluable = IsConstantEvaluableOp(node.op_type());
  int runtime_input = -1;
  std::vector<const KnownValue*> inputs;
  for (int i = 0; i < node.input_size(); ++i) {
    const KnownValue* v = node.input(i).empty() ? nullptr : Known(node.input(i));
    if (!node.input(i).empty() && !v && runtime_input < 0) runtime_input = i;
    inputs.push_back(v);
  }
  if (evaluable && runtime_input < 0) {
    CONVOY_ASSIGN_OR_RETURN(std::vector<KnownValue> values, EvaluateConstantNode(node, attrs, opset_, inputs));
    for (int i = 0; i < node.output_size(); ++i) {
      if (!node.output(i).empty()) known_[node.output(i)] = std::move(values[i]);
    }
    return absl::OkStatus();
  }
  auto it = Handlers().find(node.op_type());
  if (it != Handlers().end()) {
    current_label_ = attrs.label();
    return (this->*(it->second))(node, attrs);
  }
  if (evaluable) {  // an op Convoy only evaluates at load time, fed by a tensor computed at run time
    const std::string& in = node.input(runtime_input);
    CONVOY_ASSIGN_OR_RETURN(Shape shape, ShapeOf(in));
    return absl::UnimplementedError(absl::StrCat(
        attrs.label(), ": input ", runtime_input, " ('", in, "', ", runtime::ShapeToString(shape),
        ") is computed at run time; Convoy evaluates ", node.op_type(),
        " only at load time, when all its inputs are constants"));
  }
  return absl::UnimplementedError(absl::StrCat(attrs.label(), ": op '", node.op_type(), "' is not supported"));
}

absl::Status OnnxImporter::ImportOutputs(const onnx::GraphProto& g) {
  if (g.output_size() == 0) return absl::InvalidArgumentError(absl::StrCat(source_, ": the graph has no outputs"));
  for (const onnx::ValueInfoProto& out : g.output()) {
    current_label_ = absl::StrCat(source_, ": graph output '", out.name(), "'");
    CONVOY_RETURN_IF_ERROR(GraphTensor(out.name()).status());
    CONVOY_RETURN_IF_ERROR(graph_.AddOutput(out.name()));
  }
  return absl::OkStatus();
}

const KnownValue* OnnxImporter::Known(const std::string& name) const {
  auto it = known_.find(name);
  return it == known_.end() ? nullptr : &it->second;
}

absl::StatusOr<Shape> OnnxImporter::ShapeOf(const std::string& name) const {
  if (const KnownValue* v = Known(name)) return v->shape;
  if (quantized_.count(name)) return QuantizedTensorError(name);
  auto it = shapes_.find(name);
  if (it == shapes_.end()) {
    return absl::InvalidArgumentError(absl::StrCat(source_, ": tensor '", name, "' is used before it is produced"));
  }
  return it->second;
}

// The name of `name` as a graph tensor, adding a known float value to the graph as a constant on first use.
absl::StatusOr<std::string> OnnxImporter::GraphTensor(const std::string& name) {
  if (shapes_.count(name)) return name;
  if (quantized_.count(name)) return QuantizedTensorError(name);
  const KnownValue* v = Known(name);
  if (!v) return absl::InvalidArgumentError(absl::StrCat(source_, ": tensor '", name, "' has no producer"));
  if (v->is_int()) {
    return absl::UnimplementedError(absl::StrCat(
        current_label_, ": integer tensor '", name, "' (", v->Describe(), ") used as data; Convoy's runtime computes "
        "on floating-point tensors (integer tensors are evaluated at load time, where they must be constants)"));
  }
  if (constants_in_graph_.insert(name).second) {
    CONVOY_RETURN_IF_ERROR(graph_.AddConstant(name, runtime::Tensor{v->shape, v->floats}));
    if (auto d = dequantized_.find(name); d != dequantized_.end()) graph_.SetConstantQuantization(name, d->second);
  }
  return name;
}

absl::StatusOr<const KnownValue*> OnnxImporter::RequireKnown(const OnnxAttributes& a, const onnx::NodeProto& n,
                                                             int input, bool want_int) {
  const KnownValue* v = input < n.input_size() ? Known(n.input(input)) : nullptr;
  if (!v) {
    return absl::UnimplementedError(absl::StrCat(a.label(), ": input ", input, " ('",
                                                 input < n.input_size() ? n.input(input) : "", "') must be a constant"));
  }
  if (want_int && !v->is_int()) {
    return a.Error(absl::StrCat("input ", input, " ('", n.input(input), "') must be an integer tensor, got ",
                                v->Describe()));
  }
  return v;
}

absl::StatusOr<std::vector<int64_t>> OnnxImporter::KnownInts(const OnnxAttributes& a, const onnx::NodeProto& n,
                                                             int input) {
  CONVOY_ASSIGN_OR_RETURN(const KnownValue* v, RequireKnown(a, n, input, true));
  return v->ints;
}

std::string OnnxImporter::FreshNodeName(const std::string& stem) {
  std::string name = stem;
  for (int i = 1; node_names_.count(name); ++i) name = absl::StrCat(stem, "_", i);
  node_names_.insert(name);
  return name;
}

absl::Status OnnxImporter::Emit(const std::string& name, runtime::NodeAttrs attrs,
                                const std::vector<std::string>& inputs, const std::vector<std::string>& outputs) {
  bool all_known = true;
  for (const std::string& in : inputs) {
    const KnownValue* v = in.empty() ? nullptr : Known(in);
    if (!in.empty() && (!v || v->is_int())) all_known = false;
  }
  runtime::Node node = runtime::MakeNode(FreshNodeName(name), std::move(attrs), {}, outputs);
  if (all_known) {
    std::vector<runtime::Tensor> args;
    args.reserve(inputs.size());
    std::vector<const runtime::Tensor*> pointers;
    for (const std::string& in : inputs) {
      if (in.empty()) {
        pointers.push_back(nullptr);
        continue;
      }
      args.push_back(runtime::Tensor{Known(in)->shape, Known(in)->floats});
      pointers.push_back(&args.back());
    }
    node.inputs = inputs;
    CONVOY_ASSIGN_OR_RETURN(std::vector<runtime::Tensor> values, runtime::EvaluateNode(node, pointers));
    for (size_t i = 0; i < outputs.size(); ++i) {
      known_[outputs[i]] = KnownValue::Float(values[i].shape, std::move(values[i].data));
    }
    return absl::OkStatus();
  }
  std::vector<Shape> in_shapes;
  for (const std::string& in : inputs) {
    if (in.empty()) {
      node.inputs.push_back("");
      in_shapes.push_back({});
      continue;
    }
    CONVOY_ASSIGN_OR_RETURN(std::string tensor, GraphTensor(in));
    node.inputs.push_back(tensor);
    CONVOY_ASSIGN_OR_RETURN(Shape shape, ShapeOf(in));
    in_shapes.push_back(shape);
  }
  auto out_shapes = runtime::InferOutputShapes(node, in_shapes);
  if (!out_shapes.ok()) return absl::InvalidArgumentError(absl::StrCat(source_, ": ", out_shapes.status().message()));
  for (size_t i = 0; i < outputs.size(); ++i) shapes_[outputs[i]] = (*out_shapes)[i];
  return graph_.AddNode(std::move(node));
}

absl::Status OnnxImporter::ExpectInputs(const OnnxAttributes& a, const onnx::NodeProto& n, int min, int max) {
  if (n.input_size() < min || n.input_size() > max) {
    return a.Error(absl::StrCat("expected ", min, "-", max, " inputs, got ", n.input_size()));
  }
  for (int i = 0; i < min; ++i) {
    if (n.input(i).empty()) return a.Error(absl::StrCat("required input ", i, " is empty"));
  }
  return absl::OkStatus();
}

absl::Status OnnxImporter::OnlyFirstOutput(const OnnxAttributes& a, const onnx::NodeProto& n) {
  for (int i = 1; i < n.output_size(); ++i) {
    if (!n.output(i).empty()) {
      return absl::UnimplementedError(absl::StrCat(a.label(), ": optional output ", i, " ('", n.output(i),
                                                   "') is not supported"));
    }
  }
  return absl::OkStatus();
}

absl::Status OnnxImporter::InferenceModeBeforeOpset7(const OnnxAttributes& a) {
  if (opset_ >= 7) return absl::OkStatus();
  CONVOY_ASSIGN_OR_RETURN(int64_t is_test, a.Int("is_test", 0));
  if (is_test != 0) return absl::OkStatus();
  return absl::UnimplementedError(absl::StrCat(a.label(), ": training mode at opset ", opset_, " (attribute 'is_test' ",
                                               a.Has("is_test") ? "0" : "absent, default 0",
                                               "; inference needs is_test 1 before opset 7)"));
}

// Kernel, strides, dilations and padding (explicit or auto_pad) of a 2-D window over x [N,C,H,W].
absl::StatusOr<runtime::Window2d> OnnxImporter::ResolveWindow(const OnnxAttributes& a, const Shape& x,
                                                              int64_t kernel_h, int64_t kernel_w,
                                                              bool allow_dilation) {
  if (x.size() != 4) {
    return absl::UnimplementedError(absl::StrCat(a.label(), ": only 2-D spatial inputs [N,C,H,W] are supported, got ",
                                                 runtime::ShapeToString(x)));
  }
  runtime::Window2d w;
  w.kernel_h = kernel_h;
  w.kernel_w = kernel_w;
  CONVOY_ASSIGN_OR_RETURN(auto strides, a.Ints("strides", {1, 1}));
  CONVOY_ASSIGN_OR_RETURN(auto dilations, a.Ints("dilations", {1, 1}));
  CONVOY_ASSIGN_OR_RETURN(auto pads, a.Ints("pads", {0, 0, 0, 0}));
  CONVOY_ASSIGN_OR_RETURN(std::string auto_pad, a.String("auto_pad", "NOTSET"));
  if (strides.size() != 2 || dilations.size() != 2 || pads.size() != 4) {
    return a.Error(absl::StrCat("expected 2 strides, 2 dilations and 4 pads, got ", strides.size(), ", ",
                                dilations.size(), " and ", pads.size()));
  }
  if (!allow_dilation && (dilations[0] != 1 || dilations[1] != 1)) {
    return absl::UnimplementedError(absl::StrCat(a.label(), ": attribute 'dilations' other than 1 is not supported"));
  }
  w.stride_h = strides[0];
  w.stride_w = strides[1];
  w.dilation_h = dilations[0];
  w.dilation_w = dilations[1];
  if (w.stride_h < 1 || w.stride_w < 1 || w.dilation_h < 1 || w.dilation_w < 1) {
    return a.Error("strides and dilations must be positive");
  }
  if (auto_pad == "NOTSET") {
    w.pad_top = pads[0];
    w.pad_left = pads[1];
    w.pad_bottom = pads[2];
    w.pad_right = pads[3];
  } else if (auto_pad == "VALID") {
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    auto same = [&](int64_t in, int64_t k, int64_t s, int64_t d, int64_t& begin, int64_t& end) {
      int64_t out = (in + s - 1) / s;
      int64_t total = std::max<int64_t>(0, (out - 1) * s + (k - 1) * d + 1 - in);
      begin = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      end = total - begin;
    };
    same(x[2], kernel_h, w.stride_h, w.dilation_h, w.pad_top, w.pad_bottom);
    same(x[3], kernel_w, w.stride_w, w.dilation_w, w.pad_left, w.pad_right);
  } else {
    return absl::UnimplementedError(absl::StrCat(a.label(), ": attribute 'auto_pad' value '", auto_pad,
                                                 "' is not supported"));
  }
  return w;
}

absl::Status OnnxImporter::Conv(const onnx::NodeProto& n, const OnnxAttributes& a) {
  CONVOY_RETURN_IF_ERROR(a.CheckKnown({"kernel_shape", "strides", "pads", "dilations", "group", "auto_pad"}));
  CONVOY_RETURN_IF_ERROR(ExpectInputs(a, n, 2, 3));
  CONVOY_ASSIGN_OR_RETURN(const KnownValue* weight, RequireKnown(a, n, 1, false));
  if (weight->shape.size() != 4) {
    return absl::UnimplementedError(absl::StrCat(a.label(), ": only 2-D convolution is supported; weight has shape ",
                                                 runtime::ShapeToString(weight->shape)));
  }
  CONVOY_ASSIGN_OR_RETURN(auto kernel, a.Ints("kernel_shape", {weight->shape[2], weight->shape[3]}));
  if (kernel.size() != 2 || kernel[0] != weight->shape[2] || kernel[1] != weight->shape[3]) {
    return a.Error(absl::StrCat("kernel_shape [", absl::StrJoin(kernel, ","), "] does not match weight ",
                                runtime::ShapeToString(weight->shape)));
  }
  CONVOY_ASSIGN_OR_RETURN(Shape x, ShapeOf(n.input(0)));
  runtime::Conv2dAttrs conv;
  CONVOY_ASSIGN_OR_RETURN(conv.window, ResolveWindow(a, x, kernel[0], kernel[1], true));
  CONVOY_ASSIGN_OR_RETURN(conv.groups, a.Int("group", 1));
  std::vector<std::string> inputs = {n.input(0), n.input(1)};
  if (n.input_size() == 3 && !n.input(2).empty()) {
    conv.has_bias = true;
    inputs.push_back(n.input(2));
  }
  return Emit(n.name().empty() ? "conv" : n.name(), conv, inputs, {n.output(0)});
}

absl::Status OnnxImporter::ImportRewritten(const onnx::NodeProto& n, const OnnxAttributes& a, Handler handler,
                                           const std::string& name, const std::string& input,
                                           const std::string& weight, const std::string& output,
                                           const std::map<std::string, std::vector<int64_t>>& ints) {
  onnx::NodeProto copy = n;
  copy.set_name(name);
  copy.set_input(0, input);
  if (!weight.empty()) copy.set_input(1, weight);
  copy.set_output(0, output);
  for (onnx::AttributeProto& attr : *copy.mutable_attribute()) {
    auto it = ints.find(attr.name());
    if (it == ints.end() || attr.type() != onnx::AttributeProto::INTS) continue;
    attr.clear_ints();
    for (int64_t v : it->second) attr.add_ints(v);
  }
  const OnnxAttributes rewritten(copy, a.label());
  return (this->*handler)(copy, rewritten);
}

// 1-D: [N,C,L] -> [N,C,1,L], a 2-D window (1 x k) -> [N,C',1,L'] -> [N,C',L'].
// 3-D: [N,C,D,H,W] -> [N,C*D,H,W], the H,W window -> [N,C,D,H'*W'], the D window (kd x 1) -> [N,C,D',H',W'].
absl::Status OnnxImporter::Pool1dOr3d(const onnx::NodeProto& n, const OnnxAttributes& a, const Shape& x) {
  const std::string name = n.name().empty() ? "pool" : n.name();
  const int64_t batch = x[0] == runtime::kBatch ? 0 : x[0];  // 0: Reshape copies the batch
  std::map<std::string, std::vector<int64_t>> ints;
  auto spatial = [&](const char* attr, int64_t fill) -> absl::StatusOr<std::vector<int64_t>> {
    CONVOY_ASSIGN_OR_RETURN(std::vector<int64_t> v, a.Ints(attr, {}));
    if (!v.empty() && v.size() != x.size() - 2) {
      return a.Error(absl::StrCat("attribute '", attr, "' has ", v.size(), " entries for the ", x.size() - 2,
                                  " spatial axes of input '", n.input(0), "' ", runtime::ShapeToString(x)));
    }
    if (v.empty()) v.assign(x.size() - 2, fill);
    return v;
  };
  CONVOY_ASSIGN_OR_RETURN(auto kernel, spatial("kernel_shape", 1));
  CONVOY_ASSIGN_OR_RETURN(auto strides, spatial("strides", 1));
  CONVOY_ASSIGN_OR_RETURN(auto dilations, spatial("dilations", 1));
  CONVOY_ASSIGN_OR_RETURN(std::vector<int64_t> pads, a.Ints("pads", {}));
  if (pads.empty()) pads.assign(2 * (x.size() - 2), 0);
  if (pads.size() != 2 * (x.size() - 2)) {
    return a.Error(absl::StrCat("attribute 'pads' has ", pads.size(), " entries for the ", x.size() - 2,
                                " spatial axes of input '", n.input(0), "' ", runtime::ShapeToString(x)));
  }
  const std::string flat = FreshTensorName(n.output(0) + "_as_2d");
  const std::string pooled = FreshTensorName(n.output(0) + "_pooled_2d");
  if (x.size() == 3) {
    CONVOY_RETURN_IF_ERROR(Emit(name + "_as_2d", runtime::ReshapeAttrs{{batch, x[1], 1, x[2]}}, {n.input(0)}, {flat}));
    ints = {{"kernel_shape", {1, kernel[0]}}, {"strides", {1, strides[0]}}, {"dilations", {1, dilations[0]}},
            {"pads", {0, pads[0], 0, pads[1]}}};
    CONVOY_RETURN_IF_ERROR(ImportRewritten(n, a, &OnnxImporter::Pool, name, flat, "", pooled, ints));
    CONVOY_ASSIGN_OR_RETURN(Shape y, ShapeOf(pooled));
    return Emit(name + "_as_1d", runtime::ReshapeAttrs{{batch, y[1], y[3]}}, {pooled}, {n.output(0)});
  }
  CONVOY_RETURN_IF_ERROR(
      Emit(name + "_as_2d", runtime::ReshapeAttrs{{batch, x[1] * x[2], x[3], x[4]}}, {n.input(0)}, {flat}));
  ints = {{"kernel_shape", {kernel[1], kernel[2]}}, {"strides", {strides[1], strides[2]}},
          {"dilations", {dilations[1], dilations[2]}}, {"pads", {pads[1], pads[2], pads[4], pads[5]}}};
  CONVOY_RETURN_IF_ERROR(ImportRewritten(n, a, &OnnxImporter::Pool, name, flat, "", pooled, ints));
  CONVOY_ASSIGN_OR_RETURN(Shape hw, ShapeOf(pooled));
  const std::string depth_major = FreshTensorName(n.output(0) + "_depth_rows");
  const std::string depth_pooled = FreshTensorName(n.output(0) + "_depth_pooled");
  CONVOY_RETURN_IF_ERROR(Emit(name + "_depth_rows", runtime::ReshapeAttrs{{batch, x[1], x[2], hw[2] * hw[3]}},
                              {pooled}, {depth_major}));
  ints = {{"kernel_shape", {kernel[0], 1}}, {"strides", {strides[0], 1}}, {"dilations", {dilations[0], 1}},
          {"pads", {pads[0], 0, pads[3], 0}}};
  CONVOY_RETURN_IF_ERROR(
      ImportRewritten(n, a, &OnnxImporter::Pool, name + "_depth", depth_major, "", depth_pooled, ints));
  CONVOY_ASSIGN_OR_RETURN(Shape d, ShapeOf(depth_pooled));
  return Emit(name + "_as_3d", runtime::ReshapeAttrs{{batch, x[1], d[2], hw[2], hw[3]}}, {depth_pooled},
              {n.output(0)});
}

absl::Status OnnxImporter::Pool(const onnx::NodeProto& n, const OnnxAttributes& a) {
  const bool is_max = n.op_type() == "MaxPool";
  if (n.input_size() >= 1 && !n.input(0).empty()) {
    CONVOY_ASSIGN_OR_RETURN(Shape x, ShapeOf(n.input(0)));
    if (x.size() == 3 || x.size() == 5) {
      CONVOY_RETURN_IF_ERROR(OnlyFirstOutput(a, n));
      return Pool1dOr3d(n, a, x);
    }
  }
  if (is_max) {
    CONVOY_RETURN_IF_ERROR(
        a.CheckKnown({"kernel_shape", "strides", "pads", "dilations", "ceil_mode", "auto_pad", "storage_order"}));
    CONVOY_ASSIGN_OR_RETURN(int64_t storage_order, a.Int("storage_order", 0));
    if (storage_order != 0) return absl::UnimplementedError(absl::StrCat(a.label(), ": attribute 'storage_order' 1"));
  } else {
    if (opset_ >= 19) {  // AveragePool takes dilations from opset 19
      CONVOY_RETURN_IF_ERROR(a.CheckKnown({"kernel_shape", "strides", "pads", "dilations", "ceil_mode", "auto_pad",
                                           "count_include_pad"}));
    } else {
      CONVOY_RETURN_IF_ERROR(a.CheckKnown({"kernel_shape", "strides", "pads", "ceil_mode", "auto_pad",
                                           "count_include_pad"}));
    }
  }
  CONVOY_RETURN_IF_ERROR(ExpectInputs(a, n, 1, 1));
  CONVOY_RETURN_IF_ERROR(OnlyFirstOutput(a, n));
  CONVOY_ASSIGN_OR_RETURN(auto kernel, a.Ints("kernel_shape", {}));
  if (kernel.size() != 2) return a.Error(absl::StrCat("kernel_shape must have 2 entries, got ", kernel.size()));
  CONVOY_ASSIGN_OR_RETURN(Shape x, ShapeOf(n.input(0)));
  runtime::Pool2dAttrs pool;
  pool.kind = is_max ? runtime::PoolKind::kMax : runtime::PoolKind::kAverage;
  CONVOY_ASSIGN_OR_RETURN(pool.window, ResolveWindow(a, x, kernel[0], kernel[1], true));
  CONVOY_ASSIGN_OR_RETURN(int64_t ceil_mode, a.Int("ceil_mode", 0));
  CONVOY_ASSIGN_OR_RETURN(int64_t include_pad, a.Int("count_include_pad", 0));
  pool.ceil_mode = ceil_mode != 0;
  pool.count_include_pad = include_pad != 0;
  return Emit(n.name().empty() ? "pool" : n.name(), pool, {n.input(0)}, {n.output(0)});
}

absl::Status OnnxImporter::GlobalPool(const onnx::NodeProto& n, const OnnxAttributes& a) {
  CONVOY_RETURN_IF_ERROR(a.CheckKnown({}));
  CONVOY_RETURN_IF_ERROR(ExpectInputs(a, n, 1, 1));
  CONVOY_ASSIGN_OR_RETURN(Shape x, ShapeOf(n.input(0)));
  if (x.size() != 4) return absl::UnimplementedError(absl::StrCat(a.label(), ": input must be [N,C,H,W]"));
  runtime::Pool2dAttrs pool;
  pool.global = true;
  pool.kind = n.op_type() == "GlobalMaxPool" ? runtime::PoolKind::kMax : runtime::PoolKind::kAverage;
  return Emit(n.name().empty() ? "global_pool" : n.name(), pool, {n.input(0)}, {n.output(0)});
}

absl::StatusOr<std::vector<int64_t>> OnnxImporter::ConstantAxesInput(const OnnxAttributes& a,
                                                                     const onnx::NodeProto& n, int input,
                                                                     const char* what) {
  const KnownValue* v = Known(n.input(input));
  if (!v) {
    return absl::UnimplementedError(absl::StrCat(
        a.label(), ": input ", input, " ('", n.input(input), "', the ", what, ") is computed at run time; at opset ",
        opset_, " ", n.op_type(), " takes its ", what, " as an input, which Convoy needs as a constant (an initializer "
        "or a Constant node)"));
  }
  if (!v->is_int()) {
    return a.Error(absl::StrCat("input ", input, " ('", n.input(input), "', the ", what,
                                ") must be an integer tensor, got ", v->Describe()));
  }
  return v->ints;
}

absl::StatusOr<std::vector<int64_t>> OnnxImporter::ReduceAxes(const onnx::NodeProto& n, const OnnxAttributes& a,
                                                              bool& noop) {
  const int64_t axes_input_since = n.op_type() == "ReduceSum" ? 13 : 18;
  std::vector<int64_t> axes;
  if (opset_ < axes_input_since) {
    CONVOY_RETURN_IF_ERROR(a.CheckKnown({"axes", "keepdims"}));
    CONVOY_RETURN_IF_ERROR(ExpectInputs(a, n, 1, 1));
    CONVOY_ASSIGN_OR_RETURN(axes, a.Ints("axes", {}));
    noop = false;
    return axes;
  }
  if (a.Has("axes")) {
    return a.Error(absl::StrCat("attribute 'axes' is not part of ", n.op_type(), " at opset ", opset_,
                                " (from opset ", axes_input_since, " the axes are input 1)"));
  }
  CONVOY_RETURN_IF_ERROR(a.CheckKnown({"keepdims", "noop_with_empty_axes"}));
  CONVOY_RETURN_IF_ERROR(ExpectInputs(a, n, 1, 2));
  if (n.input_size() == 2 && !n.input(1).empty()) {
    CONVOY_ASSIGN_OR_RETURN(axes, ConstantAxesInput(a, n, 1, "axes"));
  }
  CONVOY_ASSIGN_OR_RETURN(int64_t noop_with_empty_axes, a.Int("noop_with_empty_axes", 0));
  noop = noop_with_empty_axes != 0;
  return axes;
}

// ReduceMean (ReduceMax) over the two spatial axes is a global average (max) pool, followed by a flatten when
// keepdims is 0.
absl::Status OnnxImporter::SpatialReduce(const onnx::NodeProto& n, const OnnxAttributes& a) {
  const bool is_max = n.op_type() == "ReduceMax";
  bool noop = false;
  CONVOY_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ReduceAxes(n, a, noop));
  CONVOY_ASSIGN_OR_RETURN(Shape x, ShapeOf(n.input(0)));
  CONVOY_ASSIGN_OR_RETURN(int64_t keepdims, a.Int("keepdims", 1));
  std::string name = n.name().empty() ? (is_max ? "reduce_max" : "reduce_mean") : n.name();
  if (axes.empty() && noop) return Emit(name, runtime::IdentityAttrs{}, {n.input(0)}, {n.output(0)});
  const int64_t rank = static_cast<int64_t>(x.size());
  if (axes.empty()) {  // every axis
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  for (int64_t& axis : axes) {
    if (axis < -rank || axis >= rank) return a.Error(absl::StrCat("axis ", axis, " is out of range for rank ", rank));
    axis = axis < 0 ? axis + rank : axis;
  }
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  const bool spatial = rank == 4 && axes == std::vector<int64_t>{2, 3};
  if (!spatial && !is_max) return MeanAsProduct(n, a, x, axes, keepdims != 0, name);
  if (!spatial) {
    return absl::UnimplementedError(absl::StrCat(a.label(), ": only a max over axes [2,3] of [N,C,H,W] is supported, "
                                                 "got axes [", absl::StrJoin(axes, ","), "] of ",
                                                 runtime::ShapeToString(x)));
  }
  runtime::Pool2dAttrs pool;
  pool.global = true;
  pool.kind = is_max ? runtime::PoolKind::kMax : runtime::PoolKind::kAverage;
  if (keepdims) return Emit(name, pool, {n.input(0)}, {n.output(0)});
  std::string pooled = graph_.UniqueName(n.output(0) + "_keepdims");
  CONVOY_RETURN_IF_ERROR(Emit(name, pool, {n.input(0)}, {pooled}));
  return Emit(name + "_flatten", runtime::FlattenAttrs{1}, {pooled}, {n.output(0)});
}

// The mean over `axes` (sorted, distinct) of x: a Transpose bringing them last (when they are not already), a Reshape
// merging them into one axis of R elements, a GEMM by the constant [R, 1] column of 1/R, and a Reshape to the
// output's shape (keepdims or not).
absl::Status OnnxImporter::MeanAsProduct(const onnx::NodeProto& n, const OnnxAttributes& a, const Shape& x,
                                         const std::vector<int64_t>& axes, bool keepdims, const std::string& name) {
  const int64_t rank = static_cast<int64_t>(x.size());
  std::vector<int64_t> perm, kept_dims, out_dims;
  int64_t reduced = 1;
  for (int64_t d = 0; d < rank; ++d) {
    const bool reduce = std::binary_search(axes.begin(), axes.end(), d);
    if (reduce && x[d] == runtime::kBatch) {
      return absl::UnimplementedError(absl::StrCat(a.label(), ": a mean over axis ", d, " of ",
                                                   runtime::ShapeToString(x),
                                                   " reduces the dynamic batch, which a served model keeps"));
    }
    if (reduce) {
      reduced *= x[d];
      if (keepdims) out_dims.push_back(1);
      continue;
    }
    perm.push_back(d);
    const int64_t dim = x[d] == runtime::kBatch ? 0 : x[d];  // 0: Reshape copies the batch
    kept_dims.push_back(dim);
    out_dims.push_back(dim);
  }
  perm.insert(perm.end(), axes.begin(), axes.end());
  std::string source = n.input(0);
  std::vector<int64_t> identity(rank);
  for (int64_t d = 0; d < rank; ++d) identity[d] = d;
  if (perm != identity) {
    const std::string moved = FreshTensorName(n.output(0) + "_reduced_last");
    CONVOY_RETURN_IF_ERROR(Emit(name + "_transpose", runtime::TransposeAttrs{perm}, {source}, {moved}));
    source = moved;
  }
  std::vector<int64_t> rows = kept_dims.empty() ? std::vector<int64_t>{1} : kept_dims;
  rows.push_back(reduced);
  const std::string flat = FreshTensorName(n.output(0) + "_rows");
  CONVOY_RETURN_IF_ERROR(Emit(name + "_rows", runtime::ReshapeAttrs{rows}, {source}, {flat}));
  const std::string column = FreshTensorName(n.output(0) + "_mean_weights");
  known_[column] = KnownValue::Float({reduced, 1}, std::vector<float>(reduced, 1.0f / static_cast<float>(reduced)));
  const std::string means = FreshTensorName(n.output(0) + "_means");
  CONVOY_RETURN_IF_ERROR(Emit(name, runtime::GemmAttrs{}, {flat, column}, {means}));
  return Emit(name + "_shape", runtime::ReshapeAttrs{out_dims}, {means}, {n.output(0)});
}

absl::Status OnnxImporter::BatchNorm(const onnx::NodeProto& n, const OnnxAttributes& a) {
  CONVOY_RETURN_IF_ERROR(a.CheckKnown({"epsilon", "momentum", "training_mode", "spatial", "is_test"}));
  CONVOY_RETURN_IF_ERROR(ExpectInputs(a, n, 5, 5));
  CONVOY_RETURN_IF_ERROR(OnlyFirstOutput(a, n));
  CONVOY_ASSIGN_OR_RETURN(int64_t training, a.Int("training_mode", 0));
  CONVOY_ASSIGN_OR_RETURN(int64_t spatial, a.Int("spatial", 1));
  if (training != 0 || spatial != 1) {
    return absl::UnimplementedError(absl::StrCat(a.label(), ": training_mode 1 / spatial 0 is not supported"));
  }
  CONVOY_RETURN_IF_ERROR(InferenceModeBeforeOpset7(a));
  runtime::BatchNormAttrs bn;
  CONVOY_ASSIGN_OR_RETURN(bn.epsilon, a.Float("epsilon", 1e-5f));
  return Emit(n.name().empty() ? "batch_norm" : n.name(), bn,
              {n.input(0), n.input(1), n.input(2), n.input(3), n.input(4)}, {n.output(0)});
}

absl::Status OnnxImporter::ActivationOp(const onnx::NodeProto& n, const OnnxAttributes& a) {
  CONVOY_RETURN_IF_ERROR(ExpectInputs(a, n, 1, 1));
  runtime::Activation act;
  const std::string& op = n.op_type();
  if (op == "LeakyRelu") {
    CONVOY_RETURN_IF_ERROR(a.CheckKnown({"alpha"}));
    act.kind = runtime::ActivationKind::kLeakyRelu;
    CONVOY_ASSIGN_OR_RETURN(act.alpha, a.Float("alpha", 0.01f));
  } else if (op == "HardSigmoid") {
    CONVOY_RETURN_IF_ERROR(a.CheckKnown({"alpha", "beta"}));
    act.kind = runtime::ActivationKind::kHardSigmoid;
    CONVOY_ASSIGN_OR_RETURN(act.alpha, a.Float("alpha", 0.2f));
    CONVOY_ASSIGN_OR_RETURN(act.beta, a.Float("beta", 0.5f));
  } else {
    CONVOY_RETURN_IF_ERROR(a.CheckKnown({}));
    act.kind = op == "Relu"      ? runtime::ActivationKind::kRelu
               : op == "Sigmoid" ? runtime::ActivationKind::kSigmoid
               : op == "Tanh"    ? runtime::ActivationKind::kTanh
                                 : runtime::ActivationKind::kHardSwish;
  }
  return Emit(n.name().empty() ? op : n.name(), runtime::ActivationAttrs{act}, {n.input(0)}, {n.output(0)});
}

// Clip takes min/max as attributes before opset 11 and as optional constant inputs from 11 on.
absl::Status OnnxImporter::Clip(const onnx::NodeProto& n, const OnnxAttributes& a) {
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
  if (opset_ < 11) {
    CONVOY_RETURN_IF_ERROR(a.CheckKnown({"min", "max"}));
    CONVOY_RETURN_IF_ERROR(ExpectInputs(a, n, 1, 1));
    CONVOY_ASSIGN_OR_RETURN(lo, a.Float("min", lo));
    CONVOY_ASSIGN_OR_RETURN(hi, a.Float("max", hi));
  } else {
    CONVOY_RETURN_IF_ERROR(a.CheckKnown({}));
    CONVOY_RETURN_IF_ERROR(ExpectInputs(a, n, 1, 3));
    for (int i = 1; i < n.input_size(); ++i) {
      if (n.input(i).empty()) continue;
      CONVOY_ASSIGN_OR_RETURN(const KnownValue* v, RequireKnown(a, n, i, false));
      if (v->size() != 1) return a.Error(absl::StrCat("input ", i, " must be a scalar"));
      (i == 1 ? lo : hi) = v->is_int() ? static_cast<float>(v->ints[0]) : v->floats[0];
    }
  }
  return Emit(n.name().empty() ? "clip" : n.name(), runtime::ActivationAttrs{runtime::Activation::Clip(lo, hi)},
              {n.input(0)}, {n.output(0)});
}

absl::Status OnnxImporter::BinaryOp(const onnx::NodeProto& n, const OnnxAttributes& a) {
  CONVOY_RETURN_IF_ERROR(a.CheckKnown({}));
  CONVOY_RETURN_IF_ERROR(ExpectInputs(a, n, 2, 2));
  const std::string& op = n.op_type();
  runtime::BinaryKind kind = op == "Add"   ? runtime::BinaryKind::kAdd
                             : op == "Sub" ? runtime::BinaryKind::kSub
                             : op == "Mul" ? runtime::BinaryKind::kMul
                                           : runtime::BinaryKind::kDiv;
  return Emit(n.name().empty() ? op : n.name(), runtime::BinaryAttrs{kind}, {n.input(0), n.input(1)}, {n.output(0)});
}

absl::Status OnnxImporter::ConcatOp(const onnx::NodeProto& n, const OnnxAttributes& a) {
  CONVOY_RETURN_IF_ERROR(a.CheckKnown({"axis"}));
  CONVOY_RETURN_IF_ERROR(ExpectInputs(a, n, 1, 1 << 20));
  CONVOY_ASSIGN_OR_RETURN(int64_t axis, a.Int("axis", 1));
  std::vector<std::string> inputs(n.input().begin(), n.input().end());
  return Emit(n.name().empty() ? "concat" : n.name(), runtime::ConcatAttrs{axis}, inputs, {n.output(0)});
}

// Split sizes: the `split` attribute before opset 13, input 1 (a constant) from 13, or from opset 18 the
// `num_outputs` attribute (equal parts of ceil(extent / num_outputs), the last one smaller); with none of them, equal
// parts, one per output.
absl::Status OnnxImporter::SplitOp(const onnx::NodeProto& n, const OnnxAttributes& a) {
  if (opset_ < 13) {
    CONVOY_RETURN_IF_ERROR(a.CheckKnown({"axis", "split"}));
  } else {
    if (a.Has("split")) {
      return a.Error(absl::StrCat("attribute 'split' is not part of Split at opset ", opset_,
                                  " (from opset 13 the sizes are input 1)"));
    }
    CONVOY_RETURN_IF_ERROR(opset_ < 18 ? a.CheckKnown({"axis"}) : a.CheckKnown({"axis", "num_outputs"}));
  }
  CONVOY_RETURN_IF_ERROR(ExpectInputs(a, n, 1, 2));
  CONVOY_ASSIGN_OR_RETURN(int64_t axis, a.Int("axis", 0));
  CONVOY_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, a.Ints("split", {}));
  const bool split_input = n.input_size() == 2 && !n.input(1).empty();
  if (split_input) {
    CONVOY_ASSIGN_OR_RETURN(sizes, ConstantAxesInput(a, n, 1, "split sizes"));
  }
  CONVOY_ASSIGN_OR_RETURN(Shape x, ShapeOf(n.input(0)));
  int64_t rank = static_cast<int64_t>(x.size());
  if (axis < -rank || axis >= rank) return a.Error(absl::StrCat("axis ", axis, " out of range for rank ", rank));
  if (axis < 0) axis += rank;
  const int64_t parts = n.output_size();
  if (a.Has("num_outputs")) {
    CONVOY_ASSIGN_OR_RETURN(int64_t num_outputs, a.Int("num_outputs", 0));
    if (split_input) return a.Error("has both the 'split' input and the 'num_outputs' attribute");
    if (num_outputs != parts) {
      return a.Error(absl::StrCat("num_outputs ", num_outputs, " but the node has ", parts, " outputs"));
    }
    if (x[axis] < 0) return a.Error(absl::StrCat("cannot split the dynamic batch axis ", axis));
    const int64_t chunk = (x[axis] + parts - 1) / parts;
    if (chunk * (parts - 1) >= x[axis]) {
      return a.Error(absl::StrCat("cannot split extent ", x[axis], " into ", parts, " parts of ", chunk));
    }
    sizes.assign(parts - 1, chunk);
    sizes.push_back(x[axis] - chunk * (parts - 1));
  }
  if (sizes.empty()) {
    if (x[axis] < 0 || x[axis] % parts != 0) {
      return a.Error(absl::StrCat("cannot split extent ", x[axis], " into ", parts, " equal parts"));
    }
    sizes.assign(parts, x[axis] / parts);
  }
  std::vector<std::string> outputs(n.output().begin(), n.output().end());
  return Emit(n.name().empty() ? "split" : n.name(), runtime::SplitAttrs{axis, sizes}, {n.input(0)}, outputs);
}

absl::Status OnnxImporter::FlattenOp(const onnx::NodeProto& n, const OnnxAttributes& a) {
  CONVOY_RETURN_IF_ERROR(a.CheckKnown({"axis"}));
  CONVOY_RETURN_IF_ERROR(ExpectInputs(a, n, 1, 1));
  CONVOY_ASSIGN_OR_RETURN(int64_t axis, a.Int("axis", 1));
  return Emit(n.name().empty() ? "flatten" : n.name(), runtime::FlattenAttrs{axis}, {n.input(0)}, {n.output(0)});
}

absl::Status OnnxImporter::ReshapeOp(const onnx::NodeProto& n, const OnnxAttributes& a) {
  CONVOY_RETURN_IF_ERROR(a.CheckKnown({"allowzero", "shape"}));
  CONVOY_ASSIGN_OR_RETURN(int64_t allow_zero, a.Int("allowzero", 0));
  std::vector<int64_t> target;
  if (opset_ < 5 || n.input_size() == 1) {
    CONVOY_ASSIGN_OR_RETURN(target, a.Ints("shape", {}));
  } else {
    CONVOY_RETURN_IF_ERROR(ExpectInputs(a, n, 2, 2));
    CONVOY_ASSIGN_OR_RETURN(target, KnownInts(a, n, 1));
  }
  // allowzero 1 makes a 0 in the shape an empty dimension instead of a copy; without a 0 it changes nothing.
  if (allow_zero != 0 && std::count(target.begin(), target.end(), 0) > 0) {
    return absl::UnimplementedError(absl::StrCat(a.label(), ": attribute 'allowzero' 1 with a 0 in shape [",
                                                 absl::StrJoin(target, ","), "] (an empty tensor)"));
  }
  CONVOY_ASSIGN_OR_RETURN(Shape x, ShapeOf(n.input(0)));
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] != kSymbolicBatchValue) continue;
    if (i != 0 || x.empty() || x[0] != runtime::kBatch) {
      return absl::UnimplementedError(absl::StrCat(a.label(), ": the dynamic batch size used at position ", i));
    }
    target[i] = 0;  // copy the batch dimension
  }
  return Emit(n.name().empty() ? "reshape" : n.name(), runtime::ReshapeAttrs{target}, {n.input(0)}, {n.output(0)});
}

absl::Status OnnxImporter::TransposeOp(const onnx::NodeProto& n, const OnnxAttributes& a) {
  CONVOY_RETURN_IF_ERROR(a.CheckKnown({"perm"}));
  CONVOY_RETURN_IF_ERROR(ExpectInputs(a, n, 1, 1));
  CONVOY_ASSIGN_OR_RETURN(Shape x, ShapeOf(n.input(0)));
  std::vector<int64_t> reversed;
  for (int64_t i = static_cast<int64_t>(x.size()) - 1; i >= 0; --i) reversed.push_back(i);
  CONVOY_ASSIGN_OR_RETURN(auto perm, a.Ints("perm", reversed));
  return Emit(n.name().empty() ? "transpose" : n.name(), runtime::TransposeAttrs{perm}, {n.input(0)}, {n.output(0)});
}

absl::Status OnnxImporter::GemmOp(const onnx::NodeProto& n, const OnnxAttributes& a) {
  CONVOY_RETURN_IF_ERROR(a.CheckKnown({"alpha", "beta", "transA", "transB", "broadcast"}));
  CONVOY_RETURN_IF_ERROR(ExpectInputs(a, n, 2, 3));
  runtime::GemmAttrs gemm;
  CONVOY_ASSIGN_OR_RETURN(gemm.alpha, a.Float("alpha", 1.0f));
  CONVOY_ASSIGN_OR_RETURN(gemm.beta, a.Float("beta", 1.0f));
  CONVOY_ASSIGN_OR_RETURN(int64_t ta, a.Int("transA", 0));
  CONVOY_ASSIGN_OR_RETURN(int64_t tb, a.Int("transB", 0));
  gemm.transpose_a = ta != 0;
  gemm.transpose_b = tb != 0;
  std::vector<std::string> inputs = {n.input(0), n.input(1)};
  if (n.input_size() == 3 && !n.input(2).empty()) {
    gemm.has_bias = true;
    inputs.push_back(n.input(2));
  }
  return Emit(n.name().empty() ? "gemm" : n.name(), gemm, inputs, {n.output(0)});
}

absl::Status OnnxImporter::MatMulOp(const onnx::NodeProto& n, const OnnxAttributes& a) {
  CONVOY_RETURN_IF_ERROR(a.CheckKnown({}));
  CONVOY_RETURN_IF_ERROR(ExpectInputs(a, n, 2, 2));
  CONVOY_ASSIGN_OR_RETURN(Shape x, ShapeOf(n.input(0)));
  CONVOY_ASSIGN_OR_RETURN(Shape y, ShapeOf(n.input(1)));
  // N-D A by a 2-D B (a Linear layer on [N,H,W,C]) or by a B with A's leading dims; numpy's other broadcasts and
  // 1-D operands are refused.
  const bool same_leading = y.size() == x.size() && std::equal(y.begin(), y.end() - 2, x.begin());
  if (x.size() < 2 || y.size() < 2 || (y.size() > 2 && !same_leading)) {
    return absl::UnimplementedError(absl::StrCat(
        a.label(), ": MatMul of ", runtime::ShapeToString(x), " by ", runtime::ShapeToString(y),
        " is not supported (A of rank 2 or more times a 2-D B, or a B with A's leading dimensions)"));
  }
  return Emit(n.name().empty() ? "matmul" : n.name(), runtime::GemmAttrs{}, {n.input(0), n.input(1)}, {n.output(0)});
}

absl::Status OnnxImporter::SoftmaxOp(const onnx::NodeProto& n, const OnnxAttributes& a) {
  CONVOY_RETURN_IF_ERROR(a.CheckKnown({"axis"}));
  CONVOY_RETURN_IF_ERROR(ExpectInputs(a, n, 1, 1));
  CONVOY_ASSIGN_OR_RETURN(Shape x, ShapeOf(n.input(0)));
  CONVOY_ASSIGN_OR_RETURN(int64_t axis, a.Int("axis", opset_ < 13 ? 1 : -1));
  int64_t rank = static_cast<int64_t>(x.size());
  if (axis < 0) axis += rank;
  // Before opset 13 Softmax flattens from `axis` on; that equals a softmax over one axis only when it is the last.
  if (opset_ < 13 && axis != rank - 1) {
    return absl::UnimplementedError(absl::StrCat(a.label(), ": opset ", opset_, " softmax with axis ", axis,
                                                 " of rank ", rank, " (only the last axis)"));
  }
  return Emit(n.name().empty() ? "softmax" : n.name(), runtime::SoftmaxAttrs{axis}, {n.input(0)}, {n.output(0)});
}

absl::Status OnnxImporter::IdentityOp(const onnx::NodeProto& n, const OnnxAttributes& a) {
  CONVOY_RETURN_IF_ERROR(a.CheckKnown({"ratio", "seed", "is_test"}));
  CONVOY_RETURN_IF_ERROR(ExpectInputs(a, n, 1, n.op_type() == "Dropout" ? 3 : 1));
  CONVOY_RETURN_IF_ERROR(OnlyFirstOutput(a, n));
  if (n.op_type() == "Dropout") CONVOY_RETURN_IF_ERROR(InferenceModeBeforeOpset7(a));
  if (n.op_type() == "Dropout" && n.input_size() == 3 && !n.input(2).empty()) {
    CONVOY_ASSIGN_OR_RETURN(const KnownValue* training, RequireKnown(a, n, 2, false));
    bool on = training->is_int() ? training->ints.at(0) != 0 : training->floats.at(0) != 0.0f;
    if (on) return absl::UnimplementedError(absl::StrCat(a.label(), ": training_mode true"));
  }
  if (const KnownValue* v = Known(n.input(0))) {
    known_[n.output(0)] = *v;
    return absl::OkStatus();
  }
  return Emit(n.name().empty() ? "identity" : n.name(), runtime::IdentityAttrs{}, {n.input(0)}, {n.output(0)});
}

// Pad's `axes` input (opset 18): pads [b_0..b_k, e_0..e_k] for the listed axes only, spread over every axis.
absl::StatusOr<std::vector<int64_t>> PadsOverAllAxes(const OnnxAttributes& a, const std::vector<int64_t>& pads,
                                                     const std::vector<int64_t>& axes, int64_t rank) {
  const int64_t k = static_cast<int64_t>(axes.size());
  if (static_cast<int64_t>(pads.size()) != 2 * k) {
    return a.Error(absl::StrCat("pads has ", pads.size(), " entries for ", k, " axes (expected ", 2 * k, ")"));
  }
  std::vector<int64_t> all(2 * rank, 0);
  std::set<int64_t> seen;
  for (int64_t i = 0; i < k; ++i) {
    int64_t axis = axes[i];
    if (axis < -rank || axis >= rank) return a.Error(absl::StrCat("axis ", axis, " is out of range for rank ", rank));
    if (axis < 0) axis += rank;
    if (!seen.insert(axis).second) return a.Error(absl::StrCat("axis ", axis, " is listed twice"));
    all[axis] = pads[i];
    all[axis + rank] = pads[i + k];
  }
  return all;
}

absl::Status OnnxImporter::PadOp(const onnx::NodeProto& n, const OnnxAttributes& a) {
  CONVOY_RETURN_IF_ERROR(a.CheckKnown({"mode", "pads", "value"}));
  runtime::PadAttrs pad;
  CONVOY_ASSIGN_OR_RETURN(std::string mode, a.String("mode", "constant"));
  if (mode == "constant") {
    pad.mode = runtime::PadMode::kConstant;
  } else if (mode == "reflect") {
    pad.mode = runtime::PadMode::kReflect;
  } else if (mode == "edge") {
    pad.mode = runtime::PadMode::kEdge;
  } else if (mode == "wrap") {
    return absl::UnimplementedError(absl::StrCat(a.label(), ": attribute 'mode' value 'wrap' (opset ", opset_,
                                                 ") is not supported (constant, reflect and edge are)"));
  } else {
    return absl::UnimplementedError(absl::StrCat(a.label(), ": attribute 'mode' value '", mode, "'"));
  }
  if (opset_ < 11) {
    CONVOY_RETURN_IF_ERROR(ExpectInputs(a, n, 1, 1));
    CONVOY_ASSIGN_OR_RETURN(pad.pads, a.Ints("pads", {}));
    CONVOY_ASSIGN_OR_RETURN(pad.value, a.Float("value", 0.0f));
  } else {
    CONVOY_RETURN_IF_ERROR(ExpectInputs(a, n, 2, opset_ < 18 ? 3 : 4));
    CONVOY_ASSIGN_OR_RETURN(pad.pads, ConstantAxesInput(a, n, 1, "pads"));
    if (n.input_size() >= 3 && !n.input(2).empty()) {
      CONVOY_ASSIGN_OR_RETURN(const KnownValue* v, RequireKnown(a, n, 2, false));
      if (v->size() != 1) return a.Error("constant_value must be a scalar");
      pad.value = v->is_int() ? static_cast<float>(v->ints[0]) : v->floats[0];
    }
    if (n.input_size() == 4 && !n.input(3).empty()) {
      CONVOY_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ConstantAxesInput(a, n, 3, "axes"));
      CONVOY_ASSIGN_OR_RETURN(Shape x, ShapeOf(n.input(0)));
      CONVOY_ASSIGN_OR_RETURN(pad.pads, PadsOverAllAxes(a, pad.pads, axes, static_cast<int64_t>(x.size())));
    }
  }
  // Negative pads crop; the kernels take them as they are.
  return Emit(n.name().empty() ? "pad" : n.name(), pad, {n.input(0)}, {n.output(0)});
}

// Resize and Upsample (onnx_resize_import.h): every input but the data must be known at load time.
absl::Status OnnxImporter::ResizeOp(const onnx::NodeProto& n, const OnnxAttributes& a) {
  const bool upsample = n.op_type() == "Upsample";
  const bool scales_only = upsample || opset_ < 11;  // Upsample-9 and Resize-10: (X, scales)
  CONVOY_RETURN_IF_ERROR(ExpectInputs(a, n, 1, upsample ? (opset_ < 9 ? 1 : 2) : (scales_only ? 2 : 4)));
  CONVOY_RETURN_IF_ERROR(OnlyFirstOutput(a, n));
  static constexpr const char* kInputs[] = {"X", "roi", "scales", "sizes"};
  std::vector<const KnownValue*> known(4, nullptr);
  for (int i = 1; i < n.input_size(); ++i) {
    if (n.input(i).empty()) continue;
    const char* what = scales_only ? "scales" : kInputs[i];
    known[i] = Known(n.input(i));
    if (!known[i]) {
      return absl::UnimplementedError(absl::StrCat(
          a.label(), ": input ", i, " ('", n.input(i), "', the ", what, ") is computed at run time; Convoy needs the ",
          what, " of ", n.op_type(), " (opset ", opset_, ") as a constant (an initializer, a Constant node, or a "
          "value folded from the input's shape)"));
    }
  }
  OnnxResizeInputs inputs;
  if (scales_only) {
    inputs.scales = known[1];
  } else {
    inputs.roi = known[1], inputs.scales = known[2], inputs.sizes = known[3];
  }
  CONVOY_ASSIGN_OR_RETURN(Shape x, ShapeOf(n.input(0)));
  CONVOY_ASSIGN_OR_RETURN(runtime::ResizeAttrs attrs, ImportResizeAttrs(n, a, opset_, x, inputs));
  return Emit(n.name().empty() ? "resize" : n.name(), attrs, {n.input(0)}, {n.output(0)});
}

// ArgMax (opsets 1, 11, 12, 13): the indices are a float tensor in the graph; served as UINT8/INT32/INT64 when the
// model's output is an ArgMax (the planner writes the served type directly).
absl::Status OnnxImporter::ArgMaxOp(const onnx::NodeProto& n, const OnnxAttributes& a) {
  CONVOY_RETURN_IF_ERROR(ExpectInputs(a, n, 1, 1));
  if (a.Has("select_last_index") && opset_ < 12) {
    return absl::UnimplementedError(absl::StrCat(a.label(), ": attribute 'select_last_index' is not part of ArgMax "
                                                 "at opset ", opset_, " (it appears at opset 12)"));
  }
  CONVOY_RETURN_IF_ERROR(a.CheckKnown({"axis", "keepdims", "select_last_index"}));
  runtime::ArgMaxAttrs attrs;
  CONVOY_ASSIGN_OR_RETURN(attrs.axis, a.Int("axis", 0));
  CONVOY_ASSIGN_OR_RETURN(int64_t keepdims, a.Int("keepdims", 1));
  CONVOY_ASSIGN_OR_RETURN(int64_t last, a.Int("select_last_index", 0));
  attrs.keepdims = keepdims != 0;
  attrs.select_last_index = last != 0;
  return Emit(n.name().empty() ? "argmax" : n.name(), attrs, {n.input(0)}, {n.output(0)});
}

absl::StatusOr<std::string> OnnxImporter::ConstantBroadcastTo(const OnnxAttributes& a, const onnx::NodeProto& n,
                                                              int input, const Shape& target, const char* role) {
  const KnownValue* v = Known(n.input(input));
  if (v == nullptr) {
    return absl::UnimplementedError(absl::StrCat(a.label(), ": input ", input, " ('", n.input(input), "', the ", role,
                                                 ") is computed at run time; Convoy needs it as a constant"));
  }
  if (v->is_int()) {
    return a.Error(absl::StrCat("input ", input, " ('", n.input(input), "', the ", role,
                                ") must be a float tensor, got ", v->Describe()));
  }
  Shape shape = v->shape;  // leading 1s broadcast against anything: dropped
  while (shape.size() > target.size() && shape.front() == 1) shape.erase(shape.begin());
  bool broadcasts = shape.size() <= target.size();
  for (size_t d = 0; broadcasts && d < shape.size(); ++d) {
    const int64_t t = target[target.size() - shape.size() + d];
    broadcasts = shape[d] == t || shape[d] == 1;
  }
  if (!broadcasts) {
    return a.Error(absl::StrCat("input ", input, " ('", n.input(input), "', the ", role, ") has shape ",
                                runtime::ShapeToString(v->shape), ", which does not broadcast to the normalized shape ",
                                runtime::ShapeToString(target)));
  }
  if (v->size() == runtime::NumElements(target)) return n.input(input);
  // Expand: element i of target reads the element of `shape` at its right-aligned coordinates (extent-1 axes pinned).
  std::vector<float> values(runtime::NumElements(target));
  for (int64_t i = 0; i < static_cast<int64_t>(values.size()); ++i) {
    int64_t rest = i, index = 0, stride = 1;
    for (int d = static_cast<int>(target.size()) - 1; d >= 0; --d) {
      const int64_t coord = rest % target[d];
      rest /= target[d];
      const int sd = d - static_cast<int>(target.size() - shape.size());
      if (sd < 0) continue;
      if (shape[sd] != 1) index += coord * stride;
      stride *= shape[sd];
    }
    values[i] = v->floats[index];
  }
  std::string name = absl::StrCat(n.input(input), "/broadcast");
  for (int i = 1; known_.count(name) || shapes_.count(name); ++i) name = absl::StrCat(n.input(input), "/broadcast_", i);
  known_[name] = KnownValue::Float(target, std::move(values));
  return name;
}

absl::Status OnnxImporter::EmitLayerNormPattern(const LayerNormPattern& p) {
  const std::string label = absl::StrCat(source_, ": the layer normalization computed by ReduceMean, Sub, Pow, ",
                                         "ReduceMean, Add, Sqrt, Div", p.scale.empty() ? "" : ", Mul",
                                         p.bias.empty() ? "" : ", Add", " into '", p.output, "'");
  current_label_ = label;
  CONVOY_ASSIGN_OR_RETURN(Shape x, ShapeOf(p.x));
  const int64_t rank = static_cast<int64_t>(x.size());
  std::vector<int64_t> axes = p.axes;
  for (int64_t& axis : axes) {
    if (axis < -rank || axis >= rank) {
      return absl::InvalidArgumentError(absl::StrCat(label, ": axis ", axis, " is out of range for '", p.x, "' ",
                                                     runtime::ShapeToString(x)));
    }
    axis = axis < 0 ? axis + rank : axis;
  }
  std::sort(axes.begin(), axes.end());
  bool trailing = axes.back() == rank - 1;
  for (size_t i = 1; i < axes.size(); ++i) trailing &= axes[i] == axes[i - 1] + 1;
  const bool channels = rank == 4 && axes == std::vector<int64_t>{1};
  if (!trailing && !channels) {
    return absl::UnimplementedError(absl::StrCat(label, ": normalizing over axes [", absl::StrJoin(axes, ","),
                                                 "] of '", p.x, "' ", runtime::ShapeToString(x), " is not supported ",
                                                 "(the trailing axes, or axis 1 of [N,C,H,W], are)"));
  }
  Shape normalized;
  for (int64_t axis : axes) normalized.push_back(x[axis]);
  if (std::count(normalized.begin(), normalized.end(), runtime::kBatch) > 0) {
    return absl::UnimplementedError(absl::StrCat(label, ": it normalizes over the dynamic batch dimension of '", p.x,
                                                 "' ", runtime::ShapeToString(x)));
  }
  runtime::LayerNormAttrs attrs;
  attrs.axis = axes.front();
  attrs.num_axes = channels ? 1 : 0;
  attrs.epsilon = p.epsilon;
  const int64_t count = runtime::NumElements(normalized);
  // Scale and bias: constants with one value per normalized element once their leading 1s are dropped (a channel
  // scale [C,1,1] of the NCHW form, a [C] of the trailing form), or broadcast onto the normalized shape.
  auto per_element = [&](const std::string& tensor, float fill, const char* role) -> absl::StatusOr<std::string> {
    const std::string name = FreshTensorName(absl::StrCat(p.output, "/", role));
    if (tensor.empty()) {
      known_[name] = KnownValue::Float({count}, std::vector<float>(count, fill));
      return name;
    }
    const KnownValue* v = Known(tensor);
    if (v == nullptr || v->is_int()) {
      return absl::UnimplementedError(absl::StrCat(label, ": the ", role, " '", tensor, "' must be a float constant"));
    }
    std::vector<float> values;
    if (v->size() == 1 || v->size() == count) {
      values = v->size() == 1 ? std::vector<float>(count, v->floats[0]) : v->floats;
    } else if (!channels && v->size() == normalized.back()) {  // a [C] repeated along the leading normalized axes
      for (int64_t i = 0; i < count; ++i) values.push_back(v->floats[i % normalized.back()]);
    } else {
      return absl::UnimplementedError(absl::StrCat(label, ": the ", role, " '", tensor, "' (", v->Describe(),
                                                   ") does not give one value per normalized element of ",
                                                   runtime::ShapeToString(normalized)));
    }
    known_[name] = KnownValue::Float({count}, std::move(values));
    return name;
  };
  absl::StatusOr<std::string> scale = per_element(p.scale, 1.0f, "scale");
  absl::StatusOr<std::string> bias = p.bias.empty() ? absl::StatusOr<std::string>("") : per_element(p.bias, 0.0f, "bias");
  if (scale.ok() && bias.ok()) {
    std::vector<std::string> inputs = {p.x, *scale};
    if (!p.bias.empty()) {
      attrs.has_bias = true;
      inputs.push_back(*bias);
    }
    return Emit(absl::StrCat(p.output, "/layer_norm"), attrs, inputs, {p.output});
  }
  // A scale or bias that broadcasts over more than the normalized axes: the LayerNorm without them, then the
  // pattern's own Mul and Add.
  CONVOY_ASSIGN_OR_RETURN(std::string unit, per_element("", 1.0f, "unit_scale"));
  CONVOY_RETURN_IF_ERROR(Emit(absl::StrCat(p.normalized, "/layer_norm"), attrs, {p.x, unit}, {p.normalized}));
  CONVOY_RETURN_IF_ERROR(Emit(absl::StrCat(p.scaled, "/scale"), runtime::BinaryAttrs{runtime::BinaryKind::kMul},
                              {p.normalized, p.scale}, {p.scaled}));
  if (p.bias.empty()) return absl::OkStatus();
  return Emit(absl::StrCat(p.output, "/shift"), runtime::BinaryAttrs{runtime::BinaryKind::kAdd}, {p.scaled, p.bias},
              {p.output});
}

// LayerNormalization (opset 17): Y = (X - mean) / sqrt(var + epsilon) * Scale + B over the axes from `axis` on;
// Scale and B constants broadcast to the normalized shape; the optional outputs Mean and InvStdDev are computed
// when the model names them.
absl::Status OnnxImporter::LayerNormalizationOp(const onnx::NodeProto& n, const OnnxAttributes& a) {
  if (opset_ < 17) {
    return absl::UnimplementedError(absl::StrCat(a.label(), ": LayerNormalization is not part of ONNX opset ", opset_,
                                                 " (it appears at opset 17)"));
  }
  CONVOY_RETURN_IF_ERROR(a.CheckKnown({"axis", "epsilon", "stash_type"}));
  CONVOY_RETURN_IF_ERROR(ExpectInputs(a, n, 2, 3));
  CONVOY_ASSIGN_OR_RETURN(int64_t stash_type, a.Int("stash_type", 1));
  if (stash_type != 1) {
    return absl::UnimplementedError(absl::StrCat(a.label(), ": attribute 'stash_type' value ", stash_type,
                                                 " is not supported (1, FLOAT statistics, is)"));
  }
  CONVOY_ASSIGN_OR_RETURN(Shape x, ShapeOf(n.input(0)));
  runtime::LayerNormAttrs attrs;
  CONVOY_ASSIGN_OR_RETURN(attrs.axis, a.Int("axis", -1));
  CONVOY_ASSIGN_OR_RETURN(attrs.epsilon, a.Float("epsilon", 1e-5f));
  const int64_t rank = static_cast<int64_t>(x.size());
  if (attrs.axis < -rank || attrs.axis >= rank) {
    return a.Error(absl::StrCat("attribute 'axis' ", attrs.axis, " is out of range for input '", n.input(0), "' ",
                                runtime::ShapeToString(x)));
  }
  const int64_t axis = attrs.axis < 0 ? attrs.axis + rank : attrs.axis;
  const Shape normalized(x.begin() + axis, x.end());
  if (std::count(normalized.begin(), normalized.end(), runtime::kBatch) > 0) {
    return absl::UnimplementedError(absl::StrCat(a.label(), ": axis ", attrs.axis, " normalizes over the dynamic ",
                                                 "batch dimension of input '", n.input(0), "' ",
                                                 runtime::ShapeToString(x), "; Convoy normalizes within each item"));
  }
  std::vector<std::string> inputs = {n.input(0)};
  CONVOY_ASSIGN_OR_RETURN(std::string scale, ConstantBroadcastTo(a, n, 1, normalized, "Scale"));
  inputs.push_back(scale);
  if (n.input_size() == 3 && !n.input(2).empty()) {
    attrs.has_bias = true;
    CONVOY_ASSIGN_OR_RETURN(std::string bias, ConstantBroadcastTo(a, n, 2, normalized, "B"));
    inputs.push_back(bias);
  }
  const std::string name = n.name().empty() ? "layer_norm" : n.name();
  std::vector<std::string> outputs = {n.output(0)};
  for (int i = 1; i < n.output_size() && i < 3; ++i) attrs.write_stats |= !n.output(i).empty();
  if (n.output_size() > 3) return a.Error(absl::StrCat("expected at most 3 outputs, got ", n.output_size()));
  if (attrs.write_stats) {
    static const char* kStats[] = {"", "mean", "inv_std_dev"};
    for (int i = 1; i < 3; ++i) {
      std::string out = i < n.output_size() ? n.output(i) : "";
      if (out.empty()) {  // an unnamed statistic is computed beside the named one and read by nobody
        out = absl::StrCat(name, "/", kStats[i]);
        for (int j = 1; known_.count(out) || shapes_.count(out); ++j) out = absl::StrCat(name, "/", kStats[i], "_", j);
      }
      outputs.push_back(out);
    }
  }
  return Emit(name, attrs, inputs, outputs);
}

std::string OnnxImporter::FreshTensorName(const std::string& stem) const {
  std::string name = stem;
  for (int i = 1; known_.count(name) || shapes_.count(name); ++i) name = absl::StrCat(stem, "_", i);
  return name;
}

absl::StatusOr<std::string> OnnxImporter::PerChannelConstant(const OnnxAttributes& a, const onnx::NodeProto& n,
                                                             int input, int64_t channels, int64_t groups, size_t rank,
                                                             const char* role) {
  const KnownValue* v = Known(n.input(input));
  if (v == nullptr) {
    return absl::UnimplementedError(absl::StrCat(a.label(), ": input ", input, " ('", n.input(input), "', the ", role,
                                                 ") is computed at run time; Convoy needs it as a constant"));
  }
  const int64_t per_value = v->size() == channels ? 1 : v->size() == groups ? channels / groups : 0;
  if (v->is_int() || per_value == 0) {
    return a.Error(absl::StrCat("input ", input, " ('", n.input(input), "', the ", role, ") is ", v->Describe(),
                                "; expected FLOAT with ", channels, " values (one per channel)"));
  }
  std::vector<float> values(channels);
  for (int64_t c = 0; c < channels; ++c) values[c] = v->floats[c / per_value];
  Shape shape(rank, 1);
  shape[1] = channels;
  const std::string name = FreshTensorName(absl::StrCat(n.input(input), "/per_channel"));
  known_[name] = KnownValue::Float(shape, std::move(values));
  return name;
}

// InstanceNormalization (opsets 1, 6) and GroupNormalization (18: scale and bias per group; 21: per channel) over
// x [N, C, D...]: a LayerNorm with unit scale over each group's [C/G, D...] values (instance norm: G = C), the
// grouped form reached through Reshape [N, G, C/G * D...] and back, then y = normalized * scale[c] + bias[c] as a
// Mul and an Add of [1, C, 1, ...] constants (the binary kernels' per-channel form).
absl::Status OnnxImporter::InstanceOrGroupNormalizationOp(const onnx::NodeProto& n, const OnnxAttributes& a) {
  const bool group = n.op_type() == "GroupNormalization";
  if (group && opset_ < 18) {
    return absl::UnimplementedError(absl::StrCat(a.label(), ": GroupNormalization is not part of ONNX opset ", opset_,
                                                 " (it appears at opset 18)"));
  }
  if (group) {
    CONVOY_RETURN_IF_ERROR(a.CheckKnown(opset_ >= 21 ? std::initializer_list<const char*>{"epsilon", "num_groups",
                                                                                            "stash_type"}
                                                     : std::initializer_list<const char*>{"epsilon", "num_groups"}));
  } else {
    CONVOY_RETURN_IF_ERROR(a.CheckKnown({"epsilon"}));
  }
  CONVOY_RETURN_IF_ERROR(ExpectInputs(a, n, 3, 3));
  CONVOY_RETURN_IF_ERROR(OnlyFirstOutput(a, n));
  CONVOY_ASSIGN_OR_RETURN(Shape x, ShapeOf(n.input(0)));
  if (x.size() < 3) {
    return absl::UnimplementedError(absl::StrCat(a.label(), ": input '", n.input(0), "' must be [N, C, D...] with ",
                                                 "at least one spatial axis, got ", runtime::ShapeToString(x)));
  }
  const int64_t channels = x[1];
  CONVOY_ASSIGN_OR_RETURN(int64_t groups, group ? a.Int("num_groups", 0) : absl::StatusOr<int64_t>(channels));
  if (groups < 1 || channels % groups != 0) {
    return a.Error(absl::StrCat("num_groups ", groups, " must divide the ", channels, " channels of '", n.input(0),
                                "'"));
  }
  if (group && opset_ >= 21) {
    CONVOY_ASSIGN_OR_RETURN(int64_t stash_type, a.Int("stash_type", 1));
    if (stash_type != 1) {
      return absl::UnimplementedError(absl::StrCat(a.label(), ": attribute 'stash_type' value ", stash_type,
                                                   " is not supported (1, FLOAT statistics, is)"));
    }
  }
  // Scale and bias: per channel, or per group for GroupNormalization before opset 21.
  const int64_t value_groups = group && opset_ < 21 ? groups : channels;
  CONVOY_ASSIGN_OR_RETURN(std::string scale,
                          PerChannelConstant(a, n, 1, channels, value_groups, x.size(), "scale"));
  CONVOY_ASSIGN_OR_RETURN(std::string bias, PerChannelConstant(a, n, 2, channels, value_groups, x.size(), "bias"));
  const std::string name = n.name().empty() ? (group ? "group_norm" : "instance_norm") : n.name();
  runtime::LayerNormAttrs ln;
  CONVOY_ASSIGN_OR_RETURN(ln.epsilon, a.Float("epsilon", 1e-5f));
  int64_t spatial = 1;
  for (size_t d = 2; d < x.size(); ++d) spatial *= x[d];
  std::string normalized_input = n.input(0);
  if (group) {  // [N, C, D...] -> [N, G, C/G * D...]
    normalized_input = FreshTensorName(absl::StrCat(name, "/grouped"));
    CONVOY_RETURN_IF_ERROR(Emit(absl::StrCat(name, "/group"), runtime::ReshapeAttrs{{0, groups, -1}}, {n.input(0)},
                                {normalized_input}));
  }
  ln.axis = 2;
  const int64_t per_group = group ? channels / groups * spatial : spatial;
  const std::string ones = FreshTensorName(absl::StrCat(name, "/unit_scale"));
  known_[ones] = KnownValue::Float({per_group}, std::vector<float>(per_group, 1.0f));
  std::string normalized = FreshTensorName(absl::StrCat(name, "/normalized"));
  CONVOY_RETURN_IF_ERROR(Emit(absl::StrCat(name, "/normalize"), ln, {normalized_input, ones}, {normalized}));
  if (group) {  // back to [N, C, D...]
    const std::string ungrouped = FreshTensorName(absl::StrCat(name, "/ungrouped"));
    std::vector<int64_t> shape(x.begin(), x.end());
    shape[0] = 0;  // the batch, copied
    CONVOY_RETURN_IF_ERROR(Emit(absl::StrCat(name, "/ungroup"), runtime::ReshapeAttrs{shape}, {normalized},
                                {ungrouped}));
    normalized = ungrouped;
  }
  const std::string scaled = FreshTensorName(absl::StrCat(name, "/scaled"));
  CONVOY_RETURN_IF_ERROR(Emit(absl::StrCat(name, "/scale"), runtime::BinaryAttrs{runtime::BinaryKind::kMul},
                              {normalized, scale}, {scaled}));
  return Emit(absl::StrCat(name, "/shift"), runtime::BinaryAttrs{runtime::BinaryKind::kAdd}, {scaled, bias},
              {n.output(0)});
}

// DepthToSpace (opsets 1, 11, 13; mode DCR or CRD from 11) and SpaceToDepth (1, 13) on x [N, C, H, W] with block b:
// a Reshape to 6-D, a Transpose and a Reshape back, the rearrangement ONNX defines them by (the Transpose kernel
// takes rank 6; the Reshapes are views).
absl::Status OnnxImporter::DepthSpaceOp(const onnx::NodeProto& n, const OnnxAttributes& a) {
  const bool to_space = n.op_type() == "DepthToSpace";
  CONVOY_RETURN_IF_ERROR(a.CheckKnown(to_space && opset_ >= 11 ? std::initializer_list<const char*>{"blocksize", "mode"}
                                                               : std::initializer_list<const char*>{"blocksize"}));
  CONVOY_RETURN_IF_ERROR(ExpectInputs(a, n, 1, 1));
  CONVOY_ASSIGN_OR_RETURN(int64_t b, a.Int("blocksize", 0));
  CONVOY_ASSIGN_OR_RETURN(std::string mode, a.String("mode", "DCR"));
  CONVOY_ASSIGN_OR_RETURN(Shape x, ShapeOf(n.input(0)));
  if (x.size() != 4) {
    return absl::UnimplementedError(absl::StrCat(a.label(), ": input '", n.input(0), "' must be [N,C,H,W], got ",
                                                 runtime::ShapeToString(x)));
  }
  const int64_t c = x[1], h = x[2], w = x[3];
  if (b < 1 || (to_space && c % (b * b) != 0) || (!to_space && (h % b != 0 || w % b != 0))) {
    return a.Error(absl::StrCat("blocksize ", b, " does not divide ", to_space ? "the channels of " : "H and W of ",
                                runtime::ShapeToString(x)));
  }
  if (mode != "DCR" && mode != "CRD") {
    return absl::UnimplementedError(absl::StrCat(a.label(), ": attribute 'mode' value '", mode, "' is not supported"));
  }
  std::vector<int64_t> blocks, perm, out;
  if (!to_space) {
    blocks = {0, c, h / b, b, w / b, b}, perm = {0, 3, 5, 1, 2, 4}, out = {0, c * b * b, h / b, w / b};
  } else if (mode == "DCR") {
    blocks = {0, b, b, c / (b * b), h, w}, perm = {0, 3, 4, 1, 5, 2}, out = {0, c / (b * b), h * b, w * b};
  } else {
    blocks = {0, c / (b * b), b, b, h, w}, perm = {0, 1, 4, 2, 5, 3}, out = {0, c / (b * b), h * b, w * b};
  }
  const std::string name = n.name().empty() ? (to_space ? "depth_to_space" : "space_to_depth") : n.name();
  const std::string split = FreshTensorName(absl::StrCat(name, "/blocks"));
  const std::string moved = FreshTensorName(absl::StrCat(name, "/moved"));
  CONVOY_RETURN_IF_ERROR(Emit(absl::StrCat(name, "/split"), runtime::ReshapeAttrs{blocks}, {n.input(0)}, {split}));
  CONVOY_RETURN_IF_ERROR(Emit(absl::StrCat(name, "/move"), runtime::TransposeAttrs{perm}, {split}, {moved}));
  return Emit(absl::StrCat(name, "/merge"), runtime::ReshapeAttrs{out}, {moved}, {n.output(0)});
}

// Element-wise functions on runtime tensors (on constants the load-time evaluator or the reference interpreter
// computes them): the graph's Unary node, or for Gelu without approximation the fusable exact-GELU activation.
absl::Status OnnxImporter::UnaryFunctionOp(const onnx::NodeProto& n, const OnnxAttributes& a) {
  struct Function {
    const char* op;
    runtime::UnaryKind kind;
    int64_t since;  // the first opset that defines the op
    const char* alpha_name;
    float alpha;
  };
  static const Function kFunctions[] = {
      {"Elu", runtime::UnaryKind::kElu, 1, "alpha", 1.0f},
      {"Selu", runtime::UnaryKind::kSelu, 1, "alpha", 1.67326319217681884765625f},
      {"Celu", runtime::UnaryKind::kCelu, 12, "alpha", 1.0f},
      {"Softplus", runtime::UnaryKind::kSoftplus, 1, nullptr, 0.0f},
      {"Softsign", runtime::UnaryKind::kSoftsign, 1, nullptr, 0.0f},
      {"Mish", runtime::UnaryKind::kMish, 18, nullptr, 0.0f},
      {"ThresholdedRelu", runtime::UnaryKind::kThresholdedRelu, 10, "alpha", 1.0f},
      {"Gelu", runtime::UnaryKind::kGeluTanh, 20, nullptr, 0.0f},
      {"Erf", runtime::UnaryKind::kErf, 9, nullptr, 0.0f},
      {"Exp", runtime::UnaryKind::kExp, 1, nullptr, 0.0f},
      {"Log", runtime::UnaryKind::kLog, 1, nullptr, 0.0f},
      {"Abs", runtime::UnaryKind::kAbs, 1, nullptr, 0.0f},
      {"Neg", runtime::UnaryKind::kNeg, 1, nullptr, 0.0f},
      {"Sqrt", runtime::UnaryKind::kSqrt, 1, nullptr, 0.0f},
      {"Reciprocal", runtime::UnaryKind::kReciprocal, 1, nullptr, 0.0f},
      {"Floor", runtime::UnaryKind::kFloor, 1, nullptr, 0.0f},
      {"Ceil", runtime::UnaryKind::kCeil, 1, nullptr, 0.0f},
      {"Round", runtime::UnaryKind::kRound, 11, nullptr, 0.0f},
      {"Sign", runtime::UnaryKind::kSign, 9, nullptr, 0.0f},
  };
  const Function* f = nullptr;
  for (const Function& candidate : kFunctions) {
    if (n.op_type() == candidate.op) f = &candidate;
  }
  if (f == nullptr) return a.Error("internal: no unary function for this op");
  if (opset_ < f->since) {
    return absl::UnimplementedError(absl::StrCat(a.label(), ": ", f->op, " is not part of ONNX opset ", opset_,
                                                 " (it appears at opset ", f->since, ")"));
  }
  CONVOY_RETURN_IF_ERROR(ExpectInputs(a, n, 1, 1));
  runtime::UnaryAttrs attrs;
  attrs.kind = f->kind;
  const std::string name = n.name().empty() ? n.op_type() : n.name();
  if (n.op_type() == "Gelu") {
    CONVOY_RETURN_IF_ERROR(a.CheckKnown({"approximate"}));
    CONVOY_ASSIGN_OR_RETURN(std::string approximate, a.String("approximate", "none"));
    if (approximate == "none") {
      runtime::Activation gelu;
      gelu.kind = runtime::ActivationKind::kGelu;
      return Emit(name, runtime::ActivationAttrs{gelu}, {n.input(0)}, {n.output(0)});
    }
    if (approximate != "tanh") {
      return a.Error(absl::StrCat("attribute 'approximate' value '", approximate, "' (expected none or tanh)"));
    }
  } else if (n.op_type() == "Selu") {
    CONVOY_RETURN_IF_ERROR(a.CheckKnown({"alpha", "gamma"}));
    CONVOY_ASSIGN_OR_RETURN(attrs.alpha, a.Float("alpha", f->alpha));
    CONVOY_ASSIGN_OR_RETURN(attrs.beta, a.Float("gamma", 1.05070102214813232421875f));
  } else if (f->alpha_name != nullptr) {
    CONVOY_RETURN_IF_ERROR(a.CheckKnown({f->alpha_name}));
    CONVOY_ASSIGN_OR_RETURN(attrs.alpha, a.Float(f->alpha_name, f->alpha));
    if (attrs.kind == runtime::UnaryKind::kCelu && attrs.alpha == 0.0f) return a.Error("attribute 'alpha' must not be 0");
  } else {
    CONVOY_RETURN_IF_ERROR(a.CheckKnown({}));
  }
  return Emit(name, attrs, {n.input(0)}, {n.output(0)});
}

// PRelu (opsets 7, 9, 16) with a constant slope broadcast onto x (numpy rules; per channel [C,1,1] in CNNs):
// y = max(x, 0) + slope * min(x, 0), as Relu, Sub (x - relu(x) = min(x, 0)), Mul and Add nodes.
absl::Status OnnxImporter::PReluOp(const onnx::NodeProto& n, const OnnxAttributes& a) {
  CONVOY_RETURN_IF_ERROR(a.CheckKnown({}));
  CONVOY_RETURN_IF_ERROR(ExpectInputs(a, n, 2, 2));
  const KnownValue* slope = Known(n.input(1));
  if (slope == nullptr || slope->is_int()) {
    return absl::UnimplementedError(absl::StrCat(a.label(), ": input 1 ('", n.input(1), "', the slope) must be a ",
                                                 "float constant"));
  }
  const std::string name = n.name().empty() ? "prelu" : n.name();
  const std::string positive = FreshTensorName(absl::StrCat(name, "/positive"));
  const std::string negative = FreshTensorName(absl::StrCat(name, "/negative"));
  const std::string sloped = FreshTensorName(absl::StrCat(name, "/sloped"));
  CONVOY_RETURN_IF_ERROR(Emit(absl::StrCat(name, "/relu"), runtime::ActivationAttrs{runtime::Activation::Relu()},
                              {n.input(0)}, {positive}));
  CONVOY_RETURN_IF_ERROR(Emit(absl::StrCat(name, "/min"), runtime::BinaryAttrs{runtime::BinaryKind::kSub},
                              {n.input(0), positive}, {negative}));
  CONVOY_RETURN_IF_ERROR(Emit(absl::StrCat(name, "/slope"), runtime::BinaryAttrs{runtime::BinaryKind::kMul},
                              {negative, n.input(1)}, {sloped}));
  return Emit(name, runtime::BinaryAttrs{runtime::BinaryKind::kAdd}, {positive, sloped}, {n.output(0)});
}

// ConvTranspose (opsets 1, 11): 2-D, constant weight [C, K/group, kh, kw]; strides, dilations, group, pads or
// auto_pad, output_padding and output_shape resolved here into the output extent and the leading pads, as ONNX's
// reference implementation does (which generated the conformance data): with auto_pad SAME_UPPER / SAME_LOWER the
// total padding stride * (in - 1) + output_padding + dilated kernel - output_shape (default in * stride) is split
// floor(total / 2) at the start (SAME_UPPER) or the end; otherwise the begin pads are `pads` (0 for VALID) and the
// output is output_shape when given, else stride * (in - 1) + output_padding + dilated kernel - both pads.
// [N,C,L] -> [N,C,1,L] with the weight [C,K/g,k] as [C,K/g,1,k] -> the 2-D transposed convolution -> [N,K,L'].
absl::Status OnnxImporter::ConvTranspose1d(const onnx::NodeProto& n, const OnnxAttributes& a, const Shape& x) {
  const std::string name = n.name().empty() ? "conv_transpose" : n.name();
  const int64_t batch = x[0] == runtime::kBatch ? 0 : x[0];
  const KnownValue* weight = Known(n.input(1));
  const std::string weight_2d = FreshTensorName(n.input(1) + "_2d");
  known_[weight_2d] = KnownValue::Float({weight->shape[0], weight->shape[1], 1, weight->shape[2]}, weight->floats);
  std::map<std::string, std::vector<int64_t>> ints;
  for (const char* attr : {"kernel_shape", "strides", "dilations", "output_padding", "output_shape", "pads"}) {
    CONVOY_ASSIGN_OR_RETURN(std::vector<int64_t> v, a.Ints(attr, {}));
    const size_t expected = std::string(attr) == "pads" ? 2 : 1;
    if (v.empty()) continue;
    if (v.size() != expected) {
      return a.Error(absl::StrCat("attribute '", attr, "' has ", v.size(), " entries; a 1-D transposed convolution "
                                  "takes ", expected));
    }
    const int64_t unit = std::string(attr) == "output_padding" ? 0 : 1;
    ints[attr] = expected == 2 ? std::vector<int64_t>{0, v[0], 0, v[1]} : std::vector<int64_t>{unit, v[0]};
  }
  const std::string flat = FreshTensorName(n.output(0) + "_as_2d");
  const std::string out_2d = FreshTensorName(n.output(0) + "_out_2d");
  CONVOY_RETURN_IF_ERROR(Emit(name + "_as_2d", runtime::ReshapeAttrs{{batch, x[1], 1, x[2]}}, {n.input(0)}, {flat}));
  CONVOY_RETURN_IF_ERROR(
      ImportRewritten(n, a, &OnnxImporter::ConvTransposeOp, name, flat, weight_2d, out_2d, ints));
  CONVOY_ASSIGN_OR_RETURN(Shape y, ShapeOf(out_2d));
  return Emit(name + "_as_1d", runtime::ReshapeAttrs{{batch, y[1], y[3]}}, {out_2d}, {n.output(0)});
}

absl::Status OnnxImporter::ConvTransposeOp(const onnx::NodeProto& n, const OnnxAttributes& a) {
  CONVOY_RETURN_IF_ERROR(a.CheckKnown({"auto_pad", "dilations", "group", "kernel_shape", "output_padding",
                                       "output_shape", "pads", "strides"}));
  CONVOY_RETURN_IF_ERROR(ExpectInputs(a, n, 2, 3));
  CONVOY_ASSIGN_OR_RETURN(const KnownValue* weight, RequireKnown(a, n, 1, false));
  CONVOY_ASSIGN_OR_RETURN(Shape x, ShapeOf(n.input(0)));
  if (weight->shape.size() == 3 && x.size() == 3) return ConvTranspose1d(n, a, x);
  if (weight->shape.size() != 4 || x.size() != 4) {
    return absl::UnimplementedError(absl::StrCat(a.label(), ": only 2-D transposed convolution is supported (input ",
                                                 "[N,C,H,W], weight [C,K/group,kh,kw]); input '", n.input(0), "' is ",
                                                 runtime::ShapeToString(x), ", weight ",
                                                 runtime::ShapeToString(weight->shape)));
  }
  runtime::ConvTranspose2dAttrs attrs;
  CONVOY_ASSIGN_OR_RETURN(attrs.groups, a.Int("group", 1));
  if (attrs.groups < 1 || weight->shape[0] != x[1] || x[1] % attrs.groups != 0) {
    return a.Error(absl::StrCat("weight ", runtime::ShapeToString(weight->shape), " with group ", attrs.groups,
                                " does not fit input '", n.input(0), "' ", runtime::ShapeToString(x),
                                " (weight dim 0 must be the ", x[1], " input channels, divisible by the group)"));
  }
  CONVOY_ASSIGN_OR_RETURN(auto kernel, a.Ints("kernel_shape", {weight->shape[2], weight->shape[3]}));
  CONVOY_ASSIGN_OR_RETURN(auto strides, a.Ints("strides", {1, 1}));
  CONVOY_ASSIGN_OR_RETURN(auto dilations, a.Ints("dilations", {1, 1}));
  CONVOY_ASSIGN_OR_RETURN(auto output_padding, a.Ints("output_padding", {0, 0}));
  CONVOY_ASSIGN_OR_RETURN(auto pads, a.Ints("pads", {0, 0, 0, 0}));
  CONVOY_ASSIGN_OR_RETURN(auto output_shape, a.Ints("output_shape", {}));
  CONVOY_ASSIGN_OR_RETURN(std::string auto_pad, a.String("auto_pad", "NOTSET"));
  if (kernel.size() != 2 || kernel[0] != weight->shape[2] || kernel[1] != weight->shape[3]) {
    return a.Error(absl::StrCat("kernel_shape [", absl::StrJoin(kernel, ","), "] does not match weight ",
                                runtime::ShapeToString(weight->shape)));
  }
  if (strides.size() != 2 || dilations.size() != 2 || output_padding.size() != 2 || pads.size() != 4 ||
      (!output_shape.empty() && output_shape.size() != 2 && output_shape.size() != 4)) {
    return a.Error(absl::StrCat("expected 2 strides, 2 dilations, 2 output_padding, 4 pads and 2 (or 4) output_shape "
                                "entries, got ", strides.size(), ", ", dilations.size(), ", ", output_padding.size(),
                                ", ", pads.size(), " and ", output_shape.size()));
  }
  if (output_shape.size() == 4) output_shape.erase(output_shape.begin(), output_shape.begin() + 2);
  if (strides[0] < 1 || strides[1] < 1 || dilations[0] < 1 || dilations[1] < 1) {
    return a.Error("strides and dilations must be positive");
  }
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") {
    return absl::UnimplementedError(absl::StrCat(a.label(), ": attribute 'auto_pad' value '", auto_pad,
                                                 "' is not supported"));
  }
  int64_t begin[2], out[2];
  for (int i = 0; i < 2; ++i) {
    const int64_t in = x[2 + i];
    const int64_t natural = strides[i] * (in - 1) + output_padding[i] + (kernel[i] - 1) * dilations[i] + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      out[i] = output_shape.empty() ? in * strides[i] : output_shape[i];
      const int64_t total = natural - out[i];
      const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);  // floor(total / 2)
      begin[i] = auto_pad == "SAME_UPPER" ? half : total - half;
    } else {
      begin[i] = auto_pad == "VALID" ? 0 : pads[i];
      const int64_t end = auto_pad == "VALID" ? 0 : pads[i + 2];
      out[i] = output_shape.empty() ? natural - begin[i] - end : output_shape[i];
    }
    if (out[i] < 1) {
      return a.Error(absl::StrCat("the output extent along axis ", 2 + i, " is ", out[i], " (input ", in,
                                  ", stride ", strides[i], ", kernel ", kernel[i], ", dilation ", dilations[i],
                                  ", output_padding ", output_padding[i], ", pads ", pads[i], "/", pads[i + 2], ")"));
    }
  }
  attrs.kernel_h = kernel[0], attrs.kernel_w = kernel[1];
  attrs.stride_h = strides[0], attrs.stride_w = strides[1];
  attrs.dilation_h = dilations[0], attrs.dilation_w = dilations[1];
  attrs.pad_top = begin[0], attrs.pad_left = begin[1];
  attrs.out_h = out[0], attrs.out_w = out[1];
  std::vector<std::string> inputs = {n.input(0), n.input(1)};
  if (n.input_size() == 3 && !n.input(2).empty()) {
    attrs.has_bias = true;
    inputs.push_back(n.input(2));
  }
  return Emit(n.name().empty() ? "conv_transpose" : n.name(), attrs, inputs, {n.output(0)});
}

// Shape of a runtime tensor: its dimensions are known at import, except the dynamic batch (kSymbolicBatchValue).
absl::Status OnnxImporter::ShapeOp(const onnx::NodeProto& n, const OnnxAttributes& a) {
  CONVOY_RETURN_IF_ERROR(a.CheckKnown({"start", "end"}));
  CONVOY_RETURN_IF_ERROR(ExpectInputs(a, n, 1, 1));
  CONVOY_ASSIGN_OR_RETURN(Shape x, ShapeOf(n.input(0)));
  int64_t rank = static_cast<int64_t>(x.size());
  CONVOY_ASSIGN_OR_RETURN(int64_t start, a.Int("start", 0));
  CONVOY_ASSIGN_OR_RETURN(int64_t end, a.Int("end", rank));
  start = std::clamp<int64_t>(start < 0 ? start + rank : start, 0, rank);
  end = std::clamp<int64_t>(end < 0 ? end + rank : end, 0, rank);
  std::vector<int64_t> dims;
  for (int64_t i = start; i < end; ++i) dims.push_back(x[i] == runtime::kBatch ? kSymbolicBatchValue : x[i]);
  const int64_t count = static_cast<int64_t>(dims.size());
  known_[n.output(0)] = KnownValue::Int64({count}, std::move(dims));
  return absl::OkStatus();
}

absl::Status OnnxImporter::UnsqueezeOp(const onnx::NodeProto& n, const OnnxAttributes& a) {
  CONVOY_RETURN_IF_ERROR(a.CheckKnown({"axes"}));
  CONVOY_RETURN_IF_ERROR(ExpectInputs(a, n, 1, 2));
  std::vector<int64_t> axes;
  if (opset_ < 13) {
    CONVOY_ASSIGN_OR_RETURN(axes, a.Ints("axes", {}));
  } else {
    CONVOY_RETURN_IF_ERROR(ExpectInputs(a, n, 2, 2));
    if (a.Has("axes")) return a.Error(absl::StrCat("attribute 'axes' is not part of Unsqueeze at opset ", opset_,
                                                   " (from opset 13 the axes are input 1)"));
    CONVOY_ASSIGN_OR_RETURN(axes, ConstantAxesInput(a, n, 1, "axes"));
  }
  CONVOY_ASSIGN_OR_RETURN(Shape x, ShapeOf(n.input(0)));
  int64_t out_rank = static_cast<int64_t>(x.size() + axes.size());
  for (int64_t& axis : axes) {
    if (axis < -out_rank || axis >= out_rank) return a.Error(absl::StrCat("axis ", axis, " for rank ", out_rank));
    if (axis < 0) axis += out_rank;
  }
  std::vector<int64_t> target;
  size_t next = 0;
  for (int64_t d = 0; d < out_rank; ++d) {
    bool inserted = std::count(axes.begin(), axes.end(), d) > 0;
    target.push_back(inserted ? 1 : (next < x.size() ? (x[next] == runtime::kBatch ? 0 : x[next]) : 1));
    if (!inserted) ++next;
  }
  return ReshapeTo(n, target, "unsqueeze");
}

absl::Status OnnxImporter::ReshapeTo(const onnx::NodeProto& n, const std::vector<int64_t>& target,
                                     const char* default_name) {
  return Emit(n.name().empty() ? default_name : n.name(), runtime::ReshapeAttrs{target}, {n.input(0)}, {n.output(0)});
}

absl::Status OnnxImporter::SqueezeOp(const onnx::NodeProto& n, const OnnxAttributes& a) {
  CONVOY_RETURN_IF_ERROR(a.CheckKnown({"axes"}));
  CONVOY_RETURN_IF_ERROR(ExpectInputs(a, n, 1, 2));
  std::vector<int64_t> axes;
  if (opset_ < 13) {
    CONVOY_ASSIGN_OR_RETURN(axes, a.Ints("axes", {}));
  } else {
    if (a.Has("axes")) return a.Error(absl::StrCat("attribute 'axes' is not part of Squeeze at opset ", opset_,
                                                   " (from opset 13 the axes are input 1)"));
    if (n.input_size() == 2 && !n.input(1).empty()) {
      CONVOY_ASSIGN_OR_RETURN(axes, ConstantAxesInput(a, n, 1, "axes"));
    }
  }
  CONVOY_ASSIGN_OR_RETURN(Shape x, ShapeOf(n.input(0)));
  int64_t rank = static_cast<int64_t>(x.size());
  for (int64_t& axis : axes) axis = axis < 0 ? axis + rank : axis;
  std::vector<int64_t> target;
  for (int64_t d = 0; d < rank; ++d) {
    bool drop = axes.empty() ? x[d] == 1 : std::count(axes.begin(), axes.end(), d) > 0;
    if (drop && x[d] != 1) return a.Error(absl::StrCat("cannot squeeze axis ", d, " of extent ", x[d]));
    if (!drop) target.push_back(x[d] == runtime::kBatch ? 0 : x[d]);
  }
  return ReshapeTo(n, target, "squeeze");
}

// Cast of runtime data: to a float type it is an identity (the plan chooses the compute precision); a cast of a
// constant never gets here (the evaluator folds it).
absl::Status OnnxImporter::CastOp(const onnx::NodeProto& n, const OnnxAttributes& a) {
  CONVOY_RETURN_IF_ERROR(a.CheckKnown({"to", "saturate"}));
  CONVOY_RETURN_IF_ERROR(ExpectInputs(a, n, 1, 1));
  CONVOY_ASSIGN_OR_RETURN(int64_t to, a.Int("to", 0));
  if (to != onnx::TensorProto::FLOAT && to != onnx::TensorProto::DOUBLE) {
    return absl::UnimplementedError(absl::StrCat(
        a.label(), ": cast of the runtime tensor '", n.input(0), "' to ",
        onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(to)),
        "; Convoy's runtime computes on floating-point tensors (casts of constants are evaluated at load time)"));
  }
  return Emit(n.name().empty() ? "cast" : n.name(), runtime::IdentityAttrs{}, {n.input(0)}, {n.output(0)});
}

// CastLike (opsets 15, 19, 21) with a runtime tensor among its inputs: the target type is a runtime tensor's, FLOAT.
// A constant cast like a runtime tensor (ONNX's function bodies write CastLike(alpha, X)) becomes a float constant;
// a runtime tensor cast like a float is an identity; a runtime tensor cast like an integer constant is refused.
absl::Status OnnxImporter::CastLikeOp(const onnx::NodeProto& n, const OnnxAttributes& a) {
  CONVOY_RETURN_IF_ERROR(a.CheckKnown({"saturate"}));
  CONVOY_RETURN_IF_ERROR(ExpectInputs(a, n, 2, 2));
  const KnownValue* value = Known(n.input(0));
  if (value != nullptr) {  // the type reference (input 1) is computed at run time: FLOAT
    std::vector<float> floats = value->floats;
    if (value->is_int()) floats.assign(value->ints.begin(), value->ints.end());
    known_[n.output(0)] = KnownValue::Float(value->shape, std::move(floats));
    return absl::OkStatus();
  }
  const KnownValue* like = Known(n.input(1));
  if (like != nullptr && like->is_int()) {
    return absl::UnimplementedError(absl::StrCat(
        a.label(), ": cast of the runtime tensor '", n.input(0), "' like the integer tensor '", n.input(1), "' (",
        like->Describe(), "); Convoy's runtime computes on floating-point tensors"));
  }
  return Emit(n.name().empty() ? "cast_like" : n.name(), runtime::IdentityAttrs{}, {n.input(0)}, {n.output(0)});
}

// A step-1 slice of runtime data on non-batch axes: on the channel axis it is the middle output of a Split
// (ShuffleNet's chunk), on H and W of an image a Pad with negative pads (a crop); one node per cut axis.
absl::Status OnnxImporter::SliceRuntimeTensor(const onnx::NodeProto& n, const OnnxAttributes& a,
                                              const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
                                              const std::vector<int64_t>& axes, const std::vector<int64_t>& steps) {
  CONVOY_ASSIGN_OR_RETURN(Shape x, ShapeOf(n.input(0)));
  const int64_t rank = static_cast<int64_t>(x.size());
  if (ends.size() != starts.size() || (!axes.empty() && axes.size() != starts.size()) ||
      (!steps.empty() && steps.size() != starts.size())) {
    return a.Error(absl::StrCat("starts, ends, axes and steps have ", starts.size(), ", ", ends.size(), ", ",
                                axes.size(), " and ", steps.size(), " entries"));
  }
  struct Cut {
    int64_t axis, begin, end;
  };
  std::vector<Cut> cuts;
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t axis = axes.empty() ? static_cast<int64_t>(i) : axes[i];
    if (axis < -rank || axis >= rank) return a.Error(absl::StrCat("axis ", axis, " is out of range for rank ", rank));
    if (axis < 0) axis += rank;
    if (!steps.empty() && steps[i] != 1) {
      return absl::UnimplementedError(absl::StrCat(a.label(), ": slicing the runtime tensor '", n.input(0),
                                                   "' with step ", steps[i], " (only step 1)"));
    }
    if (axis == 0) {
      return absl::UnimplementedError(absl::StrCat(a.label(), ": slicing the batch axis of '", n.input(0), "'"));
    }
    const int64_t dim = x[axis];
    int64_t s = starts[i] < 0 ? starts[i] + dim : starts[i], e = ends[i] < 0 ? ends[i] + dim : ends[i];
    s = std::clamp<int64_t>(s, 0, dim);
    e = std::clamp<int64_t>(e, s, dim);
    if (e == s) return a.Error(absl::StrCat("empty slice of runtime data on axis ", axis));
    if (s > 0 || e < dim) cuts.push_back({axis, s, e});
  }
  const std::string name = n.name().empty() ? "slice" : n.name();
  if (cuts.empty()) return Emit(name, runtime::IdentityAttrs{}, {n.input(0)}, {n.output(0)});
  std::string current = n.input(0);
  for (size_t k = 0; k < cuts.size(); ++k) {
    const Cut& cut = cuts[k];
    const std::string out =
        k + 1 == cuts.size() ? n.output(0) : graph_.UniqueName(absl::StrCat(n.output(0), "_cut", cut.axis));
    CONVOY_ASSIGN_OR_RETURN(Shape shape, ShapeOf(current));
    if (rank == 4 && cut.axis >= 2) {
      runtime::PadAttrs crop;
      crop.pads.assign(8, 0);
      crop.pads[cut.axis] = -cut.begin;
      crop.pads[cut.axis + 4] = -(shape[cut.axis] - cut.end);
      CONVOY_RETURN_IF_ERROR(Emit(name, crop, {current}, {out}));
    } else {
      runtime::SplitAttrs split{cut.axis, {}};
      std::vector<std::string> outputs;
      const std::string stem = absl::StrCat(out, "_axis", cut.axis);
      for (auto [part, part_name] : {std::pair<int64_t, std::string>{cut.begin, stem + "_before"},
                                     {cut.end - cut.begin, out},
                                     {shape[cut.axis] - cut.end, stem + "_after"}}) {
        if (part == 0) continue;
        split.sizes.push_back(part);
        outputs.push_back(part_name == out ? out : graph_.UniqueName(part_name));
      }
      CONVOY_RETURN_IF_ERROR(Emit(name, split, {current}, outputs));
    }
    current = out;
  }
  return absl::OkStatus();
}

// Slice of runtime data (a slice of a constant is evaluated at load time).
absl::Status OnnxImporter::SliceOp(const onnx::NodeProto& n, const OnnxAttributes& a) {
  CONVOY_RETURN_IF_ERROR(a.CheckKnown({"starts", "ends", "axes"}));
  std::vector<int64_t> starts, ends, axes, steps;
  if (opset_ < 10) {
    CONVOY_RETURN_IF_ERROR(ExpectInputs(a, n, 1, 1));
    CONVOY_ASSIGN_OR_RETURN(starts, a.Ints("starts", {}));
    CONVOY_ASSIGN_OR_RETURN(ends, a.Ints("ends", {}));
    CONVOY_ASSIGN_OR_RETURN(axes, a.Ints("axes", {}));
  } else {
    CONVOY_RETURN_IF_ERROR(ExpectInputs(a, n, 3, 5));
    CONVOY_ASSIGN_OR_RETURN(starts, KnownInts(a, n, 1));
    CONVOY_ASSIGN_OR_RETURN(ends, KnownInts(a, n, 2));
    if (n.input_size() > 3 && !n.input(3).empty()) {
      CONVOY_ASSIGN_OR_RETURN(axes, KnownInts(a, n, 3));
    }
    if (n.input_size() > 4 && !n.input(4).empty()) {
      CONVOY_ASSIGN_OR_RETURN(steps, KnownInts(a, n, 4));
    }
  }
  return SliceRuntimeTensor(n, a, starts, ends, axes, steps);
}

absl::Status OnnxImporter::QuantizedTensorError(const std::string& name) const {
  const QuantizedTensor& q = quantized_.at(name);
  return absl::UnimplementedError(absl::StrCat(
      current_label_, ": tensor '", name, "' is the ", q.params.Describe(), " output of ", q.producer,
      "; Convoy reads quantized tensors only through a DequantizeLinear"));
}

absl::Status OnnxImporter::QuantizeLinearOp(const onnx::NodeProto& n, const OnnxAttributes& a) {
  CONVOY_RETURN_IF_ERROR(ExpectInputs(a, n, 2, 3));
  CONVOY_ASSIGN_OR_RETURN(Shape x_shape, ShapeOf(n.input(0)));
  const KnownValue* zero_point = n.input_size() > 2 && !n.input(2).empty() ? Known(n.input(2)) : nullptr;
  CONVOY_ASSIGN_OR_RETURN(QuantizationParams params,
                          ReadQuantizationParams(n, a, opset_, x_shape, 0, Known(n.input(1)), zero_point));
  if (const KnownValue* x = Known(n.input(0))) {
    CONVOY_ASSIGN_OR_RETURN(known_[n.output(0)], QuantizeConstant(params, *x, a.label()));
    return absl::OkStatus();
  }
  quantized_[n.output(0)] = QuantizedTensor{n.input(0), std::move(params), a.label()};
  return absl::OkStatus();
}

absl::Status OnnxImporter::DequantizeLinearOp(const onnx::NodeProto& n, const OnnxAttributes& a) {
  CONVOY_RETURN_IF_ERROR(ExpectInputs(a, n, 2, 3));
  const KnownValue* zero_point = n.input_size() > 2 && !n.input(2).empty() ? Known(n.input(2)) : nullptr;
  const KnownValue* x = Known(n.input(0));
  auto pending = quantized_.find(n.input(0));
  if (!x && pending == quantized_.end()) {
    CONVOY_ASSIGN_OR_RETURN(Shape shape, ShapeOf(n.input(0)));
    return absl::UnimplementedError(absl::StrCat(
        a.label(), ": input 0 ('", n.input(0), "', ", runtime::ShapeToString(shape),
        ") is a runtime tensor no QuantizeLinear produced; Convoy imports DequantizeLinear of constants and of "
        "QuantizeLinear outputs"));
  }
  if (x) {
    CONVOY_ASSIGN_OR_RETURN(QuantizationParams params,
                            ReadQuantizationParams(n, a, opset_, x->shape, x->type, Known(n.input(1)), zero_point));
    CONVOY_ASSIGN_OR_RETURN(known_[n.output(0)], DequantizeConstant(params, *x, a.label()));
    // Remembered for the INT8 planning of the weights, should the value become a graph constant (GraphTensor).
    if (params.type == onnx::TensorProto::INT8 || params.type == onnx::TensorProto::UINT8) {
      dequantized_[n.output(0)] = runtime::ConstantQuantization{params.type == onnx::TensorProto::INT8, params.axis,
                                                                params.scales, params.zero_points};
    }
    return absl::OkStatus();
  }
  const QuantizedTensor q = pending->second;
  CONVOY_ASSIGN_OR_RETURN(Shape x_shape, ShapeOf(q.source));
  CONVOY_ASSIGN_OR_RETURN(QuantizationParams params, ReadQuantizationParams(n, a, opset_, x_shape, q.params.type,
                                                                            Known(n.input(1)), zero_point));
  CONVOY_ASSIGN_OR_RETURN(runtime::Activation act, QuantizeDequantizeActivation(q.params, params, a.label()));
  return Emit(n.name().empty() ? "quantize_dequantize" : n.name(), runtime::ActivationAttrs{act}, {q.source},
              {n.output(0)});
}

}  // namespace

absl::StatusOr<Graph> ImportOnnxModel(std::string_view serialized_model, const std::string& source_name,
                                      const OnnxImportOptions& options) {
  onnx::ModelProto model;
  if (serialized_model.size() > static_cast<size_t>(std::numeric_limits<int>::max()) ||
      !model.ParseFromArray(serialized_model.data(), static_cast<int>(serialized_model.size()))) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_name, ": not a valid ONNX model (protobuf parse failed, ", serialized_model.size(), " bytes)"));
  }
  // QOperator models (QLinearConv, QLinearAdd, ...) are read as the QDQ models they are equivalent to.
  CONVOY_RETURN_IF_ERROR(RewriteQOperatorNodes(model, source_name));
  return OnnxImporter(source_name, options).Import(model);
}

absl::StatusOr<Graph> ImportOnnxFile(const std::string& path, const OnnxImportOptions& options) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot open ONNX model '", path, "'"));
  std::stringstream buffer;
  buffer << file.rdbuf();
  return ImportOnnxModel(buffer.str(), path, options);
}

}  // namespace convoy::repository
