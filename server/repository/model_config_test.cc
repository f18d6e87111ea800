// Tests for config.yaml parsing: a full config round-trips into the struct; each kind of mistake fails with the
// location, field path and the expected/found values.
#include "server/repository/model_config.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"

namespace convoy::repository {
namespace {

using ::convoy::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr char kFullConfig[] = R"(
name: resnet
format: onnx
max_batch_size: 16
inputs:
  - name: images
    datatype: UINT8
    dims: [224, 224, 3]
    layout: NHWC
    preprocessing: {mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225]}
    encoded_image: {crop_fraction: 0.9, max_bytes: 1000000}
outputs:
  - {name: logits, dims: [1000], labels: labels.txt}
dynamic_batching:
  preferred_batch_size: [4, 8]
  max_queue_delay_microseconds: 100
  preserve_ordering: true
  priority_levels: 3
  default_priority_level: 2
  default_queue_policy: {max_queue_size: 10, timeout_action: DELAY, allow_timeout_override: true}
  priority_queue_policy:
    1: {max_queue_size: 5, default_timeout_microseconds: 2000}
instance_group:
  - {count: 2, kind: gpu, gpus: [0, 1]}
  - {count: 1, kind: cpu}
optimization: {precision: fp16, cuda_graphs: true, algorithm_selection: tune, tune_batch_sizes: [1, 8]}
warmup: {batch_sizes: [1, 16], iterations: 3}
version_policy: {specific: [1, 3]}
)";

TEST(ModelConfigTest, ParsesEveryField) {
  CONVOY_ASSERT_OK_AND_ASSIGN(ModelConfig c, ParseModelConfigText(kFullConfig, "config.yaml"));
  EXPECT_EQ(c.name, "resnet");
  EXPECT_EQ(c.format, ModelFormat::kOnnx);
  EXPECT_EQ(c.max_batch_size, 16);
  ASSERT_EQ(c.inputs.size(), 1u);
  EXPECT_EQ(c.inputs[0].data_type, TensorDataType::kUint8);
  EXPECT_EQ(c.inputs[0].layout, TensorLayout::kNhwc);
  ASSERT_TRUE(c.inputs[0].preprocessing.has_value());
  EXPECT_FLOAT_EQ(c.inputs[0].preprocessing->std[2], 0.225f);
  ASSERT_TRUE(c.inputs[0].encoded_image.has_value());
  EXPECT_DOUBLE_EQ(c.inputs[0].encoded_image->crop_fraction, 0.9);
  EXPECT_EQ(c.inputs[0].encoded_image->max_bytes, 1000000);
  EXPECT_EQ(c.inputs[0].encoded_image->max_pixels, EncodedImageConfig().max_pixels);
  EXPECT_EQ(c.outputs[0].labels_file, "labels.txt");
  EXPECT_EQ(c.outputs[0].data_type, TensorDataType::kFp32);
  ASSERT_TRUE(c.dynamic_batching.has_value());
  EXPECT_EQ(c.dynamic_batching->preferred_batch_size, (std::vector<int64_t>{4, 8}));
  EXPECT_TRUE(c.dynamic_batching->preserve_ordering);
  EXPECT_EQ(c.dynamic_batching->default_queue_policy.timeout_action, TimeoutAction::kDelay);
  EXPECT_EQ(c.dynamic_batching->priority_queue_policy.at(1).default_timeout_microseconds, 2000);
  ASSERT_EQ(c.instance_groups.size(), 2u);
  EXPECT_EQ(c.instance_groups[0].gpus, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(c.instance_groups[1].kind, InstanceKind::kCpu);
  EXPECT_EQ(c.optimization.precision, Precision::kFp16);
  EXPECT_EQ(c.optimization.algorithm_selection, AlgorithmSelection::kTune);
  EXPECT_EQ(c.warmup->iterations, 3);
  EXPECT_EQ(c.version_policy.kind, VersionPolicyKind::kSpecific);
  EXPECT_EQ(c.version_policy.versions, (std::vector<int64_t>{1, 3}));
}

TEST(ModelConfigTest, DefaultsForAMinimalConfig) {
  CONVOY_ASSERT_OK_AND_ASSIGN(
      ModelConfig c, ParseModelConfigText("name: m\nformat: convoy\ninputs: [{name: x, dims: [3]}]\n"
                                          "outputs: [{name: y, dims: [2]}]\n", "config.yaml"));
  EXPECT_EQ(c.max_batch_size, 0);
  EXPECT_FALSE(c.dynamic_batching.has_value());
  ASSERT_EQ(c.instance_groups.size(), 1u);
  EXPECT_EQ(c.instance_groups[0].kind, InstanceKind::kAuto);
  EXPECT_EQ(c.version_policy.kind, VersionPolicyKind::kLatest);
  EXPECT_EQ(c.version_policy.latest_count, 1);
}

struct BadCase {
  const char* description;
  const char* find;     // replaced in kFullConfig
  const char* replace;
  const char* message;  // expected substring
};

class ModelConfigErrorTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(ModelConfigErrorTest, FailsWithLocationAndFieldPath) {
  std::string text = kFullConfig;
  size_t at = text.find(GetParam().find);
  ASSERT_NE(at, std::string::npos) << GetParam().find;
  text.replace(at, std::string(GetParam().find).size(), GetParam().replace);
  EXPECT_THAT(ParseModelConfigText(text, "m/config.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument, AllOf(HasSubstr("m/config.yaml:"),
                                                                 HasSubstr(GetParam().message))))
      << GetParam().description;
}

