// GoogleTest matchers for absl::Status and absl::StatusOr (Debian's Abseil has none).
//
//   EXPECT_THAT(DoThing(), IsOk());
//   EXPECT_THAT(Parse(bad), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("input 'x'")));
//   CONVOY_ASSERT_OK_AND_ASSIGN(auto v, MakeValue());
#ifndef CONVOY_KERNELS_COMMON_STATUS_MATCHERS_H_
#define CONVOY_KERNELS_COMMON_STATUS_MATCHERS_H_

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace convoy::testing {

inline const absl::Status& GetStatus(const absl::Status& status) { return status; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}

MATCHER(IsOk, "is OK") {
  const absl::Status& status = ::convoy::testing::GetStatus(arg);
  if (!status.ok()) *result_listener << "status is " << status.ToString();
  return status.ok();
}

MATCHER_P2(StatusIs, code, message_matcher, "") {
  const absl::Status& status = ::convoy::testing::GetStatus(arg);
  *result_listener << "status is " << status.ToString();
  return status.code() == code &&
         ::testing::Matches(message_matcher)(std::string(status.message()));
}

}  // namespace convoy::testing

#define CONVOY_ASSERT_OK(expr) ASSERT_THAT((expr), ::convoy::testing::IsOk())
#define CONVOY_EXPECT_OK(expr) EXPECT_THAT((expr), ::convoy::testing::IsOk())

#define CONVOY_ASSERT_OK_AND_ASSIGN(lhs, expr)                                                  \
  CONVOY_ASSERT_OK_AND_ASSIGN_IMPL_(CONVOY_MATCHERS_CONCAT_(convoy_statusor_, __LINE__), lhs, expr)
#define CONVOY_MATCHERS_CONCAT_INNER_(a, b) a##b
#define CONVOY_MATCHERS_CONCAT_(a, b) CONVOY_MATCHERS_CONCAT_INNER_(a, b)
#define CONVOY_ASSERT_OK_AND_ASSIGN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                       \
  ASSERT_TRUE(statusor.ok()) << statusor.status().ToString();   \
  lhs = std::move(statusor).value()

#endif  // CONVOY_KERNELS_COMMON_STATUS_MATCHERS_H_
