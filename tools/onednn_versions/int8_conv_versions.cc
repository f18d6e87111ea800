// ResNet-50's INT8 convolution layers timed through oneDNN's own API, built once against Debian's oneDNN 2.6 and once
// against PyPI's oneDNN 3.2 (run.sh builds and runs both): NHWC UINT8 source with zero point ZP (environment, default
// 128; 0 leaves the attribute out, as for the ReLU outputs that feed every layer but the stem), INT8 weights in the
// layout the primitive picks (`any`, reordered once), FP32 bias, per-channel requantization, ReLU, UINT8 output.
// Modes (2.6 only): `convoy` gives the requantization as a per-channel binary_mul post-op with a run-time operand
// (cpu.quantized_conv2d.onednn_nhwc's form for multipliers known only at run time), ReLU, round; `ideal` as constant
// per-channel output scales (its form for the multipliers a plan fixes). 3.2 takes run-time per-channel weight scales
// (its only form). Prints the sum over the layers of each layer's fastest of 31 runs (after 3 warm-ups) times its use
// count; PER_LAYER=1 prints each layer and the implementation oneDNN chose; ONLY_1X1=1 times the 1x1 layers alone.
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
struct L { int c, k, r, s, h, stride, pad, groups, count; };
// ResNet-50 conv layers (input size h at the layer), with use counts.
static const std::vector<L> kResNet50 = {
  {3, 64, 7, 7, 224, 2, 3, 1, 1},
  {64, 64, 1, 1, 56, 1, 0, 1, 1}, {64, 64, 3, 3, 56, 1, 1, 1, 3}, {64, 256, 1, 1, 56, 1, 0, 1, 4}, {256, 64, 1, 1, 56, 1, 0, 1, 2},
  {256, 128, 1, 1, 56, 1, 0, 1, 1}, {128, 128, 3, 3, 56, 2, 1, 1, 1}, {128, 512, 1, 1, 28, 1, 0, 1, 4}, {256, 512, 1, 1, 56, 2, 0, 1, 1},
  {512, 128, 1, 1, 28, 1, 0, 1, 3}, {128, 128, 3, 3, 28, 1, 1, 1, 3},
  {512, 256, 1, 1, 28, 1, 0, 1, 1}, {256, 256, 3, 3, 28, 2, 1, 1, 1}, {256, 1024, 1, 1, 14, 1, 0, 1, 6}, {512, 1024, 1, 1, 28, 2, 0, 1, 1},
  {1024, 256, 1, 1, 14, 1, 0, 1, 5}, {256, 256, 3, 3, 14, 1, 1, 1, 5},
  {1024, 512, 1, 1, 14, 1, 0, 1, 1}, {512, 512, 3, 3, 14, 2, 1, 1, 1}, {512, 2048, 1, 1, 7, 1, 0, 1, 3}, {1024, 2048, 1, 1, 14, 2, 0, 1, 1},
  {2048, 512, 1, 1, 7, 1, 0, 1, 2}, {512, 512, 3, 3, 7, 1, 1, 1, 2},
};
static double NowMs() { return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
int main(int argc, char** argv) {
  const int zp = getenv("ZP") ? atoi(getenv("ZP")) : 128;
  const bool only_1x1 = getenv("ONLY_1X1") != nullptr;
  const int n = argc > 1 ? atoi(argv[1]) : 1;
  const std::string mode = argc > 2 ? argv[2] : "ideal";
  const int reps = 31;
  engine eng(engine::kind::cpu, 0);
  stream st(eng);
  double total = 0;
  for (const L& l : kResNet50) {
    if (only_1x1 && l.r != 1) continue;
    const int oh = (l.h + 2 * l.pad - l.r) / l.stride + 1;
    memory::desc src({n, l.c, l.h, l.h}, dt::u8, tag::nhwc);
    memory::desc dst({n, l.k, oh, oh}, dt::u8, tag::nhwc);
    memory::desc wany({l.k, l.c, l.r, l.s}, dt::s8, tag::any);
    memory::desc wuser({l.k, l.c, l.r, l.s}, dt::s8, tag::ohwi);
    memory::desc bias({l.k}, dt::f32, tag::a);
    std::vector<float> scales(l.k);
    for (int i = 0; i < l.k; ++i) scales[i] = 0.001f * (1 + i % 7);
    primitive_attr attr;
    post_ops ops;
    memory::desc scales_md({1, l.k, 1, 1}, dt::f32, tag::abcd);
#if DNNL_VERSION_MAJOR >= 3
    attr.set_scales_mask(DNNL_ARG_WEIGHTS, 1);
    if (zp) attr.set_zero_points_mask(DNNL_ARG_SRC, 0);
    ops.append_eltwise(algorithm::eltwise_relu, 0.f, 0.f);
    attr.set_post_ops(ops);
    convolution_forward::primitive_desc pd(eng, prop_kind::forward_inference, algorithm::convolution_direct, src, wany,
                                           bias, dst, {l.stride, l.stride}, {0, 0}, {l.pad, l.pad}, {l.pad, l.pad}, attr);
#else
    if (mode == "convoy") {
      ops.append_binary(algorithm::binary_mul, scales_md);
      ops.append_eltwise(1.f, algorithm::eltwise_relu, 0.f, 0.f);
      ops.append_eltwise(1.f, algorithm::eltwise_round, 0.f, 0.f);
    } else {
      attr.set_output_scales(2, scales);
      ops.append_eltwise(1.f, algorithm::eltwise_relu, 0.f, 0.f);
    }
    attr.set_post_ops(ops);
    if (zp) attr.set_zero_points(DNNL_ARG_SRC, 0, {zp});
    convolution_forward::desc d(prop_kind::forward_inference, algorithm::convolution_direct, src, wany, bias, dst,
                                {l.stride, l.stride}, {0, 0}, {l.pad, l.pad}, {l.pad, l.pad});
    convolution_forward::primitive_desc pd(d, attr, eng);
#endif
    memory msrc(src, eng), mdst(dst, eng), mbias(bias, eng), mw(pd.weights_desc(), eng), mwu(wuser, eng);
    memset(msrc.get_data_handle(), 100, src.get_size());
    for (size_t i = 0; i < wuser.get_size(); ++i) static_cast<int8_t*>(mwu.get_data_handle())[i] = int8_t(i * 7 % 255 - 127);
    memset(mbias.get_data_handle(), 0, bias.get_size());
    reorder(mwu, mw).execute(st, mwu, mw);
    convolution_forward conv(pd);
    std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, msrc}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_BIAS, mbias}, {DNNL_ARG_DST, mdst}};
    memory mscale(memory::desc({l.k}, dt::f32, tag::a), eng);
    memcpy(mscale.get_data_handle(), scales.data(), 4 * l.k);
    memory mscale4(scales_md, eng);
    memcpy(mscale4.get_data_handle(), scales.data(), 4 * l.k);
    memory mzp(memory::desc({1}, dt::s32, tag::a), eng);
    *static_cast<int32_t*>(mzp.get_data_handle()) = zp;
#if DNNL_VERSION_MAJOR >= 3
    args[DNNL_ARG_ATTR_SCALES | DNNL_ARG_WEIGHTS] = mscale;
    if (zp) args[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC] = mzp;
#else
    if (mode == "convoy") args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1] = mscale4;
#endif
    for (int i = 0; i < 3; ++i) conv.execute(st, args);
    st.wait();
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) {
      double t0 = NowMs();
      conv.execute(st, args);
      st.wait();
      t.push_back(NowMs() - t0);
    }
    std::sort(t.begin(), t.end());
    total += t[0] * l.count;
    if (getenv("PER_LAYER")) printf("  c%d k%d r%d h%d s%d x%d: %.3f ms  %s\n", l.c, l.k, l.r, l.h, l.stride, l.count, t[0], pd.impl_info_str());
  }
  printf("oneDNN %d.%d mode %s batch %d src zero point %d: ResNet-50 INT8 %s sum %.3f ms\n", DNNL_VERSION_MAJOR,
         DNNL_VERSION_MINOR, mode.c_str(), n, zp, only_1x1 ? "1x1 conv" : "conv", total);
}
