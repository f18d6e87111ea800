// The QOperator -> QDQ rewrite: a QOperator model (QuantizeLinear, QLinearConv with per-channel weights and an INT32
// bias, QLinearAdd, MaxPool on 8-bit data, QLinearGlobalAveragePool, Flatten, QGemm with an FP32 output) imports and
// computes exactly what the QDQ model written independently here (the way onnxruntime's QDQ quantizer writes the same
// network) computes, on fresh random inputs through the reference interpreter; the rewrite's nodes and bias scales;
// a model without QOperator nodes is left byte for byte; the refusals name the node.
#include "server/repository/onnx_qoperator.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "server/repository/onnx_importer.h"
#include "server/runtime/reference_interpreter.h"

namespace convoy::repository {
namespace {

using ::convoy::testing::IsOk;
using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;
using onnx::TensorProto;

constexpr int kC = 3, kK = 4, kH = 6, kN = 5;  // input channels, conv outputs, spatial size, classes

class ModelBuilder {
 public:
  explicit ModelBuilder(int64_t opset) {
    model_.set_ir_version(8);
    auto* op = model_.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    auto* ms = model_.add_opset_import();
    ms->set_domain("com.microsoft");
    ms->set_version(1);
    auto* in = model_.mutable_graph()->add_input();
    in->set_name("x");
    auto* tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(TensorProto::FLOAT);
    for (int64_t d : {int64_t{1}, int64_t{kC}, int64_t{kH}, int64_t{kH}}) tt->mutable_shape()->add_dim()->set_dim_value(d);
    model_.mutable_graph()->add_output()->set_name("y");
  }

  void Floats(const std::string& name, std::vector<int64_t> dims, const std::vector<float>& values) {
    TensorProto* t = Init(name, TensorProto::FLOAT, dims);
    for (float v : values) t->add_float_data(v);
  }
  void Ints(const std::string& name, int32_t type, std::vector<int64_t> dims, const std::vector<int32_t>& values) {
    TensorProto* t = Init(name, type, dims);
    for (int32_t v : values) t->add_int32_data(v);
  }
  onnx::NodeProto& Node(const std::string& op, std::vector<std::string> inputs, std::vector<std::string> outputs,
                        const std::string& domain = "") {
    onnx::NodeProto* n = model_.mutable_graph()->add_node();
    n->set_op_type(op);
    n->set_domain(domain);
    n->set_name(outputs[0] + "_node");
    for (auto& s : inputs) n->add_input(s);
    for (auto& s : outputs) n->add_output(s);
    return *n;
  }
  static void IntsAttr(onnx::NodeProto& n, const std::string& name, std::vector<int64_t> values) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t v : values) a->add_ints(v);
  }
  static void IntAttr(onnx::NodeProto& n, const std::string& name, int64_t value) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(value);
  }
  onnx::ModelProto& model() { return model_; }

 private:
  TensorProto* Init(const std::string& name, int32_t type, const std::vector<int64_t>& dims) {
    TensorProto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(type);
    for (int64_t d : dims) t->add_dims(d);
    return t;
  }
  onnx::ModelProto model_;
};

// The constants both forms share: scales, zero points, int8 weights, int32 biases (seeded, so both see the same).
struct Constants {
  std::vector<int32_t> w, w_zp, b, fc_w, fc_zp, fc_b;
  std::vector<float> w_scale, fc_scale;
  Constants() {
    std::mt19937 rng(7);
    std::uniform_int_distribution<int> i8(-127, 127), i32(-3000, 3000);
    std::uniform_real_distribution<float> scale(0.002f, 0.02f);
    for (int i = 0; i < kK * kC * 9; ++i) w.push_back(i8(rng));
    for (int k = 0; k < kK; ++k) w_scale.push_back(scale(rng)), w_zp.push_back(0), b.push_back(i32(rng));
    for (int i = 0; i < kN * kK; ++i) fc_w.push_back(i8(rng));
    for (int n = 0; n < kN; ++n) fc_scale.push_back(scale(rng)), fc_zp.push_back(0), fc_b.push_back(i32(rng));
  }
};

