// What INT8 convolutions would buy: every conv layer of ResNet-18 and ResNet-50 (224x224, NHWC, the layer's fused
// epilogue: bias + relu, bias, or bias + residual + relu) run by Convoy's FP32 oneDNN algorithm
// (cpu.conv2d.onednn_nhwc) and by its INT8 one (cpu.quantized_conv2d.onednn_nhwc: UINT8 activations with zero point
// 0 as after a ReLU, INT8 weights, INT32 bias, per-channel requantization fixed in the problem as plans fix it,
// UINT8 output; the residual as the INT8 sum), through the algorithms' own CanImplement / PackFilter / Prepare / Run;
// the fastest of REPS runs per layer after 2 warm-up runs, and the sums weighted by each layer's use count.
//
//   bazel build //kernels/benchmarks:quantized_conv_layers
//   bazel-bin/kernels/benchmarks/quantized_conv_layers BATCH THREADS REPS     # e.g. 1 1 10
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/benchmarks/resnet_conv_layers.h"
#include "kernels/common/thread_pool.h"
#include "kernels/cpu/conv2d_onednn.h"
#include "kernels/cpu/quantized_conv2d_onednn.h"

namespace convoy {
namespace {

using L = benchmarks::ResNetConvLayer;

// Fastest of `reps` runs of `run` after 2 warm-up runs, in ms; negative when a run fails.
template <typename Run>
double Fastest(int reps, Run&& run) {
  double best = 1e30;
  for (int i = 0; i < reps + 2; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    if (!run().ok()) return -1;
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (i >= 2 && ms < best) best = ms;
  }
  return best;
}

template <typename Problem, typename Algorithm, typename Args>
double TimeAlgorithm(const Algorithm& algorithm, const Problem& p, Args args, const void* filter,
                     const ExecutionContext& context, int reps, std::string& impl) {
  if (!algorithm.CanImplement(p).ok()) return -1;
  auto state = algorithm.Prepare(p, context);
  if (!state.ok()) return -1;
  auto workspace = HostBuffer::Allocate(algorithm.WorkspaceBytes(p));
  auto packed = HostBuffer::Allocate(algorithm.PackedFilterBytes(p));
  if (!workspace.ok() || !packed.ok() || !algorithm.PackFilter(p, filter, packed->data(), context).ok()) return -1;
  args.w = static_cast<decltype(args.w)>(packed->data());
  auto name = algorithm.Implementation(p);
  impl = name.ok() ? *name : "?";
  const Workspace ws{workspace->data(), workspace->size(), state->get()};
  return Fastest(reps, [&] { return algorithm.Run(p, args, ws, context); });
}

int Main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s BATCH THREADS REPS\n", argv[0]);
    return 2;
  }
  const int N = std::atoi(argv[1]), threads = std::atoi(argv[2]), reps = std::atoi(argv[3]);
  ThreadPool pool(threads);
  const ExecutionContext context{Backend::kCpu, &pool};
  const std::vector<L>& layers = benchmarks::ResNetConvLayers();
const cpu::Conv2dOnednn<Layout::kNHWC> fp32;
  const cpu::QuantizedConv2dOnednnNhwc int8;
  double sum_fp32[2] = {0, 0}, sum_int8[2] = {0, 0};
  for (const L& l : layers) {
    const int pad = l.r / 2;
    Conv2dProblem f;
    f.n = N, f.c = l.c, f.h = f.w = l.h, f.k = l.k, f.r = f.s = l.r, f.stride_h = f.stride_w = l.stride;
    f.pad_top = f.pad_bottom = f.pad_left = f.pad_right = pad;
    f.layout = Layout::kNHWC;
    f.epilogue.has_bias = true;
    f.epilogue.activation = l.epi == 1 ? Activation::Identity() : Activation::Relu();
    f.epilogue.residual = l.epi == 2 ? ResidualMode::kBeforeActivation : ResidualMode::kNone;
    QuantizedConv2dProblem q;
    q.n = N, q.c = l.c, q.h = q.w = l.h, q.k = l.k, q.r = q.s = l.r, q.stride_h = q.stride_w = l.stride;
    q.pad_top = q.pad_bottom = q.pad_left = q.pad_right = pad;
    q.src_type = q.dst_type = DataType::kUInt8, q.layout = Layout::kNHWC;
    q.epilogue.has_bias = true, q.epilogue.relu = l.epi != 1;
    q.epilogue.residual = f.epilogue.residual, q.epilogue.residual_scale = 0.5f;
    const size_t x_count = size_t(N) * l.c * l.h * l.h, y_count = size_t(N) * l.k * f.p() * f.q();
    const size_t w_count = size_t(f.filter_elements());
    std::vector<float> xf(x_count, 0.5f), wf(w_count, 0.01f), bias_f(l.k, 0.1f), yf(y_count), rf(y_count, 0.25f);
    std::vector<uint8_t> xq(x_count, 7), yq(y_count), rq(y_count, 3);
    std::vector<int8_t> wq(w_count, 2);
    std::vector<int32_t> bias_q(l.k, 10);
    std::vector<float> multipliers(l.k, 0.01f);
    multipliers[0] = 0.02f;  // per channel, as a QDQ file's
    q.epilogue.scales = multipliers;  // fixed with the problem, as plans make it
    std::string fp32_impl, int8_impl;
    const double t_fp32 = TimeAlgorithm(fp32, f, Conv2dArgs{xf.data(), nullptr, bias_f.data(), nullptr, rf.data(),
                                                            yf.data()},
                                        wf.data(), context, reps, fp32_impl);
    const double t_int8 = TimeAlgorithm(int8, q, QuantizedConv2dArgs{xq.data(), nullptr, bias_q.data(),
                                                                     multipliers.data(), rq.data(), yq.data()},
                                        wq.data(), context, reps, int8_impl);
    const int m = std::string(l.model) == "resnet18" ? 0 : 1;
    sum_fp32[m] += l.count * t_fp32;
    sum_int8[m] += l.count * t_int8;
    std::printf("%s c%d h%d k%d r%d s%d x%d epi%d: FP32 %-24s %8.3f ms | INT8 %-26s %8.3f ms | %.2f\n", l.model, l.c,
                l.h, l.k, l.r, l.stride, l.count, l.epi, fp32_impl.c_str(), t_fp32, int8_impl.c_str(), t_int8,
                t_int8 / t_fp32);
  }
  for (int m = 0; m < 2; ++m) {
    std::printf("SUM %s batch %d threads %d: FP32 %.2f ms, INT8 %.2f ms, INT8 / FP32 %.3f\n",
                m ? "resnet50" : "resnet18", N, threads, sum_fp32[m], sum_int8[m], sum_int8[m] / sum_fp32[m]);
  }
  return 0;
}

}  // namespace
}  // namespace convoy

int main(int argc, char** argv) { return convoy::Main(argc, argv); }
