// What the residual as oneDNN's sum post-op buys on an AVX-512 CPU: every conv layer of ResNet-18 and ResNet-50
// (224x224, NHWC, FP32, the layer's fused epilogue: bias + relu, bias, or bias + residual + relu) run by Convoy's
// cpu.conv2d.onednn_nhwc as it is registered (the residual as the sum post-op where that gets oneDNN's brgconv
// kernels, with the residual already in the output buffer, as plans place it) and with the residual as a full-tensor
// binary_add (what Convoy ran before: oneDNN 2.6's brgconv declines it, and jit:avx512_core runs those layers).
// Each line names the oneDNN implementation (and with it the ISA) both ran; the fastest of REPS runs per layer after
// 2 warm-up runs, and the sums weighted by each layer's use count. The CPU's model name and oneDNN's version head the
// output.
//
//   bazel build //kernels/benchmarks:onednn_brgconv_layers
//   bazel-bin/kernels/benchmarks/onednn_brgconv_layers BATCH THREADS REPS     # e.g. 1 1 10
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "kernels/benchmarks/resnet_conv_layers.h"
#include "kernels/common/thread_pool.h"
#include "kernels/cpu/conv2d_onednn.h"
#include "kernels/cpu/onednn_support.h"

namespace convoy {
namespace {

using L = benchmarks::ResNetConvLayer;
using Form = cpu::Conv2dOnednnNhwc::ResidualForm;

// The first "model name" line of /proc/cpuinfo (what lscpu prints), or "unknown CPU".
std::string CpuModelName() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown CPU";
}

struct Timed {
  double ms = -1;  // negative: the algorithm declined or failed
  std::string impl = "-";
  bool sum = false;
};

// The fastest of `reps` runs (after 2 warm-up runs) of `algorithm` on `p`, with the residual (if any) already in y
// where the algorithm adds it onto the output.
Timed Time(const cpu::Conv2dOnednnNhwc& algorithm, const Conv2dProblem& p, const ExecutionContext& context,
           int reps) {
  Timed t;
  if (!algorithm.CanImplement(p).ok()) return t;
  auto state = algorithm.Prepare(p, context);
  auto workspace = HostBuffer::Allocate(algorithm.WorkspaceBytes(p));
  auto packed = HostBuffer::Allocate(algorithm.PackedFilterBytes(p));
  auto impl = algorithm.Implementation(p);
  if (!state.ok() || !workspace.ok() || !packed.ok() || !impl.ok()) return t;
  const size_t x_count = size_t(p.n) * p.c * p.h * p.w, y_count = size_t(p.output_desc().num_elements());
  std::vector<float> x(x_count, 0.5f), w(size_t(p.filter_elements()), 0.01f), bias(p.k, 0.1f), y(y_count, 0.25f),
      residual(y_count, 0.25f);
  if (!algorithm.PackFilter(p, w.data(), packed->data(), context).ok()) return t;
  t.impl = *impl;
  t.sum = algorithm.AccumulatesOntoOutput(p);
  const Conv2dArgs args{x.data(), packed->data(), bias.data(), nullptr, t.sum ? y.data() : residual.data(), y.data()};
  const Workspace ws{workspace->data(), workspace->size(), state->get()};
  double best = 1e30;
  for (int i = 0; i < reps + 2; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    if (!algorithm.Run(p, args, ws, context).ok()) return t;
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (i >= 2 && ms < best) best = ms;
  }
  t.ms = best;
  return t;
}

int Main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s BATCH THREADS REPS\n", argv[0]);
    return 2;
  }
  const int n = std::atoi(argv[1]), threads = std::atoi(argv[2]), reps = std::atoi(argv[3]);
  ThreadPool pool(threads);
  const ExecutionContext context{Backend::kCpu, &pool};
  cpu::onednn::UseContextThreads(context);  // the descriptors are made for the pool's thread count
  std::printf("CPU: %s; oneDNN %s; batch %d, %d thread(s), fastest of %d runs\n", CpuModelName().c_str(),
              cpu::onednn::Version().c_str(), n, threads, reps);
  const cpu::Conv2dOnednnNhwc registered, binary_add(Form::kBinaryAdd);
  double sum_now[2] = {0, 0}, sum_before[2] = {0, 0}, residual_now[2] = {0, 0}, residual_before[2] = {0, 0};
  for (const L& l : benchmarks::ResNetConvLayers()) {
    Conv2dProblem p;
    p.n = n, p.c = l.c, p.h = p.w = l.h, p.k = l.k, p.r = p.s = l.r, p.stride_h = p.stride_w = l.stride;
    p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = l.r / 2;
    p.layout = Layout::kNHWC;
    p.epilogue.has_bias = true;
    p.epilogue.activation = l.epi == 1 ? Activation::Identity() : Activation::Relu();
    p.epilogue.residual = l.epi == 2 ? ResidualMode::kBeforeActivation : ResidualMode::kNone;
    const Timed now = Time(registered, p, context, reps);
    const Timed before = l.epi == 2 ? Time(binary_add, p, context, reps) : now;
    const int m = std::string(l.model) == "resnet18" ? 0 : 1;
    sum_now[m] += l.count * now.ms;
    sum_before[m] += l.count * before.ms;
    if (l.epi == 2) {
      residual_now[m] += l.count * now.ms;
      residual_before[m] += l.count * before.ms;
    }
    std::printf("%s c%d h%d k%d r%d s%d x%d epi%d: now %-22s %-10s %8.3f ms | binary_add %-22s %8.3f ms | %.2f\n",
                l.model, l.c, l.h, l.k, l.r, l.stride, l.count, l.epi, now.impl.c_str(),
                l.epi != 2 ? "" : now.sum ? "(sum)" : "(binary)", now.ms, before.impl.c_str(), before.ms,
                now.ms / before.ms);
  }
  for (int m = 0; m < 2; ++m) {
    std::printf("SUM %s batch %d threads %d: now %.2f ms, binary_add %.2f ms, ratio %.3f; residual layers now %.2f ms, "
                "binary_add %.2f ms, ratio %.3f\n",
                m ? "resnet50" : "resnet18", n, threads, sum_now[m], sum_before[m], sum_now[m] / sum_before[m],
                residual_now[m], residual_before[m], residual_now[m] / residual_before[m]);
  }
  return 0;
}

}  // namespace
}  // namespace convoy

int main(int argc, char** argv) { return convoy::Main(argc, argv); }
