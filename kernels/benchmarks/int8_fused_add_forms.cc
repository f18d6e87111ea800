// What the INT8 convolution's fused residual add costs, and what cheaper post-op chains would buy: one run times
// oneDNN 2.6's INT8 1x1 convolutions of ResNet-50's block ends (NHWC, UINT8 in and out, batch from the command line,
// 2 OpenMP threads) in five forms, interleaved run by run: the chain cpu.quantized_conv2d.onednn_nhwc built before
// (round, the conv's zero point as a scalar binary_add, clip, eltwise_linear, sum, round), the same arithmetic with
// the zero point folded into the clip bounds and the linear's constant (no binary post-op), a sum alone (no rounding of
// the conv's own output: what a peer that drops the intermediate quantization runs), no add, and the folded chain
// without its last round (the 8-bit store rounds half to even itself; the run checks that the outputs are the same
// bytes as the folded chain's, the residual put in the destination first). The folded form here
// takes the nearest FP32 constant, which is what its timing needs; which constant reproduces an add exactly is the
// kernel's own search (kernels/cpu:quantized_conv2d_onednn_test). A second table times ResNet-50's stride-2 1x1 downsamples run directly
// against a strided copy of the input followed by the stride-1 1x1 convolution.
//
//   bazel build //kernels/benchmarks:int8_fused_add_forms
//   bazel-bin/kernels/benchmarks/int8_fused_add_forms BATCH [RUNS=100]
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "dnnl.hpp"
#include "kernels/benchmarks/onednn_forms.h"

namespace {

using namespace dnnl;  // NOLINT: a standalone oneDNN benchmark
using tag = memory::format_tag;
using dt = memory::data_type;
using convoy::benchmarks::ConvPrimitive;
using convoy::benchmarks::MillisecondsOf;

engine& eng = convoy::benchmarks::CpuEngine();

constexpr int kConvZp = 140;   // the conv output's zero point
constexpr float kRc = 0.61f;   // conv scale / add scale
constexpr float kRr = 0.83f;   // residual scale / add scale
constexpr float kFixed = -3.0f - kRc * kConvZp - kRr * 128.f;  // add's zero point minus the operands' zero points

// Forms: 0 round + zp binary_add + clip + linear + sum + round; 1 round + shifted clip + linear (folded) + sum +
// round; 2 sum + round; 3 round + dst zero point (no add); 4 as 1 without the last round.
ConvPrimitive Make(int n, int c, int h, int k, int stride, int form, float fixed2, std::mt19937& rng) {
  const int oh = (h - 1) / stride + 1;
  memory::desc src({n, c, h, h}, dt::u8, tag::nhwc), dst({n, k, oh, oh}, dt::u8, tag::nhwc);
  memory::desc wany({k, c, 1, 1}, dt::s8, tag::any), bias({k}, dt::s32, tag::a);
  memory::desc scalar({1, 1, 1, 1}, dt::f32, tag::abcd);
  primitive_attr attr;
  post_ops ops;
  std::vector<float> sc(k);
  std::uniform_real_distribution<float> scale(0.002f, 0.004f);
  std::mt19937 fixed_rng(7);
  for (float& v : sc) v = scale(fixed_rng);
  attr.set_output_scales(2, sc);
  if (form == 0) {
    ops.append_eltwise(1.f, algorithm::eltwise_round, 0.f, 0.f);
    ops.append_binary(algorithm::binary_add, scalar);
    ops.append_eltwise(1.f, algorithm::eltwise_clip, 0.f, 255.f);
    ops.append_eltwise(1.f, algorithm::eltwise_linear, kRc, kFixed);
    ops.append_sum(kRr, 0, dt::u8);
    ops.append_eltwise(1.f, algorithm::eltwise_round, 0.f, 0.f);
  } else if (form == 1 || form == 4) {
    ops.append_eltwise(1.f, algorithm::eltwise_round, 0.f, 0.f);
    ops.append_eltwise(1.f, algorithm::eltwise_clip, -kConvZp, 255.f - kConvZp);
    ops.append_eltwise(1.f, algorithm::eltwise_linear, kRc, fixed2);
    ops.append_sum(kRr, 0, dt::u8);
    if (form == 1) ops.append_eltwise(1.f, algorithm::eltwise_round, 0.f, 0.f);  // form 4: the store rounds
  } else if (form == 2) {
    ops.append_sum(kRr, 0, dt::u8);
    ops.append_eltwise(1.f, algorithm::eltwise_round, 0.f, 0.f);
  } else {
    ops.append_eltwise(1.f, algorithm::eltwise_round, 0.f, 0.f);
    attr.set_zero_points(DNNL_ARG_DST, 0, {kConvZp});
  }
  attr.set_post_ops(ops);
  attr.set_scratchpad_mode(scratchpad_mode::user);
  convolution_forward::desc d(prop_kind::forward_inference, algorithm::convolution_direct, src, wany, bias, dst,
                              {stride, stride}, {0, 0}, {0, 0});
  ConvPrimitive P;
  P.pd = convolution_forward::primitive_desc(d, attr, eng);
  P.p = convolution_forward(P.pd);
  memory ms(src, eng), md(dst, eng), mw(P.pd.weights_desc(), eng), mb(bias, eng), mzp(scalar, eng),
      mpad(P.pd.scratchpad_desc(), eng);
  std::uniform_int_distribution<int> byte(0, 255), weight(-60, 60), b(-2000, 2000);
  for (size_t i = 0; i < src.get_size(); ++i) static_cast<uint8_t*>(ms.get_data_handle())[i] = byte(rng);
  for (size_t i = 0; i < P.pd.weights_desc().get_size(); ++i) static_cast<int8_t*>(mw.get_data_handle())[i] = weight(rng);
  for (int i = 0; i < k; ++i) static_cast<int32_t*>(mb.get_data_handle())[i] = b(rng);
  *static_cast<float*>(mzp.get_data_handle()) = kConvZp;
  P.args = {{DNNL_ARG_SRC, ms}, {DNNL_ARG_DST, md}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_BIAS, mb}, {DNNL_ARG_SCRATCHPAD, mpad}};
  if (form == 0) P.args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(1) | DNNL_ARG_SRC_1] = mzp;
  return P;
}

}  // namespace

