// The request decoder against hand-built signatures (every branch of DecodeInferRequest: datatype, shape, batch,
// element count, raw vs typed contents, duplicates, outputs, classification, parameters) and TopKClasses (Triton's
// "score:index:label" strings, highest first, NaN last, k clamped, labels optional). The same cases run against the
// real server in tests/python/test_server_bad_inputs.py.
#include "server/grpc/infer_codec.h"

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "server/imaging/image_resize.h"
#include "server/imaging/test_images.h"

namespace convoy::grpc_server {
namespace {

using ::convoy::testing::IsOk;
using ::convoy::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using inference::ModelInferRequest;
using infer::BytesWireForm;

// images [-1,3,4,4] FP32 -> probabilities [-1,10] FP32, max batch 8; a second model has two inputs a, b [-1,2] and
// a UINT8 input.
runtime::ModelSignature ImageModel() {
  return {"cnn", 8, {{"images", DataType::kFloat32, {-1, 3, 4, 4}}}, {{"probabilities", DataType::kFloat32, {-1, 10}}}};
}
runtime::ModelSignature TwoInputModel() {
  return {"pair",
          4,
          {{"a", DataType::kFloat32, {-1, 2}}, {"b", DataType::kFloat32, {-1, 2}}, {"u", DataType::kUInt8, {-1, 2}}},
          {{"sum", DataType::kFloat32, {-1, 2}}}};
}

void AddRaw(ModelInferRequest& r, const std::string& name, const std::string& dtype, std::vector<int64_t> shape,
            size_t bytes) {
  auto* in = r.add_inputs();
  in->set_name(name);
  in->set_datatype(dtype);
  for (int64_t d : shape) in->add_shape(d);
  r.add_raw_input_contents(std::string(bytes, '\1'));
}

ModelInferRequest ImageRequest(int64_t batch = 1) {
  ModelInferRequest r;
  r.set_model_name("cnn");
  AddRaw(r, "images", "FP32", {batch, 3, 4, 4}, static_cast<size_t>(batch) * 48 * 4);
  return r;
}

// Typed request for the pair model: batch 1 for a and b (fp32_contents), u (uint_contents).
ModelInferRequest TypedPair(int64_t batch_b = 1) {
  ModelInferRequest r;
  auto add = [&](const char* name, const char* dtype, int64_t batch) {
    auto* in = r.add_inputs();
    in->set_name(name);
    in->set_datatype(dtype);
    in->add_shape(batch);
    in->add_shape(2);
    for (int64_t i = 0; i < batch * 2; ++i) {
      if (std::strcmp(dtype, "UINT8") == 0) {
        in->mutable_contents()->add_uint_contents(static_cast<uint32_t>(200 + i));
      } else {
        in->mutable_contents()->add_fp32_contents(0.5f * static_cast<float>(i));
      }
    }
  };
  add("a", "FP32", 1);
  add("b", "FP32", batch_b);
  add("u", "UINT8", 1);
  return r;
}

TEST(DecodeInferRequestTest, ValidRawAndTypedRequestsDecode) {
  absl::StatusOr<DecodedRequest> raw = DecodeInferRequest(ImageRequest(3), ImageModel());
  ASSERT_THAT(raw, IsOk());
  EXPECT_EQ(raw->spec.batch_size, 3);
  ASSERT_EQ(raw->payload->inputs.size(), 1u);
  EXPECT_EQ(raw->payload->inputs[0].size(), 3u * 48 * 4);
  ASSERT_EQ(raw->outputs.size(), 1u);
  absl::StatusOr<DecodedRequest> typed = DecodeInferRequest(TypedPair(), TwoInputModel());
  ASSERT_THAT(typed, IsOk());
  EXPECT_EQ(typed->payload->inputs[1].as<float>()[1], 0.5f);
  EXPECT_EQ(typed->payload->inputs[2].as<uint8_t>()[1], 201);
}

struct BadCase {
  std::string what;
  ModelInferRequest request;
  std::string message;
};

std::vector<BadCase> BadImageRequests() {
  std::vector<BadCase> cases;
  auto with = [&](std::string what, std::string message, auto edit) {
    BadCase c{std::move(what), ImageRequest(), std::move(message)};
    edit(c.request);
    cases.push_back(std::move(c));
  };
  with("datatype", "input 'images': expected datatype FP32, got 'FP16'",
       [](auto& r) { r.mutable_inputs(0)->set_datatype("FP16"); });
  with("BYTES", "input 'images': expected datatype FP32, got 'BYTES'",
       [](auto& r) { r.mutable_inputs(0)->set_datatype("BYTES"); });
  with("junk datatype", "expected datatype FP32, got '\\xff\\x00x'",
       [](auto& r) { r.mutable_inputs(0)->set_datatype(std::string("\xff\0x", 3)); });
  with("long datatype", "got 'FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF...' (100000 bytes)",
       [](auto& r) { r.mutable_inputs(0)->set_datatype(std::string(100000, 'F')); });
  with("too many dims", "input 'images': expected shape [-1,3,4,4], got [1,3,4,4,1]",
       [](auto& r) { r.mutable_inputs(0)->add_shape(1); });
  with("thousands of dims", "got [1,3,4,4,1,1,1,1,1,1,1,1,1,1,1,1,...(5000 dims)]", [](auto& r) {
    for (int i = 0; i < 4996; ++i) r.mutable_inputs(0)->add_shape(1);
  });
  with("empty shape", "input 'images': expected shape [-1,3,4,4], got []",
       [](auto& r) { r.mutable_inputs(0)->clear_shape(); });
  with("overflowing shape", "input 'images': expected shape [-1,3,4,4], got [1,4294967296,4294967296,4]", [](auto& r) {
    r.mutable_inputs(0)->set_shape(1, int64_t{1} << 32);
    r.mutable_inputs(0)->set_shape(2, int64_t{1} << 32);
  });
  with("huge batch", "input 'images': batch size 9223372036854775807 is outside 1..8",
       [](auto& r) { r.mutable_inputs(0)->set_shape(0, INT64_MAX); });
  with("negative batch", "input 'images': batch size -1 is outside 1..8",
       [](auto& r) { r.mutable_inputs(0)->set_shape(0, -1); });
  with("huge shape tiny data", "input 'images': expected 1536 bytes for shape [8,3,4,4] FP32, got 192",
       [](auto& r) { r.mutable_inputs(0)->set_shape(0, 8); });
  with("raw and typed", "input 'images': both raw_input_contents and contents.fp32_contents (1 values) are set",
       [](auto& r) { r.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1); });
  with("raw count", "the request has 1 inputs and 2 raw_input_contents",
       [](auto& r) { r.add_raw_input_contents("x"); });
  with("same input twice", "input 'images' is given twice (request inputs 0 and 1)", [](auto& r) {
    *r.add_inputs() = r.inputs(0);
    r.add_raw_input_contents(r.raw_input_contents(0));
  });
  with("unknown input", "unexpected input 'nope': model 'cnn' has inputs ['images']",
       [](auto& r) { r.mutable_inputs(0)->set_name("nope"); });
  with("missing input", "missing input 'images' of model 'cnn' (expected [-1,3,4,4] FP32)", [](auto& r) {
    r.clear_inputs();
    r.clear_raw_input_contents();
  });
  with("no data", "input 'images': no data: expected 192 bytes in raw_input_contents or 48 values in "
       "contents.fp32_contents", [](auto& r) { r.clear_raw_input_contents(); });
  with("typed count", "input 'images': expected 48 values in contents.fp32_contents for shape [1,3,4,4], got 47",
       [](auto& r) {
         r.clear_raw_input_contents();
         for (int i = 0; i < 47; ++i) r.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1);
       });
  with("typed wrong field", "input 'images': FP32 values go in contents.fp32_contents, got contents.int64_contents "
       "(48 values)", [](auto& r) {
         r.clear_raw_input_contents();
         for (int i = 0; i < 48; ++i) r.mutable_inputs(0)->mutable_contents()->add_int64_contents(1);
       });
  with("unknown output", "unexpected output 'nope': model 'cnn' has outputs ['probabilities']",
       [](auto& r) { r.add_outputs()->set_name("nope"); });
  with("output twice", "output 'probabilities' is requested twice", [](auto& r) {
    r.add_outputs()->set_name("probabilities");
    r.add_outputs()->set_name("probabilities");
  });
  auto classification = [&](std::string what, std::string message, auto set) {
    with(std::move(what), std::move(message), [set](auto& r) {
      auto* out = r.add_outputs();
      out->set_name("probabilities");
      set((*out->mutable_parameters())["classification"]);
    });
  };
  const std::string cls = "output 'probabilities': parameter 'classification' (the 10 classes of [-1,10]): ";
  classification("classification 0", cls + "expected 1..10, got int64_param 0", [](auto& p) { p.set_int64_param(0); });
  classification("classification -3", cls + "expected 1..10, got int64_param -3",
                 [](auto& p) { p.set_int64_param(-3); });
  classification("classification 11", cls + "expected 1..10, got uint64_param 11",
                 [](auto& p) { p.set_uint64_param(11); });
  classification("classification string", cls + "expected an integer (int64_param or uint64_param), got string_param "
                 "'3'", [](auto& p) { p.set_string_param("3"); });
  auto parameter = [&](std::string what, std::string name, std::string message, auto set) {
    with(std::move(what), std::move(message), [name, set](auto& r) { set((*r.mutable_parameters())[name]); });
  };
  parameter("priority string", "priority",
            "parameter 'priority': expected an integer (int64_param or uint64_param), got string_param 'high'",
            [](auto& p) { p.set_string_param("high"); });
  parameter("priority negative", "priority", "parameter 'priority': expected >= 0, got int64_param -1",
            [](auto& p) { p.set_int64_param(-1); });
  parameter("priority bool", "priority", "got bool_param true", [](auto& p) { p.set_bool_param(true); });
  parameter("timeout double", "timeout",
            "parameter 'timeout' (microseconds): expected an integer (int64_param or uint64_param), got double_param "
            "1.5", [](auto& p) { p.set_double_param(1.5); });
  parameter("timeout negative", "timeout", "parameter 'timeout' (microseconds): expected >= 0, got int64_param -5",
            [](auto& p) { p.set_int64_param(-5); });
  return cases;
}

