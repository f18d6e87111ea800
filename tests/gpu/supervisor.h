// The GPU check's supervisor: runs each phase (an op family's cases, the whole plans, the benchmark, the model) in a
// child process of its own (this same binary with --phase=NAME), so a fault costs the case it happened in, not the
// report:
//   - every line a child prints is appended to the report (file and stdout) as it comes;
//   - a child that dies (a signal, an abort) or runs past its phase's time cap is marked FAIL on the case it was in
//     (from the "@@case" / "@@end" lines of case_runner.h), with the signal or the time, and a new process resumes
//     the phase at the next case;
//   - a child that exits with kContextLostExit (a sticky CUDA error after a case, already reported FAIL with the
//     CUDA error text) is restarted at the next case the same way;
//   - phases that would start past the overall budget are reported SKIP.
// The supervisor itself never touches CUDA. It ends the report with "gpu_check: N passed, M failed, K skipped".
#ifndef CONVOY_TESTS_GPU_SUPERVISOR_H_
#define CONVOY_TESTS_GPU_SUPERVISOR_H_

#include <string>
#include <vector>

#include "tests/gpu/gpu_check_report.h"

namespace convoy::gpu_check {

struct PhaseSpec {
  std::string name;
  double time_cap_s = 60;  // the child is killed past this (the case it was in FAILs, the rest is SKIPped)
  bool required = false;   // when it fails outright (no device), the check stops
};

struct SupervisorOptions {
  std::string self;                      // this binary (/proc/self/exe)
  std::vector<std::string> child_flags;  // passed to every phase process (--quick, --batches=...)
  std::vector<PhaseSpec> phases;
  double budget_s = 240;  // no phase starts after this many seconds; each phase's cap is cut to what is left
  int max_restarts_per_phase = 8;
};

// Runs the phases and returns the process exit status (0 when nothing failed).
int RunSupervisor(const SupervisorOptions& options, Report& report);

}  // namespace convoy::gpu_check

#endif  // CONVOY_TESTS_GPU_SUPERVISOR_H_
