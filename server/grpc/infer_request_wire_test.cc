// The wire reader against protobuf's own parser: fresh random requests (fields in shuffled order, typed and raw
// contents, parameters, unknown fields) split into random slices give the same message and the same raw bytes;
// truncated and malformed bytes are refused with the field and offset named; random mutations are accepted exactly
// when protobuf accepts them, with the same content.
#include "server/grpc/infer_request_wire.h"

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/util/field_comparator.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"

namespace convoy::grpc_server {
namespace {

using inference::ModelInferRequest;
using ::testing::HasSubstr;
using testing::StatusIs;

class WireTest : public ::testing::Test {
 protected:
  std::string RandomString(size_t max_size) { return RandomBytes(Uniform(0, max_size)); }
  std::string RandomBytes(size_t size) {
    std::string s(size, '\0');
    for (char& c : s) c = static_cast<char>(Uniform(0, 255));
    return s;
  }
  std::string RandomName() {
    std::string s(Uniform(1, 12), 'a');
    for (char& c : s) c = static_cast<char>('a' + Uniform(0, 25));
    return s;
  }
  size_t Uniform(size_t lo, size_t hi) { return std::uniform_int_distribution<size_t>(lo, hi)(rng_); }

  // A random request as wire bytes whose top-level fields come in shuffled order (each serialized on its own and
  // concatenated, which protobuf reads as one message), with raw contents `raw` (kept in their order).
  std::string RandomWire(std::vector<std::string>* raw) {
    std::vector<std::string> fields;
    auto field = [&](const ModelInferRequest& m) { fields.push_back(m.SerializeAsString()); };
    ModelInferRequest m;
    m.set_model_name(RandomName());
    field(m);
    if (Uniform(0, 1)) {
      m.Clear();
      m.set_id(RandomName());
      field(m);
    }
    for (size_t i = Uniform(0, 2); i > 0; --i) {
      m.Clear();
      (*m.mutable_parameters())[RandomName()].set_int64_param(static_cast<int64_t>(Uniform(0, 1000)));
      field(m);
    }
    const size_t inputs = Uniform(1, 3);
    for (size_t i = 0; i < inputs; ++i) {
      m.Clear();
      auto* input = m.add_inputs();
      input->set_name(RandomName());
      input->set_datatype("FP32");
      input->add_shape(static_cast<int64_t>(Uniform(1, 8)));
      if (Uniform(0, 3) == 0) input->mutable_contents()->add_fp32_contents(1.5f);
      field(m);
    }
    if (Uniform(0, 1)) {
      m.Clear();
      m.add_outputs()->set_name(RandomName());
      field(m);
    }
    if (Uniform(0, 2) == 0) {  // an unknown field (number 15, varint) protobuf keeps aside
      fields.push_back(std::string("\x78\x2a", 2));
    }
    std::shuffle(fields.begin(), fields.end(), rng_);
    // raw_input_contents interleaved at random places, in their own order.
    raw->clear();
    const size_t raws = Uniform(0, 1) ? inputs : Uniform(0, 3);
    for (size_t i = 0; i < raws; ++i) {
      raw->push_back(RandomString(Uniform(0, 1) ? 70000 : 64));
      m.Clear();
      m.add_raw_input_contents(raw->back());
      fields.insert(fields.begin() + static_cast<std::ptrdiff_t>(Uniform(0, fields.size())),
                    m.SerializeAsString());
    }
    // Keep raw order: the inserts above may have reordered them; recover the order as they lie in the wire.
    std::string wire;
    for (const std::string& f : fields) wire += f;
    ModelInferRequest reference;
    EXPECT_TRUE(reference.ParseFromString(wire));
    raw->assign(reference.raw_input_contents().begin(), reference.raw_input_contents().end());
    return wire;
  }

