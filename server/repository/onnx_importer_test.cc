// Tests of the ONNX importer (the numeric per-op checks against onnxruntime live in tests/python/test_onnx_ops.py
// and test_padded_exports.py): malformed bytes, unsupported ops and attributes, symbolic dimensions, opsets, weight
// sizes; the integer padding subgraph PyTorch exports, evaluated at load time and folded into the convolution; the
// errors naming node, op and input for what is not constant.
#include "server/repository/onnx_importer.h"

#include <cmath>
#include <limits>
#include <random>

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
  model.mutable_graph()->mutable_node(0)->set_op_type("Hardmax");
  EXPECT_THAT(Import(model), StatusIs(absl::StatusCode::kUnimplemented,
                                      HasSubstr("node 'act' (Hardmax): op 'Hardmax' is not supported")));
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
  EXPECT_THAT(Import(ReluModel(22)), StatusIs(absl::StatusCode::kUnimplemented,
                                           HasSubstr("ONNX opset 22 is not supported (1 to 21)")));
  EXPECT_THAT(Import(ReluModel(0)), StatusIs(absl::StatusCode::kUnimplemented,
                                          HasSubstr("ONNX opset 0 is not supported (1 to 21)")));
  for (int64_t opset = 1; opset <= 21; ++opset) EXPECT_THAT(Import(ReluModel(opset)), IsOk()) << opset;
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

// ---- Opsets 18 to 21: inputs that replaced attributes, attributes added later --------------------------------------

// A model of opset `opset` with one float input x [N,dims...] and the graph output `output`.
onnx::ModelProto ModelWithInput(int64_t opset, std::vector<int64_t> dims) {
  onnx::ModelProto model = ReluModel(opset);
  onnx::GraphProto* g = model.mutable_graph();
  g->clear_node();
  g->clear_output();
  auto* shape = g->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
  shape->clear_dim();
  shape->add_dim()->set_dim_param("N");
  for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
  return model;
}

runtime::Tensor RandomTensor(runtime::Shape shape) {
  static std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  runtime::Tensor t = runtime::Tensor::Zeros(std::move(shape));
  for (float& v : t.data) v = uniform(rng);
  return t;
}

void SetString(onnx::NodeProto* n, const char* name, const std::string& value) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(value);
}

// Runs `graph` on x with the reference interpreter.
std::map<std::string, runtime::Tensor> RunOn(const runtime::Graph& graph, const runtime::Tensor& x) {
  auto outputs = runtime::RunReference(graph, {{"x", x}});
  EXPECT_THAT(outputs.status(), IsOk());
  return outputs.ok() ? *outputs : std::map<std::string, runtime::Tensor>{};
}

class ReduceAxesInputTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(ReduceAxesInputTest, ReduceMeanAndReduceMaxTakeConstantAxesInput) {
  const int64_t opset = GetParam();
  onnx::ModelProto model = ModelWithInput(opset, {3, 4, 5});
  onnx::GraphProto* g = model.mutable_graph();
  AddInt64Initializer(g, "hw", {2}, {-1, 2});
  SetInt(AddNode(g, "ReduceMean", {"x", "hw"}, {"mean"}, "mean"), "keepdims", 0);
  AddNode(g, "ReduceMax", {"x", "hw"}, {"max"}, "max");
  g->add_output()->set_name("mean");
  g->add_output()->set_name("max");
  CONVOY_ASSERT_OK_AND_ASSIGN(runtime::Graph graph, Import(model));
  EXPECT_EQ(*graph.ShapeOf("mean"), (runtime::Shape{runtime::kBatch, 3}));
  EXPECT_EQ(*graph.ShapeOf("max"), (runtime::Shape{runtime::kBatch, 3, 1, 1}));
  const runtime::Tensor x = RandomTensor({2, 3, 4, 5});
  auto out = RunOn(graph, x);
  ASSERT_EQ(out.count("mean"), 1u);
  for (int64_t nc = 0; nc < 6; ++nc) {
    double sum = 0.0;
    float max = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < 20; ++i) {
      sum += x.data[nc * 20 + i];
      max = std::max(max, x.data[nc * 20 + i]);
    }
    EXPECT_NEAR(out.at("mean").data[nc], sum / 20, 1e-6) << nc;
    EXPECT_EQ(out.at("max").data[nc], max) << nc;
  }
}

