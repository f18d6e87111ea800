// Tests of the ONNX importer (the numeric per-op checks against onnxruntime live in tests/python/test_onnx_ops.py
// and test_padded_exports.py): malformed bytes, unsupported ops and attributes, symbolic dimensions, opsets, weight
// sizes; the integer padding subgraph PyTorch exports, evaluated at load time and folded into the convolution; the
// errors naming node, op and input for what is not constant.
#include "server/repository/onnx_importer.h"

#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "onnx/onnx_pb.h"
#include "server/runtime/passes/passes.h"
#include "server/runtime/reference_interpreter.h"

namespace convoy::repository {
namespace {

using ::convoy::testing::IsOk;
using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

onnx::ModelProto ReluModel(int64_t opset) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(opset);
  onnx::GraphProto* g = model.mutable_graph();
  auto* tt = g->add_input()->mutable_type()->mutable_tensor_type();
  g->mutable_input(0)->set_name("x");
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  tt->mutable_shape()->add_dim()->set_dim_param("N");
  tt->mutable_shape()->add_dim()->set_dim_value(4);
  onnx::NodeProto* n = g->add_node();
  n->set_name("act");
  n->set_op_type("Relu");
  n->add_input("x");
  n->add_output("y");
  g->add_output()->set_name("y");
  return model;
}

absl::StatusOr<runtime::Graph> Import(const onnx::ModelProto& model) {
  return ImportOnnxModel(model.SerializeAsString(), "m.onnx", {});
}

TEST(OnnxImporterTest, ImportsWithSymbolicBatch) {
  CONVOY_ASSERT_OK_AND_ASSIGN(runtime::Graph g, Import(ReluModel(13)));
  EXPECT_EQ(*g.ShapeOf("y"), (runtime::Shape{runtime::kBatch, 4}));
}

TEST(OnnxImporterTest, RejectsGarbageBytes) {
  EXPECT_THAT(ImportOnnxModel("\xff\xff\xff garbage", "m.onnx", {}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("m.onnx: not a valid ONNX model")));
}

TEST(OnnxImporterTest, NamesNodeOpAndAttribute) {
  onnx::ModelProto model = ReluModel(13);
  model.mutable_graph()->mutable_node(0)->set_op_type("Elu");
  EXPECT_THAT(Import(model), StatusIs(absl::StatusCode::kUnimplemented,
                                      HasSubstr("node 'act' (Elu): op 'Elu' is not supported")));
  model = ReluModel(13);
  auto* attr = model.mutable_graph()->mutable_node(0)->add_attribute();
  attr->set_name("alpha");
  attr->set_type(onnx::AttributeProto::FLOAT);
  EXPECT_THAT(Import(model), StatusIs(absl::StatusCode::kUnimplemented,
                                      HasSubstr("node 'act' (Relu): attribute 'alpha' is not supported")));
}

TEST(OnnxImporterTest, SymbolicNonBatchDimensionNeedsConfigDims) {
  onnx::ModelProto model = ReluModel(13);
  model.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(1)->set_dim_param("C");
  EXPECT_THAT(Import(model), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("dimension 1 is symbolic ('C')")));
  OnnxImportOptions options;
  options.input_shapes["x"] = {runtime::kBatch, 7};
  CONVOY_ASSERT_OK_AND_ASSIGN(runtime::Graph g, ImportOnnxModel(model.SerializeAsString(), "m.onnx", options));
  EXPECT_EQ(*g.ShapeOf("y"), (runtime::Shape{runtime::kBatch, 7}));
}

TEST(OnnxImporterTest, RejectsUnsupportedOpset) {
  EXPECT_THAT(Import(ReluModel(19)), StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("opset 19")));
}

TEST(OnnxImporterTest, RejectsInitializerWithWrongByteCount) {
  onnx::ModelProto model = ReluModel(13);
  onnx::TensorProto* t = model.mutable_graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(3);
  t->set_raw_data(std::string(11, '\0'));
  EXPECT_THAT(Import(model), StatusIs(absl::StatusCode::kInvalidArgument,
                                      HasSubstr("initializer 'w': raw_data has 11 bytes, expected 12")));
}

