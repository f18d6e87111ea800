// Registers a CPU algorithm compiled per instruction set (cpu_isa.h) once for each instruction set this CPU runs:
// the baseline everywhere, the AVX2 and AVX-512 versions where CpuSupports says so (checked once, at load); and picks
// the table of row kernels an algorithm's instance runs.
//
//   CONVOY_REGISTER_PER_ISA_ALGORITHM(Pool2dOp, CpuMaxPoolNhwcAlgorithm);   // the class is built from a CpuIsa
//   const MaxRowKernels& rows = ForCpuIsa(isa_, kMaxRowKernelsBaseline, kMaxRowKernelsAvx2, kMaxRowKernelsAvx512);
#ifndef CONVOY_KERNELS_CPU_PER_ISA_REGISTRATION_H_
#define CONVOY_KERNELS_CPU_PER_ISA_REGISTRATION_H_

#include <memory>

#include "kernels/cpu/cpu_isa.h"
#include "kernels/registry/registry.h"

namespace convoy::cpu {

// The one of an algorithm's three per-instruction-set tables that `isa` runs.
template <typename Table>
const Table& ForCpuIsa(CpuIsa isa, const Table& baseline, const Table& avx2, const Table& avx512) {
  switch (isa) {
    case CpuIsa::kAvx2: return avx2;
    case CpuIsa::kAvx512: return avx512;
    case CpuIsa::kBaseline: break;
  }
  return baseline;
}

}  // namespace convoy::cpu

#define CONVOY_REGISTER_PER_ISA_ALGORITHM(Op, AlgorithmClass)                                        \
  static const bool convoy_registered_per_isa_##AlgorithmClass = [] {                                \
    for (::convoy::cpu::CpuIsa isa : ::convoy::cpu::SupportedCpuIsas()) {                             \
      ::convoy::OpRegistry<::convoy::Op>::Global().Register(std::make_unique<AlgorithmClass>(isa)); \
    }                                                                                                 \
    return true;                                                                                      \
  }()

#endif  // CONVOY_KERNELS_CPU_PER_ISA_REGISTRATION_H_
