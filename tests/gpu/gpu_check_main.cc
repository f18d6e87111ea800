// The GPU check driver (plain main, no GoogleTest): every CUDA algorithm of every op against the CPU reference on the
// device, run directly and again recorded into a CUDA graph on a stream of its own and replayed (as plans with
// cuda_graphs run), then a benchmark of every conv2d algorithm on the ResNet-50 conv layers against cuDNN's best.
//
//   gpu_check [--quick] [--no_bench] [--batches=1,8,32] [--bench_budget_s=180] [--out=FILE] [--probe]
//
// Prints one "PASS"/"FAIL" line per (algorithm, problem) case, the benchmark table, the geometric-mean time ratio
// (ours / cuDNN, below 1 = we are faster), and a closing "gpu_check: N passed, M failed" line; exits 1 on any
// failure. --quick (the emulated CI run) checks only the extra problems and benchmarks two tiny layers with one
// repetition. Built by tests/gpu/CMakeLists.txt (real GPU) or Bazel's //tests/gpu:gpu_check_emulated.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "kernels/cuda/conv2d_gemm_test_problems.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/registry/registry.h"
#include "kernels/testing/cross_backend_suite.h"
#include "kernels/testing/test_tensors.h"
#include "tests/gpu/cudnn_bench.h"
#include "tests/gpu/gpu_check_report.h"
#include "tests/gpu/plan_check.h"

