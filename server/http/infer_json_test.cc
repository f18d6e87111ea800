// The HTTP request codec against a hand-built signature: nested and flat JSON `data` decode to the same bytes as
// the binary extension carries, each JSON mistake is INVALID_ARGUMENT naming the field, and responses put binary
// outputs after the JSON header with its length. The end-to-end battery is tests/python/test_server_http_*.py.
#include "server/http/infer_json.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"

namespace convoy::http {
namespace {

using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;

runtime::ModelSignature Model() {
  return {"m", 4, {{"x", DataType::kFloat32, {-1, 2, 3}}, {"u", DataType::kUInt8, {-1, 2}}},
          {{"y", DataType::kFloat32, {-1, 3}}}};
}

std::vector<float> RandomFloats(size_t n) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> dist(-100.f, 100.f);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

std::string Num(float f) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.9g", f);
  return text;
}

absl::StatusOr<infer::DecodedRequest> Decode(const std::string& body, std::optional<size_t> header_length,
                                             std::unique_ptr<HttpInferRequest>* keep) {
  auto parsed = ParseInferRequest(body, header_length, "m", "");
  if (!parsed.ok()) return parsed.status();
  *keep = std::move(*parsed);
  return infer::DecodeRequest((*keep)->view, Model());
}

TEST(InferJsonTest, NestedFlatAndBinaryDataDecodeToTheSameBytes) {
  const std::vector<float> x = RandomFloats(6);
  const std::string flat = "[" + Num(x[0]) + "," + Num(x[1]) + "," + Num(x[2]) + "," + Num(x[3]) + "," + Num(x[4]) +
                           "," + Num(x[5]) + "]";
  const std::string nested = "[[[" + Num(x[0]) + "," + Num(x[1]) + "," + Num(x[2]) + "],[" + Num(x[3]) + "," +
                             Num(x[4]) + "," + Num(x[5]) + "]]]";
  const std::string u = R"({"name":"u","datatype":"UINT8","shape":[1,2],"data":[0,255]})";
  for (const std::string& data : {flat, nested}) {
    std::unique_ptr<HttpInferRequest> keep;
    auto decoded = Decode(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,2,3],"data":)" + data + "}," + u +
                              "]}",
                          std::nullopt, &keep);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    ASSERT_EQ(decoded->payload->inputs[0].size(), 24u);
    EXPECT_EQ(std::memcmp(decoded->payload->inputs[0].data(), x.data(), 24), 0);
    EXPECT_EQ(decoded->payload->inputs[1].as<uint8_t>()[1], 255);
  }
  const std::string header =
      R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,2,3],"parameters":{"binary_data_size":24}},)" + u + "]}";
  std::string body = header;
  body.append(reinterpret_cast<const char*>(x.data()), 24);
  std::unique_ptr<HttpInferRequest> keep;
  auto decoded = Decode(body, header.size(), &keep);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(std::memcmp(decoded->payload->inputs[0].data(), x.data(), 24), 0);
}