void AddSharedConstants(ModelBuilder& m, const Constants& c) {
  m.Floats("x_s", {}, {0.01f});
  m.Ints("x_z", TensorProto::UINT8, {}, {128});
  m.Ints("w", TensorProto::INT8, {kK, kC, 3, 3}, c.w);
  m.Floats("w_s", {kK}, c.w_scale);
  m.Ints("w_z", TensorProto::INT8, {kK}, c.w_zp);
  m.Ints("b", TensorProto::INT32, {kK}, c.b);
  m.Floats("c_s", {}, {0.05f});
  m.Ints("c_z", TensorProto::UINT8, {}, {100});
  m.Floats("a_s", {}, {0.08f});
  m.Ints("a_z", TensorProto::UINT8, {}, {90});
  m.Floats("g_s", {}, {0.03f});
  m.Ints("g_z", TensorProto::UINT8, {}, {110});
  m.Ints("fc_w", TensorProto::INT8, {kN, kK}, c.fc_w);
  m.Floats("fc_s", {kN}, c.fc_scale);
  m.Ints("fc_z", TensorProto::INT8, {kN}, c.fc_zp);
  m.Ints("fc_b", TensorProto::INT32, {kN}, c.fc_b);
}

onnx::ModelProto QOperatorModel(int64_t opset = 13) {
  ModelBuilder m(opset);
  AddSharedConstants(m, Constants());
  m.Node("QuantizeLinear", {"x", "x_s", "x_z"}, {"xq"});
  auto& conv = m.Node("QLinearConv", {"xq", "x_s", "x_z", "w", "w_s", "w_z", "c_s", "c_z", "b"}, {"cq"});
  ModelBuilder::IntsAttr(conv, "kernel_shape", {3, 3});
  ModelBuilder::IntsAttr(conv, "pads", {1, 1, 1, 1});
  m.Node("QLinearAdd", {"cq", "c_s", "c_z", "cq", "c_s", "c_z", "a_s", "a_z"}, {"aq"}, "com.microsoft");
  auto& pool = m.Node("MaxPool", {"aq"}, {"pq"});
  ModelBuilder::IntsAttr(pool, "kernel_shape", {2, 2});
  ModelBuilder::IntsAttr(pool, "strides", {2, 2});
  auto& gap = m.Node("QLinearGlobalAveragePool", {"pq", "a_s", "a_z", "g_s", "g_z"}, {"gq"}, "com.microsoft");
  ModelBuilder::IntAttr(gap, "channels_last", 0);
  m.Node("Flatten", {"gq"}, {"fq"});
  auto& gemm = m.Node("QGemm", {"fq", "g_s", "g_z", "fc_w", "fc_s", "fc_z", "fc_b"}, {"y"}, "com.microsoft");
  ModelBuilder::IntAttr(gemm, "transB", 1);
  return m.model();
}