INSTANTIATE_TEST_SUITE_P(
    Mistakes, ModelConfigErrorTest,
    ::testing::Values(
        BadCase{"typo in a field", "preserve_ordering", "preserve_order", "dynamic_batching.preserve_order: unknown field"},
        BadCase{"wrong type in a list", "[4, 8]", "[4, eight]",
                "dynamic_batching.preferred_batch_size[1]: expected an integer, got 'eight'"},
        BadCase{"preferred size over max", "[4, 8]", "[4, 32]", "preferred_batch_size[1] is 32, larger than max_batch_size 16"},
        BadCase{"default priority out of range", "default_priority_level: 2", "default_priority_level: 4",
                "must be in 1..3"},
        BadCase{"priority policy level out of range", "    1: {max_queue_size: 5", "    7: {max_queue_size: 5",
                "priority level 7 outside 1..3"},
        BadCase{"bad enum", "precision: fp16", "precision: fp8", "expected one of fp32, tf32, fp16, bf16, auto, int8, got 'fp8'"},
        BadCase{"calibration table without int8", "precision: fp16", "precision: fp16, calibration_table: t.yaml",
                "optimization.calibration_table: is read by precision: int8 only"},
        BadCase{"unknown residual add rounding", "precision: fp16", "precision: fp16, int8_residual_add: fast",
                "optimization.int8_residual_add: expected one of exact, single_rounding, got 'fast'"},
        BadCase{"image by image not a bool", "precision: fp16", "precision: fp16, image_by_image: sometimes",
                "optimization.image_by_image: expected true or false"},
        BadCase{"negative dim", "dims: [1000]", "dims: [-1]", "entry 0 must be >= 1, got -1"},
        BadCase{"preprocessing on float input", "datatype: UINT8", "datatype: FP32", "needs datatype UINT8"},
        BadCase{"encoded images on a float input", "    datatype: UINT8\n    dims: [224, 224, 3]\n    layout: NHWC\n    preprocessing: {mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225]}\n",
                "    datatype: FP32\n    dims: [224, 224, 3]\n    layout: NHWC\n",
                "inputs[0].encoded_image: needs datatype UINT8 and dims [H, W, 3], got FP32 with dims [224, 224, 3]"},
        BadCase{"encoded images with four channels", "dims: [224, 224, 3]\n    layout: NHWC\n    preprocessing: {mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225]}",
                "dims: [224, 224, 4]\n    layout: NHWC",
                "needs datatype UINT8 and dims [H, W, 3], got UINT8 with dims [224, 224, 4]"},
        BadCase{"crop fraction above 1", "crop_fraction: 0.9", "crop_fraction: 1.5",
                "inputs[0].encoded_image.crop_fraction: must be in (0, 1], got 1.5"},
        BadCase{"typo in encoded_image", "max_bytes: 1000000", "max_byte: 1000000",
                "inputs[0].encoded_image.max_byte: unknown field"},
        BadCase{"two version policies", "{specific: [1, 3]}", "{specific: [1], latest: 2}", "exactly one of"},
        BadCase{"warmup batch over max", "batch_sizes: [1, 16]", "batch_sizes: [1, 17]", "exceeds max_batch_size 16"},
        BadCase{"syntax error", "max_batch_size: 16", "max_batch_size: [16", "YAML syntax error"},
        BadCase{"duplicate tensor", "{name: logits, dims: [1000], labels: labels.txt}",
                "{name: logits, dims: [1]}\n  - {name: logits, dims: [2]}", "duplicate name 'logits'"},
        BadCase{"bool field", "cuda_graphs: true", "cuda_graphs: yes please", "expected true or false"},
        BadCase{"unknown batching policy", "preserve_ordering: true", "preserve_ordering: true\n  policy: smart",
                "dynamic_batching.policy: expected one of fixed, adaptive, got 'smart'"},
        BadCase{"latency target with the fixed policy", "preserve_ordering: true",
                "preserve_ordering: true\n  target_latency_microseconds: 5000",
                "dynamic_batching.target_latency_microseconds: needs policy: adaptive"},
        BadCase{"preferred sizes with the adaptive policy", "preserve_ordering: true",
                "preserve_ordering: true\n  policy: adaptive",
                "dynamic_batching.preferred_batch_size: is not used by policy: adaptive"}));

