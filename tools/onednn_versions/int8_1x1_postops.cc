// ResNet-50's stride-1 1x1 INT8 layers through Debian's oneDNN 2.6, as its convolution primitive and as its matmul
// primitive ([pixels, c] x [c, k], what cpu.quantized_conv2d.onednn_matmul_nhwc builds), with each post-op chain
// Convoy's INT8 plans use: none, ReLU, the destination zero point as the plan adds it (round, then linear), and the
// fused residual add (round, clip, linear, sum). UINT8 NHWC source and destination, INT8 weights in the layout each
// primitive picks, INT32 bias, constant per-channel output scales. The two primitives alternate run by run, 31 runs
// each after 3 warm-ups; each layer's fastest run, summed with the use counts. PER_LAYER=1 prints each layer.
// Usage: tools/onednn_versions/int8_1x1_postops.sh [BATCH=1] (builds this file, runs it at OMP_NUM_THREADS=2).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "dnnl.hpp"

using namespace dnnl;
using tag = memory::format_tag;
using dt = memory::data_type;

struct Layer { int c, k, h, count; };
// ResNet-50's stride-1 1x1 convolutions (input size h), with use counts.
const std::vector<Layer> kLayers = {
    {64, 64, 56, 1},   {64, 256, 56, 4},   {256, 64, 56, 2},   {256, 128, 56, 1}, {128, 512, 28, 4},
    {512, 128, 28, 3}, {512, 256, 28, 1},  {256, 1024, 14, 6}, {1024, 256, 14, 5}, {1024, 512, 14, 1},
    {512, 2048, 7, 3}, {2048, 512, 7, 2}};
const char* kChains[] = {"none", "relu", "zero point (linear)", "zero point (round, linear)",
                         "fused add (round, clip, linear, sum)"};

double NowMs() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

primitive_attr Attr(int chain, int k) {
  std::vector<float> scales(k);
  for (int i = 0; i < k; ++i) scales[i] = 0.001f * (1 + i % 7);
  post_ops ops;
  if (chain == 1) ops.append_eltwise(1.f, algorithm::eltwise_relu, 0.f, 0.f);
  if (chain == 3 || chain == 4) ops.append_eltwise(1.f, algorithm::eltwise_round, 0.f, 0.f);
  if (chain == 4) ops.append_eltwise(1.f, algorithm::eltwise_clip, -128.f, 127.f);
  if (chain >= 2) ops.append_eltwise(1.f, algorithm::eltwise_linear, chain == 4 ? 0.7f : 1.f, 7.f);
  if (chain == 4) ops.append_sum(0.6f, 0, dt::u8);
  primitive_attr attr;
  attr.set_post_ops(ops);
  attr.set_output_scales(1 << 1, scales);
  return attr;
}

double RunMs(primitive& p, std::unordered_map<int, memory>& args, stream& st) {
  double t0 = NowMs();
  p.execute(st, args);
  st.wait();
  return NowMs() - t0;
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 1;
  engine eng(engine::kind::cpu, 0);
  stream st(eng);
  printf("oneDNN %d.%d, batch %d, OMP_NUM_THREADS=%s\n", DNNL_VERSION_MAJOR, DNNL_VERSION_MINOR, n,
         getenv("OMP_NUM_THREADS") ? getenv("OMP_NUM_THREADS") : "(unset)");
  for (int chain = 0; chain < 5; ++chain) {
    double conv_sum = 0, matmul_sum = 0;
    std::string impls;
    for (const Layer& l : kLayers) {
      const memory::dim m = memory::dim{n} * l.h * l.h;
      const primitive_attr attr = Attr(chain, l.k);
      memory::desc src({n, l.c, l.h, l.h}, dt::u8, tag::nhwc), dst({n, l.k, l.h, l.h}, dt::u8, tag::nhwc);
      memory::desc bias({l.k}, dt::s32, tag::a);
      convolution_forward::desc cd(prop_kind::forward_inference, algorithm::convolution_direct, src,
                                   memory::desc({l.k, l.c, 1, 1}, dt::s8, tag::any), bias, dst, {1, 1}, {0, 0},
                                   {0, 0}, {0, 0});
      convolution_forward::primitive_desc cpd(cd, attr, eng);
      memory::desc msrc({m, l.c}, dt::u8, tag::ab), mdst({m, l.k}, dt::u8, tag::ab), mbias({1, l.k}, dt::s32, tag::ab);
      matmul::desc md(msrc, memory::desc({l.c, l.k}, dt::s8, tag::any), mbias, mdst);
      matmul::primitive_desc mpd(md, attr, eng);
      memory x(src, eng), y(dst, eng), b(bias, eng), cw(cpd.weights_desc(), eng), mw(mpd.weights_desc(), eng);
      memset(x.get_data_handle(), 100, src.get_size());
      memset(y.get_data_handle(), 50, dst.get_size());
      memset(cw.get_data_handle(), 3, cpd.weights_desc().get_size());
      memset(mw.get_data_handle(), 3, mpd.weights_desc().get_size());
      memset(b.get_data_handle(), 0, bias.get_size());
      memory xm(msrc, eng, x.get_data_handle()), ym(mdst, eng, y.get_data_handle()), bm(mbias, eng, b.get_data_handle());
      primitive conv = convolution_forward(cpd), mm = matmul(mpd);
      std::unordered_map<int, memory> ca = {{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, cw}, {DNNL_ARG_BIAS, b}, {DNNL_ARG_DST, y}};
      std::unordered_map<int, memory> ma = {{DNNL_ARG_SRC, xm}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_BIAS, bm}, {DNNL_ARG_DST, ym}};
      for (int i = 0; i < 3; ++i) RunMs(conv, ca, st), RunMs(mm, ma, st);
      double tc = 1e9, tm = 1e9;
      for (int r = 0; r < 31; ++r) {
        tc = std::min(tc, RunMs(conv, ca, st));
        tm = std::min(tm, RunMs(mm, ma, st));
      }
      conv_sum += tc * l.count;
      matmul_sum += tm * l.count;
      if (getenv("PER_LAYER")) {
        printf("  %-38s c%-4d k%-4d h%-2d x%d: conv %.3f ms (%s), matmul %.3f ms (%s), matmul / conv %.2f\n",
               kChains[chain], l.c, l.k, l.h, l.count, tc, cpd.impl_info_str(), tm, mpd.impl_info_str(), tm / tc);
      }
    }
    printf("%-38s conv %.3f ms, matmul %.3f ms, matmul / conv %.2f\n", kChains[chain], conv_sum, matmul_sum,
           matmul_sum / conv_sum);
  }
}
