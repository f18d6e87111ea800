// libFuzzer target: the HTTP/REST infer request codec (server/http/infer_json.h) in front of the decoder both
// protocols share (server/inference/request_decoder.h), against every signature of FuzzSignatures()
// (infer_request_fuzz.h: the sample models' configs and a few built-in ones). Built with clang by
// tests/fuzz/run_fuzzers.sh (with a dictionary of the protocol's JSON keys); Bazel links it with fuzz_driver.cc.
//
// Input: 4 bytes, little-endian, give the Inference-Header-Content-Length (0xffffffff: the header is absent), the
// rest is the body. A request that decodes is checked against the signature (batch within 1..max_batch_size, every
// input buffer batch x item bytes, outputs in range and unique) and every refusal must be INVALID_ARGUMENT (for
// the URL's model, which the fuzzer does not vary); either violation aborts. CONVOY_FUZZ_WRITE_SEEDS=DIR writes one
// request per signature into DIR (JSON `data` for small inputs, the binary extension otherwise).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/common/dtype.h"
#include "server/http/infer_json.h"
#include "server/inference/request_decoder.h"
#include "tests/fuzz/infer_request_fuzz.h"

namespace {

using convoy::runtime::ModelSignature;
using convoy::runtime::TensorMetadata;

int64_t ItemElements(const TensorMetadata& t, const ModelSignature& s) {
  int64_t n = 1;
  for (size_t d = s.max_batch_size > 0 ? 1 : 0; d < t.dims.size(); ++d) n *= std::max<int64_t>(t.dims[d], 0);
  return n;
}

void Check(const convoy::infer::DecodedRequest& d, const ModelSignature& s, const std::string& body) {
  const char* problem = nullptr;
  const int64_t batch = d.spec.batch_size;
  if (s.max_batch_size > 0 ? (batch < 1 || batch > s.max_batch_size) : batch != 1) problem = "batch size";
  for (size_t i = 0; problem == nullptr && i < s.inputs.size(); ++i) {
    const size_t want =
        static_cast<size_t>(ItemElements(s.inputs[i], s) * batch) * convoy::DataTypeSize(s.inputs[i].datatype);
    if (d.payload->inputs[i].size() != want) problem = "input buffer size";
  }
  std::vector<bool> seen(s.outputs.size(), false);
  for (const auto& out : d.outputs) {
    if (out.index >= s.outputs.size() || seen[out.index]) {
      problem = "requested output index";
      break;
    }
    seen[out.index] = true;
  }
  if (problem == nullptr) return;
  std::fprintf(stderr, "http_infer_json_fuzzer: model '%s' accepted an inconsistent request (%s):\n%s\n",
               s.name.c_str(), problem, body.substr(0, 4000).c_str());
  std::abort();
}

// A request the decoder accepts for `s`, in HTTP form: 4 bytes of header length, then the body.
std::string SeedFor(const ModelSignature& s, std::mt19937_64& rng) {
  const inference::ModelInferRequest r = convoy::fuzz::ValidRequest(s, rng, 16384);
  std::vector<std::string> inputs;
  std::string binary;
  for (int i = 0; i < r.inputs_size(); ++i) {
    const auto& in = r.inputs(i);
    std::string tensor = absl::StrCat(R"({"name":")", in.name(), R"(","datatype":")", in.datatype(), R"(","shape":[)",
                                      absl::StrJoin(in.shape(), ","), "],");
    if (i < r.raw_input_contents_size() && r.raw_input_contents(i).size() > 256) {
      absl::StrAppend(&tensor, R"("parameters":{"binary_data_size":)", r.raw_input_contents(i).size(), "}}");
      binary += r.raw_input_contents(i);
    } else {
      const size_t n = i < r.raw_input_contents_size() ? r.raw_input_contents(i).size() : 0;
      std::vector<int> values(n / std::max<size_t>(1, in.datatype() == "UINT8" ? 1 : in.datatype() == "INT64" ? 8
                                                       : in.datatype() == "FP32" ? 4 : 2), 1);
      if (n == 0) values.assign(in.contents().fp32_contents_size() + in.contents().uint_contents_size() +
                                in.contents().int64_contents_size(), 1);
      absl::StrAppend(&tensor, R"("data":[)", absl::StrJoin(values, ","), "]}");
    }
    inputs.push_back(tensor);
  }
  std::string json = absl::StrCat(R"({"id":"seed","parameters":{"priority":1},"inputs":[)", absl::StrJoin(inputs, ","),
                                  "]");
  if (r.outputs_size() > 0) {
    absl::StrAppend(&json, R"(,"outputs":[{"name":")", r.outputs(0).name(), R"(","parameters":{"binary_data":true}}])");
  }
  json += "}";
  const uint32_t length = binary.empty() ? 0xffffffffu : static_cast<uint32_t>(json.size());
  std::string out(4, '\0');
  for (int b = 0; b < 4; ++b) out[b] = static_cast<char>((length >> (8 * b)) & 0xff);
  return out + json + binary;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* dir = std::getenv("CONVOY_FUZZ_WRITE_SEEDS");
  if (dir == nullptr) return 0;
  std::mt19937_64 rng(1);
  int i = 0;
  for (const ModelSignature& s : convoy::fuzz::FuzzSignatures()) {
    std::ofstream(std::string(dir) + "/seed_" + std::to_string(i++), std::ios::binary) << SeedFor(s, rng);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  uint32_t length = 0;
  for (int b = 0; b < 4; ++b) length |= static_cast<uint32_t>(data[b]) << (8 * b);
  const std::optional<size_t> header_length =
      length == 0xffffffffu ? std::nullopt : std::optional<size_t>(length);
  const std::string body(reinterpret_cast<const char*>(data) + 4, size - 4);
  for (const ModelSignature& s : convoy::fuzz::FuzzSignatures()) {
    auto parsed = convoy::http::ParseInferRequest(body, header_length, s.name, "");
    if (!parsed.ok()) {
      if (parsed.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
      return 0;  // the JSON is the same for every signature
    }
    auto decoded = convoy::infer::DecodeRequest((*parsed)->view, s);
    if (decoded.ok()) {
      Check(*decoded, s, body);
    } else if (decoded.status().code() != absl::StatusCode::kInvalidArgument) {
      std::fprintf(stderr, "http_infer_json_fuzzer: model '%s': %s is not INVALID_ARGUMENT\n", s.name.c_str(),
                   decoded.status().ToString().c_str());
      std::abort();
    }
  }
  return 0;
}
