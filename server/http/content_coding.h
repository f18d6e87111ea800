// HTTP content codings for the KServe v2 HTTP edge, as Triton's HTTP frontend has them: a request body sent with
// `Content-Encoding: gzip` or `deflate` is inflated before it is parsed, and a response is compressed with the
// coding `Accept-Encoding` prefers among gzip, deflate and identity. zlib does both ("deflate" is the zlib format of
// RFC 1950, as HTTP and tritonclient mean it; "gzip" RFC 1952).
//
//   CONVOY_ASSIGN_OR_RETURN(ContentCoding coding, RequestCoding(header));   // Content-Encoding
//   CONVOY_ASSIGN_OR_RETURN(std::string body, Inflate(wire, coding, max_body_bytes, "--http_max_body_bytes"));
//   ContentCoding reply = ResponseCoding(accept_encoding);                 // Accept-Encoding
//   CONVOY_ASSIGN_OR_RETURN(std::string compressed, Compress(json, reply));
//
// Inflating stops as soon as the output passes the limit, so a small body that would inflate to gigabytes (a zip
// bomb) costs at most the limit in memory and time.
#ifndef CONVOY_SERVER_HTTP_CONTENT_CODING_H_
#define CONVOY_SERVER_HTTP_CONTENT_CODING_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace convoy::http {

enum class ContentCoding { kIdentity, kGzip, kDeflate };

// "identity", "gzip" or "deflate".
const char* ContentCodingName(ContentCoding coding);

// The coding a request's Content-Encoding names (nullptr: the header is absent): identity, gzip (also "x-gzip") or
// deflate, any case, surrounding spaces ignored. UNIMPLEMENTED naming the value and the supported codings for
// anything else (HTTP answers 415).
absl::StatusOr<ContentCoding> RequestCoding(const char* content_encoding);

// The coding to answer with for an Accept-Encoding value (nullptr: absent): the one of identity, gzip and deflate
// with the highest q-value above 0 (q defaults to 1; on a tie the first listed), else identity. Codings Convoy
// does not produce (br, zstd, *) and malformed entries are ignored, as Triton does.
ContentCoding ResponseCoding(const char* accept_encoding);

// `body` inflated. INVALID_ARGUMENT when it is not `coding` data or ends before the end of its stream (zlib's
// reason included); RESOURCE_EXHAUSTED naming `max_bytes` and `limit_flag` as soon as the output passes max_bytes.
// Identity returns the body as is (no limit check: the caller bounds raw bodies). Concatenated gzip members are one
// body, as RFC 1952 allows.
absl::StatusOr<std::string> Inflate(absl::string_view body, ContentCoding coding, size_t max_bytes,
                                    absl::string_view limit_flag);

// `data` compressed with `coding` at zlib level 1: the batcher thread that completes a request compresses its
// response, and level 1 is several times faster than zlib's default 6 while tensors of floats compress barely
// better at 6. Identity returns the data as is. INTERNAL only if zlib fails (out of memory).
absl::StatusOr<std::string> Compress(absl::string_view data, ContentCoding coding);

}  // namespace convoy::http

#endif  // CONVOY_SERVER_HTTP_CONTENT_CODING_H_
