// See infer_request_fuzz.h.
#include "tests/fuzz/infer_request_fuzz.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include "kernels/common/dtype.h"
#include "server/grpc/infer_codec.h"
#include "server/grpc/infer_request_wire.h"
#include "server/repository/model_config.h"

namespace convoy::fuzz {
namespace {

using inference::InferParameter;
using inference::ModelInferRequest;
using runtime::ModelSignature;
using runtime::TensorMetadata;

constexpr size_t kMaxInputBytes = 1 << 20;

// Configs beside the sample models' that reach the decoder's other branches: FP16 and BF16 (raw only), UINT8
// images with preprocessing (typed uint_contents), two inputs, no batching, more than one output.
const char* const kBuiltInConfigs[] = {
    R"(name: fuzz_fp16
format: onnx
max_batch_size: 4
inputs:
  - name: x
    datatype: FP16
    dims: [3, 8, 8]
outputs:
  - name: y
    datatype: FP16
    dims: [5]
)",
    R"(name: fuzz_uint8
format: onnx
max_batch_size: 8
inputs:
  - name: image
    datatype: UINT8
    dims: [8, 8, 3]
    layout: NHWC
    preprocessing:
      mean: [0.5, 0.5, 0.5]
      std: [0.25, 0.25, 0.25]
outputs:
  - name: logits
    datatype: FP32
    dims: [10]
)",
    R"(name: fuzz_pair
format: onnx
max_batch_size: 0
inputs:
  - name: a
    datatype: FP32
    dims: [2, 4]
  - name: b
    datatype: BF16
    dims: [2, 4]
outputs:
  - name: sum
    datatype: FP32
    dims: [2, 4]
  - name: scores
    datatype: FP32
    dims: [6]
)",
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<ModelSignature> LoadSignatures() {
  std::vector<std::pair<std::string, std::string>> configs;  // (source, text)
  std::error_code error;
  std::vector<std::string> paths;
  for (const auto& entry : std::filesystem::directory_iterator("model_repo", error)) {
    const std::string path = entry.path().string() + "/config.yaml";
    if (std::filesystem::is_regular_file(path, error)) paths.push_back(path);
  }
  std::sort(paths.begin(), paths.end());
  for (const std::string& path : paths) configs.emplace_back(path, ReadFile(path));
  for (const char* text : kBuiltInConfigs) configs.emplace_back("built-in", text);
  std::vector<ModelSignature> signatures;
  for (const auto& [source, text] : configs) {
    absl::StatusOr<repository::ModelConfig> config = repository::ParseModelConfigText(text, source);
    absl::StatusOr<ModelSignature> signature =
        config.ok() ? runtime::SignatureFromConfig(*config) : absl::StatusOr<ModelSignature>(config.status());
    if (!signature.ok()) {
      std::fprintf(stderr, "infer_request_fuzz: %s: %s\n", source.c_str(), signature.status().ToString().c_str());
      std::abort();  // a broken fuzz setup must not pass silently
    }
    signatures.push_back(*std::move(signature));
  }
  return signatures;
}

int64_t ItemElements(const TensorMetadata& t, const ModelSignature& s) {
  int64_t n = 1;
  for (size_t d = (s.max_batch_size > 0 ? 1 : 0); d < t.dims.size(); ++d) n *= t.dims[d];
  return n;
}

size_t ItemBytes(const TensorMetadata& t, const ModelSignature& s) {
  return static_cast<size_t>(ItemElements(t, s)) * DataTypeSize(t.datatype);
}

template <typename T>
const T& Pick(const std::vector<T>& values, std::mt19937_64& rng) {
  return values[rng() % values.size()];
}

int64_t InterestingInt(std::mt19937_64& rng) {
  static const std::vector<int64_t> values = {0,  1,  -1, 2,  3,  4,  5,  7,  8,  9,  10, 11, 16, 17,
                                              31, 32, 33, 224, 255, 256, int64_t{1} << 31, int64_t{1} << 32,
                                              int64_t{1} << 62, INT64_MAX, INT64_MIN, -(int64_t{1} << 40)};
  return rng() % 8 == 0 ? static_cast<int64_t>(rng()) : Pick(values, rng);
}

