#include "server/repository/onnx_layer_norm_pattern.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "server/repository/onnx_proto_reader.h"

namespace convoy::repository {
namespace {

// Producers, readers and constants of one graph.
class GraphIndex {
 public:
  explicit GraphIndex(const onnx::GraphProto& g) : g_(g) {
    for (const onnx::TensorProto& t : g.initializer()) initializers_[t.name()] = &t;
    for (const onnx::ValueInfoProto& out : g.output()) outputs_.insert(out.name());
    for (int i = 0; i < g.node_size(); ++i) {
      for (const std::string& out : g.node(i).output()) producer_[out] = i;
      std::set<std::string> seen;  // a node reading a tensor twice (Mul(d, d)) is one reader
      for (const std::string& in : g.node(i).input()) {
        if (!in.empty() && seen.insert(in).second) readers_[in].push_back(i);
      }
    }
  }

  const onnx::NodeProto& node(int i) const { return g_.node(i); }
  // The one node reading `tensor` when it has exactly one reader and is not a graph output, else -1.
  int OnlyReader(const std::string& tensor) const {
    auto it = readers_.find(tensor);
    if (it == readers_.end() || it->second.size() != 1 || outputs_.count(tensor)) return -1;
    return it->second[0];
  }
  std::vector<int> Readers(const std::string& tensor) const {
    auto it = readers_.find(tensor);
    return it == readers_.end() ? std::vector<int>{} : it->second;
  }
  bool IsGraphOutput(const std::string& tensor) const { return outputs_.count(tensor) > 0; }

  // The value of a constant tensor (an initializer or a Constant node's `value`), decoded; nullopt otherwise.
  std::optional<KnownValue> Constant(const std::string& tensor) const {
    const onnx::TensorProto* proto = nullptr;
    if (auto it = initializers_.find(tensor); it != initializers_.end()) proto = it->second;
    if (auto it = producer_.find(tensor); proto == nullptr && it != producer_.end()) {
      const onnx::NodeProto& n = g_.node(it->second);
      if (n.op_type() != "Constant") return std::nullopt;
      for (const onnx::AttributeProto& a : n.attribute()) {
        if (a.name() == "value" && a.has_t()) proto = &a.t();
        if (a.name() == "value_float") return KnownValue::Float({}, {a.f()});
        if (a.name() == "value_int") return KnownValue::Int64({}, {a.i()});
      }
    }
    if (proto == nullptr) return std::nullopt;
    auto decoded = DecodeTensor(*proto, tensor);
    if (!decoded.ok()) return std::nullopt;
    return *decoded;
  }
  bool IsConstant(const std::string& tensor) const { return Constant(tensor).has_value(); }

