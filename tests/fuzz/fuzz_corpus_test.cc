// Feeds valid, truncated and randomly mutated models and inference requests through the fuzz entries
// (fuzz_entries.h, infer_request_fuzz.h), so CI exercises the loaders' and the request decoder's error paths on
// malformed input without clang or libFuzzer. Crashes, sanitizer reports (this test runs under ASan in
// tools/test.sh), inconsistent decodes and accepted truncations beyond the stated fraction fail it.
//
// Each test prints its seed ("seed N: rerun with CONVOY_FUZZ_SEED=N"; also a property in the JUnit XML); with
// `bazel test --test_env=CONVOY_FUZZ_SEED=N //tests/fuzz:fuzz_corpus_test` every test replays that seed.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "onnx/onnx_pb.h"
#include "tests/fuzz/fuzz_entries.h"
#include "tests/fuzz/infer_request_fuzz.h"

namespace convoy::fuzz {
namespace {

using ::convoy::testing::IsOk;

// $CONVOY_FUZZ_SEED, or a fresh one; printed and recorded either way.
uint32_t TestSeed() {
  const char* env = std::getenv("CONVOY_FUZZ_SEED");
  const uint32_t seed = env != nullptr ? static_cast<uint32_t>(std::strtoul(env, nullptr, 10)) : std::random_device{}();
  std::printf("seed %u: rerun with CONVOY_FUZZ_SEED=%u\n", seed, seed);
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  return seed;
}

std::string ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream bytes;
  bytes << file.rdbuf();
  return bytes.str();
}

void AddFloatInitializer(onnx::GraphProto* g, const std::string& name, std::vector<int64_t> dims, std::mt19937& rng) {
  onnx::TensorProto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  int64_t n = 1;
  for (int64_t d : dims) {
    t->add_dims(d);
    n *= d;
  }
  std::uniform_real_distribution<float> dist(-1, 1);
  for (int64_t i = 0; i < n; ++i) t->add_float_data(dist(rng));
}

// x [N,3,6,6] -> Conv 4x3x3x3 -> Relu -> GlobalAveragePool -> Flatten -> Gemm 5 -> y
std::string SmallOnnxModel(std::mt19937& rng) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(13);
  onnx::GraphProto* g = model.mutable_graph();
  auto* x = g->add_input();
  x->set_name("x");
  auto* tt = x->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  tt->mutable_shape()->add_dim()->set_dim_param("N");
  for (int d : {3, 6, 6}) tt->mutable_shape()->add_dim()->set_dim_value(d);
  AddFloatInitializer(g, "w", {4, 3, 3, 3}, rng);
  AddFloatInitializer(g, "fc", {5, 4}, rng);
  auto add_node = [&](const char* op, std::vector<std::string> in, const std::string& out) {
    onnx::NodeProto* n = g->add_node();
    n->set_op_type(op);
    for (auto& i : in) n->add_input(i);
    n->add_output(out);
    return n;
  };
  add_node("Conv", {"x", "w"}, "c");
  add_node("Relu", {"c"}, "r");
  add_node("GlobalAveragePool", {"r"}, "p");
  add_node("Flatten", {"p"}, "f");
  auto* gemm = add_node("Gemm", {"f", "fc"}, "y");
  auto* attr = gemm->add_attribute();
  attr->set_name("transB");
  attr->set_type(onnx::AttributeProto::INT);
  attr->set_i(1);
  g->add_output()->set_name("y");
  return model.SerializeAsString();
}

// Runs every truncation of `bytes` through `entry`; returns the fraction rejected.
template <typename Entry>
double TruncationRejectFraction(const std::string& bytes, Entry entry, size_t step) {
  int rejected = 0, total = 0;
  for (size_t len = 0; len < bytes.size(); len += step, ++total) {
    if (!entry(reinterpret_cast<const uint8_t*>(bytes.data()), len).ok()) ++rejected;
  }
  return static_cast<double>(rejected) / total;
}

template <typename Entry>
void RunMutations(const std::string& bytes, Entry entry, int count, std::mt19937& rng) {
  std::uniform_int_distribution<size_t> pos(0, bytes.size() - 1);
  std::uniform_int_distribution<int> byte(0, 255), flips(1, 8);
  for (int i = 0; i < count; ++i) {
    std::string mutated = bytes;
    for (int f = flips(rng); f > 0; --f) mutated[pos(rng)] = static_cast<char>(byte(rng));
    (void)entry(reinterpret_cast<const uint8_t*>(mutated.data()), mutated.size());
  }
}