constexpr char kAdaptiveConfig[] = R"(name: m
format: onnx
max_batch_size: 16
inputs: [{name: x, dims: [3]}]
outputs: [{name: y, dims: [2]}]
dynamic_batching:
  policy: Adaptive
  target_latency_microseconds: 25000
)";

TEST(ModelConfigTest, PrecisionInt8AndItsCalibrationTable) {
  std::string text = kAdaptiveConfig;
  CONVOY_ASSERT_OK_AND_ASSIGN(ModelConfig defaults, ParseModelConfigText(text + "optimization: {precision: int8}\n",
                                                                         "config.yaml"));
  EXPECT_EQ(defaults.optimization.precision, Precision::kInt8);
  EXPECT_EQ(defaults.optimization.calibration_table, "calibration.yaml");
  CONVOY_ASSERT_OK_AND_ASSIGN(
      ModelConfig named,
      ParseModelConfigText(text + "optimization: {precision: INT8, calibration_table: tables/photos.yaml}\n", "c"));
  EXPECT_EQ(named.optimization.calibration_table, "tables/photos.yaml");
  EXPECT_EQ(named.optimization.int8_residual_add, Int8ResidualAdd::kExact);
  CONVOY_ASSERT_OK_AND_ASSIGN(
      ModelConfig single,
      ParseModelConfigText(text + "optimization: {precision: int8, int8_residual_add: single_rounding}\n", "c"));
  EXPECT_EQ(single.optimization.int8_residual_add, Int8ResidualAdd::kSingleRounding);
  EXPECT_TRUE(single.optimization.image_by_image);
  CONVOY_ASSERT_OK_AND_ASSIGN(ModelConfig whole,
                              ParseModelConfigText(text + "optimization: {image_by_image: false}\n", "c"));
  EXPECT_FALSE(whole.optimization.image_by_image);
}

