// The calibration table file: what `convoy calibrate` writes (default `calibration.yaml` beside the model file) and
// `precision: int8` reads. A small YAML document; the format is in docs/model_config.md ("Calibration table"):
//
//   format: convoy_calibration_table
//   version: 1
//   model: model.onnx
//   method: entropy                      # minmax | percentile | entropy (percentile: also `percentile: 99.99`)
//   activations: uint8_asymmetric        # or int8_symmetric
//   weights: int8_symmetric_per_channel
//   samples: 64
//   tensors:                             # per activation tensor: what was seen, the range chosen, scale, zero point
//     "images": {min: -0.99, max: 0.99, lo: -0.99, hi: 0.99, scale: 0.00778, zero_point: 127}
//   layers:                              # per convolution / residual add: precision, and a conv's weight scales
//     "/model/_conv_stem/Conv": {precision: int8, weight_scales: [0.0021, ...]}
//     "/model/_blocks.2/_project_conv/Conv/residual_add": {precision: int8, add: true}
//     "/model/_fc_like/Conv": {precision: fp32, reason: "kept FP32 by --keep_fp32"}
//
// Parsing is strict like config.yaml's: unknown fields, scales that are not positive and finite, zero points outside
// the activation type, a UINT8 table with INT8 entries fail with file, line, column and the entry's path.
#ifndef CONVOY_SERVER_REPOSITORY_CALIBRATION_TABLE_H_
#define CONVOY_SERVER_REPOSITORY_CALIBRATION_TABLE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/runtime/calibration.h"

namespace convoy::repository {

// The table as YAML text (floats printed to round-trip exactly).
std::string FormatCalibrationTable(const runtime::CalibrationTable& table);
absl::Status WriteCalibrationTable(const std::string& path, const runtime::CalibrationTable& table);

// `source` names the text in errors (the file's path).
absl::StatusOr<runtime::CalibrationTable> ParseCalibrationTable(const std::string& text, const std::string& source);
// NOT_FOUND when the file does not exist.
absl::StatusOr<runtime::CalibrationTable> ReadCalibrationTable(const std::string& path);

}  // namespace convoy::repository

#endif  // CONVOY_SERVER_REPOSITORY_CALIBRATION_TABLE_H_
