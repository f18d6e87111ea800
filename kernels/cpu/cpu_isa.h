// The x86-64 instruction sets Convoy's own CPU kernels are compiled for, and which of them this CPU runs.
//
// The project is built for x86-64-v2 (SSE4.2). Kernels that pay for wider vectors compile their inner loops once
// more per instruction set, in translation units of their own (e.g. binary_rows_avx512.cc, built with -mavx512f),
// and register one algorithm per instruction set the CPU supports (cpuid at load, through
// __builtin_cpu_supports, which also checks that the OS saves the wider registers). The registry's heuristic then
// prefers the widest, the profile names the version that ran, and the cross-backend suite checks every version
// present on the machine.
//
// CONVOY_MAX_CPU_ISA=baseline|avx2 caps what CpuSupports admits (as ONEDNN_MAX_CPU_ISA caps oneDNN), so an AVX-512
// machine can run and time the versions an AVX2-only CPU would run.
#ifndef CONVOY_KERNELS_CPU_CPU_ISA_H_
#define CONVOY_KERNELS_CPU_CPU_ISA_H_

#include <vector>

#include "absl/strings/string_view.h"

namespace convoy::cpu {

enum class CpuIsa {
  kBaseline,  // x86-64-v2: SSE4.2, 4 floats per vector (every CPU Convoy runs on)
  kAvx2,      // AVX2 + FMA, 8 floats (x86-64-v3: Haswell, Zen)
  kAvx512,    // AVX-512 F/BW/DQ/VL, 16 floats (x86-64-v4: Skylake-SP and later Xeons, Zen 4)
};

// Whether this CPU (and its OS) runs code compiled for `isa`. kBaseline: always.
bool CpuSupports(CpuIsa isa);

// "baseline", "avx2", "avx512".
absl::string_view CpuIsaName(CpuIsa isa);

// The widest instruction set this CPU runs.
CpuIsa BestCpuIsa();
// Every instruction set this CPU runs, kBaseline first.
std::vector<CpuIsa> SupportedCpuIsas();

}  // namespace convoy::cpu

#endif  // CONVOY_KERNELS_CPU_CPU_ISA_H_