  // `wire` cut into random pieces (some empty).
  std::vector<absl::string_view> Split(absl::string_view wire) {
    std::vector<absl::string_view> pieces;
    while (!wire.empty()) {
      const size_t n = std::min(wire.size(), Uniform(0, 3) == 0 ? Uniform(0, 16) : Uniform(1, 40000));
      pieces.push_back(wire.substr(0, n));
      wire.remove_prefix(n);
    }
    if (Uniform(0, 1)) pieces.insert(pieces.begin() + Uniform(0, pieces.size()), absl::string_view());
    return pieces;
  }

  // Equal field by field; a NaN (a random mutation can make one) equals a NaN.
  static bool Same(const ModelInferRequest& a, const ModelInferRequest& b) {
    google::protobuf::util::DefaultFieldComparator comparator;
    comparator.set_treat_nan_as_equal(true);
    google::protobuf::util::MessageDifferencer differencer;
    differencer.set_field_comparator(&comparator);
    return differencer.Compare(a, b);
  }

  // Parses `wire` both ways and expects the same verdict and, when accepted, the same request.
  void ExpectAsProtobuf(const std::string& wire) {
    ModelInferRequest reference;
    const bool accepted = reference.ParseFromString(wire);
    WireInferRequest parsed;
    const absl::Status status = ParseWireInferRequest(Split(wire), &parsed);
    ASSERT_EQ(status.ok(), accepted) << status;
    if (!accepted) {
      EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                                   HasSubstr(absl::StrCat("malformed request: the ", wire.size(),
                                                          " bytes received are not a valid "
                                                          "inference.ModelInferRequest"))));
      return;
    }
    ModelInferRequest joined = parsed.message;
    joined.clear_raw_input_contents();
    for (const infer::RawBytes& raw : parsed.raw_input_contents) joined.add_raw_input_contents(raw.Flatten());
    EXPECT_TRUE(Same(joined, reference))
        << joined.ShortDebugString().substr(0, 300) << "\nvs\n" << reference.ShortDebugString().substr(0, 300);
  }

  std::mt19937_64 rng_{std::random_device{}()};
};

TEST_F(WireTest, FieldsInAnyOrderAndRawContentsAcrossSlicesReadAsProtobufReadsThem) {
  for (int round = 0; round < 200; ++round) {
    std::vector<std::string> raw;
    const std::string wire = RandomWire(&raw);
    WireInferRequest parsed;
    CONVOY_ASSERT_OK(ParseWireInferRequest(Split(wire), &parsed));
    ModelInferRequest reference;
    ASSERT_TRUE(reference.ParseFromString(wire));
    // The raw contents stay in the slices, not in the message.
    EXPECT_EQ(parsed.message.raw_input_contents_size(), 0);
    ASSERT_EQ(parsed.raw_input_contents.size(), raw.size());
    for (size_t i = 0; i < raw.size(); ++i) {
      EXPECT_EQ(parsed.raw_input_contents[i].size(), raw[i].size());
      EXPECT_TRUE(parsed.raw_input_contents[i].Flatten() == raw[i]) << "raw_input_contents " << i;
    }
    reference.clear_raw_input_contents();
    EXPECT_TRUE(Same(parsed.message, reference));
  }
}

TEST_F(WireTest, RawContentsSplitAcrossSlicesArePiecesOfThem) {
  ModelInferRequest m;
  m.set_model_name("resnet");
  const std::string payload = RandomBytes(100000 + Uniform(0, 4096));
  m.add_raw_input_contents(payload);
  const std::string wire = m.SerializeAsString();
  std::vector<absl::string_view> pieces;
  for (size_t at = 0; at < wire.size(); at += 16384) pieces.push_back(absl::string_view(wire).substr(at, 16384));
  WireInferRequest parsed;
  CONVOY_ASSERT_OK(ParseWireInferRequest(pieces, &parsed));
  ASSERT_EQ(parsed.raw_input_contents.size(), 1u);
  EXPECT_GT(parsed.raw_input_contents[0].pieces().size(), 1u);
  for (absl::string_view piece : parsed.raw_input_contents[0].pieces()) {  // views into the slices: no copy
    EXPECT_GE(piece.data(), wire.data());
    EXPECT_LE(piece.data() + piece.size(), wire.data() + wire.size());
  }
  std::string copied(payload.size(), '\0');
  parsed.raw_input_contents[0].CopyTo(copied.data());
  EXPECT_TRUE(copied == payload);
  EXPECT_EQ(parsed.message.model_name(), "resnet");
}

