#include "server/grpc/infer_request_wire.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"

namespace convoy::grpc_server {
namespace {

constexpr int kRawInputContents = inference::ModelInferRequest::kRawInputContentsFieldNumber;
constexpr int kMaxGroupDepth = 100;  // protobuf's default recursion limit

// A read position in a message held in pieces.
class Cursor {
 public:
  explicit Cursor(absl::Span<const absl::string_view> pieces) : pieces_(pieces) {
    for (absl::string_view piece : pieces) size_ += piece.size();
    SkipEmpty();
  }
  size_t position() const { return position_; }
  size_t remaining() const { return size_ - position_; }
  bool AtEnd() const { return position_ == size_; }

  bool ReadByte(uint8_t* byte) {
    if (AtEnd()) return false;
    *byte = static_cast<uint8_t>(pieces_[piece_][offset_]);
    Advance(1);
    return true;
  }
  // A base-128 varint of at most `max_bytes` bytes.
  bool ReadVarint(uint64_t* value, int max_bytes = 10) {
    *value = 0;
    for (int i = 0; i < max_bytes; ++i) {
      uint8_t byte = 0;
      if (!ReadByte(&byte)) return false;
      *value |= static_cast<uint64_t>(byte & 0x7f) << (7 * i);
      if ((byte & 0x80) == 0) return true;
    }
    return false;
  }
  // Moves past `length` bytes (at most remaining()), appending them to `copy` and/or `raw` when given.
  void Take(size_t length, std::string* copy, infer::RawBytes* raw) {
    while (length > 0) {
      const absl::string_view here = pieces_[piece_].substr(offset_, length);
      if (copy != nullptr) copy->append(here.data(), here.size());
      if (raw != nullptr) raw->Append(here);
      Advance(here.size());
      length -= here.size();
    }
  }

 private:
  void Advance(size_t n) {
    position_ += n;
    offset_ += n;
    SkipEmpty();
  }
  void SkipEmpty() {
    while (piece_ < pieces_.size() && offset_ == pieces_[piece_].size()) {
      ++piece_;
      offset_ = 0;
    }
  }

