// For tests of the CPU's INT8 steps: skips a test on a CPU where oneDNN's INT8 convolutions are not exact (no VNNI,
// or ONEDNN_MAX_CPU_ISA below it), where cpu.quantized_conv2d.* declines every problem and QDQ plans keep their
// layers in FP32 with the quantization simulated. What happens there is tested on every machine by
// //server/runtime:quantized_plans_without_vnni_test, which lowers oneDNN's ISA to AVX2 first.
//
//   TEST(Int8Plans, RunInt8) {
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
