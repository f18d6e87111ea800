// The GPU check driver (plain main, no GoogleTest). Without --phase it is the supervisor (supervisor.h): it runs each
// phase below in a child process of its own (this binary with --phase=NAME) and writes the report as lines come:
//
//   device           the GPU, its peak, cuDNN's version (required: without a device the check stops here)
//   ops.<op>         every CUDA algorithm of the op against the CPU reference, directly and as a replayed CUDA
//                    graph (ops_check.h); ops.conv2d_full: three full-size ResNet-50 layers (not with --quick)
//   plans            whole plans, step by step and as CUDA graphs (plan_check.h)
//   bench            ResNet-50 conv layers, ours against cuDNN's best (conv_bench.h; not with --no_bench)
//   bench_int8       the same layers in INT8 (batch <= 8), ours against cuDNN's INT8 convolution (not with --no_bench)
//   model            ResNet-50 through ModelRuntime (model_bench.h; only with --model_dir)
//
//   gpu_check [--quick] [--no_bench] [--batches=1,8,32] [--model_dir=DIR] [--model_batches=1,8,32,64]
//             [--budget_s=240] [--phases=device,ops.conv2d,...] [--out=FILE] [--probe]
//
// The report has one PASS/FAIL/SKIP line per case, the benchmark table, the geometric-mean time ratio ours / cuDNN
// per dtype, and the closing "gpu_check: N passed, M failed, K skipped"; the exit status is 1 on any failure.
// --quick (the emulated CI run) checks the extra problems only and benchmarks two tiny layers once.
// Built by Bazel: //tests/gpu:gpu_check (the nvcc-built kernels, where CUDA is installed) and
// //tests/gpu:gpu_check_emulated (the same driver on the CUDA emulation).
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "kernels/cuda/cuda_device.h"
#include "tests/gpu/case_runner.h"
#include "tests/gpu/conv_bench.h"
#include "tests/gpu/cudnn_bench.h"
#include "tests/gpu/gpu_check_report.h"
#include "tests/gpu/model_bench.h"
#include "tests/gpu/ops_check.h"
#include "tests/gpu/plan_check.h"
#include "tests/gpu/supervisor.h"

#if defined(CONVOY_CUDA_EMULATION)
#include "kernels/cuda_emulation/cuda_host_api.h"
#endif

namespace convoy::gpu_check {
namespace {

struct Options {
  bool quick = false;
  bool bench = true;
  std::vector<int> batches = {1, 8, 32};
  std::vector<int> model_batches = {1, 8, 32, 64};
  std::string model_dir;
  std::string out;
  std::string phase;                // set: run this one phase (a child of the supervisor)
  std::vector<std::string> phases;  // set: run only these phases
  int resume = 0;
  double budget_s = 240;
  std::vector<std::string> child_flags;  // what every phase process gets
};

std::vector<int> ParseInts(absl::string_view list) {
  std::vector<int> values;
  for (absl::string_view part : absl::StrSplit(list, ',')) {
    int v = 0;
    if (absl::SimpleAtoi(part, &v) && v > 0) values.push_back(v);
  }
  return values;
}

Options ParseOptions(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](absl::string_view flag) { return arg.substr(flag.size()); };
    auto has = [&](absl::string_view flag) { return arg.rfind(std::string(flag), 0) == 0; };
    bool for_children = true;
    if (arg == "--help" || arg == "-h") {
      std::cout << "usage: gpu_check [--quick] [--no_bench] [--batches=1,8,32] [--model_batches=...] [--model_dir=DIR]\n"
                   "                 [--budget_s=S] [--phases=a,b] [--out=FILE] [--probe]\n"
                   "(tests/gpu/run_gpu_check.sh runs it; docs/cuda_kernels.md)\n";
      std::exit(0);
    } else if (arg == "--probe") {  // the binary starts (libraries resolve): run_gpu_check.sh tries it before trusting it
      std::cout << "gpu_check: probe OK\n";
      std::exit(0);
    } else if (arg == "--quick") {
      o.quick = true;
    } else if (arg == "--no_bench") {
      o.bench = false;
    } else if (has("--batches=")) {
      o.batches = ParseInts(value("--batches="));
    } else if (has("--model_batches=")) {
      o.model_batches = ParseInts(value("--model_batches="));
    } else if (has("--model_dir=")) {
      o.model_dir = value("--model_dir=");
    } else if (has("--budget_s=")) {
      for_children = false;
      if (!absl::SimpleAtod(value("--budget_s="), &o.budget_s)) std::exit(2);
    } else if (has("--out=")) {
      for_children = false;
      o.out = value("--out=");
    } else if (has("--phase=")) {
      for_children = false;
      o.phase = value("--phase=");
    } else if (has("--phases=")) {
      for_children = false;
      o.phases = absl::StrSplit(value("--phases="), ',', absl::SkipEmpty());
    } else if (has("--resume=")) {
      for_children = false;
      if (!absl::SimpleAtoi(value("--resume="), &o.resume)) std::exit(2);
    } else {
      std::cerr << "unknown flag " << arg << "\n";
      std::exit(2);
    }
    if (for_children) o.child_flags.push_back(arg);
  }
  if (o.quick) o.batches = {1};
  if (o.batches.empty() || o.model_batches.empty()) {
    std::cerr << "--batches and --model_batches need positive integers\n";
    std::exit(2);
  }
  return o;
}