// Valid UTF-8 only: proto3 refuses to parse a string field that is not (libFuzzer's byte mutations cover that).
std::string InterestingString(std::mt19937_64& rng) {
  static const std::vector<std::string> values = {"",      "FP32",  "FP16",  "BF16",    "UINT8",  "INT64", "BYTES",
                                                  "INT32", "fp32",  "FP32 ", "BOOL",    "x",      "images",
                                                  "a",     "b",     "..",    "/",       "logits", "probabilities",
                                                  std::string("\0\x7f", 2), "\xc3\xa9", std::string(100, 'F')};
  return Pick(values, rng);
}

// A name the signatures use (so renames and requested outputs reach the checks after the name lookup).
std::string SignatureName(std::mt19937_64& rng, bool output) {
  const ModelSignature& s = Pick(FuzzSignatures(), rng);
  const std::vector<TensorMetadata>& tensors = output ? s.outputs : s.inputs;
  return tensors.empty() ? std::string() : Pick(tensors, rng).name;
}

void SetRandomParameter(InferParameter& p, std::mt19937_64& rng) {
  switch (rng() % 5) {
    case 0: p.set_int64_param(InterestingInt(rng)); break;
    case 1: p.set_uint64_param(static_cast<uint64_t>(InterestingInt(rng))); break;
    case 2: p.set_bool_param(rng() % 2 == 0); break;
    case 3: p.set_double_param(static_cast<double>(InterestingInt(rng)) / 3.0); break;
    default: p.set_string_param(InterestingString(rng));
  }
}

size_t ShapeBytes(const ModelInferRequest::InferInputTensor& input) {
  size_t elements = 1;
  for (int64_t d : input.shape()) {
    if (d <= 0) return 0;
    if (elements > kMaxInputBytes / static_cast<size_t>(d)) return kMaxInputBytes;
    elements *= static_cast<size_t>(d);
  }
  return std::min(elements * 4, kMaxInputBytes);
}

void FillTyped(ModelInferRequest::InferInputTensor& input, int64_t count, std::mt19937_64& rng) {
  inference::InferTensorContents* c = input.mutable_contents();
  count = std::clamp<int64_t>(count, 0, 1 << 16);
  const int field = static_cast<int>(rng() % 8);
  for (int64_t i = 0; i < count; ++i) {
    switch (field) {
      case 0: c->add_bool_contents(rng() % 2 == 0); break;
      case 1: c->add_int_contents(static_cast<int32_t>(rng())); break;
      case 2: c->add_int64_contents(static_cast<int64_t>(rng())); break;
      case 3: c->add_uint_contents(static_cast<uint32_t>(rng() % 300)); break;
      case 4: c->add_uint64_contents(rng()); break;
      case 5: c->add_fp32_contents(static_cast<float>(static_cast<int64_t>(rng() % 2000) - 1000) / 7.0f); break;
      case 6: c->add_fp64_contents(1.5); break;
      default: c->add_bytes_contents("b");
    }
  }
}

