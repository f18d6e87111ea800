// Whether oneDNN 2.6's Winograd convolution beats its brgconv on ResNet's 3x3 stride-1 layers: every such layer of
// ResNet-18 and ResNet-50 (224x224, FP32, bias + ReLU as the epilogue) as
//   brgconv    convolution_direct, NHWC activations (what Convoy's NHWC plans run on AVX-512 CPUs),
//   direct16c  convolution_direct, nChw16c activations (oneDNN's blocked JIT kernel),
//   wino16c    convolution_winograd, nChw16c activations (oneDNN's F(4x4,3x3) / F(2x2,3x3) kernels),
//   wino_nhwc  convolution_winograd on NHWC activations, as an NHWC plan would run it: the input reordered into
//              nChw16c, wino16c's primitive, the output reordered back to NHWC, all three timed (oneDNN 2.6 has no
//              Winograd kernel for NHWC activations: asked for them, it offers no implementation),
// each with the weights in the layout the primitive chose (format `any`). Each line names the implementation oneDNN
// gave each form (or why it declined), the median and the fastest of REPS runs (the forms interleaved run by run so
// that a busy machine slows them alike; on a shared machine the fastest is the steadier figure), and the largest difference of each form's output from brgconv's on the same input
// (relative to brgconv's largest magnitude): Winograd's transforms round differently. The CPU's model name and
// oneDNN's version head the output.
//
//   bazel build //kernels/benchmarks:onednn_winograd_layers
//   OMP_NUM_THREADS=2 bazel-bin/kernels/benchmarks/onednn_winograd_layers BATCH REPS    # e.g. 1 50
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "kernels/benchmarks/resnet_conv_layers.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

std::string CpuModelName() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown CPU";
}

// One form of one layer: its primitive and its buffers (plain-layout input and output copies for the comparison).
struct Form {
  const char* name;
  dnnl::algorithm algorithm;
  tag layout;
  bool via_nhwc = false;  // NHWC input and output, reordered to and from `layout` around the convolution
  bool ok = false;
  std::string impl;
  dnnl::convolution_forward primitive;
  memory src, wei, bias, dst;
  memory nhwc_src, nhwc_dst;
  dnnl::reorder to_layout, from_layout;
  std::vector<double> times;
  std::vector<float> plain_out;  // NCHW
};

void SetUp(Form& f, const dnnl::engine& eng, dnnl::stream& s, int n, int c, int h, int k,
           const std::vector<float>& x_nchw, const std::vector<float>& w_oihw, const std::vector<float>& b) {
  memory::desc src_md({n, c, h, h}, dt::f32, f.layout), wei_any({k, c, 3, 3}, dt::f32, tag::any);
  memory::desc bias_md({k}, dt::f32, tag::x), dst_md({n, k, h, h}, dt::f32, f.layout);
  dnnl::post_ops ops;
  ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  try {
    dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, f.algorithm, src_md, wei_any, bias_md,
                                      dst_md, {1, 1}, {1, 1}, {1, 1});
    dnnl::convolution_forward::primitive_desc pd(d, attr, eng);
    f.impl = pd.impl_info_str();
    if (f.impl.rfind("ref", 0) == 0) {
      f.impl = "declined (" + f.impl + ")";
      return;
    }
    f.primitive = dnnl::convolution_forward(pd);
    f.src = memory(pd.src_desc(), eng);
    f.wei = memory(pd.weights_desc(), eng);
    f.bias = memory(bias_md, eng);
    f.dst = memory(pd.dst_desc(), eng);
    memory x_plain({{n, c, h, h}, dt::f32, tag::nchw}, eng, const_cast<float*>(x_nchw.data()));
    memory w_plain({{k, c, 3, 3}, dt::f32, tag::oihw}, eng, const_cast<float*>(w_oihw.data()));
    dnnl::reorder(x_plain, f.src).execute(s, x_plain, f.src);
    dnnl::reorder(w_plain, f.wei).execute(s, w_plain, f.wei);
    std::copy(b.begin(), b.end(), static_cast<float*>(f.bias.get_data_handle()));
    if (f.via_nhwc) {
      f.nhwc_src = memory({{n, c, h, h}, dt::f32, tag::nhwc}, eng);
      f.nhwc_dst = memory({{n, k, h, h}, dt::f32, tag::nhwc}, eng);
      dnnl::reorder(x_plain, f.nhwc_src).execute(s, x_plain, f.nhwc_src);
      f.to_layout = dnnl::reorder(f.nhwc_src, f.src);
      f.from_layout = dnnl::reorder(f.dst, f.nhwc_dst);
    }
    s.wait();
    f.ok = true;
  } catch (const dnnl::error& e) {
    f.impl = std::string("declined (") + e.what() + ")";
  }
}

void RunOnce(Form& f, dnnl::stream& s) {
  if (f.via_nhwc) f.to_layout.execute(s, f.nhwc_src, f.src);
  f.primitive.execute(s, {{DNNL_ARG_SRC, f.src}, {DNNL_ARG_WEIGHTS, f.wei}, {DNNL_ARG_BIAS, f.bias},
                          {DNNL_ARG_DST, f.dst}});
  if (f.via_nhwc) f.from_layout.execute(s, f.dst, f.nhwc_dst);
  s.wait();
}

