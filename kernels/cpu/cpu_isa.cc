#include "kernels/cpu/cpu_isa.h"

#include <strings.h>

#include <cstdlib>

namespace convoy::cpu {
namespace {

// The widest instruction set CONVOY_MAX_CPU_ISA allows (kAvx512, the widest there is, when unset or unknown).
CpuIsa MaxAllowedIsa() {
  const char* cap = std::getenv("CONVOY_MAX_CPU_ISA");
  if (cap == nullptr) return CpuIsa::kAvx512;
  if (strcasecmp(cap, "baseline") == 0) return CpuIsa::kBaseline;
  if (strcasecmp(cap, "avx2") == 0) return CpuIsa::kAvx2;
  return CpuIsa::kAvx512;
}

}  // namespace

bool CpuSupports(CpuIsa isa) {
  // Algorithms register from static initializers, which may run before libgcc's own CPU-model constructor.
  __builtin_cpu_init();
  static const CpuIsa max_allowed = MaxAllowedIsa();  // read once: the registrations and every caller agree
  if (static_cast<int>(isa) > static_cast<int>(max_allowed)) return false;
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
