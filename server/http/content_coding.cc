#include "server/http/content_coding.h"

#include <zlib.h>

#include <algorithm>
#include <climits>
#include <optional>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/repository/model_names.h"

namespace convoy::http {
namespace {

// zlib's windowBits: 15 (the largest window) plus 16 for the gzip wrapper; plain 15 is the zlib wrapper.
int WindowBits(ContentCoding coding) { return coding == ContentCoding::kGzip ? 15 + 16 : 15; }

// Parses a coding token; nullopt for one Convoy does not know.
std::optional<ContentCoding> ParseCoding(absl::string_view token) {
  const std::string name = absl::AsciiStrToLower(absl::StripAsciiWhitespace(token));
  if (name.empty() || name == "identity") return ContentCoding::kIdentity;
  if (name == "gzip" || name == "x-gzip") return ContentCoding::kGzip;
  if (name == "deflate") return ContentCoding::kDeflate;
  return std::nullopt;
}

}  // namespace

const char* ContentCodingName(ContentCoding coding) {
  switch (coding) {
    case ContentCoding::kGzip: return "gzip";
    case ContentCoding::kDeflate: return "deflate";
    case ContentCoding::kIdentity: break;
  }
  return "identity";
}

absl::StatusOr<ContentCoding> RequestCoding(const char* content_encoding) {
  if (content_encoding == nullptr) return ContentCoding::kIdentity;
  std::optional<ContentCoding> coding = ParseCoding(content_encoding);
  if (!coding.has_value()) {
    return absl::UnimplementedError(absl::StrCat("Content-Encoding ", repository::QuoteClientString(content_encoding),
                                                 " is not supported: send the body as it is or with gzip or "
                                                 "deflate"));
  }
  return *coding;
}

ContentCoding ResponseCoding(const char* accept_encoding) {
  ContentCoding best = ContentCoding::kIdentity;
  double best_q = 0;
  if (accept_encoding == nullptr) return best;
  for (absl::string_view entry : absl::StrSplit(accept_encoding, ',')) {
    std::vector<absl::string_view> parts = absl::StrSplit(entry, ';');
    std::optional<ContentCoding> coding = ParseCoding(parts[0]);
    if (!coding.has_value() || absl::StripAsciiWhitespace(parts[0]).empty()) continue;
    double q = 1;
    bool malformed = false;
    for (size_t i = 1; i < parts.size(); ++i) {
      absl::string_view param = absl::StripAsciiWhitespace(parts[i]);
      if (param.size() < 2 || absl::AsciiStrToLower(param.substr(0, 2)) != "q=") continue;
      if (!absl::SimpleAtod(absl::StripAsciiWhitespace(param.substr(2)), &q) || q < 0 || q > 1) malformed = true;
    }
    if (!malformed && q > best_q) {
      best = *coding;
      best_q = q;
    }
  }
  return best;
}

absl::StatusOr<std::string> Inflate(absl::string_view body, ContentCoding coding, size_t max_bytes,
                                    absl::string_view limit_flag) {
  if (coding == ContentCoding::kIdentity) return std::string(body);
  const std::string what = absl::StrCat("request body (Content-Encoding: ", ContentCodingName(coding), ")");
  if (body.size() > UINT_MAX) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", body.size(), " bytes is more than zlib takes at once"));
  }
  z_stream z{};
  if (inflateInit2(&z, WindowBits(coding)) != Z_OK) {
    return absl::InternalError(absl::StrCat("zlib could not start inflating: ", z.msg != nullptr ? z.msg : "?"));
  }
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(body.data()));
  z.avail_in = static_cast<uInt>(body.size());
  std::string out;
  size_t produced = 0;
  absl::Status status;
  for (;;) {
    if (produced == out.size()) {  // grow, to at most one byte past the limit
      if (out.size() > max_bytes) break;
      out.resize(std::min(std::max<size_t>(2 * out.size(), 64 << 10), max_bytes + 1));
    }
    z.next_out = reinterpret_cast<Bytef*>(&out[produced]);
    z.avail_out = static_cast<uInt>(std::min<size_t>(out.size() - produced, UINT_MAX));
    const uInt before = z.avail_out;
    const int rc = inflate(&z, Z_NO_FLUSH);
    produced += before - z.avail_out;
    if (rc == Z_STREAM_END) {
      // RFC 1952: a gzip file may be several members one after another; anything else after the end is an error.
      if (z.avail_in == 0) break;
      if (coding == ContentCoding::kGzip && inflateReset(&z) == Z_OK) continue;
      status = absl::InvalidArgumentError(absl::StrCat(what, ": ", z.avail_in, " bytes follow the end of the ",
                                                       ContentCodingName(coding), " data"));
      break;
    }
    if (rc == Z_OK || (rc == Z_BUF_ERROR && z.avail_out == 0)) continue;
    if (rc == Z_BUF_ERROR) {
      status = absl::InvalidArgumentError(absl::StrCat(what, ": the ", ContentCodingName(coding), " data ends early ",
                                                       "(truncated after ", body.size(), " bytes)"));
    } else {
      status = absl::InvalidArgumentError(absl::StrCat(what, ": not valid ", ContentCodingName(coding), " data (",
                                                       z.msg != nullptr ? z.msg : "zlib error", ")"));
    }
    break;
  }
  inflateEnd(&z);
  if (!status.ok()) return status;
  if (produced > max_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(what, ": inflates to more than ", max_bytes,
                                                     " bytes, the largest request body this server takes (",
                                                     limit_flag, ")"));
  }
  out.resize(produced);
  return out;
}

absl::StatusOr<std::string> Compress(absl::string_view data, ContentCoding coding) {
  if (coding == ContentCoding::kIdentity) return std::string(data);
  if (data.size() > UINT_MAX / 2) {
    return absl::InternalError(absl::StrCat("a ", data.size(), "-byte response is more than zlib compresses at once"));
  }
  z_stream z{};
  // Level 1, the default memory level 8 and strategy: see the header.
  if (deflateInit2(&z, 1, Z_DEFLATED, WindowBits(coding), 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return absl::InternalError(absl::StrCat("zlib could not start compressing: ", z.msg != nullptr ? z.msg : "?"));
  }
  std::string out(deflateBound(&z, static_cast<uLong>(data.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);  // deflateBound leaves room to finish in one call
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) {
    return absl::InternalError(absl::StrCat("zlib could not compress a ", data.size(), "-byte response (", rc, ")"));
  }
  return out;
}

}  // namespace convoy::http