INSTANTIATE_TEST_SUITE_P(Opsets18To21, ReduceAxesInputTest, ::testing::Values(18, 19, 20, 21));

TEST(OnnxImporterTest, ReduceMeanAxesComputedAtRunTimeFailNamingNodeOpOpsetAndInput) {
  onnx::ModelProto model = ModelWithInput(18, {3, 4, 5});
  onnx::GraphProto* g = model.mutable_graph();
  auto* axes = g->add_input();
  axes->set_name("runtime_axes");
  axes->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  axes->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(2);
  AddNode(g, "ReduceMean", {"x", "runtime_axes"}, {"y"}, "gap");
  g->add_output()->set_name("y");
  EXPECT_THAT(Import(model), StatusIs(absl::StatusCode::kUnimplemented,
                                      HasSubstr("node 'gap' (ReduceMean): input 1 ('runtime_axes', the axes) is "
                                                "computed at run time; at opset 18 ReduceMean takes its axes as an "
                                                "input")));
}

TEST(OnnxImporterTest, ReduceMeanAxesAttributeAtOpset18FailsNamingTheOpset) {
  onnx::ModelProto model = ModelWithInput(18, {3, 4, 5});
  onnx::GraphProto* g = model.mutable_graph();
  SetInts(AddNode(g, "ReduceMean", {"x"}, {"y"}, "gap"), "axes", {2, 3});
  g->add_output()->set_name("y");
  EXPECT_THAT(Import(model), StatusIs(absl::StatusCode::kInvalidArgument,
                                      HasSubstr("node 'gap' (ReduceMean): attribute 'axes' is not part of ReduceMean "
                                                "at opset 18 (from opset 18 the axes are input 1)")));
  // Before 18 the attribute is the form.
  model.mutable_opset_import(0)->set_version(17);
  EXPECT_THAT(Import(model), IsOk());
}

TEST(OnnxImporterTest, ReduceMeanNoopWithEmptyAxesIsAnIdentity) {
  onnx::ModelProto model = ModelWithInput(18, {3, 4, 5});
  onnx::GraphProto* g = model.mutable_graph();
  SetInt(AddNode(g, "ReduceMean", {"x"}, {"y"}, "gap"), "noop_with_empty_axes", 1);
  g->add_output()->set_name("y");
  CONVOY_ASSERT_OK_AND_ASSIGN(runtime::Graph graph, Import(model));
  EXPECT_EQ(*graph.ShapeOf("y"), (runtime::Shape{runtime::kBatch, 3, 4, 5}));
  // Without the attribute, empty axes reduce every axis, the batch included: refused, naming the axis.
  g->mutable_node(0)->clear_attribute();
  EXPECT_THAT(Import(model), StatusIs(absl::StatusCode::kUnimplemented,
                                      HasSubstr("node 'gap' (ReduceMean): a mean over axis 0 of [N,3,4,5] reduces the "
                                                "dynamic batch, which a served model keeps")));
}

TEST(OnnxImporterTest, SplitNumOutputsAtOpset18CutsCeilSizedParts) {
  for (int64_t opset : {18, 21}) {
    onnx::ModelProto model = ModelWithInput(opset, {7, 2, 2});
    onnx::GraphProto* g = model.mutable_graph();
    auto* split = AddNode(g, "Split", {"x"}, {"a", "b", "c"}, "split");
    SetInt(split, "axis", 1);
    SetInt(split, "num_outputs", 3);
    for (const char* out : {"a", "b", "c"}) g->add_output()->set_name(out);
    CONVOY_ASSERT_OK_AND_ASSIGN(runtime::Graph graph, Import(model));
    EXPECT_EQ(*graph.ShapeOf("a"), (runtime::Shape{runtime::kBatch, 3, 2, 2}));
    EXPECT_EQ(*graph.ShapeOf("c"), (runtime::Shape{runtime::kBatch, 1, 2, 2}));
    const runtime::Tensor x = RandomTensor({2, 7, 2, 2});
    auto out = RunOn(graph, x);
    ASSERT_EQ(out.count("c"), 1u);
    for (int64_t n = 0; n < 2; ++n) {
      for (int64_t i = 0; i < 4; ++i) {
        EXPECT_EQ(out.at("c").data[n * 4 + i], x.data[(n * 7 + 6) * 4 + i]);
        EXPECT_EQ(out.at("b").data[(n * 3 + 2) * 4 + i], x.data[(n * 7 + 5) * 4 + i]);
      }
    }
  }
}

