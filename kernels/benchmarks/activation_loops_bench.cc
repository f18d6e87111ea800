// What the own kernels' sigmoid and SiLU epilogues cost per element: the element-by-element definition
// (ApplyActivation, libm's expf), ApplyActivationInPlace (the vectorized loops of kernels/cpu/silu_loops.h on the
// widest instruction set this CPU runs) and each version of those loops, on 64 Ki random floats in [-8, 8] (one
// thread, in cache). The forms alternate run by run; the fastest of RUNS runs per form, in ns per element.
//
//   bazel build //kernels/benchmarks:activation_loops_bench
//   bazel-bin/kernels/benchmarks/activation_loops_bench [RUNS=300]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/common/epilogue.h"
#include "kernels/cpu/activation_loops.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/silu_loops.h"

namespace convoy {
namespace {

struct Form {
  std::string name;
  std::function<void(float*, int64_t)> run;
};

std::vector<Form> FormsOf(ActivationKind kind, const char* name) {
  std::vector<Form> forms;
  forms.push_back({std::string(name) + " element by element (expf)", [kind](float* x, int64_t n) {
                     for (int64_t i = 0; i < n; ++i) x[i] = ApplyActivation(x[i], kind, 0.0f, 0.0f);
                   }});
  forms.push_back({std::string(name) + " ApplyActivationInPlace",
                   [kind](float* x, int64_t n) { cpu::ApplyActivationInPlace(x, n, Activation::Of(kind)); }});
  for (cpu::CpuIsa isa : cpu::SupportedCpuIsas()) {
    forms.push_back({std::string(name) + " loop, " + std::string(cpu::CpuIsaName(isa)), [kind, isa](float* x, int64_t n) {
                       if (kind == ActivationKind::kSilu) {
                         cpu::SiluInPlace(isa, x, n);
                       } else {
                         cpu::SigmoidInPlace(isa, x, n);
                       }
                     }});
  }
  return forms;
}

}  // namespace
}  // namespace convoy

int main(int argc, char** argv) {
  using namespace convoy;  // NOLINT: a standalone benchmark
  const int runs = argc > 1 ? std::atoi(argv[1]) : 300;
  std::vector<float> input(int64_t{1} << 16);
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> values(-8.0f, 8.0f);
  for (float& v : input) v = values(rng);
  std::vector<Form> forms = FormsOf(ActivationKind::kSilu, "silu");
  for (Form& f : FormsOf(ActivationKind::kSigmoid, "sigmoid")) forms.push_back(std::move(f));
  std::vector<double> best(forms.size(), 1e30);
  std::vector<float> x;
  for (int run = 0; run < runs; ++run) {
    for (size_t f = 0; f < forms.size(); ++f) {
      x = input;
      const auto start = std::chrono::steady_clock::now();
      forms[f].run(x.data(), static_cast<int64_t>(x.size()));
      const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
      best[f] = std::min(best[f], ns / static_cast<double>(x.size()));
    }
  }
  std::printf("%zu floats, fastest of %d runs each, ns per element\n", input.size(), runs);
  for (size_t f = 0; f < forms.size(); ++f) std::printf("  %-44s %6.2f\n", forms[f].name.c_str(), best[f]);
}
