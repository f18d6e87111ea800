// Every registered CPU pool2d algorithm that implements it, side by side on the ResNets' stem max pool (3x3, stride 2,
// padding 1, 64 channels, 112x112 -> 56x56; NHWC) in FP32 and BF16 at the given batch: cpu.pool2d.max_nhwc (per
// instruction set), cpu.pool2d.onednn_nhwc (oneDNN's pooling; its implementation named) and cpu.pool2d.direct. The
// median and the fastest of REPS runs each, the algorithms alternating run by run after 3 warm-up runs.
//
//   bazel build //kernels/benchmarks:max_pool_bench
//   bazel-bin/kernels/benchmarks/max_pool_bench BATCH THREADS REPS     # e.g. 1 2 200
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "kernels/common/dtype.h"
#include "kernels/common/thread_pool.h"
#include "kernels/cpu/cpu_device.h"
#include "kernels/registry/registry.h"

namespace convoy {
namespace {

struct Candidate {
  const Pool2dAlgorithm* algorithm;
  std::unique_ptr<AlgorithmState> state;
  std::vector<uint8_t> workspace;
  std::vector<double> times;
};

int Main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s BATCH THREADS REPS\n", argv[0]);
    return 2;
  }
  const int n = std::atoi(argv[1]), threads = std::atoi(argv[2]), reps = std::atoi(argv[3]);
  auto device = CpuDevice::Create(CpuDevice::Options{threads});
  if (!device.ok()) return 2;
  const ExecutionContext context = (*device)->context();
  std::printf("CPU: %s; batch %d, %d thread(s); median and fastest of %d alternating runs, ms\n",
              CpuModelName().c_str(), n, threads, reps);
  for (DataType dtype : {DataType::kFloat32, DataType::kBFloat16}) {
    Pool2dProblem p;
    p.mode = PoolMode::kMax, p.n = n, p.c = 64, p.h = p.w = 112, p.r = p.s = 3, p.stride_h = p.stride_w = 2;
    p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = 1;
    p.dtype = dtype, p.layout = Layout::kNHWC;
    const size_t in = size_t(n) * 64 * 112 * 112, out = size_t(n) * 64 * p.p() * p.q();
    std::vector<uint8_t> x(in * DataTypeSize(dtype)), y(out * DataTypeSize(dtype));
    for (size_t i = 0; i < in; ++i) StoreFromFloat(x.data(), dtype, i, float(i % 251) / 251.0f - 0.3f);
    std::vector<Candidate> candidates;
    for (const auto* a : OpRegistry<Pool2dOp>::Global().All(Backend::kCpu)) {
      if (!a->CanImplement(p).ok()) continue;
      auto state = a->Prepare(p, context);
      if (!state.ok()) continue;
      candidates.push_back({a, std::move(*state), std::vector<uint8_t>(a->WorkspaceBytes(p)), {}});
    }
    for (int i = 0; i < reps + 3; ++i) {
      for (Candidate& c : candidates) {
        const auto start = std::chrono::steady_clock::now();
        const absl::Status run = c.algorithm->Run(
            p, Pool2dArgs{x.data(), y.data()}, Workspace{c.workspace.data(), c.workspace.size(), c.state.get()},
            context);
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
        if (!run.ok()) {
          std::fprintf(stderr, "%s: %s\n", std::string(c.algorithm->name()).c_str(), run.ToString().c_str());
          return 1;
        }
        if (i >= 3) c.times.push_back(ms);
      }
    }
    std::printf("%s\n", p.ToString().c_str());
    for (Candidate& c : candidates) {
      std::sort(c.times.begin(), c.times.end());
      std::printf("  %-30s %-32s med %.4f min %.4f\n", std::string(c.algorithm->name()).c_str(),
                  c.algorithm->LaunchSummary(p).c_str(), c.times[c.times.size() / 2], c.times[0]);
    }
  }
  return 0;
}

}  // namespace
}  // namespace convoy

int main(int argc, char** argv) { return convoy::Main(argc, argv); }