TEST(OnnxImporterTest, SplitNumOutputsBeforeOpset18AndMismatchFailNamingTheNode) {
  onnx::ModelProto model = ModelWithInput(17, {6, 2, 2});
  onnx::GraphProto* g = model.mutable_graph();
  auto* split = AddNode(g, "Split", {"x"}, {"a", "b"}, "split");
  SetInt(split, "axis", 1);
  SetInt(split, "num_outputs", 3);
  g->add_output()->set_name("a");
  EXPECT_THAT(Import(model), StatusIs(absl::StatusCode::kUnimplemented,
                                      HasSubstr("node 'split' (Split): attribute 'num_outputs' is not supported")));
  model.mutable_opset_import(0)->set_version(18);
  EXPECT_THAT(Import(model), StatusIs(absl::StatusCode::kInvalidArgument,
                                      HasSubstr("node 'split' (Split): num_outputs 3 but the node has 2 outputs")));
  // The `split` attribute became input 1 at opset 13.
  split->clear_attribute();
  SetInt(split, "axis", 1);
  SetInts(split, "split", {2, 4});
  EXPECT_THAT(Import(model), StatusIs(absl::StatusCode::kInvalidArgument,
                                      HasSubstr("node 'split' (Split): attribute 'split' is not part of Split at "
                                                "opset 18 (from opset 13 the sizes are input 1)")));
  model.mutable_opset_import(0)->set_version(11);
  EXPECT_THAT(Import(model), IsOk());
}

TEST(OnnxImporterTest, PadAxesInputAtOpset18PadsOnlyTheListedAxes) {
  onnx::ModelProto model = ModelWithInput(18, {2, 3, 4});
  onnx::GraphProto* g = model.mutable_graph();
  AddInt64Initializer(g, "pads", {4}, {1, 2, 0, 3});  // H: 1 before, 0 after; W: 2 before, 3 after
  AddInt64Initializer(g, "axes", {2}, {-2, 3});
  AddNode(g, "Pad", {"x", "pads", "", "axes"}, {"y"}, "pad");
  g->add_output()->set_name("y");
  CONVOY_ASSERT_OK_AND_ASSIGN(runtime::Graph graph, Import(model));
  ASSERT_EQ(graph.nodes().size(), 1u);
  EXPECT_EQ(graph.nodes()[0].As<runtime::PadAttrs>().pads, (std::vector<int64_t>{0, 0, 1, 2, 0, 0, 0, 3}));
  EXPECT_EQ(*graph.ShapeOf("y"), (runtime::Shape{runtime::kBatch, 2, 4, 9}));
  // pads must have two entries per listed axis.
  AddInt64Initializer(g, "short_pads", {2}, {1, 1});
  g->mutable_node(0)->set_input(1, "short_pads");
  EXPECT_THAT(Import(model), StatusIs(absl::StatusCode::kInvalidArgument,
                                      HasSubstr("node 'pad' (Pad): pads has 2 entries for 2 axes (expected 4)")));
}

TEST(OnnxImporterTest, PadWrapModeAtOpset19FailsNamingModeAndOpset) {
  onnx::ModelProto model = ModelWithInput(19, {2, 3, 4});
  onnx::GraphProto* g = model.mutable_graph();
  AddInt64Initializer(g, "pads", {8}, {0, 0, 1, 1, 0, 0, 1, 1});
  SetString(AddNode(g, "Pad", {"x", "pads"}, {"y"}, "pad"), "mode", "wrap");
  g->add_output()->set_name("y");
  EXPECT_THAT(Import(model), StatusIs(absl::StatusCode::kUnimplemented,
                                      HasSubstr("node 'pad' (Pad): attribute 'mode' value 'wrap' (opset 19) is not "
                                                "supported")));
}