TEST(DecodeInferRequestTest, BadRequestsNameTheFieldWithExpectedAndActual) {
  for (const BadCase& c : BadImageRequests()) {
    EXPECT_THAT(DecodeInferRequest(c.request, ImageModel()),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)))
        << c.what;
  }
}

TEST(DecodeInferRequestTest, BadTypedAndMultiInputRequests) {
  const runtime::ModelSignature pair = TwoInputModel();
  EXPECT_THAT(DecodeInferRequest(TypedPair(2), pair),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("input 'b': batch size 2 differs from input 'a' (batch size 1)")));
  ModelInferRequest above = TypedPair();
  above.mutable_inputs(2)->mutable_contents()->set_uint_contents(1, 256);
  EXPECT_THAT(DecodeInferRequest(above, pair),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("input 'u': contents.uint_contents[1] is 256, expected 0..255 for UINT8")));
  ModelInferRequest two_fields = TypedPair();
  two_fields.mutable_inputs(0)->mutable_contents()->add_int_contents(1);
  EXPECT_THAT(DecodeInferRequest(two_fields, pair),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("input 'a': FP32 values go in contents.fp32_contents, got contents.int_contents "
                                 "(1 values), contents.fp32_contents (2 values)")));
  const runtime::ModelSignature half{"half", 0, {{"x", DataType::kFloat16, {2}}}, {{"y", DataType::kFloat16, {2}}}};
  ModelInferRequest fp16;
  auto* in = fp16.add_inputs();
  in->set_name("x");
  in->set_datatype("FP16");
  in->add_shape(2);
  in->mutable_contents()->add_fp32_contents(1);
  in->mutable_contents()->add_fp32_contents(2);
  EXPECT_THAT(DecodeInferRequest(fp16, half),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("input 'x': expected 4 bytes in raw_input_contents (typed contents cannot carry "
                                 "FP16), got contents.fp32_contents (2 values)")));
  // A model without batching takes its dims as they are: no batch dimension.
  in->mutable_contents()->Clear();
  fp16.add_raw_input_contents(std::string(4, '\0'));
  ASSERT_THAT(DecodeInferRequest(fp16, half), IsOk());
  EXPECT_EQ(DecodeInferRequest(fp16, half)->spec.batch_size, 1);
}