 private:
  const onnx::GraphProto& g_;
  std::map<std::string, const onnx::TensorProto*> initializers_;
  std::map<std::string, int> producer_;
  std::map<std::string, std::vector<int>> readers_;
  std::set<std::string> outputs_;
};

// A single-element constant's value.
std::optional<double> Scalar(const GraphIndex& index, const std::string& tensor) {
  std::optional<KnownValue> v = index.Constant(tensor);
  if (!v || v->size() != 1) return std::nullopt;
  return v->is_int() ? static_cast<double>(v->ints[0]) : static_cast<double>(v->floats[0]);
}

// A ReduceMean's axes (attribute, or constant input 1) when it keeps its dims; nullopt otherwise.
std::optional<std::vector<int64_t>> KeptAxes(const GraphIndex& index, const onnx::NodeProto& n) {
  if (n.op_type() != "ReduceMean") return std::nullopt;
  std::vector<int64_t> axes;
  for (const onnx::AttributeProto& a : n.attribute()) {
    if (a.name() == "keepdims" && a.i() == 0) return std::nullopt;
    if (a.name() == "noop_with_empty_axes" && a.i() != 0) return std::nullopt;
    if (a.name() == "axes") axes.assign(a.ints().begin(), a.ints().end());
  }
  if (n.input_size() > 1 && !n.input(1).empty()) {
    std::optional<KnownValue> v = index.Constant(n.input(1));
    if (!v || !v->is_int()) return std::nullopt;
    axes = v->ints;
  }
  if (axes.empty()) return std::nullopt;  // every axis: not a per-item normalization
  return axes;
}

// The operand of binary node `n` other than `tensor` when n is `op` with `tensor` as one operand (`first_only`: as
// operand 0); empty otherwise.
std::string OtherOperand(const onnx::NodeProto& n, const char* op, const std::string& tensor, bool first_only) {
  if (n.op_type() != op || n.input_size() != 2) return "";
  if (n.input(0) == tensor) return n.input(1);
  if (!first_only && n.input(1) == tensor) return n.input(0);
  return "";
}

// The pattern starting at ReduceMean node `first`, if it matches.
std::optional<LayerNormPattern> MatchAt(const GraphIndex& index, int first) {
  const onnx::NodeProto& mean_node = index.node(first);
  std::optional<std::vector<int64_t>> axes = KeptAxes(index, mean_node);
  if (!axes || mean_node.input_size() < 1 || mean_node.output_size() != 1) return std::nullopt;
  LayerNormPattern p;
  p.x = mean_node.input(0), p.axes = *axes, p.nodes = {first};
  const int sub = index.OnlyReader(mean_node.output(0));
  if (sub < 0 || index.node(sub).op_type() != "Sub" || index.node(sub).input(0) != p.x ||
      index.node(sub).input(1) != mean_node.output(0)) {
    return std::nullopt;
  }
  const std::string d = index.node(sub).output(0);
  std::vector<int> d_readers = index.Readers(d);
  if (d_readers.size() != 2 || index.IsGraphOutput(d)) return std::nullopt;
  int square = -1, div = -1;
  for (int r : d_readers) {
    const onnx::NodeProto& n = index.node(r);
    if (n.op_type() == "Div" && n.input(0) == d) div = r;
    const bool pow2 = n.op_type() == "Pow" && n.input(0) == d && Scalar(index, n.input(1)) == 2.0;
    const bool mul_self = n.op_type() == "Mul" && n.input(0) == d && n.input(1) == d;
    if (pow2 || mul_self) square = r;
  }
  if (square < 0 || div < 0) return std::nullopt;
  const int variance = index.OnlyReader(index.node(square).output(0));
  if (variance < 0 || KeptAxes(index, index.node(variance)) != axes ||
      index.node(variance).input(0) != index.node(square).output(0)) {
    return std::nullopt;
  }
  const std::string v = index.node(variance).output(0);
  const int add = index.OnlyReader(v);
  if (add < 0) return std::nullopt;
  const std::string eps_tensor = OtherOperand(index.node(add), "Add", v, false);
  std::optional<double> eps = eps_tensor.empty() ? std::nullopt : Scalar(index, eps_tensor);
  if (!eps) return std::nullopt;
  const int sqrt = index.OnlyReader(index.node(add).output(0));
  if (sqrt < 0 || index.node(sqrt).op_type() != "Sqrt" || index.OnlyReader(index.node(sqrt).output(0)) != div ||
      index.node(div).input(1) != index.node(sqrt).output(0)) {
    return std::nullopt;
  }
  p.epsilon = static_cast<float>(*eps);
  p.nodes.insert(p.nodes.end(), {sub, square, variance, add, sqrt, div});
  p.output = p.normalized = index.node(div).output(0);
  // Optional affine tail: Mul by a constant scale, then Add of a constant bias.
  const int mul = index.OnlyReader(p.output);
  const std::string scale = mul < 0 ? "" : OtherOperand(index.node(mul), "Mul", p.output, false);
  if (!scale.empty() && index.IsConstant(scale)) {
    p.scale = scale, p.output = p.scaled = index.node(mul).output(0), p.nodes.push_back(mul);
    const int shift = index.OnlyReader(p.output);
    const std::string bias = shift < 0 ? "" : OtherOperand(index.node(shift), "Add", p.output, false);
    if (!bias.empty() && index.IsConstant(bias)) {
      p.bias = bias, p.output = index.node(shift).output(0), p.nodes.push_back(shift);
    }
  }
  // The node producing the result must come last (the importer emits the LayerNorm there, when every constant the
  // pattern reads is known): true in any topologically sorted graph.
  const int last = p.nodes.back();
  std::sort(p.nodes.begin(), p.nodes.end());
  if (p.nodes.back() != last) return std::nullopt;
  return p;
}

}  // namespace

std::vector<LayerNormPattern> FindLayerNormPatterns(const onnx::GraphProto& graph) {
  const GraphIndex index(graph);
  std::vector<LayerNormPattern> found;
  std::set<int> taken;
  for (int i = 0; i < graph.node_size(); ++i) {
    if (taken.count(i) || graph.node(i).op_type() != "ReduceMean") continue;
    std::optional<LayerNormPattern> p = MatchAt(index, i);
    if (!p) continue;
    if (std::any_of(p->nodes.begin(), p->nodes.end(), [&](int n) { return taken.count(n) > 0; })) continue;
    taken.insert(p->nodes.begin(), p->nodes.end());
    found.push_back(std::move(*p));
  }
  return found;
}

}  // namespace convoy::repository