TEST(OnnxImporterTest, AveragePoolDilationsFromOpset19) {
  onnx::ModelProto model = ModelWithInput(19, {2, 7, 7});
  onnx::GraphProto* g = model.mutable_graph();
  auto* pool = AddNode(g, "AveragePool", {"x"}, {"y"}, "pool");
  SetInts(pool, "kernel_shape", {2, 2});
  SetInts(pool, "dilations", {2, 2});
  g->add_output()->set_name("y");
  CONVOY_ASSERT_OK_AND_ASSIGN(runtime::Graph graph, Import(model));
  EXPECT_EQ(*graph.ShapeOf("y"), (runtime::Shape{runtime::kBatch, 2, 5, 5}));
  const runtime::Tensor x = RandomTensor({1, 2, 7, 7});
  auto out = RunOn(graph, x);
  ASSERT_EQ(out.count("y"), 1u);
  // y[0,1,3,4] averages x[0,1,{3,5},{4,6}].
  const float* plane = x.data.data() + 49;
  EXPECT_NEAR(out.at("y").data[25 + 3 * 5 + 4], (plane[3 * 7 + 4] + plane[3 * 7 + 6] + plane[5 * 7 + 4] +
                                                 plane[5 * 7 + 6]) / 4, 1e-6);
  model.mutable_opset_import(0)->set_version(18);
  EXPECT_THAT(Import(model), StatusIs(absl::StatusCode::kUnimplemented,
                                      HasSubstr("node 'pool' (AveragePool): attribute 'dilations' is not supported")));
}

TEST(OnnxImporterTest, SqueezeAndUnsqueezeAxesInputsAtOpset21) {
  onnx::ModelProto model = ModelWithInput(21, {3, 1, 5});
  onnx::GraphProto* g = model.mutable_graph();
  AddInt64Initializer(g, "two", {1}, {2});
  AddInt64Initializer(g, "last", {1}, {-1});
  AddNode(g, "Squeeze", {"x", "two"}, {"s"}, "squeeze");
  AddNode(g, "Unsqueeze", {"s", "last"}, {"y"}, "unsqueeze");
  g->add_output()->set_name("y");
  CONVOY_ASSERT_OK_AND_ASSIGN(runtime::Graph graph, Import(model));
  EXPECT_EQ(*graph.ShapeOf("y"), (runtime::Shape{runtime::kBatch, 3, 5, 1}));
  // Axes as an attribute at opset 13 and later are refused naming the opset.
  SetInts(g->mutable_node(0), "axes", {2});
  g->mutable_node(0)->mutable_input()->RemoveLast();
  EXPECT_THAT(Import(model), StatusIs(absl::StatusCode::kInvalidArgument,
                                      HasSubstr("node 'squeeze' (Squeeze): attribute 'axes' is not part of Squeeze at "
                                                "opset 21")));
}

TEST(OnnxImporterTest, ReshapeAllowzeroWithoutZerosIsAPlainReshape) {
  onnx::ModelProto model = ModelWithInput(21, {3, 4});
  onnx::GraphProto* g = model.mutable_graph();
  AddInt64Initializer(g, "shape", {3}, {-1, 2, 6});
  SetInt(AddNode(g, "Reshape", {"x", "shape"}, {"y"}, "reshape"), "allowzero", 1);
  g->add_output()->set_name("y");
  CONVOY_ASSERT_OK_AND_ASSIGN(runtime::Graph graph, Import(model));
  AddInt64Initializer(g, "zero_shape", {3}, {0, 2, 6});
  g->mutable_node(0)->set_input(1, "zero_shape");
  EXPECT_THAT(Import(model), StatusIs(absl::StatusCode::kUnimplemented,
                                      HasSubstr("node 'reshape' (Reshape): attribute 'allowzero' 1 with a 0 in shape "
                                                "[0,2,6]")));
}


