// Two facts about oneDNN 3.x that decide what moving Convoy's CPU algorithms to it would cost, printed by a program
// built against PyPI's oneDNN 3.2 (run.sh builds and runs it first):
// - Where the INT8 convolution adds its bias. Convoy (and onnxruntime's QLinearConv) requantizes (acc + bias) * scale
//   with the INT32 bias inside the accumulator; oneDNN 2.6 does the same. The probe runs acc = 2, bias 10, weight
//   scale 0.5 and prints 6 for that order, 11 for acc * scale + bias.
// - Whether oneDNN's Winograd convolution (which Convoy's FP32 NHWC plans use for 3x3 stride-1 layers) still exists on
//   this CPU: a 64 -> 64 3x3 layer at 56x56, batch 1 and 8.
#include <cstdint>
#include <cstdio>

#include "dnnl.hpp"

using namespace dnnl;  // NOLINT: a standalone probe
using tag = memory::format_tag;
using dt = memory::data_type;

int main() {
  engine eng(engine::kind::cpu, 0);
  stream st(eng);
  for (dt bias_type : {dt::s32, dt::f32}) {
    const char* name = bias_type == dt::s32 ? "s32" : "f32";
    memory::desc src({1, 16, 1, 1}, dt::u8, tag::nhwc), wei({16, 16, 1, 1}, dt::s8, tag::ohwi),
        bias({16}, bias_type, tag::a), dst({1, 16, 1, 1}, dt::f32, tag::nhwc);
    primitive_attr attr;
    attr.set_scales_mask(DNNL_ARG_WEIGHTS, 0);
    try {
      convolution_forward::primitive_desc pd(eng, prop_kind::forward_inference, algorithm::convolution_direct, src,
                                             wei, bias, dst, {1, 1}, {0, 0}, {0, 0}, attr);
      memory ms(src, eng), mw(wei, eng), mb(bias, eng), md(dst, eng), mscale({{1}, dt::f32, tag::a}, eng);
      for (int i = 0; i < 16; ++i) static_cast<uint8_t*>(ms.get_data_handle())[i] = i == 0;
      for (int i = 0; i < 256; ++i) static_cast<int8_t*>(mw.get_data_handle())[i] = i % 16 == 0 ? 2 : 0;
      for (int i = 0; i < 16; ++i) {
        if (bias_type == dt::s32) static_cast<int32_t*>(mb.get_data_handle())[i] = 10;
        if (bias_type == dt::f32) static_cast<float*>(mb.get_data_handle())[i] = 10.f;
      }
      *static_cast<float*>(mscale.get_data_handle()) = 0.5f;
      convolution_forward(pd).execute(st, {{DNNL_ARG_SRC, ms}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_BIAS, mb},
                                           {DNNL_ARG_DST, md}, {DNNL_ARG_ATTR_SCALES | DNNL_ARG_WEIGHTS, mscale}});
      st.wait();
      std::printf("INT8 conv, %s bias (%s): acc 2, bias 10, weight scale 0.5 -> %g (6: (acc + bias) * scale; 11: acc "
                  "* scale + bias)\n", name, pd.impl_info_str(), static_cast<float*>(md.get_data_handle())[0]);
    } catch (const dnnl::error& e) {
      std::printf("INT8 conv, %s bias: %s\n", name, e.what());
    }
  }
  for (int n : {1, 8}) {
    memory::desc src({n, 64, 56, 56}, dt::f32, tag::any), wei({64, 64, 3, 3}, dt::f32, tag::any),
        bias({64}, dt::f32, tag::a), dst({n, 64, 56, 56}, dt::f32, tag::any);
    try {
      convolution_forward::primitive_desc pd(eng, prop_kind::forward_inference, algorithm::convolution_winograd, src,
                                             wei, bias, dst, {1, 1}, {1, 1}, {1, 1});
      std::printf("FP32 Winograd 3x3, batch %d: %s\n", n, pd.impl_info_str());
    } catch (const dnnl::error& e) {
      std::printf("FP32 Winograd 3x3, batch %d: none (%s)\n", n, e.what());
    }
  }
}
