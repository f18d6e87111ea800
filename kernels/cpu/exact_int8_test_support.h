// For tests of oneDNN's INT8 convolutions (cpu.quantized_conv2d.onednn*): skips a test on a CPU where they are not
// exact (no VNNI, or ONEDNN_MAX_CPU_ISA below it) and decline every problem. QDQ plans there run their convolutions
// on the own exact kernels (cpu.quantized_conv2d.gemm_nhwc*), which every machine tests; what a plan does there is
// tested on every machine by //server/runtime:quantized_plans_without_vnni_test, which lowers oneDNN's ISA to AVX2.
//
//   TEST(OnednnInt8, MatchesTheReference) {
//     CONVOY_SKIP_UNLESS_EXACT_CPU_INT8();
//     ...
#ifndef CONVOY_KERNELS_CPU_EXACT_INT8_TEST_SUPPORT_H_
#define CONVOY_KERNELS_CPU_EXACT_INT8_TEST_SUPPORT_H_

#include "gtest/gtest.h"
#include "kernels/cpu/onednn_support.h"

#define CONVOY_SKIP_UNLESS_EXACT_CPU_INT8()                                                           \
  if (const absl::Status convoy_exact_int8 = ::convoy::cpu::onednn::CheckExactInt8Products();       \
      !convoy_exact_int8.ok())                                                                        \
  GTEST_SKIP() << convoy_exact_int8.message()

#endif  // CONVOY_KERNELS_CPU_EXACT_INT8_TEST_SUPPORT_H_