namespace convoy::gpu_check {
namespace {

struct Options {
  bool quick = false;
  bool bench = true;
  std::vector<int> batches = {1, 8, 32};
  std::string out;
  double bench_budget_s = 180;  // benchmark rows past this many seconds are reported as skipped, not run
};

template <typename Op>
void CheckOp(const std::vector<typename Op::Problem>& problems, cuda::CudaDevice& device, Report& report,
             Counts& counts, bool require_coverage = true, bool recorded = false) {
  const char* how = recorded ? " [graph]" : "";
  const auto algorithms = OpRegistry<Op>::Global().All(Backend::kCuda);
  std::map<std::string, int> ran;
  for (const auto* algorithm : algorithms) ran[std::string(algorithm->name())] = 0;
  for (size_t i = 0; i < problems.size(); ++i) {
    const auto& problem = problems[i];
    const testing::Tolerance tolerance = testing::OpCaseTraits<typename Op::Problem>::TolerancePerOutput(problem);
    const uint32_t seed = 20240601 + 64 * static_cast<uint32_t>(i);
    for (const auto* algorithm : algorithms) {
      if (!algorithm->CanImplement(problem).ok()) continue;
      const absl::Status status =
          testing::cross_backend_internal::RunOneCase<Op>(*algorithm, problem, device, seed, tolerance, recorded);
      ++ran[std::string(algorithm->name())];
      if (status.ok()) {
        ++counts.passed;
        report.Line("PASS ", algorithm->name(), how, " ", problem.ToString());
      } else {
        ++counts.failed;
        report.Line("FAIL ", algorithm->name(), how, " ", problem.ToString(), " (seed ", seed, "): ",
                    status.message());
      }
    }
  }
  for (const auto& [name, count] : ran) {
    report.Line("  ", name, how, ": ", count, " cases");
    if (count == 0 && require_coverage) {
      ++counts.failed;
      report.Line("FAIL ", name, " ran on no problem");
    }
  }
  if (algorithms.empty()) {
    ++counts.failed;
    report.Line("FAIL no CUDA algorithm registered for ", OpKindName(Op::Problem::kKind));
  }
}

// Every op besides conv2d and GEMM (their own problem lists above) on the shared problem list
// (kernels/testing/problem_list.h).
void CheckOtherOps(cuda::CudaDevice& device, Report& report, Counts& counts, bool recorded) {
  ForEachOp([&](auto tag) {
    using Op = typename decltype(tag)::type;
    if constexpr (Op::kKind != OpKind::kConv2d && Op::kKind != OpKind::kGemm) {
      CheckOp<Op>(testing::ProblemsFor<typename Op::Problem>(), device, report, counts, true, recorded);
    }
  });
}

// A device buffer of `count` elements of `dtype`, uniform in [-1, 1).
absl::StatusOr<DeviceAllocation> RandomDeviceBuffer(cuda::CudaDevice& device, DataType dtype, int64_t count,
                                                    uint32_t seed) {
  CONVOY_ASSIGN_OR_RETURN(HostBuffer host, testing::RandomBuffer(dtype, count, seed));
  const size_t bytes = static_cast<size_t>(count) * DataTypeSize(dtype);
  CONVOY_ASSIGN_OR_RETURN(DeviceAllocation buffer, device.Allocate(bytes));
  CONVOY_RETURN_IF_ERROR(device.CopyToDevice(buffer.data(), host.data(), bytes));
  return buffer;
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0.0 : values[values.size() / 2];
}

struct BenchRow {
  std::string layer, dtype, ours_algorithm, cudnn_algorithm;
  double ours_ms = 0, cudnn_ms = 0, flops = 0;
  bool cudnn_fused = false;
};

// Times every CUDA conv algorithm that implements `problem` (one warm-up, then enough repetitions for ~20 ms) and
// cuDNN's best; returns the row, or an error for a layer nothing could run.
absl::StatusOr<BenchRow> BenchLayer(const testing::ResNetLayer& layer, cuda::CudaDevice& device, void* workspace,
                                    size_t workspace_bytes, bool quick, Report& report) {
  const Conv2dProblem& p = layer.problem;
  CONVOY_ASSIGN_OR_RETURN(DeviceAllocation x, RandomDeviceBuffer(device, p.dtype, p.input_desc().num_elements(), 1));
  CONVOY_ASSIGN_OR_RETURN(DeviceAllocation w, RandomDeviceBuffer(device, p.dtype, p.filter_elements(), 2));
  CONVOY_ASSIGN_OR_RETURN(DeviceAllocation bias, RandomDeviceBuffer(device, DataType::kFloat32, p.k, 3));
  const size_t y_bytes = static_cast<size_t>(p.output_desc().num_elements()) * DataTypeSize(p.dtype);
  CONVOY_ASSIGN_OR_RETURN(DeviceAllocation y, device.Allocate(y_bytes));
  BenchRow row{layer.name, std::string(DataTypeName(p.dtype)) + (p.allow_tf32 ? "/TF32" : ""), "", "", 0, 0,
               static_cast<double>(p.flops())};
  for (const Conv2dAlgorithm* algorithm : OpRegistry<Conv2dOp>::Global().Candidates(p, Backend::kCuda)) {
    Conv2dArgs args;
    args.x = x.data(), args.w = w.data(), args.bias = bias.as<float>(), args.y = y.data();
    const size_t need = algorithm->WorkspaceBytes(p);
    if (need > workspace_bytes || algorithm->PackedFilterBytes(p) > 0) continue;  // none of ours needs either yet
    auto run = [&] { return algorithm->Run(p, args, Workspace{workspace, need}, device.context()); };
    absl::StatusOr<std::vector<double>> first = device.TimeRuns(run, 1, 1);
    if (!first.ok()) {
      report.Line("  ", layer.name, ": ", algorithm->name(), " failed: ", first.status().message());
      continue;
    }
    const int reps = quick ? 1 : std::clamp(static_cast<int>(20.0 / std::max((*first)[0], 1e-3)), 3, 50);
    CONVOY_ASSIGN_OR_RETURN(std::vector<double> times, device.TimeRuns(run, 0, reps));
    const double ms = Median(times);
    if (row.ours_algorithm.empty() || ms < row.ours_ms) {
      row.ours_ms = ms;
      row.ours_algorithm = std::string(algorithm->name());
    }
  }
  if (row.ours_algorithm.empty()) return absl::InternalError(absl::StrCat(layer.name, ": no algorithm ran"));
  absl::StatusOr<CudnnTiming> cudnn =
      TimeCudnnConv(p, x.data(), w.data(), y.data(), workspace, workspace_bytes, device.context().cuda_stream, 20);
  if (cudnn.ok()) {
    row.cudnn_algorithm = cudnn->algorithm;
    row.cudnn_ms = cudnn->milliseconds;
    row.cudnn_fused = cudnn->fused;
  } else if (CudnnBenchAvailable().ok()) {
    report.Line("  ", layer.name, ": cuDNN failed: ", cudnn.status().message());
  }
  return row;
}

void RunBenchmark(const Options& options, cuda::CudaDevice& device, Report& report, Counts& counts) {
  const absl::Status cudnn = CudnnBenchAvailable();
  report.Line("");
  report.Line("== Benchmark: ResNet-50 conv layers, bias+ReLU epilogue, median of CUDA-event timings ==");
  if (device.emulated()) report.Line("(emulated device: the times below are CPU emulation times, not GPU times)");
  report.Line(cudnn.ok() ? absl::StrCat("cuDNN ", CudnnVersionString(), ": best of its own Find, fused bias+ReLU")
                         : absl::StrCat("cuDNN: SKIPPED (", cudnn.message(), ")"));
  const size_t workspace_bytes = options.quick ? (1 << 20) : (size_t{512} << 20);
  absl::StatusOr<DeviceAllocation> workspace = device.Allocate(workspace_bytes);
  if (!workspace.ok()) {
    ++counts.failed;
    report.Line("FAIL workspace: ", workspace.status().message());
    return;
  }
  std::vector<testing::ResNetLayer> layers;
  for (const auto& [dtype, label] : {std::pair{DataType::kFloat16, "FP16"}, std::pair{DataType::kFloat32, "TF32"}}) {
    for (int batch : options.batches) {
      for (testing::ResNetLayer& layer : testing::ResNet50ConvLayers(batch, dtype, Layout::kNHWC)) {
        if (options.quick) {  // tiny stand-ins of two layer kinds, for the emulated run
          if (layer.name.rfind("res5_3x3_512", 0) != 0 && layer.name.rfind("res5_1x1_2048", 0) != 0) continue;
          layer.problem.c = 16, layer.problem.k = 32, layer.problem.h = layer.problem.w = 6;
        }
        layers.push_back(std::move(layer));
      }
    }
  }
  report.Line(absl::StrFormat("%-22s %-9s %-30s %9s %-22s %9s %7s %8s %8s", "layer", "dtype", "our best",
                              "ours ms", "cuDNN algo", "cuDNN ms", "ratio", "TFLOP/s", "cuDNN"));
  std::map<std::string, std::pair<double, int>> log_ratio;  // per dtype: sum of log(ratio), count
  const auto start = std::chrono::steady_clock::now();
  int skipped = 0;
  for (const testing::ResNetLayer& layer : layers) {
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > options.bench_budget_s) {
      ++skipped;
      report.Line(absl::StrFormat("%-22s SKIPPED (past the %.0f s benchmark budget)", layer.name,
                                  options.bench_budget_s));
      continue;
    }
    absl::StatusOr<BenchRow> row = BenchLayer(layer, device, workspace->data(), workspace_bytes, options.quick, report);
    if (!row.ok()) {
      ++counts.failed;
      report.Line("FAIL bench ", layer.name, ": ", row.status().message());
      continue;
    }
    const double ours_tflops = row->flops / (row->ours_ms * 1e-3) / 1e12;
    std::string cudnn_ms = "-", ratio = "-", cudnn_tflops = "-";
    if (row->cudnn_ms > 0) {
      const double r = row->ours_ms / row->cudnn_ms;
      cudnn_ms = absl::StrFormat("%.4f", row->cudnn_ms);
      ratio = absl::StrFormat("%.2f", r);
      cudnn_tflops = absl::StrFormat("%.1f", row->flops / (row->cudnn_ms * 1e-3) / 1e12);
      for (const std::string& key : {row->dtype, std::string("all")}) {
        log_ratio[key].first += std::log(r);
        ++log_ratio[key].second;
      }
    }
    report.Line(absl::StrFormat("%-22s %-9s %-30s %9.4f %-22s %9s %7s %8.1f %8s", row->layer, row->dtype,
                                row->ours_algorithm, row->ours_ms,
                                row->cudnn_algorithm + (row->cudnn_ms > 0 && !row->cudnn_fused ? " (conv only)" : ""),
                                cudnn_ms, ratio, ours_tflops, cudnn_tflops));
  }
  for (const auto& [key, sum_count] : log_ratio) {
    report.Line(absl::StrFormat("geometric-mean time ratio ours/cuDNN (%s, %d layers): %.3f", key, sum_count.second,
                                std::exp(sum_count.first / sum_count.second)));
  }
  if (log_ratio.empty()) report.Line("geometric-mean time ratio: n/a (cuDNN skipped)");
  if (skipped > 0) report.Line(skipped, " benchmark rows skipped for time (raise --bench_budget_s)");
}

Options ParseOptions(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << "usage: gpu_check [--quick] [--no_bench] [--batches=1,8,32] [--bench_budget_s=180] [--out=FILE] "
                   "[--probe]\n(tests/gpu/run_gpu_check.sh runs it; docs/cuda_kernels.md)\n";
      std::exit(0);
    } else if (arg == "--probe") {  // the binary starts (libraries resolve): used by run_gpu_check.sh before trusting it
      std::cout << "gpu_check: probe OK\n";
      std::exit(0);
    } else if (arg == "--quick") {
      options.quick = true;
    } else if (arg == "--no_bench") {
      options.bench = false;
    } else if (arg.rfind("--batches=", 0) == 0) {
      options.batches.clear();
      for (absl::string_view part : absl::StrSplit(arg.substr(10), ',')) {
        int batch = 0;
        if (absl::SimpleAtoi(part, &batch) && batch > 0) options.batches.push_back(batch);
      }
    } else if (arg.rfind("--bench_budget_s=", 0) == 0) {
      if (!absl::SimpleAtod(arg.substr(17), &options.bench_budget_s)) std::exit(2);
    } else if (arg.rfind("--out=", 0) == 0) {
      options.out = arg.substr(6);
    } else {
      std::cerr << "unknown flag " << arg << "\n";
      std::exit(2);
    }
  }
  if (options.quick) options.batches = {1};
  return options;
}

