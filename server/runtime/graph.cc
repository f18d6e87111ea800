// Graph IR bookkeeping: names, topological sort with cycle detection, and the printable dump.
#include "server/runtime/graph.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/common/status_macros.h"

namespace convoy::runtime {

std::string ShapeToString(const Shape& shape) {
  std::vector<std::string> dims;
  for (int64_t d : shape) dims.push_back(d == kBatch ? "N" : absl::StrCat(d));
  return absl::StrCat("[", absl::StrJoin(dims, ","), "]");
}

int64_t NumElements(const Shape& shape, int64_t batch_size) {
  int64_t n = 1;
  for (int64_t d : shape) n *= (d == kBatch ? batch_size : d);
  return n;
}

Shape ConcreteShape(const Shape& shape, int64_t batch_size) {
  Shape out = shape;
  for (int64_t& d : out) {
    if (d == kBatch) d = batch_size;
  }
  return out;
}

Tensor Tensor::Zeros(Shape shape) {
  Tensor t;
  t.data.assign(static_cast<size_t>(NumElements(shape)), 0.0f);
  t.shape = std::move(shape);
  return t;
}

const char* ActivationKindName(ActivationKind kind) {
  switch (kind) {
    case ActivationKind::kIdentity: return "identity";
    case ActivationKind::kRelu: return "relu";
    case ActivationKind::kClip: return "clip";
    case ActivationKind::kLeakyRelu: return "leaky_relu";
    case ActivationKind::kSigmoid: return "sigmoid";
    case ActivationKind::kTanh: return "tanh";
    case ActivationKind::kSilu: return "silu";
    case ActivationKind::kHardSigmoid: return "hard_sigmoid";
    case ActivationKind::kHardSwish: return "hard_swish";
    case ActivationKind::kGelu: return "gelu";
    case ActivationKind::kQuantizeDequantizeU8: return "quantize_dequantize_u8";
    case ActivationKind::kQuantizeDequantizeS8: return "quantize_dequantize_s8";
  }
  return "?";
}

float ApplyActivation(const Activation& a, float x) {
  switch (a.kind) {
    case ActivationKind::kIdentity: return x;
    case ActivationKind::kRelu: return x > 0.0f ? x : 0.0f;
    case ActivationKind::kClip: return std::min(std::max(x, a.alpha), a.beta);
    case ActivationKind::kLeakyRelu: return x >= 0.0f ? x : a.alpha * x;
    case ActivationKind::kSigmoid: return static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(x))));
    case ActivationKind::kTanh: return std::tanh(x);
    case ActivationKind::kSilu: return static_cast<float>(x / (1.0 + std::exp(-static_cast<double>(x))));
    case ActivationKind::kHardSigmoid: return std::min(std::max(a.alpha * x + a.beta, 0.0f), 1.0f);
    case ActivationKind::kHardSwish: return x * std::min(std::max(x / 6.0f + 0.5f, 0.0f), 1.0f);
    case ActivationKind::kGelu: return static_cast<float>(0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))));
    case ActivationKind::kQuantizeDequantizeU8:
    case ActivationKind::kQuantizeDequantizeS8: {
      const float qmin = a.kind == ActivationKind::kQuantizeDequantizeU8 ? 0.0f : -128.0f;
      const float qmax = a.kind == ActivationKind::kQuantizeDequantizeU8 ? 255.0f : 127.0f;
      const float q = std::min(std::max(std::nearbyint(x / a.alpha) + a.beta, qmin), qmax);
      return (q - a.beta) * a.alpha;
    }
  }
  return x;
}

const char* OpKindName(OpKind op) {
  switch (op) {
    case OpKind::kConv2d: return "Conv2d";
    case OpKind::kPool2d: return "Pool2d";
    case OpKind::kBatchNorm: return "BatchNorm";
    case OpKind::kActivation: return "Activation";
    case OpKind::kBinary: return "Binary";
    case OpKind::kConcat: return "Concat";
    case OpKind::kSplit: return "Split";
    case OpKind::kChannelShuffle: return "ChannelShuffle";
    case OpKind::kSoftmax: return "Softmax";
    case OpKind::kGemm: return "Gemm";
    case OpKind::kPad: return "Pad";
    case OpKind::kFlatten: return "Flatten";
    case OpKind::kReshape: return "Reshape";
    case OpKind::kTranspose: return "Transpose";
    case OpKind::kResize: return "Resize";
    case OpKind::kArgMax: return "ArgMax";
    case OpKind::kLayerNorm: return "LayerNorm";
    case OpKind::kConvTranspose2d: return "ConvTranspose2d";
    case OpKind::kUnary: return "Unary";
    case OpKind::kIdentity: return "Identity";
  }
  return "?";
}

