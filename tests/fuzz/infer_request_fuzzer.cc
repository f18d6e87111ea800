// libFuzzer target: the server's request decoder (see infer_request_fuzz.h) with a structure-aware mutator. Built
// with clang by tests/fuzz/run_fuzzers.sh; Bazel links it with fuzz_driver.cc instead, which replays files.
//
// Three mutations in four are structural (MutateRequest on the parsed input, or on a fresh ValidRequest when the
// input does not parse); the fourth is libFuzzer's own byte mutation, so malformed protobuf reaches the parser too.
// CONVOY_FUZZ_WRITE_SEEDS=DIR writes one valid request per signature into DIR at start-up (the seed corpus).
// run_fuzzers.sh runs it with -max_len=65536: valid requests stay under 32 KB of input, so executions stay cheap.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>

#include "google/protobuf/stubs/logging.h"
#include "tests/fuzz/infer_request_fuzz.h"

// Provided by libFuzzer; absent (null) in the plain-driver build.
extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size) __attribute__((weak));

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);  // parse failures of invalid UTF-8 strings are expected, not news
  const char* dir = std::getenv("CONVOY_FUZZ_WRITE_SEEDS");
  if (dir == nullptr) return 0;
  int i = 0;
  for (const std::string& seed : convoy::fuzz::SeedRequests(1, 32768)) {
    std::ofstream(std::string(dir) + "/seed_" + std::to_string(i++), std::ios::binary) << seed;
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  convoy::fuzz::DecodeRequestBytes(data, size);
  return 0;
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  std::mt19937_64 rng(seed);
  if (LLVMFuzzerMutate != nullptr && rng() % 4 == 0) return LLVMFuzzerMutate(data, size, max_size);
  inference::ModelInferRequest request;
  if (size == 0 || !request.ParseFromArray(data, static_cast<int>(size)) || rng() % 32 == 0) {
    const auto& signatures = convoy::fuzz::FuzzSignatures();
    request = convoy::fuzz::ValidRequest(signatures[rng() % signatures.size()], rng, max_size / 2);
  }
  convoy::fuzz::MutateRequest(request, rng);
  const std::string bytes = request.SerializeAsString();
  if (bytes.size() > max_size) return LLVMFuzzerMutate != nullptr ? LLVMFuzzerMutate(data, size, max_size) : size;
  std::memcpy(data, bytes.data(), bytes.size());
  return bytes.size();
}
