// Speed of the CUDA emulation on the sample kernels, to keep the cross-backend suite fast in CI:
//   bazel run -c opt //kernels/cuda_emulation:emulation_benchmark
// Reports emulated thread switches per second (every barrier or warp collective is one switch per thread).
#include <vector>

#include "benchmark/benchmark.h"
#include "kernels/cuda_emulation/cuda_host_api.h"
#include "kernels/cuda_emulation/testdata/sample_kernels.h"

namespace convoy::cuda_emulation {
namespace {

namespace testdata = ::convoy::cuda_emulation_testdata;

void BM_TiledSgemm(benchmark::State& state) {
  const int size = static_cast<int>(state.range(0));
  std::vector<float> a(size * size, 0.5f), b(size * size, 0.25f), c(size * size);
  for (auto _ : state) {
    if (testdata::LaunchTiledSgemm(a.data(), b.data(), c.data(), size, size, size, nullptr) != cudaSuccess) {
      state.SkipWithError("launch failed");
    }
  }
  // Per block: 256 threads x (2 barriers per 16-wide k step + exit).
  const double switches = double{size / 16.0} * (size / 16.0) * 256 * (2 * size / 16.0 + 1);
  state.counters["switches/s"] = benchmark::Counter(switches, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_TiledSgemm)->Arg(64)->Arg(256)->Unit(benchmark::kMillisecond);

void BM_MmaGemmF16(benchmark::State& state) {
  const int size = static_cast<int>(state.range(0));
  std::vector<__half> a(size * size, __half(0.5f)), b(size * size, __half(0.25f));
  std::vector<float> c(size * size);
  for (auto _ : state) {
    if (testdata::LaunchMmaGemmF16(a.data(), b.data(), c.data(), size, size, size, nullptr) != cudaSuccess) {
      state.SkipWithError("launch failed");
    }
  }
  state.counters["mma/s"] = benchmark::Counter(double{size / 16.0} * (size / 8.0) * (size / 16.0),
                                               benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_MmaGemmF16)->Arg(128)->Unit(benchmark::kMillisecond);

void BM_BlockSum(benchmark::State& state) {
  const int n = 1 << 20;
  std::vector<float> input(n, 1.0f), sums(256);
  for (auto _ : state) {
    if (testdata::LaunchBlockSum(input.data(), n, sums.data(), 256, 256, nullptr) != cudaSuccess) {
      state.SkipWithError("launch failed");
    }
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_BlockSum)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace convoy::cuda_emulation

BENCHMARK_MAIN();
