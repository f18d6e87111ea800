// A stand-in for gtest/gtest.h for the GPU check driver, which is built without GoogleTest (the GPU machine may
// lack it). The driver calls cross_backend_internal::RunOneCase (plain absl::Status) and never the gtest-reporting
// templates of kernels/testing/cross_backend_suite.h; this header only lets that header parse. Any use of these
// macros at run time records a failure the driver reports.
#ifndef CONVOY_TESTS_GPU_GTEST_STUB_GTEST_GTEST_H_
#define CONVOY_TESTS_GPU_GTEST_STUB_GTEST_GTEST_H_

#include <iostream>

namespace convoy_gtest_stub {
inline int& Failures() {
  static int failures = 0;
  return failures;
}
// Swallows what a failing assertion streams, after counting the failure.
struct FailureSink {
  explicit FailureSink(bool failed) : failed_(failed) {
    if (failed_) ++Failures();
  }
  template <typename T>
  FailureSink& operator<<(const T& value) {
    if (failed_) std::cerr << value;
    return *this;
  }
  ~FailureSink() {
    if (failed_) std::cerr << "\n";
  }
  bool failed_;
};
}  // namespace convoy_gtest_stub

#define ADD_FAILURE() ::convoy_gtest_stub::FailureSink(true)
#define EXPECT_TRUE(condition) ::convoy_gtest_stub::FailureSink(!(condition))
#define EXPECT_GT(a, b) ::convoy_gtest_stub::FailureSink(!((a) > (b)))

#endif  // CONVOY_TESTS_GPU_GTEST_STUB_GTEST_GTEST_H_
