// libFuzzer target: ImportConvoyGraphBytes (see fuzz_entries.h). Built with clang by tests/fuzz/run_fuzzers.sh; Bazel links it with
// fuzz_driver.cc instead, which runs it over files named on the command line.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)convoy::fuzz::ImportConvoyGraphBytes(data, size);
  return 0;
}
