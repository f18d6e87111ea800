// Phases in child processes, their output appended to the report as it comes (see supervisor.h).
#include "tests/gpu/supervisor.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <map>
#include <cstring>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "tests/gpu/case_runner.h"

namespace convoy::gpu_check {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct OpenCase {
  int index = -1;
  std::string label;
};

// What one child process did.
struct ChildOutcome {
  bool timed_out = false;
  int exit_code = -1;  // when it exited
  int signal = 0;      // when a signal killed it
  int last_closed = -1;
  std::optional<OpenCase> open;  // the case it was in when it ended, if any
};

// The report side of the protocol: counts PASS/FAIL/SKIP lines, follows @@case/@@end, forwards the rest.
class LineSink {
 public:
  explicit LineSink(Report& report) : report_(report) {}

  void Take(const std::string& line, ChildOutcome& outcome) {
    if (line.rfind("@@case ", 0) == 0) {
      std::vector<std::string> parts = absl::StrSplit(line.substr(7), absl::MaxSplits(' ', 1));
      OpenCase open;
      if (!parts.empty() && absl::SimpleAtoi(parts[0], &open.index)) {
        open.label = parts.size() > 1 ? parts[1] : "";
        outcome.open = open;
      }
      return;
    }
    if (line.rfind("@@end ", 0) == 0) {
      int index = -1;
      if (absl::SimpleAtoi(line.substr(6), &index)) outcome.last_closed = index;
      outcome.open.reset();
      return;
    }
    if (line.rfind("@@ratio ", 0) == 0) {  // a benchmark row's time ratio ours / cuDNN, per dtype
      std::vector<std::string> parts = absl::StrSplit(line.substr(8), ' ');
      double ratio = 0;
      if (parts.size() == 2 && absl::SimpleAtod(parts[1], &ratio) && ratio > 0) {
        for (const std::string& key : {parts[0], std::string("all")}) {
          log_ratio_[key].first += std::log(ratio);
          ++log_ratio_[key].second;
        }
      }
      return;
    }
    Count(line);
    report_.Line(line);
  }

  // The geometric-mean time ratio ours / cuDNN per dtype over every benchmark row (whichever process ran it).
  void ReportRatios() {
    for (const auto& [key, sum_count] : log_ratio_) {
      report_.Line(absl::StrFormat("geometric-mean time ratio ours/cuDNN (%s, %d layers): %.3f", key,
                                   sum_count.second, std::exp(sum_count.first / sum_count.second)));
    }
  }

  void Count(const std::string& line) {
    if (line.rfind("PASS ", 0) == 0) ++passed;
    if (line.rfind("FAIL ", 0) == 0) ++failed;
    if (line.rfind("SKIP ", 0) == 0) ++skipped;
  }

  void Emit(const std::string& line) {
    Count(line);
    report_.Line(line);
  }

  int passed = 0, failed = 0, skipped = 0;

 private:
  Report& report_;
  std::map<std::string, std::pair<double, int>> log_ratio_;  // per dtype: sum of log(ratio), count
};

std::string DescribeSignal(int signal) {
  const char* name = strsignal(signal);
  return absl::StrCat("signal ", signal, " (", name != nullptr ? name : "unknown", ")");
}

// Starts `argv` with stdout and stderr on a pipe; returns the pid and the pipe's read end.
bool Spawn(const std::vector<std::string>& argv, pid_t& pid, int& read_fd) {
  int fds[2];
  if (pipe(fds) != 0) return false;
  pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return false;
  }
  if (pid == 0) {
    setpgid(0, 0);  // its own process group: a timeout kills whatever it started too
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    close(fds[1]);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  read_fd = fds[0];
  return true;
}

// Runs one child to its end (or its deadline), feeding its lines to `sink`.
ChildOutcome RunChild(const std::vector<std::string>& argv, double time_cap_s, LineSink& sink) {
  ChildOutcome outcome;
  pid_t pid = -1;
  int fd = -1;
  if (!Spawn(argv, pid, fd)) {
    outcome.exit_code = 127;
    return outcome;
  }
  const auto start = Clock::now();
  std::string pending;
  char buffer[4096];
  for (;;) {
    const double left_s = time_cap_s - SecondsSince(start);
    if (left_s <= 0) {
      outcome.timed_out = true;
      kill(-pid, SIGKILL);
      break;
    }
    pollfd p{fd, POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(std::min(left_s * 1000.0, 1000.0)) + 1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: the child closed its output (it is exiting)
    pending.append(buffer, static_cast<size_t>(n));
    size_t newline;
    while ((newline = pending.find('\n')) != std::string::npos) {
      sink.Take(pending.substr(0, newline), outcome);
      pending.erase(0, newline + 1);
    }
  }
  if (!pending.empty() && !outcome.timed_out) sink.Take(pending, outcome);
  close(fd);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) outcome.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) outcome.signal = WTERMSIG(status);
  return outcome;
}

