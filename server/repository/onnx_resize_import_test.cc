// ImportResizeAttrs: the output extents, scales and resized lengths each opset's form gives (scales, sizes, axes,
// keep_aspect_ratio_policy, Resize-10 and Upsample's fixed rules), and the refusals naming node, opset and attribute.
// The numbers against onnxruntime: tests/python/test_onnx_resize.py; ONNX's own cases: test_onnx_conformance.py.
#include "server/repository/onnx_resize_import.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"

namespace convoy::repository {
namespace {

using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;
using runtime::kBatch;
using runtime::ResizeAttrs;

struct Node {
  onnx::NodeProto proto;
  Node(const char* op, std::initializer_list<std::pair<const char*, std::string>> strings = {}) {
    proto.set_name("up");
    proto.set_op_type(op);
    for (const auto& [name, value] : strings) {
      auto* attr = proto.add_attribute();
      attr->set_name(name);
      attr->set_type(onnx::AttributeProto::STRING);
      attr->set_s(value);
    }
  }
  Node& Ints(const char* name, std::vector<int64_t> values) {
    auto* attr = proto.add_attribute();
    attr->set_name(name);
    attr->set_type(onnx::AttributeProto::INTS);
    for (int64_t v : values) attr->add_ints(v);
    return *this;
  }
  Node& Int(const char* name, int64_t value) {
    auto* attr = proto.add_attribute();
    attr->set_name(name);
    attr->set_type(onnx::AttributeProto::INT);
    attr->set_i(value);
    return *this;
  }
  absl::StatusOr<ResizeAttrs> Import(int64_t opset, runtime::Shape x, const OnnxResizeInputs& inputs) const {
    OnnxAttributes a(proto, absl::StrCat("m.onnx: node 'up' (", proto.op_type(), ")"));
    return ImportResizeAttrs(proto, a, opset, x, inputs);
  }
};

KnownValue Floats(std::vector<float> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return KnownValue::Float({n}, std::move(v));
}
KnownValue Ints(std::vector<int64_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return KnownValue::Int64({n}, std::move(v));
}

TEST(OnnxResizeImportTest, ScalesGiveFlooredExtentsAndFractionalLengths) {
  const KnownValue scales = Floats({1.0f, 1.0f, 1.7f, 0.45f});
  CONVOY_ASSERT_OK_AND_ASSIGN(ResizeAttrs r, Node("Resize", {{"mode", "linear"}}).Import(13, {kBatch, 3, 7, 9},
                                                                                          {nullptr, &scales, nullptr}));
  EXPECT_EQ(r.mode, runtime::ResizeMode::kLinear);
  EXPECT_EQ(r.coordinates, runtime::ResizeCoordinates::kHalfPixel);
  EXPECT_EQ(r.out_h, 11);  // floor(7 * 1.7 = 11.9)
  EXPECT_EQ(r.out_w, 4);   // floor(9 * 0.45 = 4.05)
  EXPECT_FLOAT_EQ(r.scale_h, 1.7f);
  EXPECT_FLOAT_EQ(r.length_h, 7 * 1.7f);
  EXPECT_FLOAT_EQ(r.length_w, 9 * 0.45f);
}

TEST(OnnxResizeImportTest, SizesGiveExactLengthsAndTheSymbolicBatchPasses) {
  const KnownValue sizes = Ints({kSymbolicBatchValue, 3, 5, 20});
  CONVOY_ASSERT_OK_AND_ASSIGN(ResizeAttrs r, Node("Resize", {{"nearest_mode", "ceil"}})
                                                 .Import(11, {kBatch, 3, 7, 9}, {nullptr, nullptr, &sizes}));
  EXPECT_EQ(r.nearest, runtime::ResizeNearest::kCeil);
  EXPECT_EQ(r.out_h, 5);
  EXPECT_EQ(r.out_w, 20);
  EXPECT_FLOAT_EQ(r.scale_h, 5.0f / 7.0f);
  EXPECT_FLOAT_EQ(r.length_h, 5.0f);
  EXPECT_FLOAT_EQ(r.length_w, 20.0f);
}

TEST(OnnxResizeImportTest, AxesAndKeepAspectRatioPolicy) {
  const KnownValue sizes = Ints({10, 12});  // axes [3, 2]: W to 10, H to 12, of 6x9
  for (const auto& [policy, h, w, scale] :
       std::vector<std::tuple<const char*, int, int, float>>{{"stretch", 12, 10, 2.0f},
                                                            {"not_larger", 7, 10, 10.0f / 9},
                                                            {"not_smaller", 12, 18, 2.0f}}) {
    SCOPED_TRACE(policy);
    CONVOY_ASSERT_OK_AND_ASSIGN(
        ResizeAttrs r, Node("Resize", {{"keep_aspect_ratio_policy", policy}})
                           .Ints("axes", {3, -2})
                           .Import(18, {kBatch, 3, 6, 9}, {nullptr, nullptr, &sizes}));
    EXPECT_EQ(r.out_h, h);
    EXPECT_EQ(r.out_w, w);
    EXPECT_FLOAT_EQ(r.scale_h, scale);
    if (std::string(policy) != "stretch") {
      EXPECT_FLOAT_EQ(r.scale_w, scale);
    }
  }
}

TEST(OnnxResizeImportTest, Resize10AndUpsampleAreAsymmetricWithSimpleNearest) {
  const KnownValue scales = Floats({1.0f, 1.0f, 2.0f, 0.5f});
  for (const char* op : {"Resize", "Upsample"}) {
    SCOPED_TRACE(op);
    CONVOY_ASSERT_OK_AND_ASSIGN(ResizeAttrs r,
                                Node(op).Import(std::string(op) == "Resize" ? 10 : 9, {kBatch, 2, 4, 6},
                                                {nullptr, &scales, nullptr}));
    EXPECT_EQ(r.coordinates, runtime::ResizeCoordinates::kAsymmetric);
    EXPECT_EQ(r.nearest, runtime::ResizeNearest::kSimple);
    EXPECT_EQ(r.out_h, 8);
    EXPECT_EQ(r.out_w, 3);
  }
}

TEST(OnnxResizeImportTest, RefusalsNameNodeOpsetAndAttribute) {
  const KnownValue scales = Floats({1.0f, 1.0f, 2.0f, 2.0f});
  const KnownValue channel_scales = Floats({1.0f, 2.0f, 2.0f, 2.0f});
  const KnownValue sizes = Ints({4, 2, 8, 8});
  const OnnxResizeInputs by_scales{nullptr, &scales, nullptr};
  const runtime::Shape x = {kBatch, 2, 4, 4};
  EXPECT_THAT(Node("Resize").Int("antialias", 1).Import(13, x, by_scales),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("node 'up' (Resize): attribute 'antialias' is not part of Resize at opset 13 (it "
                                 "appears at opset 18)")));
  EXPECT_THAT(Node("Resize", {{"coordinate_transformation_mode", "half_pixel_symmetric"}}).Import(18, x, by_scales),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("attribute 'coordinate_transformation_mode' value 'half_pixel_symmetric' (opset 18) "
                                 "is not supported")));
  EXPECT_THAT(Node("Resize", {{"mode", "cubic"}}).Import(10, x, by_scales),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("attribute 'mode' value 'cubic' (opset 10) is not supported (nearest and linear are)")));
  EXPECT_THAT(Node("Resize").Import(13, x, {nullptr, &channel_scales, nullptr}),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("resizing axis 1 (the channels) of [N,2,4,4] to 4 (scale 2) is not supported")));
  EXPECT_THAT(Node("Resize").Import(13, x, {nullptr, nullptr, &sizes}),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("sizes resize the dynamic batch axis to 4; Convoy resizes H and W")));
  EXPECT_THAT(Node("Resize").Import(13, x, {nullptr, &scales, &sizes}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("both scales and sizes are given")));
  EXPECT_THAT(Node("Resize").Import(13, x, {}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("neither scales nor sizes is given")));
  EXPECT_THAT(Node("Upsample").Import(10, x, by_scales),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("Upsample is deprecated at opset 10")));
  EXPECT_THAT(Node("Resize", {{"coordinate_transformation_mode", "tf_crop_and_resize"}}).Import(13, x, by_scales),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("tf_crop_and_resize needs a constant float roi of 8 values, got none")));
}

}  // namespace
}  // namespace convoy::repository