// LayerNormalization over the last axis of [N,6,5] with a Scale of shape [1,5] (broadcast to the normalized shape)
// and the optional Mean output named, InvStdDev not: every output against the definition computed here, the named
// statistic the row's mean; the op before opset 17 and a Scale that does not broadcast are refused naming node and
// tensor.
TEST(OnnxImporterTest, LayerNormalizationBroadcastsScaleAndWritesTheNamedStatistics) {
  onnx::ModelProto model = ModelWithInput(17, {6, 5});
  onnx::GraphProto* g = model.mutable_graph();
  AddFloatInitializer(g, "scale", {1, 5}, 0.25f);
  auto* ln = AddNode(g, "LayerNormalization", {"x", "scale"}, {"y", "mean"}, "ln");
  SetInt(ln, "axis", -1);
  g->add_output()->set_name("y");
  g->add_output()->set_name("mean");
  CONVOY_ASSERT_OK_AND_ASSIGN(runtime::Graph graph, Import(model));
  EXPECT_EQ(*graph.ShapeOf("mean"), (runtime::Shape{runtime::kBatch, 6, 1}));
  const runtime::Tensor x = RandomTensor({2, 6, 5});
  auto out = RunOn(graph, x);
  ASSERT_EQ(out.count("y"), 1u);
  ASSERT_EQ(out.count("mean"), 1u);
  float scale[5];  // AddFloatInitializer's values
  for (int i = 0; i < 5; ++i) scale[i] = 0.25f * static_cast<float>((i * 7919) % 13 - 6);
  for (int row = 0; row < 12; ++row) {
    double mean = 0, var = 0;
    for (int i = 0; i < 5; ++i) mean += x.data[row * 5 + i] / 5.0;
    for (int i = 0; i < 5; ++i) var += (x.data[row * 5 + i] - mean) * (x.data[row * 5 + i] - mean) / 5.0;
    EXPECT_NEAR(out.at("mean").data[row], mean, 1e-6) << row;
    for (int i = 0; i < 5; ++i) {
      EXPECT_NEAR(out.at("y").data[row * 5 + i], (x.data[row * 5 + i] - mean) / std::sqrt(var + 1e-5) * scale[i],
                  1e-5) << row << "," << i;
    }
  }
  model.mutable_opset_import(0)->set_version(16);
  EXPECT_THAT(Import(model), StatusIs(absl::StatusCode::kUnimplemented,
                                      HasSubstr("node 'ln' (LayerNormalization): LayerNormalization is not part of "
                                                "ONNX opset 16 (it appears at opset 17)")));
  model.mutable_opset_import(0)->set_version(17);
  AddFloatInitializer(g, "wide_scale", {6, 4}, 1.0f);
  g->mutable_node(0)->set_input(1, "wide_scale");
  EXPECT_THAT(Import(model), StatusIs(absl::StatusCode::kInvalidArgument,
                                      HasSubstr("input 1 ('wide_scale', the Scale) has shape [6,4], which does not "
                                                "broadcast to the normalized shape [5]")));
}