int Main(int argc, char** argv) {
  const Options options = ParseOptions(argc, argv);
  Report report(options.out);
  absl::StatusOr<std::unique_ptr<cuda::CudaDevice>> device = cuda::CudaDevice::Create({});
  if (!device.ok()) {
    report.Line("FAIL no CUDA device: ", device.status().message());
    report.Line("gpu_check: 0 passed, 1 failed");
    return 1;
  }
  report.Line("device: ", (*device)->Identity(), options.quick ? "  (--quick subset)" : "");
  Counts counts;
  report.Line("== Correctness: every CUDA algorithm of every op against the CPU reference ==");
  CheckOp<Conv2dOp>(options.quick ? testing::CudaConvExtraProblems() : testing::CudaConvTestProblems(), **device,
                    report, counts);
  CheckOp<GemmOp>(options.quick ? testing::CudaGemmExtraProblems() : testing::CudaGemmTestProblems(), **device,
                  report, counts);
  CheckOtherOps(**device, report, counts, /*recorded=*/false);
  report.Line("== The same, recorded into a CUDA graph on a stream of its own and replayed ==");
  CheckOp<Conv2dOp>(testing::CudaConvExtraProblems(), **device, report, counts, true, /*recorded=*/true);
  CheckOp<GemmOp>(testing::CudaGemmExtraProblems(), **device, report, counts, true, /*recorded=*/true);
  CheckOtherOps(**device, report, counts, /*recorded=*/true);
  if (!options.quick) {  // full-size layers (batch 1, FP16) against the reference, for the tensor-core kernels
    std::vector<Conv2dProblem> full;
    for (const testing::ResNetLayer& layer : testing::ResNet50ConvLayers(1, DataType::kFloat16, Layout::kNHWC)) {
      if (layer.name == "res2_3x3_64_b1" || layer.name == "res4_1x1_1024_b1" || layer.name == "res5_3x3s2_512_b1") {
        full.push_back(layer.problem);
      }
    }
    report.Line("-- full-size ResNet-50 layers (batch 1, FP16) --");
    CheckOp<Conv2dOp>(full, **device, report, counts, /*require_coverage=*/false);
  }
  CheckPlans(**device, options.quick, report, counts);
  if (options.bench) RunBenchmark(options, **device, report, counts);
  report.Line("gpu_check: ", counts.passed, " passed, ", counts.failed, " failed");
  return counts.failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace convoy::gpu_check

int main(int argc, char** argv) { return convoy::gpu_check::Main(argc, argv); }
