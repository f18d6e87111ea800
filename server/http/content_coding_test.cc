// Content codings: what Compress writes inflates back to the same bytes for fresh random data of many sizes; bodies
// zlib itself compressed (other levels, several gzip members) inflate; truncated, corrupt and trailing data are
// INVALID_ARGUMENT with the exact reason; a zip bomb stops at the limit with RESOURCE_EXHAUSTED naming it; and the
// Content-Encoding / Accept-Encoding rules of Triton's HTTP frontend.
#include "server/http/content_coding.h"

#include <zlib.h>

#include <random>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"

namespace convoy::http {
namespace {

using ::convoy::testing::IsOk;
using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;

constexpr size_t kNoLimit = size_t{1} << 40;

// Random bytes, half of them from a small alphabet so that zlib has something to compress.
std::string RandomBody(size_t size, std::mt19937& rng) {
  std::string s(size, '\0');
  std::uniform_int_distribution<int> byte(0, 255), small(0, 3), coin(0, 1);
  for (char& c : s) c = static_cast<char>(coin(rng) ? byte(rng) : 'a' + small(rng));
  return s;
}

// `data` compressed by zlib directly at `level` (not through Compress): the reference encoder.
std::string ZlibCompress(const std::string& data, ContentCoding coding, int level) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, level, Z_DEFLATED, coding == ContentCoding::kGzip ? 31 : 15, 9, Z_DEFAULT_STRATEGY),
            Z_OK);
  std::string out(deflateBound(&z, data.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

class ContentCodingTest : public ::testing::TestWithParam<ContentCoding> {
 protected:
  std::mt19937 rng_{std::random_device{}()};
};

TEST_P(ContentCodingTest, CompressThenInflateGivesTheSameBytes) {
  for (size_t size : {size_t{0}, size_t{1}, size_t{1000}, size_t{65536}, size_t{65537}, size_t{700000}}) {
    SCOPED_TRACE(size);
    const std::string body = RandomBody(size, rng_);
    absl::StatusOr<std::string> compressed = Compress(body, GetParam());
    ASSERT_THAT(compressed, IsOk());
    if (GetParam() == ContentCoding::kGzip) {
      EXPECT_EQ(compressed->substr(0, 2), "\x1f\x8b");  // RFC 1952 magic
    } else {
      EXPECT_EQ((*compressed)[0], '\x78');  // RFC 1950: deflate, 32 KiB window
    }
    absl::StatusOr<std::string> inflated = Inflate(*compressed, GetParam(), size, "--limit");
    ASSERT_THAT(inflated, IsOk());
    EXPECT_TRUE(*inflated == body);
  }
}

TEST_P(ContentCodingTest, InflatesWhatZlibWroteAtAnyLevel) {
  const std::string body = RandomBody(200000, rng_);
  for (int level : {0, 6, 9}) {
    absl::StatusOr<std::string> inflated = Inflate(ZlibCompress(body, GetParam(), level), GetParam(), kNoLimit, "");
    ASSERT_THAT(inflated, IsOk());
    EXPECT_TRUE(*inflated == body) << level;
  }
}

TEST_P(ContentCodingTest, TruncatedCorruptAndTrailingDataAreInvalidArgument) {
  const char* name = GetParam() == ContentCoding::kGzip ? "gzip" : "deflate";
  const std::string prefix = absl::StrCat("request body (Content-Encoding: ", name, "): ");
  const std::string compressed = ZlibCompress(RandomBody(50000, rng_), GetParam(), 6);
  const std::string truncated = compressed.substr(0, compressed.size() / 2);
  EXPECT_THAT(Inflate(truncated, GetParam(), kNoLimit, ""),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       absl::StrCat(prefix, "the ", name, " data ends early (truncated after ", truncated.size(),
                                    " bytes)")));
  EXPECT_THAT(Inflate("{\"inputs\": []}", GetParam(), kNoLimit, ""),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       absl::StrCat(prefix, "not valid ", name, " data (incorrect header check)")));
  std::string flipped = compressed;
  flipped[flipped.size() - 3] ^= 0x55;  // the stored checksum (CRC-32 or Adler-32) no longer matches
  EXPECT_THAT(Inflate(flipped, GetParam(), kNoLimit, ""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(absl::StrCat(prefix, "not valid ", name))));
  if (GetParam() == ContentCoding::kDeflate) {
    EXPECT_THAT(Inflate(compressed + "junk", GetParam(), kNoLimit, ""),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         absl::StrCat(prefix, "4 bytes follow the end of the deflate data")));
  }
}

