// The neutral decoder on hand-built views: raw bytes reach the payload unchanged, the decode hook runs only after
// the datatype and shape checks and sees the element count, parameter messages use the protocol's spelling, and
// BytesWireForm writes Triton's length-prefixed form. The gRPC spelling of every error is covered through
// server/grpc/infer_codec_test.cc, the HTTP one by tests/python/test_server_http_bad_inputs.py.
#include "server/inference/request_decoder.h"

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"

namespace convoy::infer {
namespace {

using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;

runtime::ModelSignature ImageModel() {
  return {"cnn", 8, {{"images", DataType::kFloat32, {-1, 3, 4, 4}}}, {{"probabilities", DataType::kFloat32, {-1, 10}}}};
}

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string bytes(n, '\0');
  for (char& c : bytes) c = static_cast<char>(rng() & 0xff);
  return bytes;
}

TEST(RequestDecoderTest, RawBytesArriveUnchanged) {
  const std::string bytes = RandomBytes(2 * 48 * 4, std::random_device{}());
  RequestView view;
  InputTensorView input;
  input.name = "images";
  input.datatype = "FP32";
  input.shape = {2, 3, 4, 4};
  input.raw = absl::string_view(bytes);
  view.inputs.push_back(input);
  absl::StatusOr<DecodedRequest> decoded = DecodeRequest(view, ImageModel());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->spec.batch_size, 2);
  ASSERT_EQ(decoded->payload->inputs[0].size(), bytes.size());
  EXPECT_EQ(std::memcmp(decoded->payload->inputs[0].data(), bytes.data(), bytes.size()), 0);
  ASSERT_EQ(decoded->outputs.size(), 1u);  // no outputs named: all of them
}

TEST(RequestDecoderTest, DecodeHookRunsAfterTheShapeCheckWithTheElementCount) {
  int calls = 0;
  int64_t seen = -1;
  InputTensorView input;
  input.name = "images";
  input.datatype = "FP32";
  input.decode = [&](const runtime::TensorMetadata& t, int64_t count, HostBuffer* out) -> absl::Status {
    ++calls;
    seen = count;
    auto buffer = HostBuffer::Allocate(static_cast<size_t>(count) * 4);
    if (!buffer.ok()) return buffer.status();
    *out = std::move(*buffer);
    return absl::OkStatus();
  };
  RequestView view;
  input.shape = {1, 3, 4, 5};
  view.inputs = {input};
  EXPECT_THAT(DecodeRequest(view, ImageModel()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("input 'images': expected shape [-1,3,4,4], got [1,3,4,5]")));
  EXPECT_EQ(calls, 0);
  view.inputs[0].shape = {3, 3, 4, 4};
  EXPECT_TRUE(DecodeRequest(view, ImageModel()).ok());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen, 3 * 48);
}

TEST(RequestDecoderTest, ParameterMessagesUseTheProtocolsSpelling) {
  const std::string bytes(48 * 4, '\0');
  RequestView view;
  InputTensorView input;
  input.name = "images";
  input.datatype = "FP32";
  input.shape = {1, 3, 4, 4};
  input.raw = absl::string_view(bytes);
  view.inputs.push_back(input);
  view.parameters.push_back({"priority", ParameterValue{std::nullopt, "\"high\""}});
  EXPECT_THAT(DecodeRequest(view, ImageModel()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "parameter 'priority': expected an integer, got \"high\""));
  view.integer_kinds = " (int64_param or uint64_param)";
  view.parameters[0].value = ParameterValue{std::nullopt, "string_param 'high'"};
  EXPECT_THAT(DecodeRequest(view, ImageModel()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "parameter 'priority': expected an integer (int64_param or uint64_param), got string_param "
                       "'high'"));
  view.parameters[0].value = ParameterValue{7, "7"};
  view.parameters.push_back({"timeout", ParameterValue{-3, "-3"}});
  EXPECT_THAT(DecodeRequest(view, ImageModel()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "parameter 'timeout' (microseconds): expected >= 0, got -3"));
  view.parameters[1].value = ParameterValue{2500, "2500"};
  absl::StatusOr<DecodedRequest> decoded = DecodeRequest(view, ImageModel());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->spec.priority, 7u);
  EXPECT_EQ(decoded->spec.timeout, absl::Microseconds(2500));
}

TEST(RequestDecoderTest, BytesWireFormPrefixesLittleEndianLengths) {
  const std::string long_element(300, 'x');
  const std::string wire = BytesWireForm({"ab", "", long_element});
  ASSERT_EQ(wire.size(), 4u + 2 + 4 + 4 + 300);
  EXPECT_EQ(wire.substr(0, 6), std::string("\x02\0\0\0ab", 6));
  EXPECT_EQ(wire.substr(6, 4), std::string("\0\0\0\0", 4));
  EXPECT_EQ(wire.substr(10, 4), std::string("\x2c\x01\0\0", 4));
  EXPECT_EQ(wire.substr(14), long_element);
}

}  // namespace
}  // namespace convoy::infer
