// The GPU check's cases, as a phase's child process runs them (tests/gpu/supervisor.h starts one process per phase).
//
//   CaseRunner cases(options);                      // resume_from: cases before it were run by an earlier process
//   cases.Run("cuda.pool2d.direct " + problem.ToString(), [&] { return RunOneCase(...); });
//
// Each case is announced on stdout ("@@case <index> <label>"), then reported ("PASS <label>" or "FAIL <label>: <why>")
// and closed ("@@end <index>"), so the supervisor knows which case a process was in when it died. After a failing
// case the runner checks the CUDA context: a kernel fault (illegal address, trap, assert) is sticky on a GPU, every
// later call of the process would fail with it, so the process exits with kContextLostExit and the supervisor starts
// a new one at the next case. Lines that are neither go to the report as they are.
#ifndef CONVOY_TESTS_GPU_CASE_RUNNER_H_
#define CONVOY_TESTS_GPU_CASE_RUNNER_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace convoy::gpu_check {

// Exit status of a phase process whose CUDA context is unusable after a case (resume at the next case).
inline constexpr int kContextLostExit = 3;

// One line of the report: to stdout (the supervisor's pipe), flushed at once.
void PrintLine(absl::string_view line);
template <typename... Args>
void Say(const Args&... args) {
  PrintLine(absl::StrCat(args...));
}

// OK while the current CUDA context still works (waits for the device); the sticky error otherwise.
absl::Status CheckCudaContext();

class CaseRunner {
 public:
  explicit CaseRunner(int resume_from) : resume_from_(resume_from) {}

  // Runs case number next_index() unless it is before resume_from; reports it; exits the process with
  // kContextLostExit when the case left the CUDA context unusable. Returns whether the case passed (or was skipped
  // because an earlier process ran it).
  bool Run(const std::string& label, const std::function<absl::Status()>& body);
  // Like Run, but `body` runs in every process of the phase (it sets up what later cases use); it is reported only
  // by the process whose resume point is not past it.
  bool RunSetup(const std::string& label, const std::function<absl::Status()>& body);
  // Reports a case that is decided without running anything (a coverage gap, a setup failure).
  void Fail(const std::string& label, absl::string_view why);
  // Reports a case that did not run, with the reason (counted as skipped, never as passed).
  void Skip(const std::string& label, absl::string_view why);

  int next_index() const { return next_; }
  // True once this process has reached cases it runs itself (summaries of a loop print only then, once).
  bool past_resume_point() const { return next_ > resume_from_; }
  int passed() const { return passed_; }
  int failed() const { return failed_; }

 private:
  bool Claim(const std::string& label);  // false: an earlier process ran this index
  void Close(int index);
  bool Report(const std::string& label, int index, const absl::Status& status);

  const int resume_from_;
  int next_ = 0;
  int passed_ = 0, failed_ = 0;
};

}  // namespace convoy::gpu_check

#endif  // CONVOY_TESTS_GPU_CASE_RUNNER_H_
