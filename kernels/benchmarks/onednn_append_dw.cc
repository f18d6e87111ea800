// oneDNN's depthwise post-op (append_dw: a 3x3 depthwise convolution fused into the 1x1 convolution before it, the
// pair in every MobileNetV2 / EfficientNet inverted-residual block): which implementation oneDNN gives the fused
// primitive in NHWC and the blocked layouts, and what it costs against the two primitives run one after the other,
// on MobileNetV2's expansion + depthwise shapes at batch 1 (ReLU6 after each). Both forms are timed interleaved, the
// median of 400 runs each, on OMP_NUM_THREADS threads.
//
//   bazel build //kernels/benchmarks:onednn_append_dw && OMP_NUM_THREADS=2 bazel-bin/kernels/benchmarks/onednn_append_dw
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "oneapi/dnnl/dnnl.hpp"

using namespace dnnl;
using tag = memory::format_tag;
using dt = memory::data_type;

int main() {
  engine eng(engine::kind::cpu, 0);
  stream s(eng);
  struct Shape { int c, k, h, stride; const char* name; };
  // MobileNetV2 expansion 1x1 (C -> K) followed by the 3x3 depthwise on K channels.
  const Shape shapes[] = {{16, 96, 112, 2, "b2 expand 16->96 @112 dw s2"},  {24, 144, 56, 1, "b3 expand 24->144 @56 dw s1"},
                          {32, 192, 28, 1, "b5 expand 32->192 @28 dw s1"},   {64, 384, 14, 1, "b8 expand 64->384 @14 dw s1"},
                          {96, 576, 14, 2, "b14 expand 96->576 @14 dw s2"},  {160, 960, 7, 1, "b15 expand 160->960 @7 dw s1"}};
  for (tag layout : {tag::nhwc, tag::nChw16c, tag::nChw8c}) {
    const char* lname = layout == tag::nhwc ? "nhwc" : layout == tag::nChw16c ? "nChw16c" : "nChw8c";
    for (const Shape& sh : shapes) {
      const int n = 1, oh = sh.h / sh.stride;
      memory::desc src({n, sh.c, sh.h, sh.h}, dt::f32, layout);
      memory::desc wei({sh.k, sh.c, 1, 1}, dt::f32, tag::any);
      memory::desc bia({sh.k}, dt::f32, tag::x);
      memory::desc mid({n, sh.k, sh.h, sh.h}, dt::f32, layout);
      memory::desc out({n, sh.k, oh, oh}, dt::f32, layout);
      post_ops fused_ops;
      fused_ops.append_eltwise(1.f, algorithm::eltwise_clip, 0.f, 6.f);
      if (sh.stride == 1) fused_ops.append_dw_k3s1p1(dt::f32, dt::f32, dt::f32, 0, {});
      else fused_ops.append_dw_k3s2p1(dt::f32, dt::f32, dt::f32, 0, {});
      fused_ops.append_eltwise(1.f, algorithm::eltwise_clip, 0.f, 6.f);
      primitive_attr fused_attr;
      fused_attr.set_post_ops(fused_ops);
      convolution_forward::desc cd(prop_kind::forward_inference, algorithm::convolution_direct, src, wei, bia, mid,
                                   {1, 1}, {0, 0}, {0, 0});
      std::string fused_impl = "(none)";
      convolution_forward::primitive_desc fpd;
      bool fused_ok = false;
      try {
        fpd = convolution_forward::primitive_desc(cd, fused_attr, eng);
        fused_impl = fpd.impl_info_str();
        fused_ok = true;
      } catch (const dnnl::error& e) {
        fused_impl = std::string("error: ") + e.what();
      }
      // Separate: 1x1 + clip, then dw 3x3 + clip.
      post_ops clip;
      clip.append_eltwise(1.f, algorithm::eltwise_clip, 0.f, 6.f);
      primitive_attr clip_attr;
      clip_attr.set_post_ops(clip);
      convolution_forward::primitive_desc pw(cd, clip_attr, eng);
      memory::desc dwwei({sh.k, 1, 1, 3, 3}, dt::f32, tag::any);
      convolution_forward::desc dd(prop_kind::forward_inference, algorithm::convolution_direct, mid, dwwei, bia, out,
                                   {sh.stride, sh.stride}, {1, 1}, {1, 1});
      convolution_forward::primitive_desc dw(dd, clip_attr, eng);
      std::printf("%-8s %-32s fused: %-28s separate: %s + %s", lname, sh.name, fused_impl.c_str(),
                  pw.impl_info_str(), dw.impl_info_str());
      if (!fused_ok || fused_impl.rfind("ref:", 0) == 0) {  // no implementation, or oneDNN's reference one
        std::printf("\n");
        continue;
      }
      if (fpd.dst_desc() != out) std::printf(" [fused dst dims differ]");
      auto fill = [&](const memory::desc& d) {
        memory m(d, eng);
        float* p = static_cast<float*>(m.get_data_handle());
        for (size_t i = 0; i < d.get_size() / sizeof(float); ++i) p[i] = 0.01f * float((i * 7919) % 200) - 1.f;
        return m;
      };
      memory m_src = fill(src), m_pw_w = fill(pw.weights_desc()), m_b = fill(bia), m_mid = fill(mid);
      memory m_out = fill(out), m_dw_w = fill(dw.weights_desc()), m_fw = fill(fpd.weights_desc());
      memory m_fout = fill(fpd.dst_desc());
      memory m_dw_w_fused = fill(memory::desc({sh.k, 1, 1, 3, 3}, dt::f32, tag::goihw));
      memory m_pad(fpd.scratchpad_desc(), eng);
      convolution_forward fused(fpd), pwp(pw), dwp(dw);
      auto run_fused = [&] {
        fused.execute(s, {{DNNL_ARG_SRC, m_src},
                          {DNNL_ARG_WEIGHTS, m_fw},
                          {DNNL_ARG_BIAS, m_b},
                          {DNNL_ARG_DST, m_fout},
                          {DNNL_ARG_SCRATCHPAD, m_pad},
                          {DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS, m_dw_w_fused},
                          {DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_BIAS, m_b}});
      };
      auto run_separate = [&] {
        pwp.execute(s, {{DNNL_ARG_SRC, m_src}, {DNNL_ARG_WEIGHTS, m_pw_w}, {DNNL_ARG_BIAS, m_b}, {DNNL_ARG_DST, m_mid}});
        dwp.execute(s, {{DNNL_ARG_SRC, m_mid}, {DNNL_ARG_WEIGHTS, m_dw_w}, {DNNL_ARG_BIAS, m_b}, {DNNL_ARG_DST, m_out}});
      };
      std::vector<double> tf, ts;
      for (int r = 0; r < 30; ++r) {
        run_fused();
        run_separate();
      }
      for (int r = 0; r < 400; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        run_fused();
        auto t1 = std::chrono::steady_clock::now();
        run_separate();
        auto t2 = std::chrono::steady_clock::now();
        tf.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
        ts.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
      }
      std::sort(tf.begin(), tf.end());
      std::sort(ts.begin(), ts.end());
      std::printf("  | fused %.1f us, separate %.1f us, fused/separate %.2f\n", tf[200], ts[200], tf[200] / ts[200]);
    }
  }
}
