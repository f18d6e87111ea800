// The shared pieces of the standalone benchmarks that time one oneDNN convolution in several forms
// (int8_fused_add_forms, onednn_silu_forms): the CPU engine, a primitive with its arguments, and the forms timed in
// turn run by run, so that load on a shared machine hits every form alike.
#ifndef CONVOY_KERNELS_BENCHMARKS_ONEDNN_FORMS_H_
#define CONVOY_KERNELS_BENCHMARKS_ONEDNN_FORMS_H_

#include <algorithm>
#include <chrono>
#include <functional>
#include <unordered_map>
#include <vector>

#include "dnnl.hpp"

namespace convoy::benchmarks {

inline dnnl::engine& CpuEngine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

struct ConvPrimitive {
  dnnl::convolution_forward p;
  dnnl::convolution_forward::primitive_desc pd;
  std::unordered_map<int, dnnl::memory> args;
};

// Wall time of f() in ms.
inline double MillisecondsOf(const std::function<void()>& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// run(form) for forms 0..forms-1 in turn, `runs` rounds; each form's times in ms, sorted (median at size / 2).
inline std::vector<std::vector<double>> TimeInterleaved(int forms, int runs, const std::function<void(int)>& run) {
  std::vector<std::vector<double>> times(forms);
  for (int round = 0; round < runs; ++round) {
    for (int form = 0; form < forms; ++form) times[form].push_back(MillisecondsOf([&] { run(form); }));
  }
  for (auto& t : times) std::sort(t.begin(), t.end());
  return times;
}

}  // namespace convoy::benchmarks

#endif  // CONVOY_KERNELS_BENCHMARKS_ONEDNN_FORMS_H_