TEST(OnnxImporterTest, RejectsDanglingEdge) {
  onnx::ModelProto model = ReluModel(13);
  model.mutable_graph()->mutable_node(0)->set_input(0, "ghost");
  EXPECT_THAT(Import(model), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'ghost'")));
}

// Small builders for hand-written graphs.
onnx::NodeProto* AddNode(onnx::GraphProto* g, const std::string& op, std::vector<std::string> inputs,
                         std::vector<std::string> outputs, const std::string& name = "") {
  onnx::NodeProto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name.empty() ? outputs[0] : name);
  for (const std::string& in : inputs) n->add_input(in);
  for (const std::string& out : outputs) n->add_output(out);
  return n;
}

void AddInt64Initializer(onnx::GraphProto* g, const std::string& name, std::vector<int64_t> dims,
                         std::vector<int64_t> values) {
  onnx::TensorProto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  for (int64_t d : dims) t->add_dims(d);
  for (int64_t v : values) t->add_int64_data(v);
}

void AddFloatInitializer(onnx::GraphProto* g, const std::string& name, std::vector<int64_t> dims, float fill) {
  onnx::TensorProto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  int64_t count = 1;
  for (int64_t d : dims) {
    t->add_dims(d);
    count *= d;
  }
  for (int64_t i = 0; i < count; ++i) t->add_float_data(fill * static_cast<float>((i * 7919) % 13 - 6));
}

void SetInts(onnx::NodeProto* n, const char* name, std::vector<int64_t> values) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t v : values) a->add_ints(v);
}

void SetInt(onnx::NodeProto* n, const char* name, int64_t value) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(value);
}

// x [N,3,9,8] -> F.pad(x, [l=0, r=1, t=0, b=1]) as torch.onnx (opset 13) writes it -> 3x3 stride-2 conv -> y.
onnx::ModelProto TorchPaddedConvModel() {
  onnx::ModelProto model = ReluModel(13);
  onnx::GraphProto* g = model.mutable_graph();
  g->clear_node();
  g->clear_output();
  auto* shape = g->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
  shape->clear_dim();
  shape->add_dim()->set_dim_param("N");
  for (int64_t d : {3, 9, 8}) shape->add_dim()->set_dim_value(d);
  AddInt64Initializer(g, "torch_pads", {4}, {0, 1, 0, 1});
  AddInt64Initializer(g, "four", {1}, {4});
  AddInt64Initializer(g, "rows", {2}, {-1, 2});
  AddInt64Initializer(g, "start", {1}, {-1});
  AddInt64Initializer(g, "end", {1}, {-kInt64Max});
  AddInt64Initializer(g, "axis0", {1}, {0});
  AddInt64Initializer(g, "minus1", {1}, {-1});
  AddInt64Initializer(g, "flat", {1}, {-1});
  AddFloatInitializer(g, "w", {4, 3, 3, 3}, 0.05f);
  auto* zeros = AddNode(g, "ConstantOfShape", {"four"}, {"zeros"});
  auto* value = zeros->add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  value->mutable_t()->set_data_type(onnx::TensorProto::INT64);
  value->mutable_t()->add_dims(1);
  value->mutable_t()->add_int64_data(0);
  SetInt(AddNode(g, "Concat", {"torch_pads", "zeros"}, {"all"}), "axis", 0);
  AddNode(g, "Reshape", {"all", "rows"}, {"pairs"});
  AddNode(g, "Slice", {"pairs", "start", "end", "axis0", "minus1"}, {"reversed"});
  SetInts(AddNode(g, "Transpose", {"reversed"}, {"columns"}), "perm", {1, 0});
  AddNode(g, "Reshape", {"columns", "flat"}, {"pads64"});
  SetInt(AddNode(g, "Cast", {"pads64"}, {"pads"}), "to", onnx::TensorProto::INT64);
  AddNode(g, "Pad", {"x", "pads"}, {"padded"}, "pad");
  auto* conv = AddNode(g, "Conv", {"padded", "w"}, {"y"}, "conv");
  SetInts(conv, "strides", {2, 2});
  g->add_output()->set_name("y");
  return model;
}

