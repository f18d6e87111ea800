#include "server/repository/onnx_qoperator.h"

#include <cstdint>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "server/repository/onnx_proto_reader.h"

namespace convoy::repository {
namespace {

using onnx::NodeProto;
using onnx::TensorProto;

constexpr char kMicrosoft[] = "com.microsoft";

// The scale and zero-point tensors (names; the zero point may be "") an 8-bit tensor was quantized with.
struct QuantizedBy {
  std::string scale;
  std::string zero_point;
};

// Ops that only move or select values: on 8-bit data they equal DequantizeLinear -> op -> QuantizeLinear.
const std::set<std::string>& MovingOps() {
  static const auto* ops = new std::set<std::string>{"MaxPool",   "Flatten",   "Reshape",  "Transpose",
                                                     "Squeeze",   "Unsqueeze", "Identity", "Slice"};
  return *ops;
}

class QOperatorRewriter {
 public:
  QOperatorRewriter(onnx::ModelProto& model, std::string source) : model_(model), source_(std::move(source)) {}

  absl::Status Run(int* rewritten);

 private:
  std::string Label(const NodeProto& n) const {
    return absl::StrCat(source_, ": node '", n.name().empty() ? n.output(0) : n.name(), "' (", n.op_type(), ")");
  }
  static std::string Input(const NodeProto& n, int i) { return i < n.input_size() ? n.input(i) : std::string(); }
  std::string NodeName(const NodeProto& n) const { return n.name().empty() ? n.output(0) : n.name(); }
  std::string Fresh(const std::string& base);
  NodeProto& Emit(const std::string& op, const std::string& name, std::vector<std::string> inputs,
                  std::vector<std::string> outputs);
  // DequantizeLinear of `x` (per-axis along `axis` when the scale has more than one element); returns the float name.
  absl::StatusOr<std::string> Dequantize(const NodeProto& n, const std::string& role, const std::string& x,
                                         const std::string& scale, const std::string& zero_point, int64_t axis);
  // QuantizeLinear of `x` onto `out`, remembered as quantized.
  void Quantize(const NodeProto& n, const std::string& x, const std::string& scale, const std::string& zero_point,
                const std::string& out);
  // The element count of a constant (initializer or Constant node), or 1 when it is not one.
  int64_t Elements(const std::string& name) const;
  int64_t Rank(const std::string& name) const;
  // A new FLOAT initializer holding input_scale x weight_scale (per weight channel): an INT32 bias's scale.
  absl::StatusOr<std::string> BiasScale(const NodeProto& n, const std::string& input_scale,
                                        const std::string& weight_scale);
  // The float op in place of a QLinear node: `op` with the node's attributes except `dropped`.
  NodeProto& FloatOp(const NodeProto& n, const std::string& op, std::vector<std::string> inputs,
                     const std::string& output, const std::set<std::string>& dropped = {});
  absl::Status CheckNotChannelsLast(const NodeProto& n) const;

  absl::Status Conv(const NodeProto& n);
  absl::Status MatMul(const NodeProto& n);
  absl::Status Gemm(const NodeProto& n);
  absl::Status Binary(const NodeProto& n, const std::string& op);
  absl::Status Unary(const NodeProto& n, const std::string& op, const std::set<std::string>& dropped);
  absl::Status Concat(const NodeProto& n);
  absl::Status Moving(const NodeProto& n);