const char* UnaryKindName(UnaryKind kind) {
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
  return "?";
}

Node MakeNode(std::string name, NodeAttrs attrs, std::vector<std::string> inputs, std::vector<std::string> outputs) {
  Node node;
  node.name = std::move(name);
  node.attrs = std::move(attrs);
  node.inputs = std::move(inputs);
  node.outputs = std::move(outputs);
  return node;
}

bool Graph::NameTaken(const std::string& name) const {
  if (constants_.count(name)) return true;
  for (const GraphInput& in : inputs_) {
    if (in.name == name) return true;
  }
  for (const Node& node : nodes_) {
    if (std::find(node.outputs.begin(), node.outputs.end(), name) != node.outputs.end()) return true;
  }
  return false;
}

absl::Status Graph::AddInput(const std::string& name, Shape shape) {
  if (name.empty()) return absl::InvalidArgumentError("graph input with an empty name");
  if (NameTaken(name)) return absl::AlreadyExistsError(absl::StrCat("graph input '", name, "': name already used"));
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == kBatch && i == 0) continue;
    if (shape[i] <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("graph input '", name, "': dimension ", i, " is ", shape[i],
                                                     "; only dimension 0 may be the symbolic batch"));
    }
  }
  shapes_[name] = shape;
  inputs_.push_back({name, std::move(shape)});
  return absl::OkStatus();
}

absl::Status Graph::AddConstant(const std::string& name, Tensor value) {
  if (name.empty()) return absl::InvalidArgumentError("constant with an empty name");
  if (NameTaken(name)) return absl::AlreadyExistsError(absl::StrCat("constant '", name, "': name already used"));
  if (static_cast<int64_t>(value.data.size()) != NumElements(value.shape)) {
    return absl::InvalidArgumentError(absl::StrCat("constant '", name, "': shape ", ShapeToString(value.shape),
                                                   " needs ", NumElements(value.shape), " values, got ",
                                                   value.data.size()));
  }
  shapes_[name] = value.shape;
  constants_.emplace(name, std::move(value));
  return absl::OkStatus();
}

absl::Status Graph::AddNode(Node node) {
  if (node.name.empty()) return absl::InvalidArgumentError("node with an empty name");
  if (node.outputs.empty()) return absl::InvalidArgumentError(absl::StrCat("node '", node.name, "' has no output"));
  for (const Node& other : nodes_) {
    if (other.name == node.name) {
      return absl::AlreadyExistsError(absl::StrCat("node '", node.name, "': name already used"));
    }
  }
  for (const std::string& out : node.outputs) {
    if (out.empty() || NameTaken(out)) {
      return absl::AlreadyExistsError(
          absl::StrCat("node '", node.name, "': output '", out, "' is empty or already produced elsewhere"));
    }
  }
  nodes_.push_back(std::move(node));
  return absl::OkStatus();
}

absl::Status Graph::AddOutput(const std::string& name) {
  if (IsGraphOutput(name)) return absl::AlreadyExistsError(absl::StrCat("graph output '", name, "' listed twice"));
  outputs_.push_back(name);
  return absl::OkStatus();
}

const Tensor* Graph::FindConstant(const std::string& name) const {
  auto it = constants_.find(name);
  return it == constants_.end() ? nullptr : &it->second;
}

const ConstantQuantization* Graph::FindConstantQuantization(const std::string& name) const {
  auto it = constant_quantization_.find(name);
  return it == constant_quantization_.end() || !IsConstant(name) ? nullptr : &it->second;
}

absl::StatusOr<Shape> Graph::ShapeOf(const std::string& name) const {
  auto it = shapes_.find(name);
  if (it == shapes_.end()) return absl::NotFoundError(absl::StrCat("tensor '", name, "' has no known shape"));
  return it->second;
}