void ReadBack(Form& f, const dnnl::engine& eng, dnnl::stream& s, int n, int k, int h) {
  f.plain_out.assign(size_t(n) * k * h * h, 0.f);
  memory plain({{n, k, h, h}, dt::f32, tag::nchw}, eng, f.plain_out.data());
  memory& out = f.via_nhwc ? f.nhwc_dst : f.dst;
  dnnl::reorder(out, plain).execute(s, out, plain);
  s.wait();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int batch = argc > 1 ? std::atoi(argv[1]) : 1;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 50;
  const dnnl_version_t* v = dnnl_version();
  std::printf("CPU: %s; oneDNN %d.%d.%d; batch %d; %d interleaved runs per form\n",
              CpuModelName().c_str(), v->major, v->minor, v->patch, batch, reps);
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream s(eng);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  double model_ms[2][4] = {}, model_min_ms[2][4] = {};  // [resnet18, resnet50][form], weighted by the layer's uses
  bool model_complete[2][4] = {{true, true, true, true}, {true, true, true, true}};  // no layer declined
  for (const auto& layer : convoy::benchmarks::ResNetConvLayers()) {
    if (layer.r != 3 || layer.stride != 1) continue;
    const int n = batch, c = layer.c, h = layer.h, k = layer.k;
    std::vector<float> x(size_t(n) * c * h * h), w(size_t(k) * c * 9), b(k);
    for (float& e : x) e = uni(rng);
    const float w_scale = 1.f / std::sqrt(float(c * 9));
    for (float& e : w) e = uni(rng) * w_scale;
    for (float& e : b) e = uni(rng) * 0.1f;
    Form forms[4] = {{"brgconv", dnnl::algorithm::convolution_direct, tag::nhwc},
                     {"direct16c", dnnl::algorithm::convolution_direct, tag::nChw16c},
                     {"wino16c", dnnl::algorithm::convolution_winograd, tag::nChw16c},
                     {"wino_nhwc", dnnl::algorithm::convolution_winograd, tag::nChw16c, /*via_nhwc=*/true}};
    for (Form& f : forms) SetUp(f, eng, s, n, c, h, k, x, w, b);
    for (Form& f : forms) {
      if (!f.ok) continue;
      RunOnce(f, s);
      RunOnce(f, s);
    }
    for (int rep = 0; rep < reps; ++rep) {
      for (Form& f : forms) {
        if (!f.ok) continue;
        const auto start = std::chrono::steady_clock::now();
        RunOnce(f, s);
        f.times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
      }
    }
    std::printf("%s %dx%dx%d -> %d (x%d)\n", layer.model, c, h, h, k, layer.count);
    for (Form& f : forms) if (f.ok) ReadBack(f, eng, s, n, k, h);
    double ref_max = 0;
    for (float e : forms[0].plain_out) ref_max = std::max(ref_max, double(std::fabs(e)));
    const int model = std::string(layer.model) == "resnet18" ? 0 : 1;
    for (int i = 0; i < 4; ++i) {
      Form& f = forms[i];
      if (!f.ok) {
        model_complete[model][i] = false;
        std::printf("  %-10s %s\n", f.name, f.impl.c_str());
        continue;
      }
      double diff = 0;
      if (forms[0].ok) {
        for (size_t j = 0; j < f.plain_out.size(); ++j) {
          diff = std::max(diff, double(std::fabs(f.plain_out[j] - forms[0].plain_out[j])));
        }
      }
      const double ms = Median(f.times), min_ms = *std::min_element(f.times.begin(), f.times.end());
      model_ms[model][i] += ms * layer.count;
      model_min_ms[model][i] += min_ms * layer.count;
      const double brg_min = forms[0].ok ? *std::min_element(forms[0].times.begin(), forms[0].times.end()) : 0.0;
      std::printf("  %-10s %-30s median %8.4f ms %5.2fx brgconv, min %8.4f ms %5.2fx brgconv, max |diff| / max "
                  "|brgconv| %.1e\n", f.name, f.impl.c_str(), ms, forms[0].ok ? ms / Median(forms[0].times) : 0.0,
                  min_ms, brg_min > 0 ? min_ms / brg_min : 0.0, ref_max > 0 ? diff / ref_max : 0.0);
    }
  }
  for (int m = 0; m < 2; ++m) {
    std::printf("%s 3x3 stride-1 layers, weighted by uses:", m == 0 ? "resnet18" : "resnet50");
    const char* names[4] = {"brgconv", "direct16c", "wino16c", "wino_nhwc"};
    for (int i = 0; i < 4; ++i) {
      if (model_complete[m][i]) std::printf("  %s median %.3f / min %.3f ms", names[i], model_ms[m][i], model_min_ms[m][i]);
      else std::printf("  %s (declined some layers)", names[i]);
    }
    std::printf("\n");
  }
  return 0;
}