// One structural edit; `request` may be anything a client could send.
void MutateOnce(ModelInferRequest& r, std::mt19937_64& rng) {
  const int n = r.inputs_size();
  auto* input = n > 0 ? r.mutable_inputs(static_cast<int>(rng() % n)) : nullptr;
  const int raw_index = n > 0 && r.raw_input_contents_size() > 0 ? static_cast<int>(rng() % r.raw_input_contents_size())
                                                                 : -1;
  switch (rng() % 20) {
    case 0:
      if (input != nullptr && input->shape_size() > 0) {
        input->set_shape(static_cast<int>(rng() % input->shape_size()), InterestingInt(rng));
      }
      break;
    case 1:
      if (input != nullptr) input->add_shape(rng() % 2 == 0 ? 1 : InterestingInt(rng));
      break;
    case 2:
      if (input != nullptr && input->shape_size() > 0) {
        input->mutable_shape()->RemoveLast();
      } else if (input != nullptr) {
        input->clear_shape();
      }
      break;
    case 3:
      if (input != nullptr) input->set_datatype(InterestingString(rng));
      break;
    case 4:
      if (raw_index >= 0) {
        std::string* raw = r.mutable_raw_input_contents(raw_index);
        const size_t expected = ShapeBytes(r.inputs(std::min(raw_index, n - 1)));
        const std::vector<size_t> sizes = {0, expected, expected + 1, expected > 0 ? expected - 1 : 0, expected + 4,
                                           expected / 2, static_cast<size_t>(rng() % 4096)};
        raw->resize(Pick(sizes, rng), static_cast<char>(rng()));
      }
      break;
    case 5: r.add_raw_input_contents(std::string(rng() % 64, '\x7f')); break;
    case 6:
      if (r.raw_input_contents_size() > 0) r.mutable_raw_input_contents()->RemoveLast();
      break;
    case 7: r.clear_raw_input_contents(); break;
    case 8:
      if (input != nullptr) {
        const int64_t elements = static_cast<int64_t>(ShapeBytes(*input) / 4);
        const std::vector<int64_t> counts = {0, 1, elements, elements + 1, elements - 1};
        FillTyped(*input, Pick(counts, rng), rng);
      }
      break;
    case 9:
      if (input != nullptr) input->clear_contents();
      break;
    case 10:
      if (input != nullptr) {
        *r.add_inputs() = *input;
        if (raw_index >= 0) r.add_raw_input_contents(r.raw_input_contents(raw_index));
      }
      break;
    case 11:
      if (n > 0) {
        r.mutable_inputs()->DeleteSubrange(static_cast<int>(rng() % n), 1);
        if (r.raw_input_contents_size() > 0 && rng() % 2 == 0) r.mutable_raw_input_contents()->RemoveLast();
      }
      break;
    case 12:
      if (input != nullptr) input->set_name(rng() % 2 == 0 ? SignatureName(rng, false) : InterestingString(rng));
      break;
    case 13: r.add_outputs()->set_name(rng() % 3 != 0 ? SignatureName(rng, true) : InterestingString(rng)); break;
    case 14:
      if (r.outputs_size() > 0) *r.add_outputs() = r.outputs(static_cast<int>(rng() % r.outputs_size()));
      break;
    case 15: {
      auto* out = r.outputs_size() > 0 ? r.mutable_outputs(static_cast<int>(rng() % r.outputs_size())) : r.add_outputs();
      if (out->name().empty()) out->set_name(SignatureName(rng, true));
      SetRandomParameter((*out->mutable_parameters())["classification"], rng);
      break;
    }
    case 16: SetRandomParameter((*r.mutable_parameters())[rng() % 2 == 0 ? "priority" : "timeout"], rng); break;
    case 17:
      if (n >= 2) r.mutable_inputs()->SwapElements(0, n - 1);
      break;
    case 18:
      if (input != nullptr && input->shape_size() > 0) {
        // Another signature's shape with a random batch: the shape matches, the contents may not.
        const ModelSignature& s = Pick(FuzzSignatures(), rng);
        const TensorMetadata& t = Pick(s.inputs, rng);
        input->clear_shape();
        for (size_t d = 0; d < t.dims.size(); ++d) {
          input->add_shape(d == 0 && s.max_batch_size > 0 ? 1 + static_cast<int64_t>(rng() % (s.max_batch_size + 1))
                                                          : t.dims[d]);
        }
      }
      break;
    default:
      r.set_model_version(rng() % 2 == 0 ? std::to_string(InterestingInt(rng)) : InterestingString(rng));
      r.set_model_name(InterestingString(rng));
  }
}

