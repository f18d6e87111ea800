// LoadEstimator: arrivals, returning clients and execution times per batch size. See load_estimator.h.
#include "server/batching/load_estimator.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

namespace convoy::batching {
namespace {

constexpr size_t kArrivalWindow = 64;
constexpr size_t kNewArrivalWindow = 32;
constexpr size_t kMaxClientsOut = 4096;     // memory bound; far above any real population of one model
constexpr double kExecutionWeight = 1.0 / 8;  // after the first 8 batches of a size
constexpr int64_t kStaleBatches = 32;              // a size not measured for this many batches starts over
constexpr double kReturnWeight = 1.0 / 16;    // after the first 16 matched returns
constexpr size_t kReturnWindow = 128;         // return times kept for their quantiles
constexpr double kRequestSizeWeight = 1.0 / 32;
constexpr double kP99Sigmas = 2.33;           // p99 of a normal distribution
constexpr double kP99MinimumMargin = 0.10;    // of the mean: a size measured once has no variance yet
constexpr int64_t kOwnSpreadSamples = 4;      // a size's own spread counts from this many recent samples
constexpr double kMeanStepPerSigma = 1.128;   // mean |x - y| of two normal samples, in sigmas: 2 / sqrt(pi)
constexpr double kStepClip = 4;               // a difference counts at most this many mean differences...
constexpr double kStepClipFloor = 0.02;       // ...or this share of the mean, whichever is more
// Samples the exponential mean holds, in effect: its variance is sigma^2 * w / (2 - w) for weight w, i.e. the
// variance of a plain mean of (2 - w) / w samples.
constexpr double kEffectiveSamples = (2 - kExecutionWeight) / kExecutionWeight;
const absl::Duration kExpiryBeforeAnyReturn = absl::Seconds(1);
const absl::Duration kMinimumExpiry = absl::Microseconds(200);

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

// The weight of a new sample: a running mean while 1 / samples > weight, exponential with `weight` afterwards.
double Weight(int64_t samples, double weight) { return std::max(1.0 / static_cast<double>(samples), weight); }

}  // namespace

LoadEstimator::LoadEstimator(int64_t max_batch_size)
    : max_batch_size_(std::max<int64_t>(max_batch_size, 1)), sizes_(max_batch_size_ + 1) {}

bool LoadEstimator::RecordArrival(absl::Time now, int64_t batch_size) {
  ForgetGoneClients(now);
  arrivals_.push_back(now);
  if (arrivals_.size() > kArrivalWindow) arrivals_.pop_front();
  ++request_samples_;
  mean_request_size_ += Weight(request_samples_, kRequestSizeWeight) *
                        (static_cast<double>(batch_size) - mean_request_size_);
  if (out_.empty()) {
    new_arrivals_.push_back(now);
    if (new_arrivals_.size() > kNewArrivalWindow) new_arrivals_.pop_front();
    return false;
  }
  const double sample = std::max(0.0, Seconds(now - out_.front().responded));
  out_.pop_front();
  recent_returns_.Add(sample);
  ++return_samples_;
  if (return_samples_ == 1) {
    return_mean_s_ = sample;
    return_dev_s_ = 0;
    return true;
  }
  const double weight = Weight(return_samples_, kReturnWeight);
  const double deviation = sample - return_mean_s_;
  return_mean_s_ += weight * deviation;
  return_dev_s_ += weight * (std::abs(deviation) - return_dev_s_);
  return true;
}

void LoadEstimator::RecordResponses(absl::Time done, int64_t returning, int64_t new_clients) {
  const int64_t answered = returning + new_clients;
  for (int64_t i = 0; i < answered; ++i) {
    // Completions are reported in about time order; keep the list sorted so the oldest is matched first (and of
    // the clients answered together, the first to come back takes the first rank).
    auto at = out_.end();
    while (at != out_.begin() && (at - 1)->responded > done) --at;
    out_.insert(at, ClientOut{done, i < returning,
                              static_cast<double>(i + 1) / static_cast<double>(answered + 1)});
  }
  while (out_.size() > kMaxClientsOut) out_.pop_front();
}

void LoadEstimator::ReturnWindow::Add(double seconds) {
  recent_s_.push_back(seconds);
  sorted_s_.insert(std::upper_bound(sorted_s_.begin(), sorted_s_.end(), seconds), seconds);
  if (recent_s_.size() > kReturnWindow) {
    sorted_s_.erase(std::lower_bound(sorted_s_.begin(), sorted_s_.end(), recent_s_.front()));
    recent_s_.pop_front();
  }
}

double LoadEstimator::ReturnWindow::Quantile(double q) const {
  if (sorted_s_.empty()) return 0;
  const double position = std::clamp(q, 0.0, 1.0) * static_cast<double>(sorted_s_.size() - 1);
  const size_t below = static_cast<size_t>(position);
  const size_t above = std::min(below + 1, sorted_s_.size() - 1);
  const double share = position - static_cast<double>(below);
  return sorted_s_[below] + share * (sorted_s_[above] - sorted_s_[below]);
}

absl::Duration LoadEstimator::ReturnTimeOfLast(int64_t clients) const {
  const double k = static_cast<double>(std::max<int64_t>(clients, 1));
  return absl::Seconds(recent_returns_.Quantile(k / (k + 1)));
}

void LoadEstimator::RecordExecution(int64_t batch_size, absl::Duration busy) {
  SizeStats& size = sizes_[std::clamp<int64_t>(batch_size, 1, max_batch_size_)];
  // An estimate not updated for kStaleBatches batches of other sizes describes the machine as it was: start over
  // (the running mean restarts; the count of samples, which says whether a size was ever measured, does not).
  if (size.samples > 0 && batches_ - size.last_batch >= kStaleBatches) size.recent = 0;
  // The first batch of a size pays one-time costs (the first touch of its memory, the first run of its kernels:
  // about 5x the steady time for the sample ResNet at batch 2 on the CPU server): the second sample replaces it.
  if (size.samples == 1) size.recent = 0;
  ++size.samples;
  ++size.recent;
  size.last_batch = ++batches_;
  const double weight = Weight(size.recent, kExecutionWeight);
  const double deviation = Seconds(busy) - size.mean_s;
  size.mean_s += weight * deviation;
  size.variance_s2 = (1 - weight) * (size.variance_s2 + weight * deviation * deviation);
  // The spread of one batch from the differences between its successive samples: their mean absolute value, over
  // 1.128 (for normal noise, the mean absolute difference of two samples is 2 / sqrt(pi) sigma), exponential with the
  // mean's weight. Unlike the deviation from the mean, which stays large while the mean catches up with a change of
  // the machine, a change makes one large difference, and that one counts at most kStepClip times the spread so far.
  // The differences since the estimate last started over number recent - 1.
  if (size.recent == 1) {
    size.mean_step_s = 0;
  } else {
    double step = std::abs(Seconds(busy) - size.last_s);
    if (size.recent > kOwnSpreadSamples) {
      step = std::min(step, std::max(kStepClip * size.mean_step_s, kStepClipFloor * size.mean_s));
    }
    size.mean_step_s += Weight(size.recent - 1, kExecutionWeight) * (step - size.mean_step_s);
  }
  size.last_s = Seconds(busy);
  // The typical relative spread of one batch: the median over the sizes measured often enough to have their own,
  // and lately (a stale size's spread, like its mean, describes the machine as it was).
  spread_scratch_.clear();
  for (const SizeStats& other : sizes_) {
    if (other.recent < kOwnSpreadSamples || batches_ - other.last_batch >= kStaleBatches) continue;
    spread_scratch_.push_back(OwnSpread(other));
  }
  typical_spread_ = 0;
  if (!spread_scratch_.empty()) {
    const auto middle = spread_scratch_.begin() + spread_scratch_.size() / 2;
    std::nth_element(spread_scratch_.begin(), middle, spread_scratch_.end());
    typical_spread_ = *middle;
  }
}

double LoadEstimator::OwnSpread(const SizeStats& size) {
  if (size.recent < kOwnSpreadSamples || size.mean_s <= 0) return 0;
  return size.mean_step_s / kMeanStepPerSigma / size.mean_s;
}

double LoadEstimator::arrival_rate() const {
  if (arrivals_.size() < 2) return 0;
  const double span = std::max(Seconds(arrivals_.back() - arrivals_.front()), 1e-9);
  return static_cast<double>(arrivals_.size() - 1) / span;
}

double LoadEstimator::new_arrival_rate(absl::Time at) const {
  if (new_arrivals_.size() < 2) return 0;
  const absl::Time end = std::max(at, new_arrivals_.back());
  const double span = std::max(Seconds(end - new_arrivals_.front()), 1e-6);
  return static_cast<double>(new_arrivals_.size() - 1) / span;
}

std::optional<absl::Duration> LoadEstimator::return_time() const {
  if (return_samples_ == 0) return std::nullopt;
  return absl::Seconds(return_mean_s_);
}

absl::Duration LoadEstimator::ExpiryAfterResponse() const {
  if (return_samples_ == 0) return kExpiryBeforeAnyReturn;
  return std::max(absl::Seconds(2 * return_mean_s_ + 6 * return_dev_s_), kMinimumExpiry);
}

absl::Duration LoadEstimator::return_time_late_bound() const {
  return absl::Seconds(return_mean_s_ + std::max(3 * return_dev_s_, 0.2 * return_mean_s_));
}

absl::Time LoadEstimator::LateBound(absl::Time completed) const { return completed + return_time_late_bound(); }

void LoadEstimator::ForgetGoneClients(absl::Time now) {
  const absl::Duration expiry = ExpiryAfterResponse();
  while (!out_.empty() && now - out_.front().responded > expiry) out_.pop_front();
}

int64_t LoadEstimator::ClientsExpected(absl::Time at) const {
  if (return_samples_ == 0) return 0;
  int64_t expected = 0;
  for (const ClientOut& client : out_) expected += client.returning && LateBound(client.responded) >= at ? 1 : 0;
  return expected;
}

std::vector<LoadEstimator::ExpectedArrival> LoadEstimator::ExpectedArrivals(absl::Time at, int64_t count,
                                                                           absl::Time until) const {
  std::vector<ExpectedArrival> returns;
  if (return_samples_ > 0) {
    for (const ClientOut& client : out_) {
      const absl::Time late = LateBound(client.responded);
      if (!client.returning || late < at) continue;
      const absl::Time likely = std::clamp(
          client.responded + absl::Seconds(recent_returns_.Quantile(client.rank_quantile)), at, late);
      if (likely <= until) returns.push_back(ExpectedArrival{likely, late});
    }
  }
  std::sort(returns.begin(), returns.end(),
            [](const ExpectedArrival& a, const ExpectedArrival& b) { return a.likely < b.likely; });
  const double open_rate = new_arrival_rate(at);
  std::vector<ExpectedArrival> expected;
  size_t next_return = 0;
  int64_t next_open = 1;
  while (static_cast<int64_t>(expected.size()) < count) {
    const bool have_return = next_return < returns.size();
    absl::Time open = open_rate > 0 ? at + absl::Seconds(static_cast<double>(next_open) / open_rate)
                                    : absl::InfiniteFuture();
    if (open > until) open = absl::InfiniteFuture();
    if (!have_return && open == absl::InfiniteFuture()) break;
    if (have_return && returns[next_return].likely <= open) {
      expected.push_back(returns[next_return++]);
    } else {
      expected.push_back(ExpectedArrival{open, open});
      ++next_open;
    }
  }
  return expected;
}

std::optional<double> LoadEstimator::MeasuredSeconds(int64_t batch_size, bool p99) const {
  const SizeStats& size = sizes_[batch_size];
  if (size.samples == 0) return std::nullopt;
  if (!p99) return size.mean_s;
  return size.mean_s + std::max(kP99Sigmas * std::sqrt(size.variance_s2), kP99MinimumMargin * size.mean_s);
}

double LoadEstimator::MeasuredRelativeError(int64_t batch_size) const {
  const SizeStats& size = sizes_[batch_size];
  if (size.recent == 0 || size.mean_s <= 0) return 0;
  const double held = std::min(static_cast<double>(size.recent), kEffectiveSamples);
  return std::max(OwnSpread(size), typical_spread_) / std::sqrt(held);
}

double LoadEstimator::ExecutionTimeRelativeError(int64_t batch_size) const {
  if (batch_size < 1) return 0;
  const int64_t b = std::min(batch_size, max_batch_size_);
  if (sizes_[b].samples > 0) return MeasuredRelativeError(b);
  // Estimated from the measured neighbours: as uncertain as the less certain of them.
  const auto [below, above] = MeasuredNeighbours(b);
  double error = 0;
  if (below >= 1) error = std::max(error, MeasuredRelativeError(below));
  if (above <= max_batch_size_) error = std::max(error, MeasuredRelativeError(above));
  return error;
}

std::pair<int64_t, int64_t> LoadEstimator::MeasuredNeighbours(int64_t batch_size) const {
  int64_t below = batch_size - 1, above = batch_size + 1;
  while (below >= 1 && sizes_[below].samples == 0) --below;
  while (above <= max_batch_size_ && sizes_[above].samples == 0) ++above;
  return {below, above};
}

std::optional<double> LoadEstimator::EstimateSeconds(int64_t batch_size, bool p99) const {
  if (batch_size < 1) return 0.0;
  const int64_t b = std::min(batch_size, max_batch_size_);
  if (auto measured = MeasuredSeconds(b, p99)) return *measured;
  const auto [below, above] = MeasuredNeighbours(b);
  const bool have_below = below >= 1, have_above = above <= max_batch_size_;
  if (have_below && have_above) {
    const double lo = *MeasuredSeconds(below, p99), hi = *MeasuredSeconds(above, p99);
    return lo + (hi - lo) * static_cast<double>(b - below) / static_cast<double>(above - below);
  }
  // Outside the measured range: the time per element of the nearest measured size.
  if (have_below) return *MeasuredSeconds(below, p99) * static_cast<double>(b) / static_cast<double>(below);
  if (have_above) return *MeasuredSeconds(above, p99) * static_cast<double>(b) / static_cast<double>(above);
  return std::nullopt;
}

std::optional<absl::Duration> LoadEstimator::ExecutionTime(int64_t batch_size) const {
  const std::optional<double> seconds = EstimateSeconds(batch_size, /*p99=*/false);
  if (!seconds) return std::nullopt;
  return absl::Seconds(*seconds);
}

std::optional<absl::Duration> LoadEstimator::ExecutionTimeP99(int64_t batch_size) const {
  const std::optional<double> seconds = EstimateSeconds(batch_size, /*p99=*/true);
  if (!seconds) return std::nullopt;
  return absl::Seconds(*seconds);
}

int64_t LoadEstimator::ExecutionSamples(int64_t batch_size) const {
  if (batch_size < 1 || batch_size > max_batch_size_) return 0;
  return sizes_[batch_size].samples;
}

int64_t LoadEstimator::BatchesSinceMeasured(int64_t batch_size) const {
  if (batch_size < 1 || batch_size > max_batch_size_ || sizes_[batch_size].samples == 0) return batches_;
  return batches_ - sizes_[batch_size].last_batch;
}

std::map<int64_t, absl::Duration> LoadEstimator::MeasuredExecutionTimes() const {
  std::map<int64_t, absl::Duration> measured;
  for (int64_t b = 1; b <= max_batch_size_; ++b) {
    if (sizes_[b].samples > 0) measured[b] = absl::Seconds(sizes_[b].mean_s);
  }
  return measured;
}

}  // namespace convoy::batching