// The same network as onnxruntime's QDQ quantizer writes it: Q -> DQ on every activation, DQ on the constants.
onnx::ModelProto QdqModel() {
  const Constants c;
  ModelBuilder m(13);
  AddSharedConstants(m, c);
  std::vector<float> conv_bias_scale, fc_bias_scale;
  for (float s : c.w_scale) conv_bias_scale.push_back(0.01f * s);
  for (float s : c.fc_scale) fc_bias_scale.push_back(0.03f * s);
  m.Floats("b_s", {kK}, conv_bias_scale);
  m.Floats("fc_b_s", {kN}, fc_bias_scale);
  auto per_axis = [](onnx::NodeProto& n) { ModelBuilder::IntAttr(n, "axis", 0); };
  m.Node("QuantizeLinear", {"x", "x_s", "x_z"}, {"xq"});
  m.Node("DequantizeLinear", {"xq", "x_s", "x_z"}, {"xd"});
  per_axis(m.Node("DequantizeLinear", {"w", "w_s", "w_z"}, {"wd"}));
  per_axis(m.Node("DequantizeLinear", {"b", "b_s"}, {"bd"}));
  auto& conv = m.Node("Conv", {"xd", "wd", "bd"}, {"c"});
  ModelBuilder::IntsAttr(conv, "kernel_shape", {3, 3});
  ModelBuilder::IntsAttr(conv, "pads", {1, 1, 1, 1});
  m.Node("QuantizeLinear", {"c", "c_s", "c_z"}, {"cq"});
  m.Node("DequantizeLinear", {"cq", "c_s", "c_z"}, {"cd1"});
  m.Node("DequantizeLinear", {"cq", "c_s", "c_z"}, {"cd2"});
  m.Node("Add", {"cd1", "cd2"}, {"a"});
  m.Node("QuantizeLinear", {"a", "a_s", "a_z"}, {"aq"});
  m.Node("DequantizeLinear", {"aq", "a_s", "a_z"}, {"ad"});
  auto& pool = m.Node("MaxPool", {"ad"}, {"p"});
  ModelBuilder::IntsAttr(pool, "kernel_shape", {2, 2});
  ModelBuilder::IntsAttr(pool, "strides", {2, 2});
  m.Node("QuantizeLinear", {"p", "a_s", "a_z"}, {"pq"});
  m.Node("DequantizeLinear", {"pq", "a_s", "a_z"}, {"pd"});
  m.Node("GlobalAveragePool", {"pd"}, {"g"});
  m.Node("QuantizeLinear", {"g", "g_s", "g_z"}, {"gq"});
  m.Node("DequantizeLinear", {"gq", "g_s", "g_z"}, {"gd"});
  m.Node("Flatten", {"gd"}, {"f"});
  m.Node("QuantizeLinear", {"f", "g_s", "g_z"}, {"fq"});
  m.Node("DequantizeLinear", {"fq", "g_s", "g_z"}, {"fd"});
  per_axis(m.Node("DequantizeLinear", {"fc_w", "fc_s", "fc_z"}, {"fcw"}));
  per_axis(m.Node("DequantizeLinear", {"fc_b", "fc_b_s"}, {"fcb"}));
  auto& gemm = m.Node("Gemm", {"fd", "fcw", "fcb"}, {"y"});
  ModelBuilder::IntAttr(gemm, "transB", 1);
  return m.model();
}

TEST(QOperatorTest, ComputesWhatTheQdqFormComputes) {
  CONVOY_ASSERT_OK_AND_ASSIGN(runtime::Graph qop, ImportOnnxModel(QOperatorModel().SerializeAsString(), "q.onnx", {}));
  CONVOY_ASSERT_OK_AND_ASSIGN(runtime::Graph qdq, ImportOnnxModel(QdqModel().SerializeAsString(), "d.onnx", {}));
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> u(-1.5f, 1.5f);  // past the input's quantized range [-1.28, 1.27] too
  for (int trial = 0; trial < 20; ++trial) {
    runtime::Tensor x{{1, kC, kH, kH}, {}};
    for (int i = 0; i < kC * kH * kH; ++i) x.data.push_back(u(rng));
    CONVOY_ASSERT_OK_AND_ASSIGN(auto a, runtime::RunReference(qop, {{"x", x}}));
    CONVOY_ASSERT_OK_AND_ASSIGN(auto b, runtime::RunReference(qdq, {{"x", x}}));
    ASSERT_EQ(a.at("y").shape, (runtime::Shape{1, kN}));
    ASSERT_EQ(a.at("y").data.size(), b.at("y").data.size());
    for (size_t i = 0; i < a.at("y").data.size(); ++i) {
      EXPECT_EQ(a.at("y").data[i], b.at("y").data[i]) << "logit " << i << ", trial " << trial;  // exactly
    }
  }
}