TEST(DecodeInferRequestTest, ParametersAndClassificationWithinRangeDecode) {
  ModelInferRequest r = ImageRequest();
  (*r.mutable_parameters())["priority"].set_uint64_param(2);
  (*r.mutable_parameters())["timeout"].set_int64_param(1500);
  (*r.mutable_parameters())["binary_data_output"].set_bool_param(true);  // not ours: ignored
  auto* out = r.add_outputs();
  out->set_name("probabilities");
  (*out->mutable_parameters())["classification"].set_int64_param(10);
  absl::StatusOr<DecodedRequest> decoded = DecodeInferRequest(r, ImageModel());
  ASSERT_THAT(decoded, IsOk());
  EXPECT_EQ(decoded->spec.priority, 2u);
  EXPECT_EQ(decoded->spec.timeout, absl::Microseconds(1500));
  ASSERT_EQ(decoded->outputs.size(), 1u);
  EXPECT_EQ(decoded->outputs[0].classification, 10);
}

// Photos for an encoded_image input in contents.bytes_contents (one per batch item) decode like raw BYTES: the
// payload holds each photo cropped and resized to the input's [H, W, 3] pixels, in batch order.
TEST(DecodeInferRequestTest, PhotosInBytesContentsDecodeIntoThePixels) {
  runtime::ModelSignature model{"photos", 4, {{"images", DataType::kUInt8, {-1, 6, 8, 3}}},
                                {{"probabilities", DataType::kFloat32, {-1, 10}}}};
  model.inputs[0].encoded_image = repository::EncodedImageConfig{};
  imaging::RgbImage first = imaging::testing::RandomImage(30, 40, 1), second = imaging::testing::RandomImage(45, 20, 2);
  const std::string pngs[] = {imaging::testing::EncodePng(first, imaging::testing::PngKind::kRgb),
                              imaging::testing::EncodePng(second, imaging::testing::PngKind::kRgb)};
  ModelInferRequest r;
  r.set_model_name("photos");
  auto* in = r.add_inputs();
  in->set_name("images");
  in->set_datatype("BYTES");
  in->add_shape(2);
  for (const std::string& png : pngs) in->mutable_contents()->add_bytes_contents(png);
  absl::StatusOr<infer::DecodedRequest> decoded = DecodeInferRequest(r, model);
  ASSERT_THAT(decoded.status(), IsOk());
  EXPECT_EQ(decoded->spec.batch_size, 2);
  ASSERT_EQ(decoded->payload->inputs[0].size(), 2u * 6 * 8 * 3);
  for (int i = 0; i < 2; ++i) {
    std::vector<uint8_t> expected(6 * 8 * 3);
    ASSERT_THAT(imaging::CenterCropAndResize(i == 0 ? first : second, 6, 8, 0.875, expected.data()), IsOk());
    const uint8_t* item = decoded->payload->inputs[0].as<uint8_t>() + i * expected.size();
    EXPECT_EQ(std::memcmp(item, expected.data(), expected.size()), 0) << "batch item " << i;
  }
  // A third photo for a [2] shape is a count error naming both numbers.
  in->mutable_contents()->add_bytes_contents(pngs[0]);
  EXPECT_THAT(DecodeInferRequest(r, model).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("input 'images': expected 2 BYTES elements for shape [2], got 3")));
}