TEST(FuzzCorpusTest, OnnxTruncationsAndMutations) {
  std::mt19937 rng(TestSeed());
  const std::string model = SmallOnnxModel(rng);
  ASSERT_THAT(ImportOnnxBytes(reinterpret_cast<const uint8_t*>(model.data()), model.size()), IsOk());
  // Cutting a protobuf mid-field fails to parse; cutting at a field boundary loses nodes or weights. Either way
  // nearly every truncation must be rejected.
  EXPECT_GE(TruncationRejectFraction(model, ImportOnnxBytes, 1), 0.95);
  RunMutations(model, ImportOnnxBytes, 3000, rng);
}

TEST(FuzzCorpusTest, ConvoyGraphTruncationsAndMutations) {
  std::mt19937 rng(TestSeed());
  std::string input = ReadFile("model_repo/simple_cnn/1/model.yaml");
  ASSERT_FALSE(input.empty());
  input += '\0';
  input += ReadFile("model_repo/simple_cnn/1/model.safetensors");
  ASSERT_THAT(ImportConvoyGraphBytes(reinterpret_cast<const uint8_t*>(input.data()), input.size()), IsOk());
  EXPECT_GE(TruncationRejectFraction(input, ImportConvoyGraphBytes, 97), 0.95);
  // Mutate the YAML and the safetensors header only, where the parsing happens; the graph is too big to run, so
  // OptimizeAndRun stops after optimizing.
  std::string head = input.substr(0, input.find('\0') + 400);
  auto with_rest = [&](const uint8_t* data, size_t size) {
    std::string whole(reinterpret_cast<const char*>(data), size);
    whole += input.substr(head.size());
    return ImportConvoyGraphBytes(reinterpret_cast<const uint8_t*>(whole.data()), whole.size());
  };
  RunMutations(head, with_rest, 100, rng);
}

TEST(FuzzCorpusTest, ModelConfigMutations) {
  std::mt19937 rng(TestSeed());
  const std::string config = ReadFile("model_repo/resnet_classifier/config.yaml");
  ASSERT_THAT(ParseModelConfigBytes(reinterpret_cast<const uint8_t*>(config.data()), config.size()), IsOk());
  RunMutations(config, ParseModelConfigBytes, 2000, rng);
}

// Every seed request decodes against its own signature (the mutators start from them).
TEST(FuzzCorpusTest, InferRequestSeedsDecode) {
  const std::vector<std::string> seeds = SeedRequests(TestSeed());
  ASSERT_EQ(seeds.size(), FuzzSignatures().size());
  ASSERT_GE(seeds.size(), 5u) << "model_repo/*/config.yaml not found (run from the repository root)";
  for (const std::string& seed : seeds) {
    EXPECT_GE(DecodeRequestBytes(reinterpret_cast<const uint8_t*>(seed.data()), seed.size()), 1);
  }
}

// Structure-aware mutations (as the libFuzzer target's custom mutator makes them), decoded against every signature.
// Some must still be accepted and most refused: a mutator that only breaks requests, or never does, tests nothing.
TEST(FuzzCorpusTest, InferRequestStructuredMutations) {
  std::mt19937_64 rng(TestSeed());
  const auto& signatures = FuzzSignatures();
  int accepted = 0, refused = 0;
  for (int i = 0; i < 3000; ++i) {
    inference::ModelInferRequest request = ValidRequest(signatures[rng() % signatures.size()], rng);
    MutateRequest(request, rng);
    const std::string bytes = request.SerializeAsString();
    const int result = DecodeRequestBytes(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    ASSERT_GE(result, 0) << "the mutator wrote a request that does not parse: " << request.ShortDebugString();
    (result > 0 ? accepted : refused)++;
  }
  EXPECT_GT(accepted, 50);
  EXPECT_GT(refused, 1500);
}

// Byte flips and truncations of serialized valid requests: the protobuf parser and then the decoder.
TEST(FuzzCorpusTest, InferRequestByteMutations) {
  const uint32_t seed = TestSeed();
  std::mt19937 rng(seed);
  for (const std::string& request : SeedRequests(seed)) {
    if (request.size() > 200000) continue;  // keep the run short: the big resnet request is covered above
    RunMutations(request, [](const uint8_t* data, size_t size) {
      DecodeRequestBytes(data, size);
      return absl::OkStatus();
    }, 300, rng);
    for (size_t len = 0; len < request.size(); len += 1 + request.size() / 64) {
      DecodeRequestBytes(reinterpret_cast<const uint8_t*>(request.data()), len);
    }
  }
}

}  // namespace
}  // namespace convoy::fuzz
