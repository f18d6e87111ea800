// The binary op's versions side by side on EfficientNet-B0's 16 squeeze-excitation multiplies (x [N,C,H,W] times
// the gate [N,C,1,1], FP32, 224x224 input): the staged loop every dtype ran before (what cpu.binary.elementwise ran
// for FP32 until the per-instruction-set row kernels), each registered version (cpu.binary.elementwise = x86-64-v2,
// _avx2, _avx512: the ones this CPU runs), and oneDNN's binary primitive (binary_mul with the gate broadcast; its
// implementation named). Per shape the median of REPS runs each, the versions alternating run by run after 3 warm-up
// runs; then the sums over the 16 layers and old / new. The CPU's model name heads the output.
//
//   bazel build //kernels/benchmarks:binary_isa_bench
//   bazel-bin/kernels/benchmarks/binary_isa_bench LAYOUT BATCH THREADS REPS     # e.g. nhwc 1 2 50
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "dnnl.hpp"
#include "kernels/common/status_macros.h"
#include "kernels/common/thread_pool.h"
#include "kernels/cpu/binary.h"
#include "kernels/cpu/cpu_device.h"
#include "kernels/cpu/onednn_support.h"
#include "kernels/registry/registry.h"

namespace convoy {
namespace {

// EfficientNet-B0's squeeze-excitation multiplies at 224x224: (H = W, C) of each of the 16 MBConv blocks.
struct SeLayer {
  int hw, c;
};
constexpr SeLayer kEfficientNetB0SeLayers[] = {
    {112, 32}, {56, 96},  {56, 144}, {28, 144}, {28, 240}, {14, 240}, {14, 480},  {14, 480},
    {14, 480}, {14, 672}, {14, 672}, {7, 672},  {7, 1152}, {7, 1152}, {7, 1152}, {7, 1152},
};

struct Variant {
  std::string name;
  std::function<absl::Status()> run;
  std::vector<double> times;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? -1 : v[v.size() / 2];
}

// oneDNN's binary_mul of x and the gate in `layout`, run like Convoy's oneDNN algorithms (onednn_support.h).
struct OnednnMultiply {
  std::unique_ptr<AlgorithmState> state;
  std::unordered_map<int, dnnl::memory> args;
  std::string impl;
};

absl::StatusOr<OnednnMultiply> MakeOnednnMultiply(const BinaryProblem& p, const float* a, const float* b, float* y,
                                                  const ExecutionContext& context) {
  namespace onednn = cpu::onednn;
  CONVOY_ASSIGN_OR_RETURN(dnnl::memory::desc x, onednn::ActivationDesc(p.dtype, p.n, p.c, p.h, p.w, p.layout));
  CONVOY_ASSIGN_OR_RETURN(dnnl::memory::desc gate, onednn::ActivationDesc(p.dtype, p.n, p.c, 1, 1, p.layout));
  OnednnMultiply m;
  try {
    onednn::UseContextThreads(context);
    const dnnl::binary::primitive_desc pd(dnnl::binary::desc(dnnl::algorithm::binary_mul, x, gate, x),
                                          onednn::Engine());
    m.impl = pd.impl_info_str();
    CONVOY_ASSIGN_OR_RETURN(m.state, onednn::MakePrimitiveState<dnnl::binary>(pd, m.impl, context));
  } catch (const dnnl::error& error) {
    return onednn::FromError(error, "binary_mul");
  }
  m.args = {{DNNL_ARG_SRC_0, onednn::Wrap(x, a)}, {DNNL_ARG_SRC_1, onednn::Wrap(gate, b)},
            {DNNL_ARG_DST, onednn::Wrap(x, y)}};
  return m;
}

int Main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s nhwc|nchw8c|nchw BATCH THREADS REPS\n", argv[0]);
    return 2;
  }
  const std::string layout_name = argv[1];
  const Layout layout = layout_name == "nhwc" ? Layout::kNHWC : layout_name == "nchw8c" ? Layout::kNCHW8c
                                                                                          : Layout::kNCHW;
  const int n = std::atoi(argv[2]), threads = std::atoi(argv[3]), reps = std::atoi(argv[4]);
  auto device = CpuDevice::Create(CpuDevice::Options{threads});
  if (!device.ok()) return 2;
  const ExecutionContext context = (*device)->context();
  const auto versions = OpRegistry<BinaryElementwiseOp>::Global().All(Backend::kCpu);
  std::printf("CPU: %s; oneDNN %s; %s, batch %d, %d thread(s), median of %d alternating runs\n",
              CpuModelName().c_str(), cpu::onednn::Version().c_str(), layout_name.c_str(), n, threads, reps);
  std::vector<std::string> names = {"staged(old)"};
  for (const auto* v : versions) names.push_back(std::string(v->name()));
  names.push_back("onednn");
  std::vector<double> sums(names.size(), 0);
  for (const SeLayer& l : kEfficientNetB0SeLayers) {
    BinaryProblem p;
    p.op = BinaryOp::kMul, p.broadcast = BinaryBroadcast::kPerImageChannel, p.n = n, p.c = l.c, p.h = p.w = l.hw;
    p.layout = layout;
    const size_t count = size_t(p.desc().num_elements());
    std::vector<float> a(count), b(size_t(n) * l.c), y(count);
    for (size_t i = 0; i < count; ++i) a[i] = float(i % 97) / 97.0f - 0.5f;
    for (size_t i = 0; i < b.size(); ++i) b[i] = float(i % 13) / 13.0f;
    const BinaryArgs args{a.data(), b.data(), y.data()};
    std::vector<Variant> variants;
    variants.push_back({"staged(old)", [&] { return cpu::RunBinaryStaged(p, args, context); }, {}});
    for (const auto* v : versions) {
      variants.push_back({std::string(v->name()), [&, v] { return v->Run(p, args, Workspace{}, context); }, {}});
    }
    auto onednn = MakeOnednnMultiply(p, a.data(), b.data(), y.data(), context);
    std::string impl = onednn.ok() ? onednn->impl : std::string(onednn.status().message());
    if (onednn.ok()) {
      variants.push_back({"onednn", [&] {
                            const auto* state = static_cast<const cpu::onednn::PrimitiveState*>(onednn->state.get());
                            return cpu::onednn::Execute(*state, onednn->args, Workspace{}, 0, context);
                          }, {}});
    }
    for (int i = 0; i < reps + 3; ++i) {
      for (Variant& v : variants) {
        const auto t0 = std::chrono::steady_clock::now();
        if (absl::Status s = v.run(); !s.ok()) {
          std::fprintf(stderr, "%s failed: %s\n", v.name.c_str(), std::string(s.message()).c_str());
          return 1;
        }
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (i >= 3) v.times.push_back(ms);
      }
    }
    std::printf("%3dx%-3d C %4d:", l.hw, l.hw, l.c);
    for (size_t k = 0; k < names.size(); ++k) {
      double ms = -1;
      for (const Variant& v : variants) {
        if (v.name == names[k]) ms = Median(v.times);
      }
      sums[k] += ms;
      std::printf("  %s %.4f", names[k].c_str(), ms);
    }
    std::printf("  [onednn: %s]\n", impl.c_str());
  }
  std::printf("SUM of the 16 SE multiplies, %s batch %d, %d thread(s):", layout_name.c_str(), n, threads);
  for (size_t k = 0; k < names.size(); ++k) std::printf("  %s %.3f ms", names[k].c_str(), sums[k]);
  std::printf("\nold / each:");
  for (size_t k = 1; k < names.size(); ++k) std::printf("  %s %.2fx", names[k].c_str(), sums[0] / sums[k]);
  std::printf("\n");
  return 0;
}

}  // namespace
}  // namespace convoy

int main(int argc, char** argv) { return convoy::Main(argc, argv); }