// ConvTranspose: the output extent from strides, output_padding and pads; output_shape with SAME_UPPER; a 1-D
// transposed convolution refused naming the node and the shapes.
TEST(OnnxImporterTest, ConvTransposeResolvesTheOutputExtentTakesOneDAndRefusesThreeD) {
  onnx::ModelProto model = ModelWithInput(11, {2, 3, 4});
  onnx::GraphProto* g = model.mutable_graph();
  AddFloatInitializer(g, "w", {2, 3, 3, 3}, 0.1f);
  auto* up = AddNode(g, "ConvTranspose", {"x", "w"}, {"y"}, "up");
  SetInts(up, "strides", {3, 2});
  SetInts(up, "output_padding", {1, 1});
  SetInts(up, "pads", {1, 0, 0, 1});
  g->add_output()->set_name("y");
  CONVOY_ASSERT_OK_AND_ASSIGN(runtime::Graph graph, Import(model));
  // H: 3 * (3 - 1) + 1 + 3 - 1 - 0 = 9; W: 2 * (4 - 1) + 1 + 3 - 0 - 1 = 9.
  EXPECT_EQ(*graph.ShapeOf("y"), (runtime::Shape{runtime::kBatch, 3, 9, 9}));
  g->mutable_node(0)->clear_attribute();
  SetInts(g->mutable_node(0), "strides", {2, 2});
  SetString(g->mutable_node(0), "auto_pad", "SAME_UPPER");
  CONVOY_ASSERT_OK_AND_ASSIGN(graph, Import(model));
  EXPECT_EQ(*graph.ShapeOf("y"), (runtime::Shape{runtime::kBatch, 3, 6, 8}));  // in * stride
  // 1-D: as 2-D with H = 1 between Reshapes; stride 2, pads 1/0: 2 * (7 - 1) + 3 - 1 = 14.
  onnx::ModelProto one_d = ModelWithInput(11, {2, 7});
  g = one_d.mutable_graph();
  AddFloatInitializer(g, "w", {2, 3, 3}, 0.1f);
  up = AddNode(g, "ConvTranspose", {"x", "w"}, {"y"}, "up");
  SetInts(up, "strides", {2});
  SetInts(up, "pads", {1, 0});
  g->add_output()->set_name("y");
  CONVOY_ASSERT_OK_AND_ASSIGN(graph, Import(one_d));
  EXPECT_EQ(*graph.ShapeOf("y"), (runtime::Shape{runtime::kBatch, 3, 14}));
  SetInts(up, "output_padding", {1, 1});
  EXPECT_THAT(Import(one_d), StatusIs(absl::StatusCode::kInvalidArgument,
                                      HasSubstr("node 'up' (ConvTranspose): attribute 'output_padding' has 2 entries; "
                                                "a 1-D transposed convolution takes 1")));
  onnx::ModelProto three_d = ModelWithInput(11, {2, 4, 4, 4});
  g = three_d.mutable_graph();
  AddFloatInitializer(g, "w", {2, 3, 3, 3, 3}, 0.1f);
  AddNode(g, "ConvTranspose", {"x", "w"}, {"y"}, "up");
  g->add_output()->set_name("y");
  EXPECT_THAT(Import(three_d), StatusIs(absl::StatusCode::kUnimplemented,
                                        HasSubstr("node 'up' (ConvTranspose): only 2-D transposed convolution is "
                                                  "supported")));
}


// Before opset 7 Dropout (and BatchNormalization) run in training mode unless is_test is 1: refused naming the node.
TEST(OnnxImporterTest, DropoutBeforeOpset7NeedsIsTest) {
  onnx::ModelProto model = ModelWithInput(6, {4});
  onnx::GraphProto* g = model.mutable_graph();
  AddNode(g, "Dropout", {"x"}, {"y"}, "drop");
  g->add_output()->set_name("y");
  EXPECT_THAT(Import(model), StatusIs(absl::StatusCode::kUnimplemented,
                                      HasSubstr("node 'drop' (Dropout): training mode at opset 6 (attribute 'is_test' "
                                                "absent, default 0")));
  SetInt(g->mutable_node(0), "is_test", 1);
  EXPECT_THAT(Import(model), IsOk());
}

// ---- N-D MatMul, means over any axes, 1-D and 3-D windows -----------------------------------------------------

TEST(OnnxImporterTest, MatMulOfAnNdTensorByA2dWeight) {
  onnx::ModelProto model = ModelWithInput(13, {5, 6, 8});
  onnx::GraphProto* g = model.mutable_graph();
  AddFloatInitializer(g, "w", {8, 3}, 0.1f);
  AddNode(g, "MatMul", {"x", "w"}, {"y"}, "fc");
  g->add_output()->set_name("y");
  CONVOY_ASSERT_OK_AND_ASSIGN(runtime::Graph graph, Import(model));
  EXPECT_EQ(*graph.ShapeOf("y"), (runtime::Shape{runtime::kBatch, 5, 6, 3}));
  // A batched B that is not A's leading dims: refused, naming both shapes.
  g->mutable_initializer(0)->clear_dims();
  for (int64_t d : {2, 8, 3}) g->mutable_initializer(0)->add_dims(d);
  g->mutable_initializer(0)->clear_float_data();
  for (int i = 0; i < 48; ++i) g->mutable_initializer(0)->add_float_data(0.5f);
  EXPECT_THAT(Import(model), StatusIs(absl::StatusCode::kUnimplemented,
                                      HasSubstr("node 'fc' (MatMul): MatMul of [N,5,6,8] by [2,8,3] is not supported")));
}

