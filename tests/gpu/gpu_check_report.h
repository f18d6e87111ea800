// What the GPU check prints: every line to stdout and to the report file, and the pass/fail counts behind its closing
// "gpu_check: N passed, M failed" line.
#ifndef CONVOY_TESTS_GPU_GPU_CHECK_REPORT_H_
#define CONVOY_TESTS_GPU_GPU_CHECK_REPORT_H_

#include <fstream>
#include <iostream>
#include <string>

#include "absl/strings/str_cat.h"

namespace convoy::gpu_check {

class Report {
 public:
  explicit Report(const std::string& path) {
    if (!path.empty()) file_.open(path);
  }
  template <typename... Args>
  void Line(const Args&... args) {
    const std::string line = absl::StrCat(args...);
    std::cout << line << "\n" << std::flush;
    if (file_.is_open()) file_ << line << "\n" << std::flush;
  }

 private:
  std::ofstream file_;
};

struct Counts {
  int passed = 0, failed = 0;
};

}  // namespace convoy::gpu_check

#endif  // CONVOY_TESTS_GPU_GPU_CHECK_REPORT_H_
