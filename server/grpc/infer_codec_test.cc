// TopKClasses: Triton's "score:index:label" strings, highest first, NaN last, k clamped, labels optional.
#include "server/grpc/infer_codec.h"

#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace convoy::grpc_server {
namespace {

using ::testing::ElementsAre;

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
