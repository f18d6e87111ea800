// Why Convoy's INT8 convolutions need VNNI: oneDNN 2.6 with its ISA lowered to AVX2 (as on a CPU without VNNI) runs a
// 64-channel 1x1 and 3x3 INT8 convolution of all-255 UINT8 inputs and all-127 INT8 weights through every
// implementation it offers, and prints each one's INT32 sum at a pixel whose window lies inside the image next to the
// exact sum. The JIT kernels add pairs of products in saturating 16-bit arithmetic (vpmaddubsw): 32767 per pair.
//
//   g++ -O1 -std=c++17 tools/onednn_versions/int8_saturation_probe.cc -o /tmp/int8_saturation_probe -ldnnl
//   /tmp/int8_saturation_probe
#include <cstdint>
#include <cstdio>

#include "dnnl.hpp"

using namespace dnnl;  // NOLINT: a standalone probe
using tag = memory::format_tag;
using dt = memory::data_type;

int main() {
  set_max_cpu_isa(cpu_isa::avx2);  // before anything asks oneDNN for its ISA
  engine eng(engine::kind::cpu, 0);
  stream st(eng);
  for (int r : {1, 3}) {
    memory::desc src({2, 64, 8, 8}, dt::u8, tag::nhwc), weights_any({64, 64, r, r}, dt::s8, tag::any),
        weights_user({64, 64, r, r}, dt::s8, tag::ohwi), dst({2, 64, 8, 8}, dt::s32, tag::nhwc);
    convolution_forward::desc d(prop_kind::forward_inference, algorithm::convolution_direct, src, weights_any, dst,
                                {1, 1}, {r / 2, r / 2}, {r / 2, r / 2});
    convolution_forward::primitive_desc pd(d, eng);
    do {
      memory ms(src, eng), mw(pd.weights_desc(), eng), mwu(weights_user, eng), md(dst, eng);
      for (size_t i = 0; i < src.get_size(); ++i) static_cast<uint8_t*>(ms.get_data_handle())[i] = 255;
      for (size_t i = 0; i < weights_user.get_size(); ++i) static_cast<int8_t*>(mwu.get_data_handle())[i] = 127;
      reorder(mwu, mw).execute(st, mwu, mw);
      convolution_forward(pd).execute(st, {{DNNL_ARG_SRC, ms}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_DST, md}});
      st.wait();
      const int32_t centre = static_cast<const int32_t*>(md.get_data_handle())[(4 * 8 + 4) * 64];
      std::printf("%dx%d %-28s sum %d, exact %d\n", r, r, pd.impl_info_str(), centre, 255 * 127 * 64 * r * r);
    } while (pd.next_impl());
  }
}