// Aborts unless a successful decode is consistent with the signature.
void CheckDecoded(const grpc_server::DecodedRequest& d, const ModelSignature& s, const ModelInferRequest& r) {
  const char* problem = nullptr;
  const int64_t batch = d.spec.batch_size;
  if (batch < 1 || batch > std::max(1, s.max_batch_size) || d.payload->batch_size != batch) {
    problem = "batch size";
  } else if (d.payload->inputs.size() != s.inputs.size()) {
    problem = "input count";
  } else if (d.outputs.empty()) {
    problem = "no outputs";
  }
  for (size_t i = 0; problem == nullptr && i < s.inputs.size(); ++i) {
    const size_t expected = ItemBytes(s.inputs[i], s) * static_cast<size_t>(s.max_batch_size > 0 ? batch : 1);
    if (d.payload->inputs[i].size() != expected) problem = "input buffer size";
  }
  std::vector<bool> seen(s.outputs.size(), false);
  for (const grpc_server::RequestedOutput& out : d.outputs) {
    if (problem != nullptr) break;
    if (out.index >= s.outputs.size() || seen[out.index]) {
      problem = "requested output index";
    } else if (out.classification < 0 || out.classification > ItemElements(s.outputs[out.index], s)) {
      problem = "classification count";
    } else {
      seen[out.index] = true;
    }
  }
  if (problem == nullptr) return;
  std::fprintf(stderr, "infer_request_fuzz: model '%s' accepted an inconsistent request (%s):\n%s\n",
               s.name.c_str(), problem, r.ShortDebugString().substr(0, 4000).c_str());
  std::abort();
}

}  // namespace

const std::vector<ModelSignature>& FuzzSignatures() {
  static const std::vector<ModelSignature>* const signatures = new std::vector<ModelSignature>(LoadSignatures());
  return *signatures;
}

ModelInferRequest ValidRequest(const ModelSignature& s, std::mt19937_64& rng, size_t max_input_bytes) {
  ModelInferRequest r;
  r.set_model_name(s.name);
  size_t item_bytes = 0;
  for (const TensorMetadata& t : s.inputs) item_bytes += ItemBytes(t, s);
  const bool fits = item_bytes <= max_input_bytes;
  const int64_t max_batch = std::max<int64_t>(
      1, std::min<int64_t>(s.max_batch_size, static_cast<int64_t>(max_input_bytes / std::max<size_t>(item_bytes, 1))));
  const int64_t batch = s.max_batch_size > 0 ? 1 + static_cast<int64_t>(rng() % max_batch) : 1;
  // Typed contents cost a protobuf field per element: only for small inputs.
  const bool typed = rng() % 3 == 0 && std::all_of(s.inputs.begin(), s.inputs.end(), [&](const TensorMetadata& t) {
    return (t.datatype == DataType::kFloat32 || t.datatype == DataType::kUInt8 || t.datatype == DataType::kInt64) &&
           ItemElements(t, s) * batch <= 4096;
  });
  for (const TensorMetadata& t : s.inputs) {
    auto* in = r.add_inputs();
    in->set_name(t.name);
    in->set_datatype(std::string(DataTypeName(t.datatype)));
    for (size_t d = 0; d < t.dims.size(); ++d) in->add_shape(d == 0 && s.max_batch_size > 0 ? batch : t.dims[d]);
    const int64_t count = ItemElements(t, s) * (s.max_batch_size > 0 ? batch : 1);
    if (!typed) {
      // The decoder reads sizes, not values: one byte value repeated is enough (and fast for big inputs).
      r.add_raw_input_contents(std::string(fits ? static_cast<size_t>(count) * DataTypeSize(t.datatype) : 0,
                                           static_cast<char>(rng() & 0x3f)));
    } else if (t.datatype == DataType::kFloat32) {
      for (int64_t i = 0; i < count; ++i) in->mutable_contents()->add_fp32_contents(0.25f * static_cast<float>(i % 9));
    } else if (t.datatype == DataType::kUInt8) {
      for (int64_t i = 0; i < count; ++i) in->mutable_contents()->add_uint_contents(static_cast<uint32_t>(rng() % 256));
    } else {
      for (int64_t i = 0; i < count; ++i) in->mutable_contents()->add_int64_contents(i);
    }
  }
  if (rng() % 2 == 0 && !s.outputs.empty()) {
    const TensorMetadata& t = Pick(s.outputs, rng);
    auto* out = r.add_outputs();
    out->set_name(t.name);
    if (rng() % 2 == 0 && IsFloatingPoint(t.datatype)) {
      (*out->mutable_parameters())["classification"].set_int64_param(
          1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(ItemElements(t, s))));
    }
  }
  if (rng() % 3 == 0) (*r.mutable_parameters())["priority"].set_uint64_param(rng() % 2);
  return r;
}

