// CheckWorkspaceBytes: OK from the needed size up, and below it INVALID_ARGUMENT naming the algorithm, the bytes given
// and the bytes needed, for random sizes.
#include "kernels/registry/check_workspace.h"

#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"

namespace convoy {
namespace {

using ::convoy::testing::IsOk;
using ::convoy::testing::StatusIs;

TEST(CheckWorkspaceBytesTest, AcceptsEnoughAndNamesTheShortfall) {
  std::mt19937_64 rng{std::random_device{}()};
  for (int i = 0; i < 100; ++i) {
    const size_t needed = std::uniform_int_distribution<size_t>(1, size_t{1} << 40)(rng);
    const size_t extra = std::uniform_int_distribution<size_t>(0, 4096)(rng);
    const size_t short_by = std::uniform_int_distribution<size_t>(1, needed)(rng);
    const std::string name = absl::StrCat("cpu.test.algorithm_", i);
    EXPECT_THAT(CheckWorkspaceBytes(name, Workspace{nullptr, needed}, needed), IsOk());
    EXPECT_THAT(CheckWorkspaceBytes(name, Workspace{nullptr, needed + extra}, needed), IsOk());
    EXPECT_THAT(CheckWorkspaceBytes(name, Workspace{nullptr, needed - short_by}, needed),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         ::testing::StrEq(absl::StrCat(name, ": workspace of ", needed - short_by, " bytes, needs ",
                                                       needed))));
  }
}

}  // namespace
}  // namespace convoy