TEST(InferJsonTest, MistakesNameTheField) {
  const std::string u = R"({"name":"u","datatype":"UINT8","shape":[1,2],"data":[1,2]})";
  struct Case {
    std::string body;
    std::optional<size_t> header_length;
    std::string message;
  };
  const std::vector<Case> cases = {
      {R"({"inputs":[)", std::nullopt, "malformed JSON at byte 11 of the 11-byte request: "},
      {"[1]", std::nullopt, "the request: expected a JSON object, got [1]"},
      {R"({"inputs":{}})", std::nullopt, "inputs: expected an array, got {}"},
      {R"({"inputs":[{"datatype":"FP32","shape":[1]}]})", std::nullopt, "inputs[0]: 'name' is missing"},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,-2,3],"data":[]}]})", std::nullopt,
       "inputs[0].shape[1]: expected a non-negative integer, got -2"},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,2,3],"data":[1,2,3,4,5]},)" + u + "]}", std::nullopt,
       "input 'x': expected 6 values in data for shape [1,2,3], got 5"},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,2,3],"data":[1,2,"a",4,5,6]},)" + u + "]}",
       std::nullopt, "input 'x': data[2] is 'a', expected a number for FP32"},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,2,3],"data":[1,2,3,4,5,6]},)"
       R"({"name":"u","datatype":"UINT8","shape":[1,2],"data":[1,256]}]})",
       std::nullopt, "input 'u': data[1] is 256, expected an integer 0..255 for UINT8"},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,2,3],"parameters":{"binary_data_size":24}}]})",
       std::nullopt, "input 'x': parameters.binary_data_size is set but the request has no "
                     "Inference-Header-Content-Length header"},
      {R"({"id":7,"inputs":[]})", std::nullopt, "id: expected a string, got 7"},
      {R"({"inputs":[]})", 99, "Inference-Header-Content-Length is 99, larger than the 13-byte body"},
  };
  for (const Case& c : cases) {
    std::unique_ptr<HttpInferRequest> keep;
    EXPECT_THAT(Decode(c.body, c.header_length, &keep).status(),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)))
        << c.body;
  }
  // Binary bytes left over after every input took its share.
  const std::string header =
      R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,2,3],"parameters":{"binary_data_size":24}}]})";
  std::unique_ptr<HttpInferRequest> keep;
  EXPECT_THAT(Decode(header + std::string(25, '\0'), header.size(), &keep).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("the inputs' binary_data_size values add up to 24 bytes, but the body carries 25")));
}

TEST(InferJsonTest, ResponsePutsBinaryOutputsAfterTheHeader) {
  const std::vector<float> y = RandomFloats(3);
  infer::ResponseTensor t;
  t.name = "y";
  t.datatype = "FP32";
  t.shape = {1, 3};
  t.data = absl::string_view(reinterpret_cast<const char*>(y.data()), 12);
  auto parsed = ParseInferRequest(R"({"id":"r1","inputs":[],"outputs":[{"name":"y","parameters":{"binary_data":true}}]})",
                                  std::nullopt, "m", "");
  ASSERT_TRUE(parsed.ok());
  HttpInferResponse binary = EncodeInferResponse("m", 3, **parsed, {t});
  ASSERT_TRUE(binary.header_length.has_value());
  EXPECT_EQ(binary.body.substr(0, *binary.header_length),
            R"({"model_name":"m","model_version":"3","id":"r1","outputs":[{"name":"y","datatype":"FP32","shape":[1,3],)"
            R"("parameters":{"binary_data_size":12}}]})");
  EXPECT_EQ(binary.body.substr(*binary.header_length), std::string(t.data));
  parsed = ParseInferRequest(R"({"inputs":[]})", std::nullopt, "m", "");
  ASSERT_TRUE(parsed.ok());
  HttpInferResponse json = EncodeInferResponse("m", 3, **parsed, {t});
  EXPECT_FALSE(json.header_length.has_value());
  EXPECT_THAT(json.body, HasSubstr(R"("data":[)"));
  EXPECT_EQ(ErrorJson("input 'x': \"quoted\""), R"({"error":"input 'x': \"quoted\""})");
}

