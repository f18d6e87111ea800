// Post-training INT8 calibration: the statistics `convoy calibrate` collects for each activation tensor while it runs
// the FP32 model on calibration inputs, the range each method picks from them, and the calibration table those
// ranges become (written and read by server/repository/calibration_table.h, applied to a graph by
// calibrated_quantization.h).
//
//   TensorStatistics stats;
//   for (each batch) stats.Add(values.data(), values.size());
//   CONVOY_ASSIGN_OR_RETURN(ActivationRange range, ChooseRange(stats, CalibrationMethod::kEntropy, 99.99, false));
//   TensorQuantization q = QuantizeRange(range, /*signed_activations=*/false);   // scale and zero point
//
// Activations are quantized per tensor, UINT8 asymmetric by default (onnxruntime's quantize_static default:
// scale = (hi - lo) / 255, zero point = round(-lo / scale), the range first widened to contain 0) or INT8 symmetric
// (scale = max(|lo|, |hi|) / 127, zero point 0). Weights are INT8 symmetric per output channel:
// scale[k] = max |w[k, ...]| / 127.
//
// Methods (the range [lo, hi] of one tensor):
// - minmax: the smallest and largest value seen.
// - percentile p (default 99.99): lo and hi are the (100 - p)-th and p-th percentiles of all values seen (from the
//   histogram, to one bin), so the rarest (100 - p) % of values at each end saturate.
// - entropy: TensorRT's calibration: over the histogram of |x|, the threshold t whose quantized distribution (the
//   bins below t merged into as many levels as the range will have, values beyond t counted in the last bin) has the
//   smallest KL divergence from the observed one; the range is [0, t] for a tensor with no negative value (256
//   levels), else [-t, t] (128 levels a side). Both are cut to the values actually seen. The search counts the bin
//   at 0 as it counts bin 1 (a ReLU's exact zeros would otherwise decide every threshold).
//
// The histogram has kBins bins of |x| on each side of zero over [0, R); R starts as the first power of two above the
// largest |x| seen and doubles (merging neighbouring bins, exactly) when a later batch exceeds it.
#ifndef CONVOY_SERVER_RUNTIME_CALIBRATION_H_
#define CONVOY_SERVER_RUNTIME_CALIBRATION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace convoy::runtime {

enum class CalibrationMethod { kMinMax, kPercentile, kEntropy };
const char* CalibrationMethodName(CalibrationMethod method);  // "minmax", "percentile", "entropy"
absl::StatusOr<CalibrationMethod> ParseCalibrationMethod(absl::string_view name);

// Running statistics of one tensor over all calibration batches: exact minimum and maximum, and the histogram.
class TensorStatistics {
 public:
  static constexpr int kBins = 2048;

  // Adds `count` values. Non-finite values are counted (non_finite()) and otherwise ignored.
  void Add(const float* values, int64_t count);

  int64_t count() const { return count_; }  // finite values seen
  int64_t non_finite() const { return non_finite_; }
  float min() const { return min_; }
  float max() const { return max_; }
  // The histogram's upper end R (0 until a nonzero value is seen); bin i covers |x| in [i, i + 1) * R / kBins.
  double range() const { return range_; }
  const std::vector<int64_t>& positive() const { return positive_; }  // x >= 0 by |x|
  const std::vector<int64_t>& negative() const { return negative_; }  // x < 0 by |x|

 private:
  void Widen(double needed);

  int64_t count_ = 0, non_finite_ = 0;
  float min_ = 0, max_ = 0;
  double range_ = 0;
  std::vector<int64_t> positive_ = std::vector<int64_t>(kBins, 0);
  std::vector<int64_t> negative_ = std::vector<int64_t>(kBins, 0);
};

struct ActivationRange {
  float lo = 0, hi = 0;
};

// The range `method` picks from `stats`; `percentile` is used by kPercentile only and must be in (50, 100].
// `signed_activations` (INT8 symmetric) makes entropy search 128 levels a side even for a tensor without negative
// values. Fails when no finite value was seen.
absl::StatusOr<ActivationRange> ChooseRange(const TensorStatistics& stats, CalibrationMethod method, double percentile,
                                            bool signed_activations);

// TensorRT's entropy threshold of a histogram of |x| (bins of equal width starting at 0): the bin count t (in
// [levels, bins]) minimizing KL(P || Q), P the first t bins with everything beyond added to bin t - 1, Q P's first t
// bins merged into `levels` groups and spread back over their nonzero bins. Returns t (the threshold is
// t * bin width). A histogram with at most `levels` bins in use returns the last nonempty bin + 1.
int EntropyThresholdBins(const std::vector<int64_t>& histogram, int levels);

// The quantization of one activation tensor.
struct TensorQuantization {
  std::string name;
  float min = 0, max = 0;        // what calibration saw
  float lo = 0, hi = 0;          // the range the method chose
  bool is_signed = false;        // INT8 symmetric (true) or UINT8 asymmetric
  float scale = 1.0f;
  int zero_point = 0;
};

// Scale and zero point for `range` (module comment); a range of zero width gets scale 1.
TensorQuantization QuantizeRange(const ActivationRange& range, bool is_signed);

// INT8 symmetric per-output-channel scales of convolution weights [K, ...] (row-major): max |w[k]| / 127, or 1 for a
// channel of zeros.
std::vector<float> WeightScalesPerChannel(const std::vector<float>& weights, int64_t channels);

// What a layer of the table is. A classifier's tail (global average pool, then Gemm) runs INT8 like a QDQ file's:
// the pool reads and writes 8-bit tensors, the Gemm reads one and writes its FP32 output.
enum class CalibratedLayerKind { kConv, kResidualAdd, kGlobalAveragePool, kGemm };
const char* CalibratedLayerKindName(CalibratedLayerKind kind);  // "convolution", "residual add", "global average pool", "Gemm"

// One layer of the table.
struct LayerCalibration {
  std::string name;                  // the node
  CalibratedLayerKind kind = CalibratedLayerKind::kConv;
  bool int8 = true;                  // false: kept in FP32 (`reason` says why)
  std::string reason;
  std::vector<float> weight_scales;  // convolutions and Gemms: one per output channel

  bool has_weights() const { return kind == CalibratedLayerKind::kConv || kind == CalibratedLayerKind::kGemm; }
};

// What `convoy calibrate` writes and `precision: int8` reads. Tensor and layer names are those of the optimized
// graph with residual adds separated (calibrated_quantization.h), in graph order.
struct CalibrationTable {
  std::string model;  // the model file's name, for the reader
  CalibrationMethod method = CalibrationMethod::kMinMax;
  double percentile = 99.99;  // kPercentile only
  bool signed_activations = false;
  int64_t samples = 0;
  std::vector<TensorQuantization> tensors;
  std::vector<LayerCalibration> layers;

  const TensorQuantization* FindTensor(const std::string& name) const;
  const LayerCalibration* FindLayer(const std::string& name) const;
};

}  // namespace convoy::runtime

#endif  // CONVOY_SERVER_RUNTIME_CALIBRATION_H_
