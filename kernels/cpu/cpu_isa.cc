#include "kernels/cpu/cpu_isa.h"

namespace convoy::cpu {

bool CpuSupports(CpuIsa isa) {
  // Algorithms register from static initializers, which may run before libgcc's own CPU-model constructor.
  __builtin_cpu_init();
  switch (isa) {
    case CpuIsa::kBaseline:
      return true;
    case CpuIsa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case CpuIsa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  }
  return false;
}

absl::string_view CpuIsaName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kBaseline: return "baseline";
    case CpuIsa::kAvx2: return "avx2";
    case CpuIsa::kAvx512: return "avx512";
  }
  return "unknown";
}

CpuIsa BestCpuIsa() {
  if (CpuSupports(CpuIsa::kAvx512)) return CpuIsa::kAvx512;
  if (CpuSupports(CpuIsa::kAvx2)) return CpuIsa::kAvx2;
  return CpuIsa::kBaseline;
}

std::vector<CpuIsa> SupportedCpuIsas() {
  std::vector<CpuIsa> out;
  for (CpuIsa isa : {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (CpuSupports(isa)) out.push_back(isa);
  }
  return out;
}

}  // namespace convoy::cpu