TEST_P(ContentCodingTest, AZipBombStopsAtTheLimit) {
  const std::string zeros(16 << 20, '\0');
  const std::string bomb = ZlibCompress(zeros, GetParam(), 9);
  ASSERT_LT(bomb.size(), 64u << 10);  // 16 MiB in a few KiB
  const char* name = GetParam() == ContentCoding::kGzip ? "gzip" : "deflate";
  EXPECT_THAT(Inflate(bomb, GetParam(), 1 << 20, "--http_max_body_bytes"),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       absl::StrCat("request body (Content-Encoding: ", name, "): inflates to more than 1048576 "
                                    "bytes, the largest request body this server takes (--http_max_body_bytes)")));
  // Exactly at the limit is fine; one byte under it is not.
  const std::string body = RandomBody(100000, rng_);
  const std::string compressed = ZlibCompress(body, GetParam(), 6);
  EXPECT_THAT(Inflate(compressed, GetParam(), body.size(), "--limit"), IsOk());
  EXPECT_THAT(Inflate(compressed, GetParam(), body.size() - 1, "--limit"),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("inflates to more than 99999 bytes")));
}

INSTANTIATE_TEST_SUITE_P(Codings, ContentCodingTest, ::testing::Values(ContentCoding::kGzip, ContentCoding::kDeflate),
                         [](const auto& info) { return std::string(ContentCodingName(info.param)); });

TEST(ContentCodingGzipTest, ConcatenatedMembersAreOneBody) {
  std::mt19937 rng(std::random_device{}());
  const std::string a = RandomBody(3000, rng), b = RandomBody(5000, rng);
  absl::StatusOr<std::string> inflated = Inflate(ZlibCompress(a, ContentCoding::kGzip, 6) +
                                                     ZlibCompress(b, ContentCoding::kGzip, 1),
                                                 ContentCoding::kGzip, kNoLimit, "");
  ASSERT_THAT(inflated, IsOk());
  EXPECT_TRUE(*inflated == a + b);
}

TEST(ContentCodingIdentityTest, PassesTheBodyThrough) {
  EXPECT_THAT(Inflate("abc", ContentCoding::kIdentity, 1, ""), IsOk());
  EXPECT_EQ(*Compress("abc", ContentCoding::kIdentity), "abc");
}

TEST(RequestCodingTest, KnownCodingsAnyCaseAndOthersUnimplemented) {
  EXPECT_EQ(*RequestCoding(nullptr), ContentCoding::kIdentity);
  EXPECT_EQ(*RequestCoding("identity"), ContentCoding::kIdentity);
  EXPECT_EQ(*RequestCoding(""), ContentCoding::kIdentity);
  EXPECT_EQ(*RequestCoding(" GZip "), ContentCoding::kGzip);
  EXPECT_EQ(*RequestCoding("x-gzip"), ContentCoding::kGzip);
  EXPECT_EQ(*RequestCoding("deflate"), ContentCoding::kDeflate);
  EXPECT_THAT(RequestCoding("br"), StatusIs(absl::StatusCode::kUnimplemented,
                                            "Content-Encoding 'br' is not supported: send the body as it is or "
                                            "with gzip or deflate"));
  EXPECT_THAT(RequestCoding("gzip, deflate"), StatusIs(absl::StatusCode::kUnimplemented,
                                                       HasSubstr("'gzip, deflate' is not supported")));
}

TEST(ResponseCodingTest, HighestQualityWinsAndTheFirstOnATie) {
  EXPECT_EQ(ResponseCoding(nullptr), ContentCoding::kIdentity);
  EXPECT_EQ(ResponseCoding("gzip"), ContentCoding::kGzip);
  EXPECT_EQ(ResponseCoding("GZIP"), ContentCoding::kGzip);
  EXPECT_EQ(ResponseCoding("deflate"), ContentCoding::kDeflate);
  EXPECT_EQ(ResponseCoding("deflate, gzip"), ContentCoding::kDeflate);  // curl --compressed: the first of a tie
  EXPECT_EQ(ResponseCoding("gzip, deflate, br, zstd"), ContentCoding::kGzip);
  EXPECT_EQ(ResponseCoding("gzip;q=0.5, deflate"), ContentCoding::kDeflate);
  EXPECT_EQ(ResponseCoding("gzip;q=0.5, deflate;q=0.4"), ContentCoding::kGzip);
  EXPECT_EQ(ResponseCoding("gzip ; q=0.2 , deflate ; q=0.9"), ContentCoding::kDeflate);
  EXPECT_EQ(ResponseCoding("gzip;q=0"), ContentCoding::kIdentity);
  EXPECT_EQ(ResponseCoding("identity, gzip;q=0.9"), ContentCoding::kIdentity);
  EXPECT_EQ(ResponseCoding("br, zstd, *"), ContentCoding::kIdentity);
  EXPECT_EQ(ResponseCoding("gzip;q=lots, deflate;q=0.1"), ContentCoding::kDeflate);
  EXPECT_EQ(ResponseCoding("gzip;q=2"), ContentCoding::kIdentity);
  EXPECT_EQ(ResponseCoding(",,;, gzip"), ContentCoding::kGzip);
}

}  // namespace
}  // namespace convoy::http
