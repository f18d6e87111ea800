#include "kernels/common/status_macros.h"

#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"

namespace convoy {
namespace {

using ::convoy::testing::IsOk;
using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;

absl::StatusOr<int> Half(int x) {
  if (x % 2 != 0) return absl::InvalidArgumentError("odd value " + std::to_string(x));
  return x / 2;
}

absl::StatusOr<int> Quarter(int x) {
  CONVOY_ASSIGN_OR_RETURN(int half, Half(x));
  CONVOY_ASSIGN_OR_RETURN(int quarter, Half(half));
  return quarter;
}

absl::Status CheckQuarter(int x) {
  CONVOY_RETURN_IF_ERROR(Quarter(x).status());
  return absl::OkStatus();
}

TEST(StatusMacrosTest, PropagatesFirstError) {
  EXPECT_THAT(Quarter(6), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("odd value 3")));
  EXPECT_THAT(CheckQuarter(5), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("odd value 5")));
}

TEST(StatusMacrosTest, PassesValuesThrough) {
  CONVOY_ASSERT_OK_AND_ASSIGN(int q, Quarter(12));
  EXPECT_EQ(q, 3);
  EXPECT_THAT(CheckQuarter(8), IsOk());
}

}  // namespace
}  // namespace convoy
