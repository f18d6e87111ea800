// Calibration statistics, range choice and scales; see calibration.h.
#include "server/runtime/calibration.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace convoy::runtime {

const char* CalibrationMethodName(CalibrationMethod method) {
  switch (method) {
    case CalibrationMethod::kMinMax: return "minmax";
    case CalibrationMethod::kPercentile: return "percentile";
    case CalibrationMethod::kEntropy: return "entropy";
  }
  return "unknown";
}

absl::StatusOr<CalibrationMethod> ParseCalibrationMethod(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  for (CalibrationMethod m : {CalibrationMethod::kMinMax, CalibrationMethod::kPercentile, CalibrationMethod::kEntropy}) {
    if (lower == CalibrationMethodName(m)) return m;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown calibration method '", name, "'; expected minmax, percentile or entropy"));
}

void TensorStatistics::Widen(double needed) {
  if (range_ == 0) {
    range_ = std::exp2(std::ceil(std::log2(needed)));
    if (range_ < needed) range_ *= 2;  // log2 rounding
    return;
  }
  while (range_ < needed) {
    // Doubling R halves the bin count per unit: bins 2i and 2i + 1 become bin i.
    for (std::vector<int64_t>* h : {&positive_, &negative_}) {
      for (int i = 0; i < kBins / 2; ++i) (*h)[i] = (*h)[2 * i] + (*h)[2 * i + 1];
      std::fill(h->begin() + kBins / 2, h->end(), 0);
    }
    range_ *= 2;
  }
}

void TensorStatistics::Add(const float* values, int64_t count) {
  float lo = std::numeric_limits<float>::infinity(), hi = -lo;
  int64_t finite = 0;
  for (int64_t i = 0; i < count; ++i) {
    const float v = values[i];
    if (!std::isfinite(v)) {
      ++non_finite_;
      continue;
    }
    lo = std::min(lo, v), hi = std::max(hi, v);
    ++finite;
  }
  if (finite == 0) return;
  min_ = count_ == 0 ? lo : std::min(min_, lo);
  max_ = count_ == 0 ? hi : std::max(max_, hi);
  count_ += finite;
  const double needed = std::max(std::fabs(static_cast<double>(lo)), std::fabs(static_cast<double>(hi)));
  // Until a nonzero value arrives the histogram has no scale; zeros land in bin 0 whatever R becomes.
  if (needed > 0) Widen(needed);
  const double per_unit = range_ > 0 ? kBins / range_ : 0.0;
  for (int64_t i = 0; i < count; ++i) {
    const float v = values[i];
    if (!std::isfinite(v)) continue;
    const int bin = static_cast<int>(std::min<double>(std::fabs(static_cast<double>(v)) * per_unit, kBins - 1));
    ++(v >= 0 ? positive_ : negative_)[bin];
  }
}

namespace {

// The value below which at most `cut` of the values lie, to one bin (the outer edge of the bin holding the cut).
double LowerQuantile(const TensorStatistics& s, double cut) {
  const double width = s.range() / TensorStatistics::kBins;
  double seen = 0;
  for (int i = TensorStatistics::kBins - 1; i >= 0; --i) {
    seen += s.negative()[i];
    if (seen > cut) return -(i + 1) * width;
  }
  for (int i = 0; i < TensorStatistics::kBins; ++i) {
    seen += s.positive()[i];
    if (seen > cut) return i * width;
  }
  return s.max();
}

double UpperQuantile(const TensorStatistics& s, double cut) {
  const double width = s.range() / TensorStatistics::kBins;
  double seen = 0;
  for (int i = TensorStatistics::kBins - 1; i >= 0; --i) {
    seen += s.positive()[i];
    if (seen > cut) return (i + 1) * width;
  }
  for (int i = 0; i < TensorStatistics::kBins; ++i) {
    seen += s.negative()[i];
    if (seen > cut) return -i * width;
  }
  return s.min();
}

}  // namespace

int EntropyThresholdBins(const std::vector<int64_t>& histogram, int levels) {
  const int bins = static_cast<int>(histogram.size());
  int used = 0;
  for (int i = bins - 1; i >= 0; --i) {
    if (histogram[i] != 0) {
      used = i + 1;
      break;
    }
  }
  if (used <= levels) return std::max(used, 1);
  std::vector<double> beyond(bins + 1, 0.0);  // beyond[t] = sum of histogram[t..]
  for (int i = bins - 1; i >= 0; --i) beyond[i] = beyond[i + 1] + static_cast<double>(histogram[i]);
  const double total = beyond[0];
  double best_divergence = std::numeric_limits<double>::infinity();
  int best = used;
  std::vector<double> q;
  for (int t = levels; t <= used; ++t) {
    // P: the first t bins, everything beyond counted in the last one. Q: the first t bins (without the outliers)
    // merged into `levels` groups, each group's count spread evenly over the group's bins where P is nonzero.
    q.assign(t, 0.0);
    const double q_total = total - beyond[t];
    for (int g = 0; g < levels; ++g) {
      const int start = static_cast<int>(int64_t{g} * t / levels);
      const int end = static_cast<int>(int64_t{g + 1} * t / levels);
      double sum = 0;
      int nonzero = 0;
      for (int j = start; j < end; ++j) {
        sum += static_cast<double>(histogram[j]);
        const double p = static_cast<double>(histogram[j]) + (j == t - 1 ? beyond[t] : 0.0);
        nonzero += p != 0;
      }
      for (int j = start; j < end && nonzero > 0; ++j) {
        const double p = static_cast<double>(histogram[j]) + (j == t - 1 ? beyond[t] : 0.0);
        if (p != 0) q[j] = sum / nonzero;
      }
    }
    double divergence = 0;
    for (int j = 0; j < t; ++j) {
      const double p = (static_cast<double>(histogram[j]) + (j == t - 1 ? beyond[t] : 0.0)) / total;
      if (p == 0) continue;
      // A level with nothing in it where P has mass (only the last bin's outliers can do that): a tiny probability,
      // so the divergence is large but finite.
      const double qj = q_total > 0 ? std::max(q[j] / q_total, 1e-12) : 1e-12;
      divergence += p * std::log(p / qj);
    }
    if (divergence < best_divergence) best_divergence = divergence, best = t;
  }
  return best;
}

absl::StatusOr<ActivationRange> ChooseRange(const TensorStatistics& stats, CalibrationMethod method, double percentile,
                                            bool signed_activations) {
  if (stats.count() == 0) return absl::FailedPreconditionError("no finite value was seen");
  ActivationRange range{stats.min(), stats.max()};
  if (method == CalibrationMethod::kMinMax || stats.range() == 0) return range;
  if (method == CalibrationMethod::kPercentile) {
    if (!(percentile > 50 && percentile <= 100)) {
      return absl::InvalidArgumentError(absl::StrCat("percentile must be in (50, 100], got ", percentile));
    }
    const double cut = (100.0 - percentile) / 100.0 * static_cast<double>(stats.count());
    range.lo = static_cast<float>(std::max<double>(LowerQuantile(stats, cut), stats.min()));
    range.hi = static_cast<float>(std::min<double>(UpperQuantile(stats, cut), stats.max()));
    return range;
  }
  std::vector<int64_t> magnitudes(TensorStatistics::kBins);
  for (int i = 0; i < TensorStatistics::kBins; ++i) magnitudes[i] = stats.positive()[i] + stats.negative()[i];
  // The exact zeros a ReLU writes pile up in bin 0; left there, any threshold that merges bin 0 with its neighbours
  // looks infinitely worse and the search always picks the smallest candidate. Like NVIDIA's pytorch-quantization
  // entropy calibrator, the search sees bin 0 as high as bin 1.
  magnitudes[0] = magnitudes[1];
  const bool one_sided = stats.min() >= 0 && !signed_activations;
  const int bins = EntropyThresholdBins(magnitudes, one_sided ? 256 : 128);
  const double threshold = bins * stats.range() / TensorStatistics::kBins;
  range.hi = static_cast<float>(std::min<double>(threshold, stats.max()));
  range.lo = stats.min() >= 0 ? 0.0f : static_cast<float>(std::max<double>(-threshold, stats.min()));
  return range;
}

TensorQuantization QuantizeRange(const ActivationRange& range, bool is_signed) {
  TensorQuantization q;
  q.lo = range.lo, q.hi = range.hi;
  q.is_signed = is_signed;
  if (is_signed) {
    const float a = std::max(std::fabs(range.lo), std::fabs(range.hi));
    q.scale = a > 0 ? a / 127.0f : 1.0f;
    q.zero_point = 0;
    return q;
  }
  const float lo = std::min(range.lo, 0.0f), hi = std::max(range.hi, 0.0f);
  if (!(hi - lo > 0)) return q;  // scale 1, zero point 0
  q.scale = (hi - lo) / 255.0f;
  q.zero_point = static_cast<int>(std::clamp<double>(std::nearbyint(-static_cast<double>(lo) / q.scale), 0, 255));
  return q;
}

const char* CalibratedLayerKindName(CalibratedLayerKind kind) {
  switch (kind) {
    case CalibratedLayerKind::kConv: return "convolution";
    case CalibratedLayerKind::kResidualAdd: return "residual add";
    case CalibratedLayerKind::kGlobalAveragePool: return "global average pool";
    case CalibratedLayerKind::kGemm: return "Gemm";
  }
  return "?";
}

std::vector<float> WeightScalesPerChannel(const std::vector<float>& weights, int64_t channels) {
  std::vector<float> scales(channels, 1.0f);
  if (channels <= 0) return scales;
  const size_t per_channel = weights.size() / channels;
  for (int64_t k = 0; k < channels; ++k) {
    float largest = 0;
    for (size_t i = 0; i < per_channel; ++i) largest = std::max(largest, std::fabs(weights[k * per_channel + i]));
    if (largest > 0) scales[k] = largest / 127.0f;
  }
  return scales;
}

const TensorQuantization* CalibrationTable::FindTensor(const std::string& name) const {
  for (const TensorQuantization& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

const LayerCalibration* CalibrationTable::FindLayer(const std::string& name) const {
  for (const LayerCalibration& l : layers) {
    if (l.name == name) return &l;
  }
  return nullptr;
}

}  // namespace convoy::runtime