TEST(QOperatorTest, RewritesIntoDequantizeOpQuantize) {
  onnx::ModelProto model = QOperatorModel();
  int rewritten = 0;
  ASSERT_THAT(RewriteQOperatorNodes(model, "q.onnx", &rewritten), IsOk());
  EXPECT_EQ(rewritten, 6);  // QLinearConv, QLinearAdd, MaxPool, QLinearGlobalAveragePool, Flatten, QGemm
  std::vector<std::string> ops;
  for (const auto& n : model.graph().node()) {
    EXPECT_TRUE(n.domain().empty()) << n.op_type();
    ops.push_back(n.op_type());
  }
  const std::vector<std::string> expected = {
      "QuantizeLinear",                                                                          // x
      "DequantizeLinear", "DequantizeLinear", "DequantizeLinear", "Conv", "QuantizeLinear",      // conv
      "DequantizeLinear", "Add", "QuantizeLinear",                                               // add (cq + cq)
      "DequantizeLinear", "MaxPool", "QuantizeLinear",                                           // pool
      "DequantizeLinear", "GlobalAveragePool", "QuantizeLinear",                                 // gap
      "DequantizeLinear", "Flatten", "QuantizeLinear",                                           // flatten
      "DequantizeLinear", "DequantizeLinear", "DequantizeLinear", "Gemm"};                       // FP32 out
  EXPECT_EQ(ops, expected);
  // The conv's bias scale: input scale x each weight scale.
  const Constants c;
  bool found = false;
  for (const auto& t : model.graph().initializer()) {
    if (t.name().find("cq_node/bias_scale") == std::string::npos) continue;
    found = true;
    ASSERT_EQ(t.float_data_size(), kK);
    for (int k = 0; k < kK; ++k) EXPECT_EQ(t.float_data(k), 0.01f * c.w_scale[k]);
  }
  EXPECT_TRUE(found);
  for (const auto& n : model.graph().node()) {
    if (n.op_type() == "GlobalAveragePool") {
      EXPECT_EQ(n.attribute_size(), 0) << "channels_last is dropped";
    }
  }
}

TEST(QOperatorTest, LeavesOtherModelsUnchanged) {
  onnx::ModelProto model = QdqModel();
  const std::string before = model.SerializeAsString();
  int rewritten = -1;
  ASSERT_THAT(RewriteQOperatorNodes(model, "d.onnx", &rewritten), IsOk());
  EXPECT_EQ(rewritten, 0);
  EXPECT_EQ(model.SerializeAsString(), before);
}

TEST(QOperatorTest, RefusalsNameTheNode) {
  // Per-channel scales need DequantizeLinear's axis (opset 13).
  EXPECT_THAT(ImportOnnxModel(QOperatorModel(12).SerializeAsString(), "q.onnx", {}),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("q.onnx: node 'cq_node' (QLinearConv): the w 'w' has per-channel scales ('w_s', 4 "
                                 "values) at opset 12")));
  onnx::ModelProto model = QOperatorModel();
  for (auto& n : *model.mutable_graph()->mutable_node()) {
    if (n.op_type() == "QLinearGlobalAveragePool") n.mutable_attribute(0)->set_i(1);
  }
  EXPECT_THAT(ImportOnnxModel(model.SerializeAsString(), "q.onnx", {}),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("node 'gq_node' (QLinearGlobalAveragePool): attribute 'channels_last' value 1")));
  model = QOperatorModel();
  model.mutable_graph()->mutable_node(1)->mutable_input()->RemoveLast();
  model.mutable_graph()->mutable_node(1)->mutable_input()->RemoveLast();
  EXPECT_THAT(ImportOnnxModel(model.SerializeAsString(), "q.onnx", {}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("node 'cq_node' (QLinearConv): needs 8 or 9 inputs, got 7")));
  // A com.microsoft op the rewrite does not know keeps its domain, which the importer names.
  model = QOperatorModel();
  model.mutable_graph()->mutable_node(2)->set_op_type("QLinearSoftmax");
  EXPECT_THAT(ImportOnnxModel(model.SerializeAsString(), "q.onnx", {}),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("domain 'com.microsoft' is not supported")));
}

}  // namespace
}  // namespace convoy::repository