// Phases in order, with their time caps (seconds on an H200; the supervisor also cuts them to the budget left).
std::vector<PhaseSpec> PhaseList(const Options& o) {
  std::vector<PhaseSpec> phases = {{"device", 30, /*required=*/true}};
  for (const std::string& name : OpsPhaseNames(o.quick)) phases.push_back({name, name == "ops.conv2d" ? 60.0 : 30.0});
  phases.push_back({"plans", 40});
  if (!o.model_dir.empty()) phases.push_back({"model", 80});
  if (o.bench) phases.push_back({"bench", 120});
  if (o.bench) phases.push_back({"bench_int8", 60});
  if (o.phases.empty()) return phases;
  std::vector<PhaseSpec> chosen;
  for (const PhaseSpec& p : phases) {
    if (p.required || std::find(o.phases.begin(), o.phases.end(), p.name) != o.phases.end()) chosen.push_back(p);
  }
  return chosen;
}

// One phase, in this process.
int RunChildPhase(const Options& o) {
#if defined(CONVOY_CUDA_EMULATION)
  // As on a GPU: a faulting kernel leaves the context unusable for the rest of the process.
  cuda_emulation::SetStickyKernelFaults(true);
#endif
  CaseRunner cases(o.resume);
  absl::StatusOr<std::unique_ptr<cuda::CudaDevice>> device = cuda::CudaDevice::Create({});
  if (!device.ok()) {
    cases.Fail("device", device.status().message());
    return 1;
  }
  cuda::CudaDevice& gpu = **device;
  if (o.phase == "device") {
    Say("device: ", gpu.Identity(), " (", gpu.info().ToString(), ")", o.quick ? "  (--quick subset)" : "");
    const absl::Status cudnn = CudnnBenchAvailable();
    Say("cuDNN: ", cudnn.ok() ? CudnnVersionString() : std::string(cudnn.message()));
    cases.Run("device " + gpu.Identity(), CheckCudaContext);
  } else if (o.phase.rfind("ops.", 0) == 0) {
    if (!RunOpsPhase(o.phase, o.quick, gpu, cases)) {
      std::cerr << "unknown phase " << o.phase << "\n";
      return 2;
    }
  } else if (o.phase == "plans") {
    CheckPlans(gpu, o.quick, cases);
  } else if (o.phase == "bench") {
    RunConvBench({o.batches, o.quick}, gpu, cases);
  } else if (o.phase == "bench_int8") {
    RunConvBenchInt8({o.batches, o.quick}, gpu, cases);
  } else if (o.phase == "model") {
    RunModelBench({o.model_dir, o.model_batches, o.quick}, gpu, cases);
  } else {
    std::cerr << "unknown phase " << o.phase << "\n";
    return 2;
  }
  return cases.failed() == 0 ? 0 : 1;
}

int Main(int argc, char** argv) {
  const Options o = ParseOptions(argc, argv);
  if (!o.phase.empty()) return RunChildPhase(o);
  Report report(o.out);
  SupervisorOptions supervisor;
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  supervisor.self = n > 0 ? std::string(self, static_cast<size_t>(n)) : std::string(argv[0]);
  supervisor.child_flags = o.child_flags;
  supervisor.phases = PhaseList(o);
  supervisor.budget_s = o.budget_s;
  return RunSupervisor(supervisor, report);
}

}  // namespace
}  // namespace convoy::gpu_check

int main(int argc, char** argv) { return convoy::gpu_check::Main(argc, argv); }