TEST(OnnxImporterTest, ReduceMeanOverOtherAxesIsAProductWithAColumnOfMeans) {
  onnx::ModelProto model = ModelWithInput(13, {4, 5, 6});
  onnx::GraphProto* g = model.mutable_graph();
  SetInts(AddNode(g, "ReduceMean", {"x"}, {"y"}, "mean"), "axes", {1, 3});
  SetInt(g->mutable_node(0), "keepdims", 0);
  g->add_output()->set_name("y");
  CONVOY_ASSERT_OK_AND_ASSIGN(runtime::Graph graph, Import(model));
  EXPECT_EQ(*graph.ShapeOf("y"), (runtime::Shape{runtime::kBatch, 5}));
  std::vector<runtime::OpKind> ops;
  for (const runtime::Node& n : graph.nodes()) ops.push_back(n.op());
  EXPECT_EQ(ops, (std::vector<runtime::OpKind>{runtime::OpKind::kTranspose, runtime::OpKind::kReshape,
                                                runtime::OpKind::kGemm, runtime::OpKind::kReshape}));
  const runtime::Tensor x = RandomTensor({2, 4, 5, 6});
  CONVOY_ASSERT_OK_AND_ASSIGN(auto outputs, runtime::RunReference(graph, {{"x", x}}));
  const runtime::Tensor& y = outputs.at("y");
  for (int64_t n = 0; n < 2; ++n) {
    for (int64_t h = 0; h < 5; ++h) {
      double sum = 0;
      for (int64_t c = 0; c < 4; ++c) {
        for (int64_t w = 0; w < 6; ++w) sum += x.data[((n * 4 + c) * 5 + h) * 6 + w];
      }
      EXPECT_NEAR(y.data[n * 5 + h], sum / 24, 1e-6) << n << "," << h;
    }
  }
}

TEST(OnnxImporterTest, OneDimensionalAndThreeDimensionalPoolingBecome2d) {
  onnx::ModelProto model = ModelWithInput(13, {3, 10});
  onnx::GraphProto* g = model.mutable_graph();
  auto* pool = AddNode(g, "MaxPool", {"x"}, {"y"}, "pool");
  SetInts(pool, "kernel_shape", {3});
  SetInts(pool, "strides", {2});
  SetInts(pool, "pads", {1, 1});
  g->add_output()->set_name("y");
  CONVOY_ASSERT_OK_AND_ASSIGN(runtime::Graph graph, Import(model));
  EXPECT_EQ(*graph.ShapeOf("y"), (runtime::Shape{runtime::kBatch, 3, 5}));
  // 3-D: two 2-D poolings; a wrong attribute length names the node and the input's shape.
  onnx::ModelProto model3 = ModelWithInput(13, {2, 4, 6, 6});
  g = model3.mutable_graph();
  pool = AddNode(g, "AveragePool", {"x"}, {"y"}, "pool3");
  SetInts(pool, "kernel_shape", {2, 3, 3});
  SetInts(pool, "strides", {2, 1, 2});
  g->add_output()->set_name("y");
  CONVOY_ASSERT_OK_AND_ASSIGN(graph, Import(model3));
  EXPECT_EQ(*graph.ShapeOf("y"), (runtime::Shape{runtime::kBatch, 2, 2, 4, 2}));
  int pools = 0;
  for (const runtime::Node& n : graph.nodes()) pools += n.op() == runtime::OpKind::kPool2d;
  EXPECT_EQ(pools, 2);
  SetInts(pool, "pads", {0, 0});
  EXPECT_THAT(Import(model3), StatusIs(absl::StatusCode::kInvalidArgument,
                                       HasSubstr("node 'pool3' (AveragePool): attribute 'pads' has 2 entries for the "
                                                 "3 spatial axes of input 'x' [N,2,4,6,6]")));
}

}  // namespace
}  // namespace convoy::repository
