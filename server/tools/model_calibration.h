// `convoy calibrate`: runs an FP32 model on calibration inputs and makes its calibration table
// (server/runtime/calibration.h; written by server/repository/calibration_table.h).
//
//   ModelCalibrationOptions options;
//   options.model_path = "model_repo/efficientnet_lite0/1/model.onnx";
//   options.config = config;                       // for photos: the input's size, crop and normalisation
//   options.device = cpu;
//   options.images = {"a.jpg", "b.png"};           // or options.npy_files
//   options.method = CalibrationMethod::kEntropy;
//   CONVOY_ASSIGN_OR_RETURN(CalibrationTable table, CalibrateModel(options));
//
// The model is imported and optimized as the server does, its residual adds separated
// (calibrated_quantization.h), and planned in FP32 with every tensor a convolution or residual add reads or writes
// as an extra output; each batch of inputs runs once and every such tensor's statistics grow. Photos are decoded,
// turned upright, centre-cropped and resized exactly as the server treats an encoded-image input of that model
// (server/imaging), then normalised with the input's `preprocessing`; .npy files hold either the model's float
// input [N, C, H, W] or, for a preprocessed input, UINT8 pixels [N, H, W, C].
#ifndef CONVOY_SERVER_TOOLS_MODEL_CALIBRATION_H_
#define CONVOY_SERVER_TOOLS_MODEL_CALIBRATION_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/registry/device.h"
#include "server/repository/model_config.h"
#include "server/runtime/calibration.h"

namespace convoy::tools {

struct ModelCalibrationOptions {
  std::string model_path;  // model.onnx or model.yaml; required
  std::optional<repository::ModelConfig> config;  // required for photos
  Device* device = nullptr;                       // required
  std::vector<std::string> images;                // photo files (JPEG / PNG)
  std::vector<std::string> npy_files;             // or .npy files of inputs
  runtime::CalibrationMethod method = runtime::CalibrationMethod::kMinMax;
  double percentile = 99.99;
  bool signed_activations = false;  // INT8 symmetric activations instead of UINT8 asymmetric
  int batch_size = 8;               // inputs per run
  // Convolutions / residual adds (node names, as the table lists them) to write as `precision: fp32`.
  std::vector<std::string> keep_fp32;
  // Progress: samples done and time, one line per batch at most every 5 s, and the summary. May be empty.
  std::function<void(const std::string&)> log;
};

absl::StatusOr<runtime::CalibrationTable> CalibrateModel(const ModelCalibrationOptions& options);

}  // namespace convoy::tools

#endif  // CONVOY_SERVER_TOOLS_MODEL_CALIBRATION_H_
