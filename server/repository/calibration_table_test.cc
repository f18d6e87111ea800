// Calibration table files: a random table survives writing and reading bit for bit, and every malformed entry fails
// with the file, line and the entry's path.
#include "server/repository/calibration_table.h"

#include <cstdio>
#include <fstream>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"

namespace convoy::repository {
namespace {

using ::convoy::testing::IsOk;
using ::testing::HasSubstr;
using runtime::CalibrationTable;

CalibrationTable RandomTable(uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(1e-4f, 3.0f);
  CalibrationTable table;
  table.model = "model.onnx";
  table.method = runtime::CalibrationMethod::kPercentile;
  table.percentile = 99.9;
  table.samples = 37;
  for (const char* name : {"images", "/model/conv:0", "onnx::Conv_912 \"quoted\""}) {
    runtime::TensorQuantization t;
    t.name = name;
    t.min = -dist(rng), t.max = dist(rng), t.lo = t.min * 0.9f, t.hi = t.max * 0.9f;
    t.scale = dist(rng) / 255.0f;
    t.zero_point = static_cast<int>(rng() % 256);
    table.tensors.push_back(t);
  }
  runtime::LayerCalibration conv;
  conv.name = "/model/conv";
  for (int i = 0; i < 17; ++i) conv.weight_scales.push_back(dist(rng) / 127.0f);
  table.layers.push_back(conv);
  runtime::LayerCalibration add;
  add.name = "/model/conv/residual_add";
  add.kind = runtime::CalibratedLayerKind::kResidualAdd;
  table.layers.push_back(add);
  runtime::LayerCalibration pool;
  pool.name = "/model/avgpool";
  pool.kind = runtime::CalibratedLayerKind::kGlobalAveragePool;
  table.layers.push_back(pool);
  runtime::LayerCalibration gemm;
  gemm.name = "/model/fc/Gemm";
  gemm.kind = runtime::CalibratedLayerKind::kGemm;
  for (int i = 0; i < 10; ++i) gemm.weight_scales.push_back(dist(rng) / 127.0f);
  table.layers.push_back(gemm);
  runtime::LayerCalibration kept;
  kept.name = "head";
  kept.int8 = false;
  kept.reason = "kept FP32 by --keep_fp32";
  table.layers.push_back(kept);
  return table;
}

TEST(CalibrationTableTest, RoundTripsExactly) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(seed);
  const CalibrationTable table = RandomTable(seed);
  const std::string text = FormatCalibrationTable(table);
  CONVOY_ASSERT_OK_AND_ASSIGN(CalibrationTable read, ParseCalibrationTable(text, "calibration.yaml"));
  EXPECT_EQ(read.model, table.model);
  EXPECT_EQ(read.method, table.method);
  EXPECT_EQ(read.percentile, table.percentile);
  EXPECT_EQ(read.samples, table.samples);
  EXPECT_FALSE(read.signed_activations);
  ASSERT_EQ(read.tensors.size(), table.tensors.size());
  for (size_t i = 0; i < table.tensors.size(); ++i) {
    const auto &a = read.tensors[i], &b = table.tensors[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.scale, b.scale) << a.name;  // %.9g round-trips a float
    EXPECT_EQ(a.zero_point, b.zero_point);
    EXPECT_EQ(a.min, b.min);
    EXPECT_EQ(a.max, b.max);
    EXPECT_EQ(a.lo, b.lo);
    EXPECT_EQ(a.hi, b.hi);
  }
  ASSERT_EQ(read.layers.size(), 5u);
  EXPECT_EQ(read.layers[0].weight_scales, table.layers[0].weight_scales);
  EXPECT_TRUE(read.layers[0].int8);
  EXPECT_EQ(read.layers[0].kind, runtime::CalibratedLayerKind::kConv);
  EXPECT_EQ(read.layers[1].kind, runtime::CalibratedLayerKind::kResidualAdd);
  EXPECT_EQ(read.layers[2].kind, runtime::CalibratedLayerKind::kGlobalAveragePool);
  EXPECT_TRUE(read.layers[2].weight_scales.empty());
  EXPECT_EQ(read.layers[3].kind, runtime::CalibratedLayerKind::kGemm);
  EXPECT_EQ(read.layers[3].weight_scales, table.layers[3].weight_scales);
  EXPECT_FALSE(read.layers[4].int8);
  EXPECT_EQ(read.layers[4].reason, "kept FP32 by --keep_fp32");
  // The layers as the file spells them: a residual add keeps `add: true`, the tail names its op.
  EXPECT_THAT(text, HasSubstr("\"/model/conv/residual_add\": {precision: int8, add: true}"));
  EXPECT_THAT(text, HasSubstr("\"/model/avgpool\": {precision: int8, op: global_average_pool}"));
  EXPECT_THAT(text, HasSubstr("\"/model/fc/Gemm\": {precision: int8, op: gemm, weight_scales: ["));
  EXPECT_NE(read.FindTensor("onnx::Conv_912 \"quoted\""), nullptr);
}

TEST(CalibrationTableTest, FileRoundTripAndMissingFile) {
  const std::string path = ::testing::TempDir() + "/calibration_table_test.yaml";
  const CalibrationTable table = RandomTable(std::random_device{}());
  ASSERT_THAT(WriteCalibrationTable(path, table), IsOk());
  CONVOY_ASSERT_OK_AND_ASSIGN(CalibrationTable read, ReadCalibrationTable(path));
  EXPECT_EQ(read.tensors.size(), 3u);
  std::remove(path.c_str());
  absl::StatusOr<CalibrationTable> missing = ReadCalibrationTable(path);
  EXPECT_TRUE(absl::IsNotFound(missing.status()));
  EXPECT_THAT(missing.status().message(), HasSubstr(path));
}

// The message of parsing the written random table with `from` replaced by `to` once.
std::string ErrorAfterEdit(const std::string& from, const std::string& to) {
  std::string text = FormatCalibrationTable(RandomTable(std::random_device{}()));
  const size_t at = text.find(from);
  if (at == std::string::npos) return "edit not applied: " + from;
  text.replace(at, from.size(), to);
  absl::StatusOr<CalibrationTable> parsed = ParseCalibrationTable(text, "m/1/calibration.yaml");
  return parsed.ok() ? "parsed" : std::string(parsed.status().message());
}

TEST(CalibrationTableTest, MalformedEntriesNameFileLineAndEntry) {
  EXPECT_THAT(ErrorAfterEdit("format: convoy_calibration_table", "format: tensorrt"),
              HasSubstr("m/1/calibration.yaml:3:9: format: expected convoy_calibration_table, got 'tensorrt'"));
  EXPECT_THAT(ErrorAfterEdit("version: 1", "version: 2"), HasSubstr("version: this Convoy reads version 1, got 2"));
  EXPECT_THAT(ErrorAfterEdit("method: percentile", "method: kl"), HasSubstr("unknown calibration method 'kl'"));
  EXPECT_THAT(ErrorAfterEdit("activations: uint8_asymmetric", "activations: fp8"),
              HasSubstr("activations: expected uint8_asymmetric or int8_symmetric, got 'fp8'"));
  EXPECT_THAT(ErrorAfterEdit("\"images\": {min", "\"images\": {colour: 1, min"),
              HasSubstr("tensors['images']"));
  EXPECT_THAT(ErrorAfterEdit("\"images\": {min", "\"images\": {colour: 1, min"), HasSubstr("colour"));
  EXPECT_THAT(ErrorAfterEdit(", zero_point: ", ", zero_point: 300, z: "), HasSubstr("tensors['images']"));
  // A scale of zero, and a zero point outside UINT8.
  {
    std::string text = FormatCalibrationTable(RandomTable(1));
    const size_t at = text.find("scale: ", text.find("\"images\""));
    text.replace(at, text.find(',', at) - at, "scale: 0");
    EXPECT_THAT(ParseCalibrationTable(text, "t.yaml").status().message(),
                HasSubstr("tensors['images'].scale: must be positive and finite, got 0"));
  }
  {
    std::string text = FormatCalibrationTable(RandomTable(1));
    const size_t at = text.find("zero_point: ", text.find("\"images\""));
    text.replace(at, text.find('}', at) - at, "zero_point: 256");
    EXPECT_THAT(ParseCalibrationTable(text, "t.yaml").status().message(),
                HasSubstr("tensors['images'].zero_point: must be in 0..255 for uint8_asymmetric activations, got 256"));
  }
  EXPECT_THAT(ErrorAfterEdit("{precision: int8, weight_scales: [", "{precision: int4, weight_scales: ["),
              HasSubstr("layers['/model/conv'].precision: expected int8 or fp32, got 'int4'"));
  EXPECT_THAT(ErrorAfterEdit("{precision: int8, weight_scales: [", "{precision: int8, w: ["),
              HasSubstr("layers['/model/conv']"));
  EXPECT_THAT(ErrorAfterEdit("weight_scales: [", "weight_scales: [-1, "),
              HasSubstr("layers['/model/conv'].weight_scales[0]: must be positive and finite, got -1"));
  EXPECT_THAT(ErrorAfterEdit("precision: int8, add: true", "precision: int8, add: true, weight_scales: [1]"),
              HasSubstr("a residual add has no weights"));
  // An int8 convolution without weight scales.
  {
    CalibrationTable table = RandomTable(2);
    table.layers[0].weight_scales.clear();
    EXPECT_THAT(ParseCalibrationTable(FormatCalibrationTable(table), "t.yaml").status().message(),
                HasSubstr("layers['/model/conv'].weight_scales: an int8 convolution needs its weight scales"));
  }
  EXPECT_THAT(ErrorAfterEdit("op: global_average_pool", "op: softmax"),
              HasSubstr("layers['/model/avgpool'].op: expected conv, residual_add, global_average_pool or gemm, got "
                        "'softmax'"));
  EXPECT_THAT(ErrorAfterEdit("op: global_average_pool", "op: global_average_pool, add: true"),
              HasSubstr("layers['/model/avgpool'].add: says true for a layer whose op is global_average_pool"));
  EXPECT_THAT(ErrorAfterEdit("op: global_average_pool", "op: global_average_pool, weight_scales: [1]"),
              HasSubstr("layers['/model/avgpool'].weight_scales: a global average pool has no weights"));
  {
    CalibrationTable table = RandomTable(2);
    table.layers[3].weight_scales.clear();
    EXPECT_THAT(ParseCalibrationTable(FormatCalibrationTable(table), "t.yaml").status().message(),
                HasSubstr("layers['/model/fc/Gemm'].weight_scales: an int8 Gemm needs its weight scales"));
  }
  EXPECT_THAT(ParseCalibrationTable("format: [", "t.yaml").status().message(), HasSubstr("t.yaml:"));
}

TEST(CalibrationTableTest, EmptyTableRoundTrips) {
  CalibrationTable table;
  table.model = "m.onnx";
  CONVOY_ASSERT_OK_AND_ASSIGN(CalibrationTable read, ParseCalibrationTable(FormatCalibrationTable(table), "t.yaml"));
  EXPECT_TRUE(read.tensors.empty());
  EXPECT_TRUE(read.layers.empty());
}

}  // namespace
}  // namespace convoy::repository
