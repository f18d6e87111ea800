// The fuzz entry points for the model loaders, shared by the libFuzzer targets (clang, tests/fuzz/run_fuzzers.sh),
// the plain-driver binaries Bazel builds with gcc, and fuzz_corpus_test (CI). Each feeds bytes to a loader and
// returns 0 whatever the outcome: a fuzzer only cares that nothing crashes, leaks or reads out of bounds.
#ifndef CONVOY_TESTS_FUZZ_FUZZ_ENTRIES_H_
#define CONVOY_TESTS_FUZZ_FUZZ_ENTRIES_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"

namespace convoy::fuzz {

// ONNX bytes -> import -> optimize -> (when small enough) one reference run on zeros.
absl::Status ImportOnnxBytes(const uint8_t* data, size_t size);

// Bytes split at the first NUL: before it a Convoy YAML graph, after it a safetensors file for its weights.
// Without a NUL the whole input is the YAML and there are no weights.
absl::Status ImportConvoyGraphBytes(const uint8_t* data, size_t size);

// A config.yaml.
absl::Status ParseModelConfigBytes(const uint8_t* data, size_t size);

}  // namespace convoy::fuzz

#endif  // CONVOY_TESTS_FUZZ_FUZZ_ENTRIES_H_
