// What SiLU costs after an FP32 oneDNN convolution: EfficientNet-B0's expand (1x1) and depthwise (3x3) layers at
// batch 1 (NHWC, bias), each run interleaved with no activation, ReLU, oneDNN 2.6's swish post-op, and no post-op
// followed by the own vectorized SiLU over the output (silu_loops.h, in 16384-value chunks across the OpenMP team):
// the medians and minimums of 200 runs in ms, and the implementation oneDNN chose (docs/kernels.md).
//
//   bazel build //kernels/benchmarks:onednn_silu_forms
//   bazel-bin/kernels/benchmarks/onednn_silu_forms THREADS
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "dnnl.hpp"
#include "kernels/benchmarks/onednn_forms.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/silu_loops.h"

namespace {

using namespace dnnl;  // NOLINT: a standalone oneDNN benchmark
using tag = memory::format_tag;
using dt = memory::data_type;

using convoy::benchmarks::ConvPrimitive;

engine& eng = convoy::benchmarks::CpuEngine();

enum Form { kNone, kRelu, kSwishPostOp, kOwnSiluAfter, kForms };
const char* kNames[] = {"no activation", "relu post-op", "swish post-op", "own SiLU after"};

ConvPrimitive Make(int c, int h, int k, int r, int groups, Form form) {
  const int pad = r / 2;
  memory::desc src({1, c, h, h}, dt::f32, tag::nhwc), dst({1, k, h, h}, dt::f32, tag::nhwc), b({k}, dt::f32, tag::a);
  memory::desc w = groups > 1 ? memory::desc({groups, k / groups, c / groups, r, r}, dt::f32, tag::any)
                              : memory::desc({k, c, r, r}, dt::f32, tag::any);
  post_ops ops;
  if (form == kSwishPostOp) ops.append_eltwise(1.f, algorithm::eltwise_swish, 1.f, 0.f);
  if (form == kRelu) ops.append_eltwise(1.f, algorithm::eltwise_relu, 0.f, 0.f);
  primitive_attr attr;
  attr.set_post_ops(ops);
  convolution_forward::desc d(prop_kind::forward_inference, algorithm::convolution_direct, src, w, b, dst, {1, 1},
                              {pad, pad}, {pad, pad});
  ConvPrimitive P;
  P.pd = convolution_forward::primitive_desc(d, attr, eng);
  P.p = convolution_forward(P.pd);
  memory ms(src, eng), md(dst, eng), mw(P.pd.weights_desc(), eng), mb(b, eng);
  std::fill_n(static_cast<float*>(ms.get_data_handle()), src.get_size() / 4, 0.3f);
  std::fill_n(static_cast<float*>(mw.get_data_handle()), P.pd.weights_desc().get_size() / 4, 0.01f);
  std::fill_n(static_cast<float*>(mb.get_data_handle()), k, -0.2f);
  P.args = {{DNNL_ARG_SRC, ms}, {DNNL_ARG_DST, md}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_BIAS, mb}};
  return P;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  omp_set_num_threads(threads);
  const convoy::cpu::CpuIsa isa = convoy::cpu::BestCpuIsa();
  stream s(eng);
  struct Layer { int c, h, k, r, groups; const char* name; };
  const Layer layers[] = {{32, 112, 32, 3, 32, "depthwise 3x3, 32 channels, 112x112"},
                          {16, 112, 96, 1, 1, "1x1 16 -> 96, 112x112"},
                          {96, 56, 96, 3, 96, "depthwise 3x3, 96 channels, 56x56"},
                          {24, 56, 144, 1, 1, "1x1 24 -> 144, 56x56"},
                          {40, 28, 240, 1, 1, "1x1 40 -> 240, 28x28"}};
  std::printf("%d thread(s), own SiLU on %s\n", threads, std::string(convoy::cpu::CpuIsaName(isa)).c_str());
  for (const Layer& l : layers) {
    std::vector<ConvPrimitive> ps;
    for (int f = 0; f < kForms; ++f) ps.push_back(Make(l.c, l.h, l.k, l.r, l.groups, static_cast<Form>(f)));
    const long count = static_cast<long>(l.k) * l.h * l.h;
    const auto t = convoy::benchmarks::TimeInterleaved(kForms, 200, [&](int f) {
      ps[f].p.execute(s, ps[f].args);
      s.wait();
      if (f == kOwnSiluAfter) {
        float* y = static_cast<float*>(ps[f].args[DNNL_ARG_DST].get_data_handle());
#pragma omp parallel for
        for (long c = 0; c < count; c += 16384) convoy::cpu::SiluInPlace(isa, y + c, std::min(16384L, count - c));
      }
    });
    std::printf("%s [%s]\n", l.name, ps[kNone].pd.impl_info_str());
    for (int f = 0; f < kForms; ++f) {
      std::printf("   %-16s med %.4f min %.4f\n", kNames[f], t[f][t[f].size() / 2], t[f][0]);
    }
  }
}
