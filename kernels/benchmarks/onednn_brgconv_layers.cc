// What oneDNN's brgconv kernels buy on an AVX-512 CPU: every conv layer of ResNet-18 and ResNet-50 (224x224, NHWC,
// FP32, the layer's fused epilogue: bias + relu, bias, or bias + residual + relu) run by the implementation oneDNN
// picks first (brgconv where it offers one) and by the first one that is not brgconv (what Convoy ran while brgconv
// was skipped, docs/kernels.md "brgconv"); the fastest of REPS runs per layer (after 2 warm-up runs), and the sums
// weighted by each layer's use count. oneDNN directly, no Convoy code: the kernels alone.
//
//   bazel build //kernels/benchmarks:onednn_brgconv_layers
//   bazel-bin/kernels/benchmarks/onednn_brgconv_layers BATCH THREADS REPS     # e.g. 1 1 10
#include <dnnl.hpp>
#include <omp.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/benchmarks/resnet_conv_layers.h"
using namespace dnnl;
using tag = memory::format_tag;
using dt = memory::data_type;
using L = convoy::benchmarks::ResNetConvLayer;

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s BATCH THREADS REPS\n", argv[0]);
    return 2;
  }
  const int N = std::atoi(argv[1]), thr = std::atoi(argv[2]), reps = std::atoi(argv[3]);
  omp_set_num_threads(thr);
  const std::vector<L>& layers = convoy::benchmarks::ResNetConvLayers();

  engine eng(engine::kind::cpu, 0);
  stream s(eng);
  double sum_first[2] = {0, 0}, sum_next[2] = {0, 0};
  for (const L& l : layers) {
    const int pad = l.r / 2, P = (l.h + 2 * pad - l.r) / l.stride + 1;
    memory::desc src({N, l.c, l.h, l.h}, dt::f32, tag::nhwc), dst({N, l.k, P, P}, dt::f32, tag::nhwc),
        w({l.k, l.c, l.r, l.r}, dt::f32, tag::any), b({l.k}, dt::f32, tag::a);
    post_ops ops;
    if (l.epi == 2) ops.append_binary(algorithm::binary_add, dst);
    if (l.epi != 1) ops.append_eltwise(1.f, algorithm::eltwise_relu, 0.f, 0.f);
    primitive_attr attr;
    attr.set_post_ops(ops);
    attr.set_scratchpad_mode(scratchpad_mode::user);
    convolution_forward::desc cd(prop_kind::forward_inference, algorithm::convolution_direct, src, w, b, dst,
                                 {l.stride, l.stride}, {0, 0}, {pad, pad}, {pad, pad});
    convolution_forward::primitive_desc pd(cd, attr, eng);
    auto time_pd = [&](const convolution_forward::primitive_desc& p) {
      convolution_forward prim(p);
      std::vector<float> x(src.get_size() / 4, 0.5f), y(dst.get_size() / 4), r(dst.get_size() / 4, 0.25f),
          wt(p.weights_desc().get_size() / 4, 0.01f), bias(l.k, 0.1f);
      std::vector<char> scratch(p.scratchpad_desc().get_size());
      std::unordered_map<int, memory> args{{DNNL_ARG_SRC, memory(src, eng, x.data())},
                                           {DNNL_ARG_WEIGHTS, memory(p.weights_desc(), eng, wt.data())},
                                           {DNNL_ARG_BIAS, memory(b, eng, bias.data())},
                                           {DNNL_ARG_DST, memory(dst, eng, y.data())},
                                           {DNNL_ARG_SCRATCHPAD, memory(p.scratchpad_desc(), eng, scratch.data())}};
      if (l.epi == 2) args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, memory(dst, eng, r.data()));
      double best = 1e30;
      for (int i = 0; i < reps + 2; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        prim.execute(s, args);
        s.wait();
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (i >= 2 && ms < best) best = ms;
      }
      return best;
    };
    const std::string first = pd.impl_info_str();
    const double t_first = time_pd(pd);
    convolution_forward::primitive_desc next = pd;
    while (std::string(next.impl_info_str()).find("brgconv") != std::string::npos) next.next_impl();
    const std::string next_name = next.impl_info_str();
    const double t_next = first == next_name ? t_first : time_pd(next);
    const int m = std::string(l.model) == "resnet18" ? 0 : 1;
    sum_first[m] += l.count * t_first;
    sum_next[m] += l.count * t_next;
    printf("%s c%d h%d k%d r%d s%d x%d epi%d: %-24s %8.3f ms | %-22s %8.3f ms | %.2f\n", l.model, l.c, l.h, l.k, l.r,
           l.stride, l.count, l.epi, first.c_str(), t_first, next_name.c_str(), t_next, t_first / t_next);
  }
  for (int m = 0; m < 2; ++m)
    printf("SUM %s batch %d threads %d: brgconv allowed %.2f ms, skipped %.2f ms, ratio %.3f\n",
           m ? "resnet50" : "resnet18", N, thr, sum_first[m], sum_next[m], sum_first[m] / sum_next[m]);
}
