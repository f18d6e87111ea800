// The request-decoder fuzz entry, shared by the libFuzzer target (infer_request_fuzzer.cc, built with clang by
// tests/fuzz/run_fuzzers.sh), its plain-driver twin Bazel builds with gcc, and fuzz_corpus_test (CI).
//
// Bytes are parsed as an inference.ModelInferRequest (by protobuf, and by grpc_server::ParseWireInferRequest over
// the bytes cut into pieces, as the server's ModelInfer reads them: the two must agree) and decoded by
// grpc_server::DecodeInferRequest, the function the server's ModelInfer and ModelStreamInfer handlers call, against every signature of FuzzSignatures(): the
// sample models' config.yaml files and a few built-in configs, turned into signatures by the config parser and
// SignatureFromConfig exactly as the server does. A decode that succeeds is checked against the signature (batch
// within 1..max_batch_size, every input buffer batch x item bytes, outputs in range and unique); a violation
// aborts, so the fuzzer finds wrong answers as well as crashes.
//
// The structure-aware half (MutateRequest) edits a parsed request the way a confused or hostile client would:
// shapes set to 0, -1, max_batch_size + 1, 2^62; datatypes swapped or junk; raw contents resized, dropped, added;
// typed contents of the wrong kind or count; inputs duplicated, renamed, removed; outputs repeated or unknown;
// parameters of every type. It starts from ValidRequest.
#ifndef CONVOY_TESTS_FUZZ_INFER_REQUEST_FUZZ_H_
#define CONVOY_TESTS_FUZZ_INFER_REQUEST_FUZZ_H_

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "proto/grpc_service.pb.h"
#include "server/runtime/model_signature.h"

namespace convoy::fuzz {

// The signatures decoded against. Reads model_repo/*/config.yaml relative to the working directory (the
// repository root; a missing folder leaves only the built-in ones). Built once.
const std::vector<runtime::ModelSignature>& FuzzSignatures();

// A request the decoder accepts for `signature`: a random batch (at most `max_input_bytes` of input), raw or typed
// contents, sometimes requested outputs and a priority. When one batch item is larger than max_input_bytes (the
// sample ResNet's 602 KB image under libFuzzer's 64 KB limit) the shape is right and the contents are empty.
inference::ModelInferRequest ValidRequest(const runtime::ModelSignature& signature, std::mt19937_64& rng,
                                          size_t max_input_bytes = size_t{1} << 20);

// One to four structural edits of `request` (see the file comment).
void MutateRequest(inference::ModelInferRequest& request, std::mt19937_64& rng);

// Parses `data` as a ModelInferRequest and decodes it against every signature, checking each success. Returns the
// number of signatures that accepted it (-1: the bytes are not a ModelInferRequest).
int DecodeRequestBytes(const uint8_t* data, size_t size);

// The serialized ValidRequest of each signature with `seed`: the fuzzer's seed corpus.
std::vector<std::string> SeedRequests(uint64_t seed, size_t max_input_bytes = size_t{1} << 20);

}  // namespace convoy::fuzz

#endif  // CONVOY_TESTS_FUZZ_INFER_REQUEST_FUZZ_H_