TEST(InferJsonTest, Int32TensorsAreExactIntegersBothWays) {
  // INT32 is served for outputs (an output's class_map); values past 2^24 must not pass through a float.
  const std::vector<int32_t> values = {16777217, -2147483647 - 1, 2147483647, 0};
  infer::ResponseTensor t;
  t.name = "classes";
  t.datatype = "INT32";
  t.shape = {1, 4};
  t.data = absl::string_view(reinterpret_cast<const char*>(values.data()), 16);
  auto parsed = ParseInferRequest(R"({"inputs":[]})", std::nullopt, "m", "");
  ASSERT_TRUE(parsed.ok());
  EXPECT_THAT(EncodeInferResponse("m", 1, **parsed, {t}).body,
              HasSubstr(R"("data":[16777217,-2147483648,2147483647,0])"));
  const runtime::ModelSignature model = {"m", 0, {{"i", DataType::kInt32, {4}}}, {{"y", DataType::kFloat32, {1}}}};
  std::unique_ptr<HttpInferRequest> keep;
  auto request = ParseInferRequest(R"({"inputs":[{"name":"i","datatype":"INT32","shape":[4],)"
                                   R"("data":[16777217,-2147483648,2147483647,0]}]})",
                                   std::nullopt, "m", "");
  ASSERT_TRUE(request.ok());
  auto decoded = infer::DecodeRequest((*request)->view, model);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(std::memcmp(decoded->payload->inputs[0].data(), values.data(), 16), 0);
  request = ParseInferRequest(R"({"inputs":[{"name":"i","datatype":"INT32","shape":[4],"data":[1,2,3,2147483648]}]})",
                              std::nullopt, "m", "");
  ASSERT_TRUE(request.ok());
  EXPECT_THAT(infer::DecodeRequest((*request)->view, model).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "input 'i': data[3] is 2147483648, expected a 32-bit integer for INT32"));
}

// A binary-extension body in random pieces (as libevent's chains hold it) decodes to the same tensors as in one
// piece, its tensors viewed in the pieces; a size mismatch has the same message both ways.
TEST(InferJsonTest, BinaryBodyInPiecesDecodesAsInOnePiece) {
  std::mt19937 rng(std::random_device{}());
  const std::vector<float> x = RandomFloats(3 * 2 * 3);
  const std::string u = {static_cast<char>(rng()), static_cast<char>(rng()), static_cast<char>(rng()),
                         static_cast<char>(rng()), static_cast<char>(rng()), static_cast<char>(rng())};
  const std::string json = absl::StrCat(
      R"({"inputs":[{"name":"x","datatype":"FP32","shape":[3,2,3],"parameters":{"binary_data_size":)",
      x.size() * 4, R"(}},{"name":"u","datatype":"UINT8","shape":[3,2],"parameters":{"binary_data_size":6}}]})");
  const std::string body = json + std::string(reinterpret_cast<const char*>(x.data()), x.size() * 4) + u;
  for (int round = 0; round < 20; ++round) {
    infer::RawBytes pieces;
    for (size_t at = 0; at < body.size();) {
      const size_t n = std::min<size_t>(body.size() - at, 1 + rng() % 40);
      pieces.Append(absl::string_view(body).substr(at, n));
      at += n;
    }
    auto parsed = ParseInferRequest(absl::string_view(body).substr(0, json.size()), pieces, json.size(), "m", "");
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    auto decoded = infer::DecodeRequest((*parsed)->view, Model());
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    ASSERT_EQ(decoded->payload->inputs[0].size(), x.size() * 4);
    EXPECT_EQ(std::memcmp(decoded->payload->inputs[0].data(), x.data(), x.size() * 4), 0);
    ASSERT_EQ(decoded->payload->inputs[1].size(), 6u);
    EXPECT_EQ(std::memcmp(decoded->payload->inputs[1].data(), u.data(), 6), 0);
    // One byte missing: the message names the sizes as for a body in one piece.
    const infer::RawBytes short_body = pieces.Substr(0, body.size() - 1);
    auto shorter = ParseInferRequest(absl::string_view(body).substr(0, json.size()), short_body, json.size(), "m", "");
    const std::string one_piece = body.substr(0, body.size() - 1);
    auto reference = ParseInferRequest(one_piece, json.size(), "m", "");
    ASSERT_FALSE(reference.ok());
    EXPECT_THAT(shorter.status(), StatusIs(absl::StatusCode::kInvalidArgument, reference.status().message()));
  }
}

}  // namespace
}  // namespace convoy::http
