// Which of oneDNN 2.6's INT8 convolution implementations is fastest on the layers of ResNet-50 and MobileNetV2: one run
// makes, for each layer (NHWC, UINT8 in and out, batch from the command line, 2 OpenMP threads, the requantization as
// Convoy's plans build it: output scales, a round only before a destination zero point), every implementation the
// primitive descriptor offers (walking next_impl, the reference ones left out), and times them interleaved run by run
// so that load on a shared machine hits each alike. Prints the median and the fastest of the runs per implementation;
// the first listed is the one Convoy's algorithm takes (docs/performance.md, "CPU: INT8").
//
//   bazel build //kernels/benchmarks:int8_conv_implementations
//   bazel-bin/kernels/benchmarks/int8_conv_implementations BATCH [RUNS]
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <vector>

#include "dnnl.hpp"
#include "kernels/benchmarks/onednn_forms.h"

namespace {

using namespace dnnl;  // NOLINT: a standalone oneDNN benchmark
using tag = memory::format_tag;
using dt = memory::data_type;

// One layer: batch, input channels, input size (square), output channels, filter size, stride, groups, zero points.
struct Layer {
  int n, c, h, k, r, s, g, dst_zp, src_zp;
};

struct Candidate {
  std::string impl;
  convolution_forward primitive;
  std::unordered_map<int, memory> args;
};

std::vector<Candidate> Candidates(const Layer& l) {
  engine& eng = convoy::benchmarks::CpuEngine();
  const int pad = l.r / 2, oh = (l.h + 2 * pad - l.r) / l.s + 1;
  memory::desc src({l.n, l.c, l.h, l.h}, dt::u8, tag::nhwc), dst({l.n, l.k, oh, oh}, dt::u8, tag::nhwc);
  memory::desc wany = l.g == 1 ? memory::desc({l.k, l.c, l.r, l.r}, dt::s8, tag::any)
                               : memory::desc({l.g, l.k / l.g, l.c / l.g, l.r, l.r}, dt::s8, tag::any);
  memory::desc bias({l.k}, dt::s32, tag::a);
  primitive_attr attr;
  post_ops ops;
  attr.set_output_scales(2, std::vector<float>(l.k, 0.01f));
  if (l.dst_zp) ops.append_eltwise(1.f, algorithm::eltwise_round, 0.f, 0.f);
  attr.set_post_ops(ops);
  attr.set_scratchpad_mode(scratchpad_mode::user);
  if (l.src_zp) attr.set_zero_points(DNNL_ARG_SRC, 0, {l.src_zp});
  if (l.dst_zp) attr.set_zero_points(DNNL_ARG_DST, 0, {l.dst_zp});
  convolution_forward::desc d(prop_kind::forward_inference, algorithm::convolution_direct, src, wany, bias, dst,
                              {l.s, l.s}, {pad, pad}, {pad, pad});
  convolution_forward::primitive_desc pd(d, attr, eng);
  std::vector<Candidate> out;
  do {
    const std::string impl = pd.impl_info_str();
    if (impl.find("ref") != std::string::npos) continue;
    Candidate c{impl, convolution_forward(pd), {}};
    memory ms(src, eng), md(dst, eng), mw(pd.weights_desc(), eng), mb(bias, eng), mpad(pd.scratchpad_desc(), eng);
    std::fill_n(static_cast<uint8_t*>(ms.get_data_handle()), src.get_size(), 3);
    std::fill_n(static_cast<int8_t*>(mw.get_data_handle()), pd.weights_desc().get_size(), 1);
    std::fill_n(static_cast<int32_t*>(mb.get_data_handle()), l.k, 5);
    c.args = {{DNNL_ARG_SRC, ms}, {DNNL_ARG_DST, md}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_BIAS, mb},
              {DNNL_ARG_SCRATCHPAD, mpad}};
    out.push_back(std::move(c));
  } while (pd.next_impl());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  omp_set_num_threads(2);
  const int n = argc > 1 ? atoi(argv[1]) : 1;
  const int runs = argc > 2 ? atoi(argv[2]) : 200;
  // ResNet-50's layers (stem, 1x1 and 3x3 at each stage) and MobileNetV2's (expand, depthwise, project).
  const std::vector<Layer> layers = {
      {n, 3, 224, 64, 7, 2, 1, 0, 128},    {n, 64, 56, 64, 1, 1, 1, 0, 0},      {n, 64, 56, 256, 1, 1, 1, 140, 0},
      {n, 256, 56, 64, 1, 1, 1, 0, 0},     {n, 64, 56, 64, 3, 1, 1, 0, 0},      {n, 256, 56, 128, 1, 1, 1, 0, 0},
      {n, 128, 28, 128, 3, 1, 1, 0, 0},    {n, 128, 28, 512, 1, 1, 1, 140, 0},  {n, 512, 28, 128, 1, 1, 1, 0, 0},
      {n, 256, 14, 256, 3, 1, 1, 0, 0},    {n, 256, 14, 1024, 1, 1, 1, 138, 0}, {n, 1024, 14, 256, 1, 1, 1, 0, 0},
      {n, 512, 7, 512, 3, 1, 1, 0, 0},     {n, 512, 7, 2048, 1, 1, 1, 130, 0},  {n, 2048, 7, 512, 1, 1, 1, 0, 0},
      {n, 24, 56, 144, 1, 1, 1, 0, 120},   {n, 144, 56, 144, 3, 1, 144, 0, 0},  {n, 144, 56, 24, 1, 1, 1, 3, 0},
      {n, 192, 28, 192, 3, 1, 192, 0, 0},  {n, 576, 14, 576, 3, 1, 576, 0, 0},  {n, 960, 7, 960, 3, 1, 960, 0, 0},
  };
  stream s(convoy::benchmarks::CpuEngine());
  std::printf("batch %d, %d runs per implementation, interleaved; ms\n", n, runs);
  for (const Layer& l : layers) {
    std::vector<Candidate> candidates = Candidates(l);
    const std::vector<std::vector<double>> ms =
        convoy::benchmarks::TimeInterleaved(static_cast<int>(candidates.size()), runs, [&](int i) {
          candidates[i].primitive.execute(s, candidates[i].args);
          s.wait();
        });
    std::printf("c%d h%d k%d %dx%d stride %d groups %d dst_zp %d src_zp %d\n", l.c, l.h, l.k, l.r, l.r, l.s, l.g,
                l.dst_zp, l.src_zp);
    for (size_t i = 0; i < candidates.size(); ++i) {
      std::printf("   %-36s median %.4f min %.4f\n", candidates[i].impl.c_str(), ms[i][ms[i].size() / 2], ms[i][0]);
    }
  }
}
