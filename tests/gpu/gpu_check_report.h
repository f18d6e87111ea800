// The GPU check's report: every line to stdout and to the report file (flushed per line, so a report cut short by a
// timeout still holds everything up to that point).
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

}  // namespace convoy::gpu_check

#endif  // CONVOY_TESTS_GPU_GPU_CHECK_REPORT_H_
