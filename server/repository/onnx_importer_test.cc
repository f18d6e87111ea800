// Error-path tests for the ONNX importer (the numeric per-op checks against onnxruntime live in
// tests/python/test_onnx_ops.py): malformed bytes, unsupported ops and attributes, symbolic dimensions, opsets,
// weight sizes.
#include "server/repository/onnx_importer.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "onnx/onnx_pb.h"

namespace convoy::repository {
namespace {

using ::convoy::testing::IsOk;
using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;

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

}  // namespace
}  // namespace convoy::repository
