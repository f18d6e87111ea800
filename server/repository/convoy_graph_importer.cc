// Convoy YAML graph -> graph IR. One function per layer op; each validates its fields strictly (unknown fields are
// errors) and checks its weights' shapes against its attributes before adding the node.
#include "server/repository/convoy_graph_importer.h"

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "server/repository/yaml_fields.h"

namespace convoy::repository {
namespace {

using runtime::Graph;
using runtime::Shape;

struct LayerContext {
  const YamlMap& layer;
  std::string name;
  std::vector<std::string> inputs;
  const TensorMap& weights;
  Graph& graph;
};

// Adds weight tensor "<layer>.<suffix>" as a graph constant after checking its shape; -1 in `expected` matches any.
absl::StatusOr<std::string> Weight(LayerContext& c, const std::string& suffix, const Shape& expected) {
  const std::string name = absl::StrCat(c.name, ".", suffix);
  auto it = c.weights.find(name);
  if (it == c.weights.end()) {
    return c.layer.Error("op", absl::StrCat("layer '", c.name, "' needs weight tensor '", name,
                                            "', which the weights file does not hold"));
  }
  bool match = it->second.shape.size() == expected.size();
  for (size_t i = 0; match && i < expected.size(); ++i) match = expected[i] < 0 || expected[i] == it->second.shape[i];
  if (!match) {
    std::string want = runtime::ShapeToString(expected);
    return c.layer.Error("op", absl::StrCat("weight '", name, "' has shape ", runtime::ShapeToString(it->second.shape),
                                            ", expected ", want, " (N = any)"));
  }
  if (!c.graph.IsConstant(name)) CONVOY_RETURN_IF_ERROR(c.graph.AddConstant(name, it->second));
  return name;
}

absl::StatusOr<std::pair<int64_t, int64_t>> Pair(const YamlMap& m, const std::string& key,
                                                 std::optional<std::pair<int64_t, int64_t>> fallback) {
  std::optional<std::vector<int64_t>> fb;
  if (fallback) fb = std::vector<int64_t>{fallback->first, fallback->second};
  CONVOY_ASSIGN_OR_RETURN(std::vector<int64_t> v, m.IntList(key, fb, /*allow_scalar=*/true));
  if (v.size() == 1) v.push_back(v[0]);
  if (v.size() != 2 || v[0] < 1 || v[1] < 1) return m.Error(key, "expected a positive integer or [height, width]");
  return std::make_pair(v[0], v[1]);
}

// padding: N, [h, w], [top, left, bottom, right], "same" (stride 1 only) or "valid".
absl::Status ReadPadding(const YamlMap& m, runtime::Window2d& w) {
  if (m.Has("padding") && m.Get("padding").IsScalar()) {
    const std::string text = m.Get("padding").Scalar();
    if (text == "valid") return absl::OkStatus();
    if (text == "same") {
      if (w.stride_h != 1 || w.stride_w != 1) return m.Error("padding", "'same' needs stride 1; give explicit pads");
      int64_t th = w.dilation_h * (w.kernel_h - 1), tw = w.dilation_w * (w.kernel_w - 1);
      w.pad_top = th / 2;
      w.pad_bottom = th - th / 2;
      w.pad_left = tw / 2;
      w.pad_right = tw - tw / 2;
      return absl::OkStatus();
    }
  }
  CONVOY_ASSIGN_OR_RETURN(std::vector<int64_t> p, m.IntList("padding", std::vector<int64_t>{0}, true));
  if (p.size() == 1) p = {p[0], p[0], p[0], p[0]};
  if (p.size() == 2) p = {p[0], p[1], p[0], p[1]};
  if (p.size() != 4 || *std::min_element(p.begin(), p.end()) < 0) {
    return m.Error("padding", "expected N, [h, w], [top, left, bottom, right], 'same' or 'valid'");
  }
  w.pad_top = p[0];
  w.pad_left = p[1];
  w.pad_bottom = p[2];
  w.pad_right = p[3];
  return absl::OkStatus();
}

absl::StatusOr<runtime::Activation> ParseActivation(const YamlMap& m, const std::string& key) {
  CONVOY_ASSIGN_OR_RETURN(std::string fn, m.String(key, std::string("identity")));
  using K = runtime::ActivationKind;
  static const std::map<std::string, K>* kinds = new std::map<std::string, K>{
      {"identity", K::kIdentity}, {"relu", K::kRelu},       {"relu6", K::kClip},
      {"clip", K::kClip},         {"leaky_relu", K::kLeakyRelu}, {"sigmoid", K::kSigmoid},
      {"tanh", K::kTanh},         {"silu", K::kSilu},       {"hard_sigmoid", K::kHardSigmoid},
      {"hard_swish", K::kHardSwish}, {"gelu", K::kGelu}};
  auto it = kinds->find(fn);
  if (it == kinds->end()) return m.Error(key, absl::StrCat("unknown activation '", fn, "'"));
  runtime::Activation a{it->second, 0.0f, 0.0f};
  if (fn == "relu6") a.beta = 6.0f;
  if (fn == "leaky_relu") {
    CONVOY_ASSIGN_OR_RETURN(a.alpha, m.Double("alpha", 0.01));
  }
  if (fn == "hard_sigmoid") {
    CONVOY_ASSIGN_OR_RETURN(a.alpha, m.Double("alpha", 0.2));
    CONVOY_ASSIGN_OR_RETURN(a.beta, m.Double("beta", 0.5));
  }
  if (fn == "clip") {
    CONVOY_ASSIGN_OR_RETURN(a.alpha, m.Double("min"));
    CONVOY_ASSIGN_OR_RETURN(a.beta, m.Double("max"));
  }
  return a;
}

absl::Status ExpectInputCount(const LayerContext& c, size_t count) {
  if (c.inputs.size() != count) {
    return c.layer.Error(c.layer.Has("inputs") ? "inputs" : "input",
                         absl::StrCat("layer '", c.name, "' takes ", count, " input(s), got ", c.inputs.size()));
  }
  return absl::OkStatus();
}

absl::Status AddNode(LayerContext& c, runtime::NodeAttrs attrs, std::vector<std::string> inputs) {
  absl::Status s = c.graph.AddNode(runtime::MakeNode(c.name, std::move(attrs), std::move(inputs), {c.name}));
  if (!s.ok()) return c.layer.Error("name", std::string(s.message()));
  return absl::OkStatus();
}

absl::Status ConvLayer(LayerContext& c) {
  CONVOY_RETURN_IF_ERROR(c.layer.CheckFields({"name", "op", "input", "filters", "kernel", "stride", "padding",
                                              "dilation", "groups", "bias", "activation", "alpha", "min", "max"}));
  CONVOY_RETURN_IF_ERROR(ExpectInputCount(c, 1));
  runtime::Conv2dAttrs a;
  CONVOY_ASSIGN_OR_RETURN(int64_t filters, c.layer.Int("filters"));
  CONVOY_ASSIGN_OR_RETURN(auto kernel, Pair(c.layer, "kernel", {}));
  CONVOY_ASSIGN_OR_RETURN(auto stride, Pair(c.layer, "stride", std::make_pair(1, 1)));
  CONVOY_ASSIGN_OR_RETURN(auto dilation, Pair(c.layer, "dilation", std::make_pair(1, 1)));
  CONVOY_ASSIGN_OR_RETURN(a.groups, c.layer.Int("groups", 1));
  CONVOY_ASSIGN_OR_RETURN(a.has_bias, c.layer.Bool("bias", true));
  if (filters < 1 || a.groups < 1 || filters % a.groups != 0) {
    return c.layer.Error("filters", absl::StrCat("filters ", filters, " must be positive and divisible by groups ",
                                                 a.groups));
  }
  a.window = runtime::Window2d{kernel.first, kernel.second, stride.first, stride.second, 0, 0, 0, 0,
                               dilation.first, dilation.second};
  CONVOY_RETURN_IF_ERROR(ReadPadding(c.layer, a.window));
  CONVOY_ASSIGN_OR_RETURN(a.activation, ParseActivation(c.layer, "activation"));
  std::vector<std::string> inputs = {c.inputs[0]};
  CONVOY_ASSIGN_OR_RETURN(std::string w, Weight(c, "weight", {filters, -1, kernel.first, kernel.second}));
  inputs.push_back(w);
  if (a.has_bias) {
    CONVOY_ASSIGN_OR_RETURN(std::string b, Weight(c, "bias", {filters}));
    inputs.push_back(b);
  }
  return AddNode(c, a, inputs);
}

absl::Status PoolLayer(LayerContext& c, const std::string& op) {
  CONVOY_RETURN_IF_ERROR(ExpectInputCount(c, 1));
  runtime::Pool2dAttrs a;
  a.kind = op.find("max") != std::string::npos ? runtime::PoolKind::kMax : runtime::PoolKind::kAverage;
  if (op.rfind("global_", 0) == 0) {
    CONVOY_RETURN_IF_ERROR(c.layer.CheckFields({"name", "op", "input"}));
    a.global = true;
    return AddNode(c, a, {c.inputs[0]});
  }
  CONVOY_RETURN_IF_ERROR(c.layer.CheckFields({"name", "op", "input", "kernel", "stride", "padding", "ceil_mode",
                                              "count_include_pad"}));
  CONVOY_ASSIGN_OR_RETURN(auto kernel, Pair(c.layer, "kernel", {}));
  CONVOY_ASSIGN_OR_RETURN(auto stride, Pair(c.layer, "stride", kernel));
  a.window = runtime::Window2d{kernel.first, kernel.second, stride.first, stride.second, 0, 0, 0, 0, 1, 1};
  CONVOY_RETURN_IF_ERROR(ReadPadding(c.layer, a.window));
  CONVOY_ASSIGN_OR_RETURN(a.ceil_mode, c.layer.Bool("ceil_mode", false));
  CONVOY_ASSIGN_OR_RETURN(a.count_include_pad, c.layer.Bool("count_include_pad", false));
  return AddNode(c, a, {c.inputs[0]});
}

absl::Status BatchNormLayer(LayerContext& c) {
  CONVOY_RETURN_IF_ERROR(c.layer.CheckFields({"name", "op", "input", "epsilon"}));
  CONVOY_RETURN_IF_ERROR(ExpectInputCount(c, 1));
  runtime::BatchNormAttrs a;
  CONVOY_ASSIGN_OR_RETURN(double eps, c.layer.Double("epsilon", 1e-5));
  a.epsilon = static_cast<float>(eps);
  std::vector<std::string> inputs = {c.inputs[0]};
  for (const char* suffix : {"scale", "bias", "mean", "var"}) {
    CONVOY_ASSIGN_OR_RETURN(std::string t, Weight(c, suffix, {-1}));
    inputs.push_back(t);
  }
  return AddNode(c, a, inputs);
}

absl::Status ActivationLayer(LayerContext& c) {
  CONVOY_RETURN_IF_ERROR(c.layer.CheckFields({"name", "op", "input", "function", "alpha", "beta", "min", "max"}));
  CONVOY_RETURN_IF_ERROR(ExpectInputCount(c, 1));
  CONVOY_ASSIGN_OR_RETURN(runtime::Activation act, ParseActivation(c.layer, "function"));
  return AddNode(c, runtime::ActivationAttrs{act}, {c.inputs[0]});
}

absl::Status BinaryLayer(LayerContext& c, runtime::BinaryKind kind) {
  CONVOY_RETURN_IF_ERROR(c.layer.CheckFields({"name", "op", "input", "inputs", "constant"}));
  std::vector<std::string> inputs = c.inputs;
  if (c.layer.Has("constant")) {
    CONVOY_ASSIGN_OR_RETURN(std::string constant, c.layer.String("constant"));
    auto it = c.weights.find(constant);
    if (it == c.weights.end()) return c.layer.Error("constant", absl::StrCat("no tensor '", constant, "' in weights"));
    if (!c.graph.IsConstant(constant)) CONVOY_RETURN_IF_ERROR(c.graph.AddConstant(constant, it->second));
    inputs.push_back(constant);
  }
  if (inputs.size() != 2) {
    return c.layer.Error("inputs", absl::StrCat("layer '", c.name, "' takes two operands, got ", inputs.size()));
  }
  return AddNode(c, runtime::BinaryAttrs{kind}, inputs);
}

absl::Status DenseLayer(LayerContext& c) {
  CONVOY_RETURN_IF_ERROR(c.layer.CheckFields({"name", "op", "input", "units", "bias"}));
  CONVOY_RETURN_IF_ERROR(ExpectInputCount(c, 1));
  CONVOY_ASSIGN_OR_RETURN(int64_t units, c.layer.Int("units"));
  if (units < 1) return c.layer.Error("units", absl::StrCat("expected a positive integer, got ", units));
  runtime::GemmAttrs a;
  a.transpose_b = true;
  CONVOY_ASSIGN_OR_RETURN(a.has_bias, c.layer.Bool("bias", true));
  std::vector<std::string> inputs = {c.inputs[0]};
  CONVOY_ASSIGN_OR_RETURN(std::string w, Weight(c, "weight", {units, -1}));
  inputs.push_back(w);
  if (a.has_bias) {
    CONVOY_ASSIGN_OR_RETURN(std::string b, Weight(c, "bias", {units}));
    inputs.push_back(b);
  }
  return AddNode(c, a, inputs);
}

absl::Status ShapeLayer(LayerContext& c, const std::string& op) {
  if (op == "concat") {
    CONVOY_RETURN_IF_ERROR(c.layer.CheckFields({"name", "op", "inputs", "axis"}));
    if (c.inputs.empty()) return c.layer.Error("inputs", "concat needs at least one input");
    CONVOY_ASSIGN_OR_RETURN(int64_t axis, c.layer.Int("axis", 1));
    return AddNode(c, runtime::ConcatAttrs{axis}, c.inputs);
  }
  CONVOY_RETURN_IF_ERROR(ExpectInputCount(c, 1));
  if (op == "flatten" || op == "softmax") {
    CONVOY_RETURN_IF_ERROR(c.layer.CheckFields({"name", "op", "input", "axis"}));
    CONVOY_ASSIGN_OR_RETURN(int64_t axis, c.layer.Int("axis", op == "flatten" ? 1 : -1));
    if (op == "flatten") return AddNode(c, runtime::FlattenAttrs{axis}, c.inputs);
    return AddNode(c, runtime::SoftmaxAttrs{axis}, c.inputs);
  }
  if (op == "reshape") {
    CONVOY_RETURN_IF_ERROR(c.layer.CheckFields({"name", "op", "input", "shape"}));
    CONVOY_ASSIGN_OR_RETURN(std::vector<int64_t> shape, c.layer.IntList("shape"));
    return AddNode(c, runtime::ReshapeAttrs{shape}, c.inputs);
  }
  if (op == "channel_shuffle") {
    CONVOY_RETURN_IF_ERROR(c.layer.CheckFields({"name", "op", "input", "groups"}));
    CONVOY_ASSIGN_OR_RETURN(int64_t groups, c.layer.Int("groups"));
    return AddNode(c, runtime::ChannelShuffleAttrs{groups}, c.inputs);
  }
  if (op == "pad") {
    CONVOY_RETURN_IF_ERROR(c.layer.CheckFields({"name", "op", "input", "padding", "value", "mode"}));
    runtime::Window2d w;
    CONVOY_RETURN_IF_ERROR(ReadPadding(c.layer, w));
    runtime::PadAttrs a;
    a.pads = {0, 0, w.pad_top, w.pad_left, 0, 0, w.pad_bottom, w.pad_right};
    CONVOY_ASSIGN_OR_RETURN(double value, c.layer.Double("value", 0.0));
    a.value = static_cast<float>(value);
    CONVOY_ASSIGN_OR_RETURN(std::string mode, c.layer.String("mode", std::string("constant")));
    if (mode == "reflect") {
      a.mode = runtime::PadMode::kReflect;
    } else if (mode == "edge") {
      a.mode = runtime::PadMode::kEdge;
    } else if (mode != "constant") {
      return c.layer.Error("mode", absl::StrCat("expected constant, reflect or edge, got '", mode, "'"));
    }
    return AddNode(c, a, c.inputs);
  }
  CONVOY_RETURN_IF_ERROR(c.layer.CheckFields({"name", "op", "input"}));  // identity, dropout
  return AddNode(c, runtime::IdentityAttrs{}, c.inputs);
}

absl::Status ImportLayer(const YAML::Node& node, const std::string& path, const std::string& source,
                         const TensorMap& weights, Graph& graph) {
  CONVOY_ASSIGN_OR_RETURN(YamlMap layer, YamlMap::Create(node, path, source));
  CONVOY_ASSIGN_OR_RETURN(std::string name, layer.String("name"));
  CONVOY_ASSIGN_OR_RETURN(std::string op, layer.String("op"));
  LayerContext c{layer, name, {}, weights, graph};
  if (layer.Has("input") && layer.Has("inputs")) return layer.Error("inputs", "give either 'input' or 'inputs'");
  if (layer.Has("input")) {
    CONVOY_ASSIGN_OR_RETURN(c.inputs, layer.StringList("input", std::nullopt, true));
  } else {
    CONVOY_ASSIGN_OR_RETURN(c.inputs, layer.StringList("inputs", std::vector<std::string>{}));
  }
  if (op == "conv") return ConvLayer(c);
  if (op == "max_pool" || op == "avg_pool" || op == "global_avg_pool" || op == "global_max_pool") {
    return PoolLayer(c, op);
  }
  if (op == "batch_norm") return BatchNormLayer(c);
  if (op == "activation") return ActivationLayer(c);
  if (op == "add") return BinaryLayer(c, runtime::BinaryKind::kAdd);
  if (op == "sub") return BinaryLayer(c, runtime::BinaryKind::kSub);
  if (op == "mul") return BinaryLayer(c, runtime::BinaryKind::kMul);
  if (op == "div") return BinaryLayer(c, runtime::BinaryKind::kDiv);
  if (op == "dense") return DenseLayer(c);
  if (op == "concat" || op == "flatten" || op == "softmax" || op == "reshape" || op == "channel_shuffle" ||
      op == "pad" || op == "identity" || op == "dropout") {
    return ShapeLayer(c, op);
  }
  return layer.Error("op", absl::StrCat("unknown op '", op, "' (see docs/model_formats.md)"));
}

absl::Status ImportInputs(const YamlMap& root, Graph& graph) {
  CONVOY_ASSIGN_OR_RETURN(auto items, root.Sequence("inputs"));
  if (items.empty()) return root.Error("inputs", "at least one input is required");
  for (const auto& [node, path] : items) {
    CONVOY_ASSIGN_OR_RETURN(YamlMap in, YamlMap::Create(node, path, root.source()));
    CONVOY_RETURN_IF_ERROR(in.CheckFields({"name", "shape"}));
    CONVOY_ASSIGN_OR_RETURN(std::string name, in.String("name"));
    CONVOY_ASSIGN_OR_RETURN(std::vector<int64_t> dims, in.IntList("shape"));
    Shape shape = {runtime::kBatch};
    for (int64_t d : dims) {
      if (d < 1) return in.Error("shape", absl::StrCat("dimensions must be positive, got ", d));
      shape.push_back(d);
    }
    absl::Status s = graph.AddInput(name, shape);
    if (!s.ok()) return in.Error("name", std::string(s.message()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Graph> ImportConvoyGraph(const std::string& yaml_text, const std::string& source,
                                        const TensorMap& weights) {
  CONVOY_ASSIGN_OR_RETURN(YAML::Node doc, LoadYaml(yaml_text, source));
  CONVOY_ASSIGN_OR_RETURN(YamlMap root, YamlMap::Create(doc, "", source));
  CONVOY_RETURN_IF_ERROR(root.CheckFields({"name", "weights", "inputs", "outputs", "layers"}));
  CONVOY_RETURN_IF_ERROR(root.String("name", std::string()).status());
  CONVOY_RETURN_IF_ERROR(root.String("weights", std::string()).status());
  Graph graph;
  CONVOY_RETURN_IF_ERROR(ImportInputs(root, graph));
  CONVOY_ASSIGN_OR_RETURN(auto layers, root.Sequence("layers"));
  for (const auto& [node, path] : layers) CONVOY_RETURN_IF_ERROR(ImportLayer(node, path, source, weights, graph));
  CONVOY_ASSIGN_OR_RETURN(std::vector<std::string> outputs, root.StringList("outputs", std::nullopt, true));
  for (const std::string& out : outputs) {
    absl::Status s = graph.AddOutput(out);
    if (!s.ok()) return root.Error("outputs", std::string(s.message()));
  }
  absl::Status finalized = graph.Finalize();
  if (!finalized.ok()) return absl::InvalidArgumentError(absl::StrCat(source, ": ", finalized.message()));
  return graph;
}

absl::StatusOr<Graph> ImportConvoyGraphFile(const std::string& path) {
  std::ifstream file(path);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot open Convoy graph '", path, "'"));
  std::stringstream text;
  text << file.rdbuf();
  CONVOY_ASSIGN_OR_RETURN(YAML::Node doc, LoadYaml(text.str(), path));
  TensorMap weights;
  if (doc.IsMap() && doc["weights"].IsScalar()) {
    std::filesystem::path weights_path = std::filesystem::path(path).parent_path() / doc["weights"].Scalar();
    CONVOY_ASSIGN_OR_RETURN(weights, ReadSafetensorsFile(weights_path.string()));
  }
  return ImportConvoyGraph(text.str(), path, weights);
}

}  // namespace convoy::repository