TEST(OnnxImporterTest, TorchPaddingSubgraphIsEvaluatedAndFoldsIntoTheConv) {
  CONVOY_ASSERT_OK_AND_ASSIGN(runtime::Graph g, Import(TorchPaddedConvModel()));
  ASSERT_EQ(g.nodes().size(), 2u) << g.ToString();  // only the Pad and the Conv reach the runtime graph
  ASSERT_EQ(g.nodes()[0].op(), runtime::OpKind::kPad);
  EXPECT_EQ(g.nodes()[0].As<runtime::PadAttrs>().pads, (std::vector<int64_t>{0, 0, 0, 0, 0, 0, 1, 1}));
  EXPECT_EQ(*g.ShapeOf("y"), (runtime::Shape{runtime::kBatch, 4, 4, 4}));  // (9 + 1 - 3) / 2 + 1, (8 + 1 - 3) / 2 + 1
  runtime::Graph optimized = g;
  CONVOY_ASSERT_OK_AND_ASSIGN(runtime::passes::OptimizeStats stats, runtime::passes::OptimizeGraph(optimized));
  EXPECT_EQ(stats.pads_folded, 1);
  ASSERT_EQ(optimized.nodes().size(), 1u) << optimized.ToString();
  const runtime::Window2d& w = optimized.nodes()[0].As<runtime::Conv2dAttrs>().window;
  EXPECT_EQ(std::vector<int64_t>({w.pad_top, w.pad_left, w.pad_bottom, w.pad_right}),
            std::vector<int64_t>({0, 0, 1, 1}));
  // Same values before and after folding, on a random input.
  runtime::Tensor x = runtime::Tensor::Zeros({2, 3, 9, 8});
  for (size_t i = 0; i < x.data.size(); ++i) x.data[i] = static_cast<float>((i * 2654435761u) % 1000) / 500.0f - 1.0f;
  CONVOY_ASSERT_OK_AND_ASSIGN(auto before, runtime::RunReference(g, {{"x", x}}));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto after, runtime::RunReference(optimized, {{"x", x}}));
  ASSERT_EQ(before.at("y").data.size(), after.at("y").data.size());
  for (size_t i = 0; i < after.at("y").data.size(); ++i) {
    EXPECT_NEAR(after.at("y").data[i], before.at("y").data[i], 1e-5) << i;
  }
}

TEST(OnnxImporterTest, LoadTimeOpOnRuntimeDataNamesNodeOpAndInput) {
  onnx::ModelProto model = ReluModel(13);
  onnx::GraphProto* g = model.mutable_graph();
  AddInt64Initializer(g, "zero", {}, {0});
  AddNode(g, "Equal", {"y", "zero"}, {"mask"}, "eq");
  g->clear_output();
  g->add_output()->set_name("mask");
  EXPECT_THAT(Import(model), StatusIs(absl::StatusCode::kUnimplemented,
                                      HasSubstr("node 'eq' (Equal): input 0 ('y', [N,4]) is computed at run time; "
                                                "Convoy evaluates Equal only at load time")));
}

TEST(OnnxImporterTest, IntegerTensorUsedAsDataNamesTheConsumingNode) {
  onnx::ModelProto model = ReluModel(13);
  onnx::GraphProto* g = model.mutable_graph();
  AddInt64Initializer(g, "shift", {4}, {1, 2, 3, 4});
  AddNode(g, "Add", {"y", "shift"}, {"z"}, "add");
  g->clear_output();
  g->add_output()->set_name("z");
  EXPECT_THAT(Import(model), StatusIs(absl::StatusCode::kUnimplemented,
                                      HasSubstr("node 'add' (Add): integer tensor 'shift' (INT64 [4]) used as data")));
}

TEST(OnnxImporterTest, PadsComputedFromTheBatchSizeFailNamingTheNode) {
  // Pads that depend on the dynamic batch (Shape(x)[0] * 0) cannot be known at load time.
  onnx::ModelProto model = ReluModel(13);
  onnx::GraphProto* g = model.mutable_graph();
  AddInt64Initializer(g, "index0", {1}, {0});
  AddInt64Initializer(g, "zero", {1}, {0});
  AddNode(g, "Shape", {"y"}, {"shape"});
  AddNode(g, "Gather", {"shape", "index0"}, {"batch"});
  AddNode(g, "Mul", {"batch", "zero"}, {"nothing"}, "times_zero");
  g->clear_output();
  g->add_output()->set_name("nothing");
  EXPECT_THAT(Import(model), StatusIs(absl::StatusCode::kUnimplemented,
                                      HasSubstr("node 'times_zero' (Mul): input 0 ('batch') holds the dynamic batch "
                                                "size")));
}

}  // namespace
}  // namespace convoy::repository
