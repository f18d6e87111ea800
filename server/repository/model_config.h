// A model's config.yaml (<repo>/<model>/config.yaml) as a plain struct, and its strict parser. The schema, with
// every field, type, default and meaning, is in docs/model_config.md; concepts follow Triton's model configuration.
//
//   CONVOY_ASSIGN_OR_RETURN(ModelConfig config, ParseModelConfig("model_repo/simple_cnn/config.yaml"));
//
// Errors name the file, line and column, the field path ("dynamic_batching.preferred_batch_size[1]"), what was
// expected and what was found. Unknown fields are errors. Cross-field rules (preferred sizes <= max_batch_size,
// priority levels in range, ...) are checked after parsing.
#ifndef CONVOY_SERVER_REPOSITORY_MODEL_CONFIG_H_
#define CONVOY_SERVER_REPOSITORY_MODEL_CONFIG_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace convoy::repository {

enum class ModelFormat { kConvoy, kOnnx };
enum class TensorDataType { kFp32, kFp16, kBf16, kUint8, kInt64, kInt32 };
enum class TensorLayout { kNchw, kNhwc };
enum class TimeoutAction { kReject, kDelay };
enum class BatchingPolicyKind { kFixed, kAdaptive };
enum class InstanceKind { kAuto, kGpu, kCpu };
// auto: bf16 on CPUs with AMX/AVX512-BF16, else fp32. int8: the model's QDQ scales or its calibration table.
enum class Precision { kFp32, kTf32, kFp16, kBf16, kAuto, kInt8 };
enum class AlgorithmSelection { kHeuristic, kTune };
// How an INT8 residual add fused into the convolution before it rounds: exactly as the QDQ graph (the conv's output
// rounded to 8 bits, then the add), or once at the end (faster; may differ by one quantization step).
enum class Int8ResidualAdd { kExact, kSingleRounding };
enum class VersionPolicyKind { kLatest, kAll, kSpecific };

const char* TensorDataTypeName(TensorDataType type);

// Turns a UINT8 HWC image into the model's float input: (pixel * scale - mean[c]) / std[c], laid out as the
// model input's layout.
struct ImagePreprocessing {
  std::vector<float> mean;  // one per channel
  std::vector<float> std;   // one per channel, > 0
  float scale = 1.0f / 255.0f;
};

// Photos accepted for a UINT8 [H, W, 3] image input: each batch item may come as the JPEG or PNG file's bytes (a BYTES
// element) instead of pixels; the server decodes it upright, takes the centred box of the input's aspect ratio
// keeping `crop_fraction` of the limiting side, and resizes it to H x W with Pillow's bicubic (server/imaging).
struct EncodedImageConfig {
  double crop_fraction = 0.875;   // the ImageNet evaluation crop, 224 of 256
  int64_t max_bytes = 16 << 20;   // one encoded image
  int64_t max_pixels = 40'000'000;
  int max_dimension = 16384;
};

struct TensorConfig {
  std::string name;
  TensorDataType data_type = TensorDataType::kFp32;
  std::vector<int64_t> dims;  // without the batch dimension
  TensorLayout layout = TensorLayout::kNchw;
  std::optional<ImagePreprocessing> preprocessing;  // inputs only
  std::optional<EncodedImageConfig> encoded_image;  // inputs only: also accepts JPEG / PNG bytes
  std::string labels_file;                          // outputs only, relative to the model folder
  // Outputs only: serve the per-pixel class map (the argmax over C of the model's [C, H, W] scores, UINT8 or INT32,
  // dims [H, W]) instead of the scores.
  bool class_map = false;
};

struct QueuePolicy {
  int64_t max_queue_size = 0;  // 0 = unbounded
  int64_t default_timeout_microseconds = 0;  // 0 = no timeout
  TimeoutAction timeout_action = TimeoutAction::kReject;
  bool allow_timeout_override = false;
};

struct DynamicBatchingConfig {
  BatchingPolicyKind policy = BatchingPolicyKind::kFixed;
  int64_t target_latency_microseconds = 0;  // adaptive only; 0 = no target
  std::vector<int64_t> preferred_batch_size;
  int64_t max_queue_delay_microseconds = 0;
  bool max_queue_delay_given = false;  // adaptive: absent means the hold has no cap of its own
  bool preserve_ordering = false;
  int64_t priority_levels = 0;  // 0 = priorities off
  int64_t default_priority_level = 0;
  QueuePolicy default_queue_policy;
  std::map<int64_t, QueuePolicy> priority_queue_policy;  // by level, 1..priority_levels
};

struct InstanceGroupConfig {
  int64_t count = 1;
  InstanceKind kind = InstanceKind::kAuto;
  std::vector<int64_t> gpus;  // empty = all visible GPUs
};

struct OptimizationConfig {
  Precision precision = Precision::kFp32;
  bool cuda_graphs = false;
  AlgorithmSelection algorithm_selection = AlgorithmSelection::kHeuristic;
  std::vector<int64_t> tune_batch_sizes;  // empty = every batch size up to max_batch_size when tuning
  bool verify_algorithms = true;  // check each chosen conv/GEMM algorithm's output on the GPU before READY
  // precision int8 on an FP32 model: the calibration table (`convoy calibrate`), relative to the version folder.
  std::string calibration_table = "calibration.yaml";
  // QDQ and int8 plans: how a residual add fused into an INT8 convolution rounds (PlannerOptions::
  // int8_single_rounding_adds).
  Int8ResidualAdd int8_residual_add = Int8ResidualAdd::kExact;
  // CPU plans: let batches of 2 or more run their first layers one image at a time where the tuned step times say it
  // pays (server/runtime/image_by_image.h).
  bool image_by_image = true;
};

struct WarmupConfig {
  std::vector<int64_t> batch_sizes;
  int64_t iterations = 1;
};

struct VersionPolicy {
  VersionPolicyKind kind = VersionPolicyKind::kLatest;
  int64_t latest_count = 1;         // kLatest
  std::vector<int64_t> versions;    // kSpecific
};

struct ModelConfig {
  std::string name;
  ModelFormat format = ModelFormat::kOnnx;
  int64_t max_batch_size = 0;  // 0 = no batching: the model's inputs carry no batch dimension of ours
  std::vector<TensorConfig> inputs;
  std::vector<TensorConfig> outputs;
  std::optional<DynamicBatchingConfig> dynamic_batching;
  std::vector<InstanceGroupConfig> instance_groups;
  OptimizationConfig optimization;
  std::optional<WarmupConfig> warmup;
  VersionPolicy version_policy;
};

absl::StatusOr<ModelConfig> ParseModelConfigText(const std::string& text, const std::string& source_name);
absl::StatusOr<ModelConfig> ParseModelConfig(const std::string& path);

}  // namespace convoy::repository

#endif  // CONVOY_SERVER_REPOSITORY_MODEL_CONFIG_H_