void MutateRequest(ModelInferRequest& request, std::mt19937_64& rng) {
  for (int edits = 1 + static_cast<int>(rng() % 4); edits > 0; --edits) MutateOnce(request, rng);
}

// The server's ModelInfer reads the bytes with grpc_server::ParseWireInferRequest (raw contents left in the
// received slices); here the bytes are cut into pieces at places the input decides, read that way as well, and
// both readings must agree: the same verdict, and for every signature the same decode outcome and input bytes.
int DecodeRequestBytes(const uint8_t* data, size_t size) {
  ModelInferRequest request;
  const bool parsed = request.ParseFromArray(data, static_cast<int>(std::min<size_t>(size, INT32_MAX)));
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  std::vector<absl::string_view> pieces;
  for (size_t at = 0, step = 1; at < size; step = step * 7 % 4099 + 1) {
    pieces.push_back(bytes.substr(at, step));
    at += pieces.back().size();
  }
  grpc_server::WireInferRequest wire;
  const absl::Status wire_status = grpc_server::ParseWireInferRequest(pieces, &wire);
  if (wire_status.ok() != parsed) {
    std::fprintf(stderr, "infer_request_fuzz: protobuf %s the %zu bytes, the wire reader says %s\n",
                 parsed ? "accepts" : "refuses", size, wire_status.ToString().c_str());
    std::abort();
  }
  if (!parsed) return -1;
  int accepted = 0;
  for (const ModelSignature& signature : FuzzSignatures()) {
    absl::StatusOr<grpc_server::DecodedRequest> decoded = grpc_server::DecodeInferRequest(request, signature);
    absl::StatusOr<grpc_server::DecodedRequest> from_wire =
        grpc_server::DecodeInferRequest(wire.message, signature, &wire.raw_input_contents);
    if (decoded.status() != from_wire.status()) {
      std::fprintf(stderr, "infer_request_fuzz: model '%s': protobuf's request decodes to %s, the wire reader's to %s\n",
                   signature.name.c_str(), decoded.status().ToString().c_str(), from_wire.status().ToString().c_str());
      std::abort();
    }
    if (decoded.ok()) {
      CheckDecoded(*decoded, signature, request);
      for (size_t i = 0; i < decoded->payload->inputs.size(); ++i) {
        const HostBuffer& a = decoded->payload->inputs[i];
        const HostBuffer& b = from_wire->payload->inputs[i];
        if (a.size() != b.size() || (a.size() > 0 && std::memcmp(a.data(), b.data(), a.size()) != 0)) {
          std::fprintf(stderr, "infer_request_fuzz: model '%s': input %zu differs between the two readings\n",
                       signature.name.c_str(), i);
          std::abort();
        }
      }
      ++accepted;
    } else if (decoded.status().code() != absl::StatusCode::kInvalidArgument) {
      std::fprintf(stderr, "infer_request_fuzz: model '%s': %s is not INVALID_ARGUMENT\n", signature.name.c_str(),
                   decoded.status().ToString().c_str());
      std::abort();
    }
  }
  return accepted;
}

std::vector<std::string> SeedRequests(uint64_t seed, size_t max_input_bytes) {
  std::mt19937_64 rng(seed);
  std::vector<std::string> seeds;
  for (const ModelSignature& signature : FuzzSignatures()) {
    seeds.push_back(ValidRequest(signature, rng, max_input_bytes).SerializeAsString());
  }
  return seeds;
}

}  // namespace convoy::fuzz