// The response written straight from the output buffers is byte for byte the serialized ModelInferResponse, for
// random tensors (empty, small, and over 16 KiB, whose length takes a 3-byte varint) and classification outputs.
TEST(WriteInferResponseTest, BytesAreTheSerializedResponse) {
  std::mt19937 rng(std::random_device{}());
  for (int round = 0; round < 50; ++round) {
    std::vector<std::string> buffers;
    std::vector<infer::ResponseTensor> tensors(rng() % 4);
    buffers.reserve(tensors.size());
    inference::ModelInferResponse expected;
    expected.set_model_name("resnet");
    expected.set_model_version("3");
    expected.set_id(round % 2 ? "" : "request-7");
    for (size_t i = 0; i < tensors.size(); ++i) {
      infer::ResponseTensor& t = tensors[i];
      t.name = "out" + std::to_string(i);
      t.datatype = "FP32";
      t.shape = {1, static_cast<int64_t>(rng() % 9000)};
      auto* out = expected.add_outputs();
      out->set_name(t.name);
      out->set_datatype(t.datatype);
      for (int64_t d : t.shape) out->add_shape(d);
      if (rng() % 4 == 0) {
        t.is_classification = true;
        t.classes = {"0.9:3:cat", "0.1:7:dog"};
        expected.add_raw_output_contents(BytesWireForm(t.classes));
      } else {
        std::string bytes(static_cast<size_t>(t.shape[1]) * 4, '\0');
        for (char& c : bytes) c = static_cast<char>(rng());
        buffers.push_back(std::move(bytes));
        t.data = buffers.back();
        expected.add_raw_output_contents(buffers.back());
      }
    }
    std::string written;
    CONVOY_ASSERT_OK(WriteInferResponse("resnet", 3, expected.id(), tensors, [&](size_t size) {
      written.assign(size, '\x5a');  // poisoned: every byte must be written
      return written.data();
    }));
    EXPECT_TRUE(written == expected.SerializeAsString()) << "round " << round << ": " << written.size() << " vs "
                                                         << expected.ByteSizeLong() << " bytes";
  }
  EXPECT_THAT(WriteInferResponse("m", 1, "", {}, [](size_t) { return nullptr; }),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("cannot allocate")));
}

TEST(TopKClassesTest, HighestFirstWithLabels) {
  EXPECT_THAT(TopKClasses({0.1f, 0.7f, 0.2f}, 2, {"cat", "dog", "fox"}),
              ElementsAre("0.700000:1:dog", "0.200000:2:fox"));
}

TEST(TopKClassesTest, WithoutLabelsOmitsTheLabel) {
  EXPECT_THAT(TopKClasses({3.0f, -1.0f}, 1, {}), ElementsAre("3.000000:0"));
}

TEST(TopKClassesTest, NanRanksLowestAndKIsClamped) {
  EXPECT_THAT(TopKClasses({NAN, 1.0f, INFINITY}, 10, {}), ElementsAre("inf:2", "1.000000:1", "nan:0"));
}

TEST(TopKClassesTest, TiesKeepIndexOrder) {
  EXPECT_THAT(TopKClasses({1.0f, 1.0f, 1.0f}, 2, {}), ElementsAre("1.000000:0", "1.000000:1"));
}

}  // namespace
}  // namespace convoy::grpc_server