TEST(ModelConfigTest, ParsesTheAdaptivePolicy) {
  CONVOY_ASSERT_OK_AND_ASSIGN(ModelConfig c, ParseModelConfigText(kAdaptiveConfig, "config.yaml"));
  ASSERT_TRUE(c.dynamic_batching.has_value());
  EXPECT_EQ(c.dynamic_batching->policy, BatchingPolicyKind::kAdaptive);
  EXPECT_EQ(c.dynamic_batching->target_latency_microseconds, 25000);
  EXPECT_FALSE(c.dynamic_batching->max_queue_delay_given);
  CONVOY_ASSERT_OK_AND_ASSIGN(ModelConfig fixed, ParseModelConfigText(kFullConfig, "config.yaml"));
  EXPECT_EQ(fixed.dynamic_batching->policy, BatchingPolicyKind::kFixed) << "fixed is the default";
  EXPECT_TRUE(fixed.dynamic_batching->max_queue_delay_given);
  std::string capped = kAdaptiveConfig;
  capped += "  max_queue_delay_microseconds: 0\n";
  CONVOY_ASSERT_OK_AND_ASSIGN(ModelConfig c2, ParseModelConfigText(capped, "config.yaml"));
  EXPECT_TRUE(c2.dynamic_batching->max_queue_delay_given);
}

TEST(ModelConfigTest, RejectsATargetBelowOneMicrosecondWithItsLine) {
  std::string text = kAdaptiveConfig;
  text.replace(text.find("25000"), 5, "0");
  EXPECT_THAT(ParseModelConfigText(text, "m/config.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("m/config.yaml:8:32: dynamic_batching.target_latency_microseconds: must be >= 1 "
                                 "(leave it out for no target), got 0")));
}

TEST(ModelConfigTest, ReportsLineAndColumnOfTheBadValue) {
  EXPECT_THAT(ParseModelConfigText("name: m\nformat: onnx\nmax_batch_size: lots\n", "c.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("c.yaml:3:17: max_batch_size: expected an integer, got 'lots'")));
}

constexpr char kSegmentationConfig[] = R"(
name: seg
format: onnx
max_batch_size: 2
inputs:
  - {name: x, dims: [3, 8, 8]}
outputs:
  - {name: scores, datatype: UINT8, dims: [8, 8], class_map: true}
)";

TEST(ModelConfigTest, ClassMapOutputsAreUint8OrInt32) {
  CONVOY_ASSERT_OK_AND_ASSIGN(ModelConfig c, ParseModelConfigText(kSegmentationConfig, "config.yaml"));
  EXPECT_TRUE(c.outputs[0].class_map);
  EXPECT_EQ(c.outputs[0].data_type, TensorDataType::kUint8);
  std::string int32 = kSegmentationConfig;
  int32.replace(int32.find("UINT8"), 5, "INT32");
  CONVOY_ASSERT_OK_AND_ASSIGN(ModelConfig c32, ParseModelConfigText(int32, "config.yaml"));
  EXPECT_EQ(c32.outputs[0].data_type, TensorDataType::kInt32);
  std::string fp32 = kSegmentationConfig;
  fp32.replace(fp32.find("UINT8"), 5, "FP32");
  EXPECT_THAT(ParseModelConfigText(fp32, "m/config.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("outputs[0].class_map: a class map is served as UINT8 or INT32, got datatype FP32")));
  std::string on_input = kSegmentationConfig;
  on_input.replace(on_input.find("dims: [3, 8, 8]"), 15, "dims: [3, 8, 8], class_map: true");
  EXPECT_THAT(ParseModelConfigText(on_input, "m/config.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("class_map")));
  std::string int32_input = kSegmentationConfig;
  int32_input.replace(int32_input.find("dims: [3, 8, 8]"), 15, "dims: [3, 8, 8], datatype: INT32");
  EXPECT_THAT(ParseModelConfigText(int32_input, "m/config.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("INT32 is served for outputs only")));
}

TEST(ModelConfigTest, MissingFileIsNotFound) {
  EXPECT_THAT(ParseModelConfig("/nonexistent/config.yaml"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("cannot open")));
}

}  // namespace
}  // namespace convoy::repository