// Runs one phase to its end, restarting its process after a fault. Returns false when the phase failed outright
// (its process could not run a single case).
bool RunPhase(const SupervisorOptions& options, const PhaseSpec& phase, double time_cap_s, LineSink& sink) {
  const auto start = Clock::now();
  int resume = 0;
  for (int restarts = 0;; ++restarts) {
    std::vector<std::string> argv = {options.self, absl::StrCat("--phase=", phase.name),
                                     absl::StrCat("--resume=", resume)};
    argv.insert(argv.end(), options.child_flags.begin(), options.child_flags.end());
    const double left_s = time_cap_s - SecondsSince(start);
    const ChildOutcome outcome = RunChild(argv, left_s, sink);
    if (!outcome.timed_out && outcome.signal == 0 && (outcome.exit_code == 0 || outcome.exit_code == 1)) {
      return !(phase.required && outcome.exit_code != 0);
    }
    int next = outcome.last_closed + 1;
    if (outcome.open.has_value()) {
      const std::string why =
          outcome.timed_out ? absl::StrFormat("still running when the phase's %.0f s time cap was reached", time_cap_s)
          : outcome.signal != 0
              ? absl::StrCat("the process died during this case: ", DescribeSignal(outcome.signal))
              : absl::StrCat("the process exited with status ", outcome.exit_code, " during this case");
      sink.Emit(absl::StrCat("FAIL ", outcome.open->label, ": ", why));
      next = outcome.open->index + 1;
    } else if (outcome.exit_code != kContextLostExit) {
      sink.Emit(absl::StrCat("FAIL phase ", phase.name, ": the process ",
                             outcome.timed_out    ? "ran past the phase's time cap"
                             : outcome.signal != 0 ? "died: " + DescribeSignal(outcome.signal)
                                                   : absl::StrCat("exited with status ", outcome.exit_code),
                             " outside any case (after case ", outcome.last_closed, ")"));
      if (outcome.last_closed < 0) return !phase.required;
    }
    if (outcome.timed_out) {
      sink.Emit(absl::StrCat("SKIP phase ", phase.name, " from case ", next,
                             ": not run, the phase reached its time cap"));
      return true;
    }
    if (restarts + 1 > options.max_restarts_per_phase) {
      sink.Emit(absl::StrCat("FAIL phase ", phase.name, ": abandoned at case ", next, " after ", restarts + 1,
                             " process faults"));
      return true;
    }
    sink.Emit(absl::StrCat("  (", phase.name, ": resuming at case ", next, " in a new process)"));
    resume = next;
  }
}

}  // namespace

int RunSupervisor(const SupervisorOptions& options, Report& report) {
  LineSink sink(report);
  const auto start = Clock::now();
  for (const PhaseSpec& phase : options.phases) {
    const double left_s = options.budget_s - SecondsSince(start);
    if (left_s < 1) {
      sink.Emit(absl::StrFormat("SKIP phase %s: not started, the check's %.0f s budget is spent", phase.name,
                                options.budget_s));
      continue;
    }
    const auto phase_start = Clock::now();
    const bool ok = RunPhase(options, phase, std::min(phase.time_cap_s, left_s), sink);
    report.Line(absl::StrFormat("-- phase %s: %.1f s", phase.name, SecondsSince(phase_start)));
    if (!ok && phase.required) {
      sink.Emit(absl::StrCat("SKIP the remaining phases: phase ", phase.name, " failed"));
      break;
    }
  }
  sink.ReportRatios();
  report.Line(absl::StrFormat("-- all phases: %.1f s", SecondsSince(start)));
  report.Line(absl::StrFormat("gpu_check: %d passed, %d failed, %d skipped", sink.passed, sink.failed, sink.skipped));
  return sink.failed == 0 ? 0 : 1;
}

}  // namespace convoy::gpu_check
