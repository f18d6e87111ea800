// The neutral decoder on hand-built views: raw bytes reach the payload unchanged, the decode hook runs only after
// the datatype and shape checks and sees the element count, parameter messages use the protocol's spelling, and
// BytesWireForm writes Triton's length-prefixed form. The gRPC spelling of every error is covered through
// server/grpc/infer_codec_test.cc, the HTTP one by tests/python/test_server_http_bad_inputs.py.
#include "server/inference/request_decoder.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
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

// Raw bytes in random pieces (as gRPC's slices or libevent's chains hold them) reach the payload whole and in order;
// Substr takes any range of them.
TEST(RequestDecoderTest, RawBytesInPiecesArriveUnchanged) {
  std::mt19937 rng(std::random_device{}());
  const std::string bytes = RandomBytes(3 * 48 * 4, static_cast<uint32_t>(rng()));
  RawBytes pieces;
  for (size_t at = 0; at < bytes.size();) {
    const size_t n = std::min<size_t>(bytes.size() - at, rng() % 100);
    pieces.Append(absl::string_view(bytes).substr(at, n));
    at += n;
  }
  ASSERT_EQ(pieces.size(), bytes.size());
  EXPECT_GT(pieces.pieces().size(), 1u);
  EXPECT_FALSE(pieces.Contiguous().has_value());
  EXPECT_TRUE(pieces.Flatten() == bytes);
  for (int i = 0; i < 50; ++i) {
    const size_t offset = rng() % bytes.size(), length = rng() % (bytes.size() - offset + 1);
    EXPECT_TRUE(pieces.Substr(offset, length).Flatten() == bytes.substr(offset, length)) << offset << "+" << length;
  }
  RequestView view;
  InputTensorView input;
  input.name = "images";
  input.datatype = "FP32";
  input.shape = {3, 3, 4, 4};
  input.raw = pieces;
  view.inputs.push_back(input);
  absl::StatusOr<DecodedRequest> decoded = DecodeRequest(view, ImageModel());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_EQ(decoded->payload->inputs[0].size(), bytes.size());
  EXPECT_EQ(std::memcmp(decoded->payload->inputs[0].data(), bytes.data(), bytes.size()), 0);
  // One byte short, in pieces: the same message as in one piece.
  view.inputs[0].raw = pieces.Substr(0, bytes.size() - 1);
  EXPECT_THAT(DecodeRequest(view, ImageModel()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(absl::StrCat("input 'images': expected ", bytes.size(), " bytes for shape [3,3,4,4] "
                                              "FP32, got ", bytes.size() - 1))));
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

// ---- Photos (encoded_image inputs) -------------------------------------------------------------------------------

runtime::ModelSignature PhotoModel() {
  runtime::ModelSignature model{"classifier", 4, {{"images", DataType::kUInt8, {-1, 6, 8, 3}}},
                                {{"probabilities", DataType::kFloat32, {-1, 10}}, {"mask", DataType::kUInt8, {-1, 6, 8}}}};
  model.inputs[0].encoded_image = repository::EncodedImageConfig{};
  return model;
}

InputTensorView BytesInput(std::vector<int64_t> shape, const std::string* raw) {
  InputTensorView input;
  input.name = "images";
  input.datatype = "BYTES";
  input.shape = std::move(shape);
  if (raw != nullptr) input.raw = absl::string_view(*raw);
  return input;
}

TEST(RequestDecoderTest, PhotoWireFormErrorsNameTheElement) {
  const std::string truncated_length = std::string("\x05\x00\x00\x00" "abcde", 9) + std::string("\x01\x00", 2);
  const std::string over_length = std::string("\x10\x00\x00\x00" "abc", 7);
  const std::string two = BytesWireForm({"a", "b"});
  const struct {
    std::vector<int64_t> shape;
    const std::string* raw;
    const char* message;
  } cases[] = {
      {{2}, &truncated_length, "input 'images': BYTES element 1 has a truncated length (2 of 4 bytes)"},
      {{1}, &over_length, "input 'images': BYTES element 0 declares 16 bytes but only 3 are left"},
      {{3}, &two, "input 'images': expected 3 BYTES elements for shape [3], got 2"},
      {{2, 2}, &two, "input 'images': photos (BYTES) take shape [batch] or [batch, 1], one encoded image per batch "
                     "item, got [2,2]"},
      {{5}, &two, "input 'images': batch size 5 is outside 1..4 (max_batch_size of model 'classifier')"},
      {{2, 1}, &two, "input 'images': batch item 0: image is neither JPEG"},
      {{2}, nullptr, "input 'images': expected 2 BYTES elements for shape [2] (raw BYTES data: each element a 4-byte "
                     "little-endian length and its bytes), got no raw data"},
  };
  for (const auto& c : cases) {
    RequestView view;
    view.inputs.push_back(BytesInput(c.shape, c.raw));
    EXPECT_THAT(DecodeRequest(view, PhotoModel()).status(),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)));
  }
}

TEST(RequestDecoderTest, PixelsStillGoToAPhotoInputAndOtherDatatypesNameBoth) {
  const std::string pixels = RandomBytes(6 * 8 * 3, 7);
  RequestView view;
  InputTensorView input;
  input.name = "images";
  input.datatype = "UINT8";
  input.shape = {1, 6, 8, 3};
  input.raw = absl::string_view(pixels);
  view.inputs.push_back(input);
  absl::StatusOr<DecodedRequest> decoded = DecodeRequest(view, PhotoModel());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(std::memcmp(decoded->payload->inputs[0].data(), pixels.data(), pixels.size()), 0);
  view.inputs[0].datatype = "FP32";
  EXPECT_THAT(DecodeRequest(view, PhotoModel()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("input 'images': expected datatype UINT8 (pixels) or BYTES (JPEG / PNG photos), got "
                                 "'FP32'")));
  // A model without encoded_image takes no BYTES.
  view.inputs[0] = BytesInput({1}, &pixels);
  runtime::ModelSignature plain = PhotoModel();
  plain.inputs[0].encoded_image.reset();
  EXPECT_THAT(DecodeRequest(view, plain).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("input 'images': expected datatype UINT8, got 'BYTES'")));
}

TEST(RequestDecoderTest, PhotoBodyNeedsOnePhotoInputAndClassifiesOnlyClassifierOutputs) {
  RequestView view;
  view.photo_body = true;
  view.photo_classification = 3;
  InputTensorView photo;
  photo.datatype = "BYTES";
  photo.bytes_elements = std::vector<absl::string_view>{"not a photo"};
  view.inputs.push_back(photo);
  runtime::ModelSignature plain = PhotoModel();
  plain.inputs[0].encoded_image.reset();
  EXPECT_THAT(DecodeRequest(view, plain).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("model 'classifier' does not take a photo as the request body: that needs exactly one "
                                 "input, with encoded_image in its config (docs/model_config.md); it has inputs "
                                 "['images'] without encoded_image")));
  EXPECT_THAT(DecodeRequest(view, PhotoModel()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("input 'images': batch item 0: image is neither JPEG")));
}

}  // namespace
}  // namespace convoy::infer