std::string Graph::UniqueName(const std::string& stem) const {
  if (!NameTaken(stem)) return stem;
  for (int i = 1;; ++i) {
    std::string candidate = absl::StrCat(stem, "_", i);
    if (!NameTaken(candidate)) return candidate;
  }
}

int Graph::ProducerIndex(const std::string& tensor) const {
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const auto& outs = nodes_[i].outputs;
    if (std::find(outs.begin(), outs.end(), tensor) != outs.end()) return static_cast<int>(i);
  }
  return -1;
}

std::vector<int> Graph::ConsumerIndices(const std::string& tensor) const {
  std::vector<int> out;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const auto& ins = nodes_[i].inputs;
    if (std::find(ins.begin(), ins.end(), tensor) != ins.end()) out.push_back(static_cast<int>(i));
  }
  return out;
}

bool Graph::IsGraphOutput(const std::string& tensor) const {
  return std::find(outputs_.begin(), outputs_.end(), tensor) != outputs_.end();
}

absl::Status Graph::Finalize() {
  CONVOY_RETURN_IF_ERROR(SortTopologically());
  return InferAllShapes();
}

// Kahn's algorithm over node indices; nodes left over are on (or behind) a cycle, and the error names one that is
// on the cycle itself, found by walking producers from a leftover node until a node repeats.
absl::Status Graph::SortTopologically() {
  std::map<std::string, int> producer;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    for (const std::string& out : nodes_[i].outputs) producer[out] = static_cast<int>(i);
  }
  std::vector<std::vector<int>> consumers(nodes_.size());
  std::vector<int> pending(nodes_.size(), 0);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    std::set<int> deps;
    for (const std::string& in : nodes_[i].inputs) {
      if (in.empty()) continue;
      auto it = producer.find(in);
      if (it != producer.end()) {
        deps.insert(it->second);
      } else if (!IsConstant(in) && std::none_of(inputs_.begin(), inputs_.end(),
                                                     [&](const GraphInput& gi) { return gi.name == in; })) {
        return absl::InvalidArgumentError(absl::StrCat("node '", nodes_[i].name, "' (", OpKindName(nodes_[i].op()),
                                                       ") reads '", in, "', which no node, input or constant provides"));
      }
    }
    for (int d : deps) consumers[d].push_back(static_cast<int>(i));
    pending[i] = static_cast<int>(deps.size());
  }
  std::vector<int> order, ready;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (pending[i] == 0) ready.push_back(static_cast<int>(i));
  }
  std::reverse(ready.begin(), ready.end());  // keeps the original order for already-sorted graphs
  while (!ready.empty()) {
    int n = ready.back();
    ready.pop_back();
    order.push_back(n);
    std::vector<int> now_ready;
    for (int c : consumers[n]) {
      if (--pending[c] == 0) now_ready.push_back(c);
    }
    std::sort(now_ready.rbegin(), now_ready.rend());
    ready.insert(ready.end(), now_ready.begin(), now_ready.end());
  }
  if (order.size() != nodes_.size()) {
    int walker = 0;
    while (pending[walker] == 0) ++walker;
    std::set<int> seen;
    while (seen.insert(walker).second) {
      for (const std::string& in : nodes_[walker].inputs) {
        auto it = producer.find(in);
        if (it != producer.end() && pending[it->second] > 0) {
          walker = it->second;
          break;
        }
      }
    }
    return absl::InvalidArgumentError(absl::StrCat("graph has a cycle through node '", nodes_[walker].name, "' (",
                                                   nodes_.size() - order.size(), " nodes cannot be ordered)"));
  }
  std::vector<Node> sorted;
  sorted.reserve(nodes_.size());
  for (int i : order) sorted.push_back(std::move(nodes_[i]));
  nodes_ = std::move(sorted);
  return absl::OkStatus();
}

