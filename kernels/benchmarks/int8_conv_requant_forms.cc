// Why the INT8 convolution takes its requantization multipliers as output scales: one run times oneDNN 2.6's INT8
// convolution on layers of ResNet-50 and MobileNetV2 (NHWC, UINT8 in and out, batch from the command line, 2 OpenMP
// threads) with the requantization in five forms, interleaved run by run so that load on a shared machine hits every
// form alike: per-channel multipliers as a binary multiply post-op (what Convoy ran before) or as the primitive's
// output scales, each with or without the explicit round and the destination zero point. Prints the median and the
// fastest of 300 runs per form and the implementation oneDNN chose (docs/performance.md, "CPU: INT8").
//
//   bazel build //kernels/benchmarks:int8_conv_requant_forms
//   bazel-bin/kernels/benchmarks/int8_conv_requant_forms BATCH
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "dnnl.hpp"
#include "kernels/benchmarks/onednn_forms.h"

namespace {

using namespace dnnl;  // NOLINT: a standalone oneDNN benchmark
using tag = memory::format_tag;
using dt = memory::data_type;

// One layer: batch, input channels, input size (square), output channels, filter size, stride, zero points.
struct L { int n, c, h, k, r, s; int dst_zp; int src_zp; };
using convoy::benchmarks::ConvPrimitive;

// Forms: 0 binary_mul + round + dst zero point (Convoy before), 1 output scales + round + dst zero point (Convoy now),
// 2 binary_mul without the round, 3 binary_mul without the zero point, 4 output scales alone, 5 output scales + round
// + the zero point as an eltwise_linear post-op (no destination zero point attribute), 6 form 5 with the source zero
// point folded into the bias instead of the attribute (exact for unpadded convolutions: the compensation
// src_zp * sum(w[k]) is a per-channel constant).
constexpr int kForms = 7;
ConvPrimitive Make(const L& l, int variant) {
  engine& eng = convoy::benchmarks::CpuEngine();
  int pad = l.r / 2, oh = (l.h + 2 * pad - l.r) / l.s + 1;
  memory::desc src({l.n, l.c, l.h, l.h}, dt::u8, tag::nhwc), dst({l.n, l.k, oh, oh}, dt::u8, tag::nhwc);
  memory::desc wany({l.k, l.c, l.r, l.r}, dt::s8, tag::any), bias({l.k}, dt::s32, tag::a);
  memory::desc scales({1, l.k, 1, 1}, dt::f32, tag::abcd);
  primitive_attr attr; post_ops ops;
  std::vector<float> sc(l.k, 0.01f);
  bool binary = variant == 0 || variant == 2 || variant == 3;
  if (binary) ops.append_binary(algorithm::binary_mul, scales); else attr.set_output_scales(2, sc);
  if (variant != 2 && variant != 4) ops.append_eltwise(1.f, algorithm::eltwise_round, 0.f, 0.f);
  if (variant >= 5 && l.dst_zp) ops.append_eltwise(1.f, algorithm::eltwise_linear, 1.f, float(l.dst_zp));
  attr.set_post_ops(ops);
  attr.set_scratchpad_mode(scratchpad_mode::user);
  if (l.src_zp && variant != 6) attr.set_zero_points(DNNL_ARG_SRC, 0, {l.src_zp});
  if (l.dst_zp && variant != 3 && variant < 4) attr.set_zero_points(DNNL_ARG_DST, 0, {l.dst_zp});
  convolution_forward::desc d(prop_kind::forward_inference, algorithm::convolution_direct, src, wany, bias, dst,
                              {l.s, l.s}, {pad, pad}, {pad, pad});
  ConvPrimitive P; P.pd = convolution_forward::primitive_desc(d, attr, eng); P.p = convolution_forward(P.pd);
  memory ms(src, eng), md(dst, eng), mw(P.pd.weights_desc(), eng), mb(bias, eng), msc(scales, eng), mpad(P.pd.scratchpad_desc(), eng);
  std::fill_n((uint8_t*)ms.get_data_handle(), src.get_size(), 3);
  std::fill_n((int8_t*)mw.get_data_handle(), P.pd.weights_desc().get_size(), 1);
  std::fill_n((int32_t*)mb.get_data_handle(), l.k, 5);
  std::fill_n((float*)msc.get_data_handle(), l.k, 0.01f);
  P.args = {{DNNL_ARG_SRC, ms}, {DNNL_ARG_DST, md}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_BIAS, mb}, {DNNL_ARG_SCRATCHPAD, mpad}};
  if (binary) P.args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1] = msc;
  return P;
}
}  // namespace

int main(int argc, char** argv) {
  omp_set_num_threads(2);
  int N = argc > 1 ? atoi(argv[1]) : 1;
  std::vector<L> layers = {{N,64,56,256,1,1,140,0},{N,64,56,64,1,1,0,0},{N,128,28,512,1,1,140,0},{N,256,14,1024,1,1,138,0},
                           {N,256,56,512,1,2,140,0},{N,512,28,1024,1,2,138,0},{N,1024,14,2048,1,2,131,0},
                           {N,256,56,64,1,1,0,0},{N,256,56,128,1,1,0,0},{N,64,56,64,3,1,0,0},{N,512,7,512,3,1,0,0},
                           {N,96,56,24,1,1,3,0},{N,24,56,144,1,1,0,120},{N,32,112,16,1,1,5,0},{N,16,112,96,1,1,0,121},
                           {N,3,224,64,7,2,0,128}};
  const char* names[] = {"binary_mul+round+zp", "output_scales+round+zp", "binary_mul+zp (no round)",
                         "binary_mul+round (no zp)", "output_scales only", "scales+round+linear(zp)",
                         "that, src zp in the bias"};
  stream s(convoy::benchmarks::CpuEngine());
  for (auto& l : layers) {
    std::printf("n%d c%d h%d k%d r%d s%d dst_zp%d src_zp%d\n", l.n, l.c, l.h, l.k, l.r, l.s, l.dst_zp, l.src_zp);
    std::vector<ConvPrimitive> ps; for (int v = 0; v < kForms; ++v) ps.push_back(Make(l, v));
    const std::vector<std::vector<double>> t = convoy::benchmarks::TimeInterleaved(kForms, 300, [&](int v) {
      ps[v].p.execute(s, ps[v].args);
      s.wait();
    });
    for (int v = 0; v < kForms; ++v) { const auto& x = t[v];
      std::printf("   %-30s %-32s med %.4f min %.4f\n", names[v], ps[v].pd.impl_info_str(), x[x.size()/2], x[0]); }
  }
}