  onnx::ModelProto& model_;
  const std::string source_;
  int64_t opset_ = 0;
  std::unordered_map<std::string, const TensorProto*> constants_;
  std::unordered_map<std::string, QuantizedBy> quantized_;
  std::unordered_map<std::string, std::string> dequantized_;  // (tensor, scale, zero point, axis) -> its float name
  std::set<std::string> names_;
  std::vector<NodeProto> nodes_;
};

std::string QOperatorRewriter::Fresh(const std::string& base) {
  std::string name = base;
  for (int i = 1; names_.count(name); ++i) name = absl::StrCat(base, "_", i);
  names_.insert(name);
  return name;
}

NodeProto& QOperatorRewriter::Emit(const std::string& op, const std::string& name, std::vector<std::string> inputs,
                                   std::vector<std::string> outputs) {
  NodeProto& node = nodes_.emplace_back();
  node.set_op_type(op);
  node.set_name(name);
  // Optional trailing inputs given as "" are dropped (a QuantizeLinear without a zero point).
  while (!inputs.empty() && inputs.back().empty()) inputs.pop_back();
  for (std::string& input : inputs) node.add_input(std::move(input));
  for (std::string& output : outputs) node.add_output(std::move(output));
  return node;
}

int64_t QOperatorRewriter::Elements(const std::string& name) const {
  auto it = constants_.find(name);
  if (it == constants_.end()) return 1;
  int64_t n = 1;
  for (int64_t d : it->second->dims()) n *= d;
  return n;
}

int64_t QOperatorRewriter::Rank(const std::string& name) const {
  auto it = constants_.find(name);
  return it == constants_.end() ? -1 : it->second->dims_size();
}

absl::StatusOr<std::string> QOperatorRewriter::Dequantize(const NodeProto& n, const std::string& role,
                                                          const std::string& x, const std::string& scale,
                                                          const std::string& zero_point, int64_t axis) {
  const bool per_axis = Elements(scale) > 1;
  if (per_axis && opset_ < 13) {
    return absl::UnimplementedError(absl::StrCat(Label(n), ": the ", role, " '", x, "' has per-channel scales ('",
                                                 scale, "', ", Elements(scale), " values) at opset ", opset_,
                                                 "; Convoy reads per-channel QOperator scales from opset 13"));
  }
  // One DequantizeLinear per quantized tensor and parameters, read by every consumer: the QDQ form's Q -> DQ pair,
  // which the INT8 planning looks for (a tensor read through several DQs would stay FP32 simulated).
  const std::string key = absl::StrCat(x, "\n", scale, "\n", zero_point, "\n", per_axis ? axis : -1);
  if (auto it = dequantized_.find(key); it != dequantized_.end()) return it->second;
  const std::string out = Fresh(absl::StrCat(x, "/dequantized"));
  dequantized_[key] = out;
  NodeProto& dq = Emit("DequantizeLinear", Fresh(absl::StrCat(NodeName(n), "/dequantize_", role)),
                       {x, scale, zero_point}, {out});
  if (per_axis) {
    onnx::AttributeProto* a = dq.add_attribute();
    a->set_name("axis");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(axis);
  }
  return out;
}

void QOperatorRewriter::Quantize(const NodeProto& n, const std::string& x, const std::string& scale,
                                 const std::string& zero_point, const std::string& out) {
  Emit("QuantizeLinear", Fresh(absl::StrCat(NodeName(n), "/quantize_output")), {x, scale, zero_point}, {out});
  quantized_[out] = QuantizedBy{scale, zero_point};
}

absl::StatusOr<std::string> QOperatorRewriter::BiasScale(const NodeProto& n, const std::string& input_scale,
                                                         const std::string& weight_scale) {
  std::vector<float> scales[2];
  const std::string names[2] = {input_scale, weight_scale};
  for (int i = 0; i < 2; ++i) {
    auto it = constants_.find(names[i]);
    if (it == constants_.end()) {
      return absl::UnimplementedError(absl::StrCat(Label(n), ": the bias's scale is the input scale times the ",
                                                   "weight scale, so '", names[i], "' must be a constant"));
    }
    CONVOY_ASSIGN_OR_RETURN(KnownValue v, DecodeTensor(*it->second, absl::StrCat(Label(n), ": scale '", names[i],
                                                                                 "'")));
    if (v.is_int()) return absl::InvalidArgumentError(absl::StrCat(Label(n), ": scale '", names[i], "' is ",
                                                                   v.Describe(), "; scales are floating point"));
    scales[i] = std::move(v.floats);
  }
  if (scales[0].size() != 1) {
    return absl::UnimplementedError(absl::StrCat(Label(n), ": input scale '", input_scale, "' has ", scales[0].size(),
                                                 " values; a per-tensor input scale is supported"));
  }
  TensorProto* t = model_.mutable_graph()->add_initializer();
  t->set_name(Fresh(absl::StrCat(NodeName(n), "/bias_scale")));
  t->set_data_type(TensorProto::FLOAT);
  if (scales[1].size() > 1) t->add_dims(static_cast<int64_t>(scales[1].size()));
  // ONNX's bias convention for QLinearConv / QGemm: scale input_scale * weight_scale, one FP32 product.
  for (float w : scales[1]) t->add_float_data(scales[0][0] * w);
  constants_[t->name()] = t;
  return t->name();
}

NodeProto& QOperatorRewriter::FloatOp(const NodeProto& n, const std::string& op, std::vector<std::string> inputs,
                                      const std::string& output, const std::set<std::string>& dropped) {
  NodeProto& node = Emit(op, Fresh(absl::StrCat(NodeName(n), "/", op)), std::move(inputs), {output});
  for (const onnx::AttributeProto& a : n.attribute()) {
    if (!dropped.count(a.name())) *node.add_attribute() = a;
  }
  return node;
}

absl::Status QOperatorRewriter::CheckNotChannelsLast(const NodeProto& n) const {
  for (const onnx::AttributeProto& a : n.attribute()) {
    if (a.name() == "channels_last" && a.i() != 0) {
      return absl::UnimplementedError(absl::StrCat(Label(n), ": attribute 'channels_last' value ", a.i(),
                                                   " is not supported (Convoy reads [N,C,H,W])"));
    }
  }
  return absl::OkStatus();
}

// QLinearConv(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp[, B]).
absl::Status QOperatorRewriter::Conv(const NodeProto& n) {
  if (n.input_size() < 8) {
    return absl::InvalidArgumentError(absl::StrCat(Label(n), ": needs 8 or 9 inputs, got ", n.input_size()));
  }
  CONVOY_ASSIGN_OR_RETURN(std::string x, Dequantize(n, "x", n.input(0), n.input(1), n.input(2), 0));
  CONVOY_ASSIGN_OR_RETURN(std::string w, Dequantize(n, "w", n.input(3), n.input(4), n.input(5), 0));
  std::vector<std::string> inputs = {x, w};
  if (!Input(n, 8).empty()) {
    CONVOY_ASSIGN_OR_RETURN(std::string bias_scale, BiasScale(n, n.input(1), n.input(4)));
    CONVOY_ASSIGN_OR_RETURN(std::string b, Dequantize(n, "B", n.input(8), bias_scale, "", 0));
    inputs.push_back(b);
  }
  const std::string y = Fresh(absl::StrCat(n.output(0), "/float"));
  FloatOp(n, "Conv", inputs, y);
  Quantize(n, y, n.input(6), n.input(7), n.output(0));
  return absl::OkStatus();
}

// QLinearMatMul(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp): b's scales may be per column.
absl::Status QOperatorRewriter::MatMul(const NodeProto& n) {
  if (n.input_size() != 8) {
    return absl::InvalidArgumentError(absl::StrCat(Label(n), ": needs 8 inputs, got ", n.input_size()));
  }
  CONVOY_ASSIGN_OR_RETURN(std::string a, Dequantize(n, "a", n.input(0), n.input(1), n.input(2), 0));
  CONVOY_ASSIGN_OR_RETURN(std::string b, Dequantize(n, "b", n.input(3), n.input(4), n.input(5),
                                                    std::max<int64_t>(Rank(n.input(3)) - 1, 0)));
  const std::string y = Fresh(absl::StrCat(n.output(0), "/float"));
  FloatOp(n, "MatMul", {a, b}, y);
  Quantize(n, y, n.input(6), n.input(7), n.output(0));
  return absl::OkStatus();
}

// QGemm(A, a_scale, a_zp, B, b_scale, b_zp[, C[, y_scale, y_zp]]): alpha, transA, transB; FP32 output without y_scale.
absl::Status QOperatorRewriter::Gemm(const NodeProto& n) {
  if (n.input_size() < 6) {
    return absl::InvalidArgumentError(absl::StrCat(Label(n), ": needs 6 to 9 inputs, got ", n.input_size()));
  }
  int64_t trans_b = 0;
  for (const onnx::AttributeProto& attr : n.attribute()) {
    if (attr.name() == "transB") trans_b = attr.i();
  }
  CONVOY_ASSIGN_OR_RETURN(std::string a, Dequantize(n, "A", n.input(0), n.input(1), n.input(2), 0));
  CONVOY_ASSIGN_OR_RETURN(std::string b, Dequantize(n, "B", n.input(3), n.input(4), n.input(5), trans_b ? 0 : 1));
  std::vector<std::string> inputs = {a, b};
  if (!Input(n, 6).empty()) {
    CONVOY_ASSIGN_OR_RETURN(std::string bias_scale, BiasScale(n, n.input(1), n.input(4)));
    CONVOY_ASSIGN_OR_RETURN(std::string c, Dequantize(n, "C", n.input(6), bias_scale, "", 0));
    inputs.push_back(c);
  }
  if (Input(n, 7).empty()) {  // FP32 output
    FloatOp(n, "Gemm", inputs, n.output(0));
    return absl::OkStatus();
  }
  const std::string y = Fresh(absl::StrCat(n.output(0), "/float"));
  FloatOp(n, "Gemm", inputs, y);
  Quantize(n, y, n.input(7), Input(n, 8), n.output(0));
  return absl::OkStatus();
}

// QLinearAdd / QLinearMul(A, A_scale, A_zp, B, B_scale, B_zp, C_scale, C_zp).
absl::Status QOperatorRewriter::Binary(const NodeProto& n, const std::string& op) {
  if (n.input_size() < 7) {
    return absl::InvalidArgumentError(absl::StrCat(Label(n), ": needs 7 or 8 inputs, got ", n.input_size()));
  }
  CONVOY_ASSIGN_OR_RETURN(std::string a, Dequantize(n, "A", n.input(0), n.input(1), n.input(2), 0));
  CONVOY_ASSIGN_OR_RETURN(std::string b, Dequantize(n, "B", n.input(3), n.input(4), n.input(5), 0));
  const std::string y = Fresh(absl::StrCat(n.output(0), "/float"));
  FloatOp(n, op, {a, b}, y);
  Quantize(n, y, n.input(6), Input(n, 7), n.output(0));
  return absl::OkStatus();
}

// QLinearGlobalAveragePool / QLinearAveragePool / QLinearSigmoid / QLinearLeakyRelu(X, X_scale, X_zp, Y_scale, Y_zp).
absl::Status QOperatorRewriter::Unary(const NodeProto& n, const std::string& op, const std::set<std::string>& dropped) {
  if (n.input_size() < 4) {
    return absl::InvalidArgumentError(absl::StrCat(Label(n), ": needs 4 or 5 inputs, got ", n.input_size()));
  }
  CONVOY_RETURN_IF_ERROR(CheckNotChannelsLast(n));
  CONVOY_ASSIGN_OR_RETURN(std::string x, Dequantize(n, "X", n.input(0), n.input(1), n.input(2), 0));
  const std::string y = Fresh(absl::StrCat(n.output(0), "/float"));
  FloatOp(n, op, {x}, y, dropped);
  Quantize(n, y, n.input(3), Input(n, 4), n.output(0));
  return absl::OkStatus();
}

// QLinearConcat(Y_scale, Y_zp, X0, X0_scale, X0_zp, X1, ...): axis.
absl::Status QOperatorRewriter::Concat(const NodeProto& n) {
  if (n.input_size() < 5 || (n.input_size() - 2) % 3 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(Label(n), ": needs Y_scale, Y_zero_point and triples of (X, ",
                                                   "X_scale, X_zero_point), got ", n.input_size(), " inputs"));
  }
  std::vector<std::string> inputs;
  for (int i = 2; i < n.input_size(); i += 3) {
    CONVOY_ASSIGN_OR_RETURN(std::string x, Dequantize(n, absl::StrCat("X", (i - 2) / 3), n.input(i), n.input(i + 1),
                                                      n.input(i + 2), 0));
    inputs.push_back(x);
  }
  const std::string y = Fresh(absl::StrCat(n.output(0), "/float"));
  FloatOp(n, "Concat", inputs, y);
  Quantize(n, y, n.input(0), n.input(1), n.output(0));
  return absl::OkStatus();
}

absl::Status QOperatorRewriter::Moving(const NodeProto& n) {
  const QuantizedBy by = quantized_.at(n.input(0));
  CONVOY_ASSIGN_OR_RETURN(std::string x, Dequantize(n, "input", n.input(0), by.scale, by.zero_point, 0));
  const std::string y = Fresh(absl::StrCat(n.output(0), "/float"));
  NodeProto& node = nodes_.emplace_back(n);
  node.set_input(0, x);
  node.set_output(0, y);
  Quantize(n, y, by.scale, by.zero_point, n.output(0));
  return absl::OkStatus();
}

absl::Status QOperatorRewriter::Run(int* rewritten) {
  onnx::GraphProto& g = *model_.mutable_graph();
  for (const auto& entry : model_.opset_import()) {
    if (entry.domain().empty() || entry.domain() == "ai.onnx") opset_ = entry.version();
  }
  for (const TensorProto& t : g.initializer()) {
    constants_[t.name()] = &t;
    names_.insert(t.name());
  }
  for (const onnx::ValueInfoProto& v : g.input()) names_.insert(v.name());
  for (const onnx::ValueInfoProto& v : g.output()) names_.insert(v.name());
  bool any = false;
  for (const NodeProto& n : g.node()) {
    names_.insert(n.name());
    for (const std::string& s : n.input()) names_.insert(s);
    for (const std::string& s : n.output()) names_.insert(s);
    if (n.op_type() == "Constant" && n.output_size() == 1) {
      for (const onnx::AttributeProto& a : n.attribute()) {
        if (a.name() == "value" && a.has_t()) constants_[n.output(0)] = &a.t();
      }
    }
    const bool standard = n.domain().empty() || n.domain() == "ai.onnx";
    any |= (standard && (n.op_type() == "QLinearConv" || n.op_type() == "QLinearMatMul")) || n.domain() == kMicrosoft;
  }
  if (!any) {
    if (rewritten) *rewritten = 0;
    return absl::OkStatus();
  }
  int count = 0;
  for (const NodeProto& n : g.node()) {
    const bool standard = n.domain().empty() || n.domain() == "ai.onnx";
    const bool microsoft = n.domain() == kMicrosoft;
    const std::string& op = n.op_type();
    absl::Status status = absl::OkStatus();
    bool handled = true;
    if (standard && op == "QLinearConv") {
      status = Conv(n);
    } else if (standard && op == "QLinearMatMul") {
      status = MatMul(n);
    } else if (microsoft && op == "QGemm") {
      status = Gemm(n);
    } else if (microsoft && (op == "QLinearAdd" || op == "QLinearMul")) {
      status = Binary(n, op == "QLinearAdd" ? "Add" : "Mul");
    } else if (microsoft && op == "QLinearGlobalAveragePool") {
      status = Unary(n, "GlobalAveragePool", {"channels_last"});
    } else if (microsoft && op == "QLinearAveragePool") {
      status = Unary(n, "AveragePool", {"channels_last"});
    } else if (microsoft && op == "QLinearSigmoid") {
      status = Unary(n, "Sigmoid", {});
    } else if (microsoft && op == "QLinearLeakyRelu") {
      status = Unary(n, "LeakyRelu", {});
    } else if (microsoft && op == "QLinearConcat") {
      status = Concat(n);
    } else if (standard && MovingOps().count(op) && n.input_size() > 0 && n.output_size() == 1 &&
               quantized_.count(n.input(0))) {
      status = Moving(n);
    } else {
      handled = false;
      nodes_.push_back(n);
      if (standard && op == "QuantizeLinear" && n.input_size() >= 2 && n.output_size() == 1) {
        quantized_[n.output(0)] = QuantizedBy{n.input(1), Input(n, 2)};
      }
    }
    CONVOY_RETURN_IF_ERROR(status);
    count += handled ? 1 : 0;
  }
  g.clear_node();
  for (NodeProto& n : nodes_) *g.add_node() = std::move(n);
  if (rewritten) *rewritten = count;
  return absl::OkStatus();
}

}  // namespace

absl::Status RewriteQOperatorNodes(onnx::ModelProto& model, const std::string& source, int* rewritten) {
  return QOperatorRewriter(model, source).Run(rewritten);
}

}  // namespace convoy::repository