absl::Status Graph::InferAllShapes() {
  std::map<std::string, Shape> shapes;
  for (const GraphInput& in : inputs_) shapes[in.name] = in.shape;
  for (const auto& [name, value] : constants_) shapes[name] = value.shape;
  for (const Node& node : nodes_) {
    std::vector<Shape> in_shapes;
    for (const std::string& in : node.inputs) in_shapes.push_back(in.empty() ? Shape{} : shapes.at(in));
    CONVOY_ASSIGN_OR_RETURN(std::vector<Shape> out_shapes, InferOutputShapes(node, in_shapes));
    for (size_t i = 0; i < node.outputs.size(); ++i) shapes[node.outputs[i]] = out_shapes[i];
  }
  for (const std::string& out : outputs_) {
    if (!shapes.count(out)) {
      return absl::InvalidArgumentError(absl::StrCat("graph output '", out, "' is not produced by any node"));
    }
  }
  shapes_ = std::move(shapes);
  return absl::OkStatus();
}

namespace {

std::string WindowToString(const Window2d& w) {
  return absl::StrCat("kernel=", w.kernel_h, "x", w.kernel_w, " stride=", w.stride_h, "x", w.stride_w, " pads=[",
                      w.pad_top, ",", w.pad_left, ",", w.pad_bottom, ",", w.pad_right, "] dilation=", w.dilation_h,
                      "x", w.dilation_w);
}

std::string ActivationToString(const Activation& a) {
  switch (a.kind) {
    case ActivationKind::kClip: return absl::StrCat("clip(", a.alpha, ",", a.beta, ")");
    case ActivationKind::kLeakyRelu: return absl::StrCat("leaky_relu(", a.alpha, ")");
    case ActivationKind::kHardSigmoid: return absl::StrCat("hard_sigmoid(", a.alpha, ",", a.beta, ")");
    default: return ActivationKindName(a.kind);
  }
}

std::string AttrsToString(const Node& node) {
  switch (node.op()) {
    case OpKind::kConv2d: {
      const auto& a = node.As<Conv2dAttrs>();
      const char* residual = a.residual == ResidualPosition::kNone               ? ""
                             : a.residual == ResidualPosition::kBeforeActivation ? " residual=before_act"
                                                                                 : " residual=after_act";
      return absl::StrCat(WindowToString(a.window), " groups=", a.groups, a.has_bias ? " +bias" : "",
                          a.has_channel_scale ? " +scale" : "", residual, " act=", ActivationToString(a.activation));
    }
    case OpKind::kPool2d: {
      const auto& a = node.As<Pool2dAttrs>();
      std::string kind = a.kind == PoolKind::kMax ? "max" : "avg";
      if (a.global) return absl::StrCat("global_", kind);
      return absl::StrCat(kind, " ", WindowToString(a.window), a.ceil_mode ? " ceil" : "",
                          a.count_include_pad ? " count_include_pad" : "");
    }
    case OpKind::kBatchNorm: return absl::StrCat("eps=", node.As<BatchNormAttrs>().epsilon);
    case OpKind::kActivation: return ActivationToString(node.As<ActivationAttrs>().activation);
    case OpKind::kBinary: {
      static const char* kNames[] = {"add", "sub", "mul", "div"};
      return kNames[static_cast<int>(node.As<BinaryAttrs>().kind)];
    }
    case OpKind::kConcat: return absl::StrCat("axis=", node.As<ConcatAttrs>().axis);
    case OpKind::kSplit:
      return absl::StrCat("axis=", node.As<SplitAttrs>().axis, " sizes=[", absl::StrJoin(node.As<SplitAttrs>().sizes, ","),
                          "]");
    case OpKind::kChannelShuffle: return absl::StrCat("groups=", node.As<ChannelShuffleAttrs>().groups);
    case OpKind::kSoftmax: return absl::StrCat("axis=", node.As<SoftmaxAttrs>().axis);
    case OpKind::kGemm: {
      const auto& a = node.As<GemmAttrs>();
      return absl::StrCat("alpha=", a.alpha, " beta=", a.beta, a.transpose_a ? " transA" : "",
                          a.transpose_b ? " transB" : "", a.has_bias ? " +bias" : "",
                          a.activation.kind == ActivationKind::kIdentity ? "" : " act=",
                          a.activation.kind == ActivationKind::kIdentity ? "" : ActivationToString(a.activation));
    }
    case OpKind::kPad: {
      const auto& a = node.As<PadAttrs>();
      static const char* kModes[] = {"constant", "reflect", "edge"};
      return absl::StrCat(kModes[static_cast<int>(a.mode)], " pads=[", absl::StrJoin(a.pads, ","), "] value=", a.value);
    }
    case OpKind::kFlatten: return absl::StrCat("axis=", node.As<FlattenAttrs>().axis);
    case OpKind::kReshape: return absl::StrCat("shape=[", absl::StrJoin(node.As<ReshapeAttrs>().shape, ","), "]");
    case OpKind::kTranspose: return absl::StrCat("perm=[", absl::StrJoin(node.As<TransposeAttrs>().perm, ","), "]");
    case OpKind::kResize: {
      const auto& a = node.As<ResizeAttrs>();
      static const char* kModes[] = {"nearest", "linear", "cubic"};
      static const char* kCoordinates[] = {"half_pixel",    "half_pixel_symmetric", "pytorch_half_pixel",
                                           "align_corners", "asymmetric",           "tf_crop_and_resize"};
      static const char* kNearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple"};
      std::string s = absl::StrCat(kModes[static_cast<int>(a.mode)], " ", kCoordinates[static_cast<int>(a.coordinates)],
                                   " out=", a.out_h, "x", a.out_w, " scales=", a.scale_h, ",", a.scale_w);
      if (a.mode == ResizeMode::kNearest) absl::StrAppend(&s, " ", kNearest[static_cast<int>(a.nearest)]);
      if (a.mode == ResizeMode::kCubic) absl::StrAppend(&s, " a=", a.cubic_a, a.exclude_outside ? " exclude_outside" : "");
      if (a.antialias) absl::StrAppend(&s, " antialias");
      return s;
    }
    case OpKind::kArgMax: {
      const auto& a = node.As<ArgMaxAttrs>();
      return absl::StrCat("axis=", a.axis, a.keepdims ? " keepdims" : "", a.select_last_index ? " select_last_index" : "");
    }
    case OpKind::kLayerNorm: {
      const auto& a = node.As<LayerNormAttrs>();
      return absl::StrCat("axis=", a.axis, a.num_axes > 0 ? absl::StrCat(" num_axes=", a.num_axes) : "",
                          " eps=", a.epsilon, a.has_bias ? " +bias" : "", a.write_stats ? " +stats" : "");
    }
    case OpKind::kConvTranspose2d: {
      const auto& a = node.As<ConvTranspose2dAttrs>();
      return absl::StrCat("k=", a.kernel_h, "x", a.kernel_w, " s=", a.stride_h, "x", a.stride_w, " d=", a.dilation_h,
                          "x", a.dilation_w, " pad=", a.pad_top, ",", a.pad_left, " out=", a.out_h, "x", a.out_w,
                          " groups=", a.groups, a.has_bias ? " +bias" : "");
    }
    case OpKind::kUnary: {
      const auto& a = node.As<UnaryAttrs>();
      return absl::StrCat(UnaryKindName(a.kind), " alpha=", a.alpha, " beta=", a.beta);
    }
    case OpKind::kIdentity: return "";
  }
  return "";
}

}  // namespace

std::string Graph::ToString() const {
  std::ostringstream out;
  auto shape_of = [&](const std::string& name) {
    auto it = shapes_.find(name);
    return it == shapes_.end() ? std::string("?") : ShapeToString(it->second);
  };
  out << "graph: " << inputs_.size() << " inputs, " << constants_.size() << " constants, " << nodes_.size()
      << " nodes, " << outputs_.size() << " outputs\n";
  for (const GraphInput& in : inputs_) out << "  input  " << in.name << " " << ShapeToString(in.shape) << "\n";
  for (const Node& node : nodes_) {
    std::vector<std::string> ins;
    for (const std::string& in : node.inputs) ins.push_back(in.empty() ? "-" : in);
    std::vector<std::string> outs;
    for (const std::string& o : node.outputs) outs.push_back(absl::StrCat(o, shape_of(o)));
    out << "  node   " << node.name << " = " << OpKindName(node.op()) << "(" << absl::StrJoin(ins, ", ") << ") "
        << AttrsToString(node) << " -> " << absl::StrJoin(outs, ", ") << "\n";
  }
  for (const std::string& o : outputs_) out << "  output " << o << " " << shape_of(o) << "\n";
  return out.str();
}

}  // namespace convoy::runtime
