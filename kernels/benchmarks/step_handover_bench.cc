// What one step boundary of a CPU plan costs: the hand-over from one parallel step to the next, on the two builds of
// ThreadPool (step_handover_bench: the build's default, OpenMP; step_handover_bench_threads: std::thread workers).
// A plan's steps are own kernels (ThreadPool::ParallelFor) and oneDNN primitives (inside ThreadPool::RunReserved,
// on the calling thread's OpenMP team); this times a step right after another of either kind:
//   pool step   ParallelFor over 8 chunks of CHUNK_US busy-waiting each: on 2 threads ideally 4 * CHUNK_US, on one
//               thread 8 * CHUNK_US; the excess over the ideal is the hand-over (waking a worker, joining it).
//   onednn step a oneDNN ReLU over 64x56x56 FP32 values, executed as Convoy's oneDNN algorithms do.
// Each pair (first step, timed step) runs REPS times; per pair the median and the 10th / 90th percentile of the timed
// step, in microseconds, then a gap case: the pool step after GAP_US of the caller working alone (the workers went
// idle). The CPU model, the pool's build and the load average head the output.
//
//   bazel build //kernels/benchmarks:step_handover_bench //kernels/benchmarks:step_handover_bench_threads
//   bazel-bin/kernels/benchmarks/step_handover_bench [THREADS=2] [REPS=3000] [CHUNK_US=5] [GAP_US=200]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "dnnl.hpp"
#include "kernels/common/thread_pool.h"

namespace convoy {
namespace {

using Clock = std::chrono::steady_clock;

void BusyWait(double us) {
  const auto until = Clock::now() + std::chrono::duration<double, std::micro>(us);
  while (Clock::now() < until) {
  }
}

double MicrosSince(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

std::string FirstLineOf(const char* path, const char* prefix) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) == 0) return line;
  }
  return "?";
}

// A oneDNN ReLU run the way kernels/cpu/onednn_support.cc's Execute runs a primitive.
class OnednnStep {
 public:
  OnednnStep() : engine_(dnnl::engine::kind::cpu, 0), stream_(engine_) {
    const dnnl::memory::desc desc({1, 64, 56, 56}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::nhwc);
    src_ = dnnl::memory(desc, engine_);
    dst_ = dnnl::memory(desc, engine_);
    std::fill_n(static_cast<float*>(src_.get_data_handle()), 64 * 56 * 56, -0.5f);
    dnnl::eltwise_forward::desc op(dnnl::prop_kind::forward_inference, dnnl::algorithm::eltwise_relu, desc, 0.f);
    relu_ = dnnl::eltwise_forward(dnnl::eltwise_forward::primitive_desc(op, engine_));
  }
  void Run(ThreadPool& pool) {
    pool.RunReserved([&](int threads) {
      omp_set_num_threads(threads);
      relu_.execute(stream_, {{DNNL_ARG_SRC, src_}, {DNNL_ARG_DST, dst_}});
      stream_.wait();
    });
  }

 private:
  dnnl::engine engine_;
  dnnl::stream stream_;
  dnnl::memory src_, dst_;
  dnnl::primitive relu_;
};

struct Percentiles {
  double p10, median, p90;
};

Percentiles Summarize(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  return {t[t.size() / 10], t[t.size() / 2], t[t.size() * 9 / 10]};
}

int Main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 3000;
  const double chunk_us = argc > 3 ? std::atof(argv[3]) : 5;
  const double gap_us = argc > 4 ? std::atof(argv[4]) : 200;
  std::printf("%s\n%s, ThreadPool build %s, %d threads, %d reps, chunk %.1f us, load average %s\n",
              FirstLineOf("/proc/cpuinfo", "model name").c_str(), FirstLineOf("/proc/cpuinfo", "model\t").c_str(),
              ThreadPool::RuntimeName(), threads, reps, chunk_us, FirstLineOf("/proc/loadavg", "").c_str());
  ThreadPool pool(threads);
  OnednnStep onednn;
  const std::function<void(int64_t, int64_t)> chunks = [&](int64_t b, int64_t e) { BusyWait(chunk_us * (e - b)); };
  const std::unordered_map<std::string, std::function<void()>> steps = {
      {"pool", [&] { pool.ParallelFor(8, chunks); }},
      {"onednn", [&] { onednn.Run(pool); }},
  };
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"pool", "pool"}, {"onednn", "pool"}, {"pool", "onednn"}, {"onednn", "onednn"}};
  std::unordered_map<std::string, std::vector<double>> times;
  for (int rep = 0; rep < reps; ++rep) {
    for (const auto& [first, timed] : pairs) {
      steps.at(first)();
      const auto start = Clock::now();
      steps.at(timed)();
      times[first + " -> " + timed].push_back(MicrosSince(start));
    }
    BusyWait(gap_us);  // the caller alone, as between two requests' steps on a busy server
    const auto start = Clock::now();
    steps.at("pool")();
    times["gap -> pool"].push_back(MicrosSince(start));
  }
  std::printf("pool step ideal: %.1f us on %d threads (%.1f us on one)\n", 8 * chunk_us / std::min(threads, 8),
              threads, 8 * chunk_us);
  for (const char* name : {"pool -> pool", "onednn -> pool", "gap -> pool", "pool -> onednn", "onednn -> onednn"}) {
    const Percentiles p = Summarize(times[name]);
    std::printf("  %-18s median %7.1f us  p10 %7.1f  p90 %7.1f\n", name, p.median, p.p10, p.p90);
  }
  return 0;
}

}  // namespace
}  // namespace convoy

int main(int argc, char** argv) { return convoy::Main(argc, argv); }
