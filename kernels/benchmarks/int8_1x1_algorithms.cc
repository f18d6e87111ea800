// Every CPU INT8 convolution algorithm on ResNet-50's stride-1 1x1 layers, as the QDQ plans run them: UINT8 in, the
// layer's epilogue (conv1 / conv2-in: bias + ReLU, zero point 0; the first block's projection: bias and a destination
// zero point; conv3: bias, then the residual add fused after it with its ReLU), per-channel scales fixed with the
// problem. For each layer the algorithms that can implement it are timed interleaved run by run (the fastest of RUNS
// per algorithm, after one warm-up), their outputs compared byte for byte with the first one's, and the table prints
// each one's time over the fastest oneDNN algorithm's. Which algorithms a plan picks is the autotuner's job; this
// shows where each one stands.
//
//   bazel build -c opt //kernels/benchmarks:int8_1x1_algorithms
//   bazel-bin/kernels/benchmarks/int8_1x1_algorithms BATCH [THREADS=2] [RUNS=30]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/benchmarks/resnet_conv_layers.h"
#include "kernels/common/tensor.h"
#include "kernels/common/thread_pool.h"
#include "kernels/registry/registry.h"
#include "kernels/registry/residual_in_output.h"

namespace convoy {
namespace {

struct Candidate {
  const QuantizedConv2dAlgorithm* algorithm;
  std::unique_ptr<AlgorithmState> state;
  HostBuffer workspace, packed;
  bool in_place = false;
  double best = 1e30;
};

QuantizedConv2dProblem ProblemOf(const benchmarks::ResNetConvLayer& l, int n, std::mt19937& rng) {
  QuantizedConv2dProblem p;
  p.n = n, p.c = l.c, p.h = p.w = l.h, p.k = l.k;
  p.src_type = p.dst_type = DataType::kUInt8, p.layout = Layout::kNHWC;
  p.epilogue.has_bias = true;
  std::uniform_real_distribution<float> scale(0.0008f, 0.0016f);
  p.epilogue.scales.resize(l.k);
  for (float& s : p.epilogue.scales) s = scale(rng);
  if (l.epi == 0) p.epilogue.relu = true;
  if (l.epi == 1) p.epilogue.dst_zero_point = 131;
  if (l.epi == 2) {
    p.epilogue.dst_zero_point = 127;
    p.fused_add = QuantizedFusedAdd::kConvIsB;
    p.add.a_scale = 0.031f, p.add.b_scale = 0.027f, p.add.y_scale = 0.036f;
    p.add.a_zero_point = 0, p.add.b_zero_point = 127, p.add.y_zero_point = 0;  // y's zero point 0: the ReLU after it
  }
  return p;
}

double Milliseconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

int Main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s BATCH [THREADS=2] [RUNS=30]\n", argv[0]);
    return 2;
  }
  const int batch = std::atoi(argv[1]);
  const int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  const int runs = argc > 3 ? std::atoi(argv[3]) : 30;
  ThreadPool pool(threads);
  const ExecutionContext context{Backend::kCpu, &pool};
  std::mt19937 rng(2026);
  std::printf("batch %d, %d threads, fastest of %d runs; time / fastest oneDNN algorithm's\n", batch, threads, runs);
  for (const benchmarks::ResNetConvLayer& l : benchmarks::ResNetConvLayers()) {
    if (std::string(l.model) != "resnet50" || l.r != 1 || l.stride != 1) continue;
    const QuantizedConv2dProblem p = ProblemOf(l, batch, rng);
    const size_t x_bytes = size_t(batch) * l.c * l.h * l.h, y_bytes = size_t(batch) * l.k * l.h * l.h;
    std::vector<uint8_t> x(x_bytes), residual(y_bytes), y(y_bytes), first(y_bytes);
    std::vector<int8_t> w(size_t(l.k) * l.c);
    std::vector<int32_t> bias(l.k);
    std::uniform_int_distribution<int> byte(0, 255), weight(-127, 127), bias_value(-4000, 4000);
    for (uint8_t& v : x) v = static_cast<uint8_t>(byte(rng) * byte(rng) / 255);  // post-ReLU-like: many small
    for (uint8_t& v : residual) v = static_cast<uint8_t>(byte(rng));
    for (int8_t& v : w) v = static_cast<int8_t>(weight(rng));
    for (int32_t& v : bias) v = bias_value(rng);
    std::vector<Candidate> candidates;
    for (const QuantizedConv2dAlgorithm* a : OpRegistry<QuantizedConv2dOp>::Global().All(Backend::kCpu)) {
      if (!a->CanImplement(p).ok()) continue;
      Candidate c{a};
      auto state = a->Prepare(p, context);
      auto workspace = HostBuffer::Allocate(a->WorkspaceBytes(p));
      auto packed = HostBuffer::Allocate(std::max<size_t>(1, a->PackedFilterBytes(p)));
      if (!state.ok() || !workspace.ok() || !packed.ok()) continue;
      c.state = std::move(*state);
      c.workspace = std::move(*workspace);
      c.packed = std::move(*packed);
      if (a->PackedFilterBytes(p) > 0 && !a->PackFilter(p, w.data(), c.packed.data(), context).ok()) continue;
      c.in_place = AccumulatesOntoOutput(*a, p);
      candidates.push_back(std::move(c));
    }
    for (int run = -1; run < runs; ++run) {
      for (size_t i = 0; i < candidates.size(); ++i) {
        Candidate& c = candidates[i];
        QuantizedConv2dArgs args;
        args.x = x.data();
        args.w = c.algorithm->PackedFilterBytes(p) > 0 ? static_cast<const int8_t*>(c.packed.data()) : w.data();
        args.bias = bias.data();
        args.y = y.data();
        args.residual = p.fused_add != QuantizedFusedAdd::kNone ? residual.data() : nullptr;
        if (c.in_place && args.residual != nullptr) {
          std::memcpy(y.data(), residual.data(), y_bytes);
          args.residual = y.data();
        } else {
          std::memset(y.data(), 0xA5, y_bytes);
        }
        const Workspace ws{c.workspace.data(), c.workspace.size(), c.state.get()};
        const auto t0 = std::chrono::steady_clock::now();
        const absl::Status status = c.algorithm->Run(p, args, ws, context);
        const double ms = Milliseconds(t0);
        if (!status.ok()) {
          std::fprintf(stderr, "%s: %s\n", std::string(c.algorithm->name()).c_str(), status.ToString().c_str());
          return 1;
        }
        if (run >= 0) c.best = std::min(c.best, ms);
        if (run == -1) {
          if (i == 0) first = y;
          const size_t differ = y_bytes - std::inner_product(y.begin(), y.end(), first.begin(), size_t{0},
                                                             std::plus<>(), std::equal_to<>());
          if (differ != 0) std::printf("  %s: %zu of %zu output bytes differ from %s\n",
                                       std::string(c.algorithm->name()).c_str(), differ, y_bytes,
                                       std::string(candidates[0].algorithm->name()).c_str());
        }
      }
    }
    double onednn = 1e30;
    for (const Candidate& c : candidates) {
      if (std::string(c.algorithm->name()).find("onednn") != std::string::npos) onednn = std::min(onednn, c.best);
    }
    std::printf("%4d -> %4d at %2dx%-2d (x%d, %s):", l.c, l.k, l.h, l.h, l.count,
                l.epi == 0 ? "relu" : l.epi == 1 ? "zero point" : "fused add");
    for (const Candidate& c : candidates) {
      std::string name(c.algorithm->name());
      name = name.substr(name.rfind('.') + 1);
      std::printf("  %s %.3f ms %.2f", name.c_str(), c.best, c.best / onednn);
    }
    std::printf("\n");
  }
  return 0;
}

}  // namespace
}  // namespace convoy

int main(int argc, char** argv) { return convoy::Main(argc, argv); }