TEST_F(WireTest, TruncatedRawContentsNameTheFieldAndTheLengths) {
  ModelInferRequest m;
  m.set_model_name("resnet");
  m.add_raw_input_contents(std::string(1000, 'a'));
  const std::string wire = m.SerializeAsString();
  const size_t cut = Uniform(wire.size() - 999, wire.size() - 1);
  const std::string truncated = wire.substr(0, cut);
  WireInferRequest parsed;
  const absl::Status status = ParseWireInferRequest(Split(truncated), &parsed);
  const size_t remain = cut - (wire.size() - 1000);
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr(absl::StrCat("the ", cut, " bytes received are not a valid "
                                                      "inference.ModelInferRequest: field 7 (raw_input_contents) at "
                                                      "byte 8 declares 1000 bytes, ", remain, " remain"))));
}

TEST_F(WireTest, MalformedBytesAreRefusedWithWhatAndWhere) {
  struct Case {
    std::string wire;
    std::string message;
  };
  const std::vector<Case> cases = {
      {std::string("\x0a\xff\xff\xff\xff\x0f\x01", 7), "field 1 (model_name) at byte 0 declares 4294967295 bytes, 1 remain"},
      {std::string("\x0a\x03" "abc\x8a", 6), "a truncated or overlong field tag at byte 5"},
      {std::string("\x0a\x03" "abc\x2a", 6), "field 5 (inputs) at byte 5: a truncated or overlong length"},
      {std::string("\x00\x01", 2), "field number 0 at byte 0"},
      {std::string("\x0f", 1), "field 1 (model_name) at byte 0: wire type 7 does not exist"},
      {std::string("\x1c", 1), "field 3 (id) at byte 0: a group end without its start"},
      {std::string("\x7b\x08\x01", 3), "field 15 at byte 0: a group without its end"},
      {std::string("\x3a\x80\x80\x80\x80\x80\x01", 7), "field 7 (raw_input_contents) at byte 0: a truncated or invalid length"},
      {std::string("\x0a\x02\xff\xfe", 4), "a field protobuf cannot read"},
  };
  for (const Case& c : cases) {
    ModelInferRequest reference;
    ASSERT_FALSE(reference.ParseFromString(c.wire)) << c.message;
    WireInferRequest parsed;
    EXPECT_THAT(ParseWireInferRequest(Split(c.wire), &parsed),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr(absl::StrCat("malformed request: the ", c.wire.size(),
                                                " bytes received are not a valid inference.ModelInferRequest: ",
                                                c.message))));
  }
}

// Random byte changes, insertions and cuts of random requests: the reader's verdict and content are protobuf's.
TEST_F(WireTest, RandomMutationsAreAcceptedExactlyWhenProtobufAcceptsThem) {
  for (int round = 0; round < 3000; ++round) {
    std::vector<std::string> raw;
    std::string wire = RandomWire(&raw);
    for (size_t edits = Uniform(1, 4); edits > 0 && !wire.empty(); --edits) {
      const size_t at = Uniform(0, wire.size() - 1);
      switch (Uniform(0, 3)) {
        case 0: wire[at] = static_cast<char>(Uniform(0, 255)); break;
        case 1: wire.insert(at, 1, static_cast<char>(Uniform(0, 255))); break;
        case 2: wire.resize(at); break;
        default: wire[std::min(at, Uniform(0, 64) % wire.size())] ^= static_cast<char>(1 << Uniform(0, 7));
      }
    }
    ExpectAsProtobuf(wire);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace convoy::grpc_server