  absl::Span<const absl::string_view> pieces_;
  size_t size_ = 0;
  size_t position_ = 0;
  size_t piece_ = 0;
  size_t offset_ = 0;
};

std::string FieldName(uint64_t number) {
  const google::protobuf::FieldDescriptor* field =
      inference::ModelInferRequest::descriptor()->FindFieldByNumber(static_cast<int>(number));
  return field != nullptr ? absl::StrCat("field ", number, " (", field->name(), ")") : absl::StrCat("field ", number);
}

// Reads a tag at the cursor: its field number and wire type.
absl::Status ReadTag(Cursor& in, uint64_t* field, int* wire_type) {
  const size_t at = in.position();
  uint64_t tag = 0;
  if (!in.ReadVarint(&tag, 5) || tag > UINT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat("a truncated or overlong field tag at byte ", at));
  }
  *field = tag >> 3;
  *wire_type = static_cast<int>(tag & 7);
  if (*field == 0) return absl::InvalidArgumentError(absl::StrCat("field number 0 at byte ", at));
  return absl::OkStatus();
}

// Moves past the value of a field whose tag was just read (a group up to its end tag), copying it to `copy`.
absl::Status SkipValue(Cursor& in, uint64_t field, int wire_type, size_t tag_at, int depth, std::string* copy) {
  const std::string name = FieldName(field);
  uint64_t length = 0;
  switch (wire_type) {
    case 0:
      if (!in.ReadVarint(&length)) {
        return absl::InvalidArgumentError(absl::StrCat(name, " at byte ", tag_at, ": a truncated or overlong varint"));
      }
      return absl::OkStatus();
    case 1:
    case 5: length = wire_type == 1 ? 8 : 4; break;
    case 2:
      if (!in.ReadVarint(&length)) {
        return absl::InvalidArgumentError(absl::StrCat(name, " at byte ", tag_at, ": a truncated or overlong length"));
      }
      break;
    case 3: {
      if (depth >= kMaxGroupDepth) {
        return absl::InvalidArgumentError(absl::StrCat(name, " at byte ", tag_at, ": groups nested deeper than ",
                                                       kMaxGroupDepth));
      }
      while (true) {
        const size_t at = in.position();
        if (in.AtEnd()) {
          return absl::InvalidArgumentError(absl::StrCat(name, " at byte ", tag_at, ": a group without its end"));
        }
        uint64_t inner = 0;
        int inner_type = 0;
        if (absl::Status s = ReadTag(in, &inner, &inner_type); !s.ok()) return s;
        if (inner_type == 4) {
          if (inner != field) {
            return absl::InvalidArgumentError(absl::StrCat(name, " at byte ", tag_at, ": a group ended by field ",
                                                           inner, "'s end tag at byte ", at));
          }
          return absl::OkStatus();
        }
        if (absl::Status s = SkipValue(in, inner, inner_type, at, depth + 1, nullptr); !s.ok()) return s;
      }
    }
    case 4:
      return absl::InvalidArgumentError(absl::StrCat(name, " at byte ", tag_at, ": a group end without its start"));
    default:
      return absl::InvalidArgumentError(absl::StrCat(name, " at byte ", tag_at, ": wire type ", wire_type,
                                                     " does not exist"));
  }
  if (length > in.remaining()) {
    return absl::InvalidArgumentError(absl::StrCat(name, " at byte ", tag_at, " declares ", length, " bytes, ",
                                                   in.remaining(), " remain"));
  }
  in.Take(static_cast<size_t>(length), copy, nullptr);
  return absl::OkStatus();
}

// Splits the message into the raw_input_contents payloads (as pieces) and every other field (copied, byte for byte
// and in order, to one string that protobuf parses). Only a raw_input_contents record in its canonical form (the
// one-byte tag, a length protobuf reads) is taken out; anything else goes to protobuf as it came.
absl::Status Walk(Cursor& in, WireInferRequest* out) {
  std::string fields;
  while (!in.AtEnd()) {
    const size_t at = in.position();
    Cursor field_start = in;
    uint64_t field = 0;
    int wire_type = 0;
    if (absl::Status s = ReadTag(in, &field, &wire_type); !s.ok()) return s;
    if (field == kRawInputContents && wire_type == 2 && in.position() == at + 1) {
      uint64_t length = 0;
      if (!in.ReadVarint(&length, 5) || length > INT32_MAX) {
        return absl::InvalidArgumentError(absl::StrCat(FieldName(field), " at byte ", at,
                                                       ": a truncated or invalid length"));
      }
      if (length > in.remaining()) {
        return absl::InvalidArgumentError(absl::StrCat(FieldName(field), " at byte ", at, " declares ", length,
                                                       " bytes, ", in.remaining(), " remain"));
      }
      in.Take(static_cast<size_t>(length), nullptr, &out->raw_input_contents.emplace_back());
      continue;
    }
    if (absl::Status s = SkipValue(in, field, wire_type, at, 0, nullptr); !s.ok()) return s;
    field_start.Take(in.position() - at, &fields, nullptr);
  }
  if (!out->message.ParseFromString(fields)) {
    return absl::InvalidArgumentError("a field protobuf cannot read (e.g. a string that is not UTF-8, or a nested "
                                      "message that is malformed)");
  }
  return absl::OkStatus();
}

absl::Status Malformed(size_t size, const absl::Status& why) {
  return absl::InvalidArgumentError(absl::StrCat("malformed request: the ", size, " bytes received are not a valid ",
                                                 inference::ModelInferRequest::descriptor()->full_name(), ": ",
                                                 why.message()));
}

}  // namespace

// Where the walk fails or finds raw_input_contents in a form it leaves to protobuf, protobuf parses the whole
// message (the old path, with its copy): what is accepted is exactly what protobuf accepts, and a refusal carries
// the walk's finding.
absl::Status ParseWireInferRequest(absl::Span<const absl::string_view> pieces, WireInferRequest* out) {
  out->message.Clear();
  out->raw_input_contents.clear();
  Cursor in(pieces);
  const size_t size = in.remaining();
  absl::Status walked = Walk(in, out);
  if (walked.ok() && out->message.raw_input_contents_size() == 0) return absl::OkStatus();
  std::string whole;
  whole.reserve(size);
  for (absl::string_view piece : pieces) whole.append(piece.data(), piece.size());
  out->raw_input_contents.clear();
  if (!out->message.ParseFromString(whole)) return Malformed(size, walked);
  for (const std::string& raw : out->message.raw_input_contents()) out->raw_input_contents.emplace_back(raw);
  return absl::OkStatus();
}

absl::Status ParseWireInferRequest(const grpc::ByteBuffer& bytes, WireInferRequest* out) {
  out->slices.clear();
  if (!bytes.Valid()) return ParseWireInferRequest(absl::Span<const absl::string_view>(), out);
  grpc::Status dumped = bytes.Dump(&out->slices);
  if (!dumped.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("malformed request: the ", bytes.Length(),
                                                   " bytes received cannot be read: ", dumped.error_message()));
  }
  std::vector<absl::string_view> pieces;
  pieces.reserve(out->slices.size());
  for (const grpc::Slice& slice : out->slices) {
    pieces.emplace_back(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return ParseWireInferRequest(pieces, out);
}

}  // namespace convoy::grpc_server