int main(int argc, char** argv) {
  omp_set_num_threads(2);
  const int n = argc > 1 ? std::atoi(argv[1]) : 1;
  const int runs = argc > 2 ? std::atoi(argv[2]) : 100;
  const float fixed2 = std::fmaf(static_cast<float>(kConvZp), kRc, kFixed);  // fixed + zp * ratio, rounded
  std::printf("batch %d, %d runs per form; folded constant %.9g (from %.9g)\n", n, runs, fixed2, kFixed);
  stream s(eng);
  const char* names[] = {"round+zp binary+clip+linear+sum", "round+shifted clip+linear+sum", "sum only (inexact)",
                         "no add", "as 1, the store rounding"};
  struct Shape { int c, h, k; };
  for (const Shape& l : {Shape{64, 56, 256}, Shape{128, 28, 512}, Shape{256, 14, 1024}, Shape{512, 7, 2048}}) {
    std::printf("n%d c%d h%d k%d 1x1 + residual\n", n, l.c, l.h, l.k);
    std::vector<ConvPrimitive> ps;
    for (int form = 0; form < 5; ++form) {
      std::mt19937 rng(11);  // the same data for every form
      ps.push_back(Make(n, l.c, l.h, l.k, 1, form, fixed2, rng));
    }
    const auto t = convoy::benchmarks::TimeInterleaved(5, runs, [&](int form) {
      ps[form].p.execute(s, ps[form].args);
      s.wait();
    });
    {
      // The residual is read from the destination: put the same bytes there before comparing forms 1 and 4.
      std::mt19937 rng(5);
      const size_t bytes = ps[1].pd.dst_desc().get_size();
      std::vector<uint8_t> residual(bytes);
      for (auto& v : residual) v = static_cast<uint8_t>(rng());
      std::memcpy(ps[1].args[DNNL_ARG_DST].get_data_handle(), residual.data(), bytes);
      std::memcpy(ps[4].args[DNNL_ARG_DST].get_data_handle(), residual.data(), bytes);
      ps[1].p.execute(s, ps[1].args);
      ps[4].p.execute(s, ps[4].args);
      s.wait();
      size_t differ = 0;
      const uint8_t* a = static_cast<const uint8_t*>(ps[1].args[DNNL_ARG_DST].get_data_handle());
      const uint8_t* b = static_cast<const uint8_t*>(ps[4].args[DNNL_ARG_DST].get_data_handle());
      for (size_t i = 0; i < bytes; ++i) differ += a[i] != b[i];
      std::printf("   forms 1 and 4 differ on %zu of %zu outputs\n", differ, bytes);
    }
    for (int form = 0; form < 5; ++form) {
      const auto& x = t[form];
      std::printf("   %-34s %-36s med %.4f min %.4f\n", names[form], ps[form].pd.impl_info_str(), x[x.size() / 2],
                  x[0]);
    }
  }
  for (const Shape& l : {Shape{256, 56, 512}, Shape{512, 28, 1024}, Shape{1024, 14, 2048}}) {
    std::printf("n%d c%d h%d k%d 1x1 stride 2\n", n, l.c, l.h, l.k);
    std::mt19937 rng(3);
    ConvPrimitive strided = Make(n, l.c, l.h, l.k, 2, 3, 0.f, rng);
    ConvPrimitive unit = Make(n, l.c, l.h / 2, l.k, 1, 3, 0.f, rng);
    const uint8_t* in = static_cast<const uint8_t*>(strided.args[DNNL_ARG_SRC].get_data_handle());
    uint8_t* sub = static_cast<uint8_t*>(unit.args[DNNL_ARG_SRC].get_data_handle());
    const int oh = l.h / 2;
    auto subsample = [&] {
#pragma omp parallel for collapse(2)
      for (int i = 0; i < n; ++i) {
        for (int y = 0; y < oh; ++y) {
          for (int x = 0; x < oh; ++x) {
            std::memcpy(sub + ((static_cast<size_t>(i) * oh + y) * oh + x) * l.c,
                        in + ((static_cast<size_t>(i) * l.h + 2 * y) * l.h + 2 * x) * l.c, l.c);
          }
        }
      }
    };
    std::vector<double> a, b, copy;
    for (int rep = 0; rep < runs; ++rep) {
      a.push_back(MillisecondsOf([&] { strided.p.execute(s, strided.args); s.wait(); }));
      b.push_back(MillisecondsOf([&] { subsample(); unit.p.execute(s, unit.args); s.wait(); }));
      copy.push_back(MillisecondsOf(subsample));
    }
    for (auto* x : {&a, &b, &copy}) std::sort(x->begin(), x->end());
    std::printf("   strided %-36s med %.4f min %.4f\n", strided.pd.impl_info_str(), a[a.size() / 2], a[0]);
    std::printf("   copy + %-37s med %.4f min %.4f (copy alone med %.4f)\n", unit.pd.impl_info_str(), b[b.size() / 2],
                b[0], copy[copy.size() / 2]);
  }
}
