// LoadEstimator: what the adaptive batching policy (adaptive_batch_policy.h) knows about one model's traffic and
// instances, learned from the batcher's own events at the times it passes in (no clock, no threads). BatchQueue owns
// one and feeds it under the batcher's lock; it is not thread-safe itself. The fixed policy keeps one too, for the
// metrics (docs/metrics.md, convoy_batcher_*).
//
// The traffic model: a closed population of clients plus an open stream.
//  - A client that got a response comes back with its next request one return time Z later (perf_analyzer and most
//    RPC clients work this way; Z is the client's own work plus the network and the server's decoding). Every
//    response therefore leaves one client "out", remembered with its response time. An arrival is matched to the
//    oldest client out (first in, first out): the match is one sample of Z, kept as a running mean (exponential
//    with weight 1/16 after 16 samples) and mean absolute deviation. The client's late bound is its response time +
//    Z_mean + max(3 Z_dev, Z_mean / 5); a client out for longer than 2 Z_mean + 6 Z_dev (1 s before Z was ever
//    measured; never less than 200 us) is presumed gone and forgotten, so a shrinking population is noticed within
//    a few return times.
//  - An arrival that matches no client out is new: the open stream (new clients, open-loop load generators, a
//    burst). Its rate is measured over the last 32 new arrivals up to the time of the question, so a stream that
//    stopped decays. A response to a new arrival leaves a client out that may be matched, but is not counted on:
//    only a client that came back once is expected back again. So a burst is never taken for a closed population,
//    and a closed loop is recognized from its second round on.
//  - So at any time the estimator can say which further requests may still arrive and by when: the returning
//    clients out whose late bound has not passed, and the open stream at its rate. A client whose request is queued
//    or running cannot send another one: that is what keeps a lone client from ever waiting.
//  - And when each one most likely comes: the clients answered together (one batch's responses) come back in some
//    order, the r-th of k about the r / (k + 1) quantile of the return time after their response (the last of 16
//    near the 94th percentile, not at the mean, nor at the late bound). The quantiles are read from the last 128
//    return times. The late bound says until when a client is counted on; the likely time is what a decision
//    weighs: holding for 16 clients answered together costs the wait for the last of them, which the late bound
//    overstates (a policy weighing late bounds split a loop whose clients come back with some spread into halves
//    that serve it slower than one batch, and merged a loop split by late clients again only slowly).
//
// Instances: the execution time of each batch size (elements, 1..max_batch_size) as measured on the instances: a
// running mean over the first 8 batches of a size, then exponential with weight 1/8, with an exponentially weighted
// variance; the second batch of a size replaces the first (which pays one-time costs: first touch of memory, first
// run of the kernels); a size not measured while 32 batches of other sizes ran starts over from its next sample
// (the policy re-sends such sizes now and then, adaptive_batch_policy.h, so an old estimate is replaced, not
// averaged in). A
// size never measured is estimated by linear interpolation between the nearest measured sizes; beyond
// the measured range it keeps the time per element of the nearest measured size, so no gain from batching is
// assumed that was not measured. The p99 bound of a size is mean + max(2.33 sigma, 10 % of the mean).
#ifndef CONVOY_SERVER_BATCHING_LOAD_ESTIMATOR_H_
#define CONVOY_SERVER_BATCHING_LOAD_ESTIMATOR_H_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "absl/time/time.h"

namespace convoy::batching {

class LoadEstimator {
 public:
  explicit LoadEstimator(int64_t max_batch_size);

  // A request of `batch_size` elements entered the queue at `now`. Returns whether it came from a client out (a
  // returning client), which the caller passes back with its response.
  bool RecordArrival(absl::Time now, int64_t batch_size);
  // Requests got their response at `done` (executed, or failed in the queue): `returning` of them came from
  // returning clients (expected back again), `new_clients` from new arrivals (matched if they return, not awaited).
  void RecordResponses(absl::Time done, int64_t returning, int64_t new_clients);
  // An instance ran a batch of `batch_size` elements and was busy with it for `busy` (execution and delivery).
  void RecordExecution(int64_t batch_size, absl::Duration busy);

  // All arrivals per second over the last 64 (0 before two).
  double arrival_rate() const;
  // New (unmatched) arrivals per second over the last 32, measured up to `at`.
  double new_arrival_rate(absl::Time at) const;
  // Mean batch size of a request (elements), over recent arrivals; 1 before any.
  double mean_request_size() const { return mean_request_size_; }
  // Return time Z: mean and mean deviation of the matched samples; nullopt before the first match.
  std::optional<absl::Duration> return_time() const;
  absl::Duration return_time_deviation() const { return absl::Seconds(return_dev_s_); }
  // How long after its response a returning client is late: Z_mean + max(3 Z_dev, Z_mean / 5); zero before the
  // first match.
  absl::Duration return_time_late_bound() const;
  // Returning clients out at `at` that are still expected back (their late bound is at or after `at`).
  int64_t ClientsExpected(absl::Time at) const;
  // Clients out that are remembered (not presumed gone), expected, late or new.
  int64_t clients_out() const { return static_cast<int64_t>(out_.size()); }

  // The likely time from a response until the last of `clients` answered together is back: the return time's
  // clients / (clients + 1) quantile over the recent samples; zero before the first match.
  absl::Duration ReturnTimeOfLast(int64_t clients) const;

  // An arrival still expected: when it most likely comes (for a returning client, its rank among the clients
  // answered with it on the recent return times, never before the question's time nor after its late bound) and
  // until when it is counted on (its late bound; for the open stream both are its due time).
  struct ExpectedArrival {
    absl::Time likely;
    absl::Time late;
    bool operator==(const ExpectedArrival& other) const { return likely == other.likely && late == other.late; }
  };
  // The next `count` arrivals expected, most likely first: the returning clients out still expected at `at` (late
  // bound at or after it) and likely by `until`, merged with the open stream at its rate (due at + m / rate, up to
  // `until`). Fewer when fewer can come.
  std::vector<ExpectedArrival> ExpectedArrivals(absl::Time at, int64_t count, absl::Time until) const;

  // Estimated execution time of `batch_size` elements and its p99 bound; nullopt before any batch was measured.
  std::optional<absl::Duration> ExecutionTime(int64_t batch_size) const;
  std::optional<absl::Duration> ExecutionTimeP99(int64_t batch_size) const;
  // How far the estimate of `batch_size` may be off, relative to it: the standard error of its mean, i.e. the spread
  // of one batch (from the mean difference between its own successive recent samples, in which a change of the
  // machine is one clipped difference, not a deviation as long as the mean takes to follow it; and at least the
  // typical one over the sizes measured 4 times or more since their estimates last started over: one or two
  // samples say nothing of a spread) over the
  // square root of the samples the mean holds (its recent samples, at most 15 in effect for the exponential weight
  // 1/8). A size never measured: the larger error of its measured neighbours. 0 when nothing varies or before any
  // batch. The policy counts two sizes whose rates differ by less than this noise as a tie.
  double ExecutionTimeRelativeError(int64_t batch_size) const;
  // Batches of exactly this size measured so far.
  int64_t ExecutionSamples(int64_t batch_size) const;
  // Batches of any size measured since this size was last measured (all of them when it never was).
  int64_t BatchesSinceMeasured(int64_t batch_size) const;
  // Every measured size with its mean estimate.
  std::map<int64_t, absl::Duration> MeasuredExecutionTimes() const;

 private:
  struct ClientOut {
    absl::Time responded;
    bool returning;        // came back once already: expected again
    double rank_quantile;  // r / (k + 1): the r-th of the k clients answered at `responded`
  };
  struct SizeStats {
    int64_t samples = 0;
    int64_t recent = 0;      // samples since the estimate last started over (its running-mean weight)
    int64_t last_batch = 0;  // batches_ when this size was last measured
    double mean_s = 0;
    double variance_s2 = 0;
    double last_s = 0;       // the last sample
    double mean_step_s = 0;  // mean |difference| of successive recent samples (exponential, clipped)
  };
  // The mean (or p99 bound) of one size as measured; nullopt when that size never ran.
  std::optional<double> MeasuredSeconds(int64_t batch_size, bool p99) const;
  std::optional<double> EstimateSeconds(int64_t batch_size, bool p99) const;
  // ExecutionTimeRelativeError of a size that was measured.
  double MeasuredRelativeError(int64_t batch_size) const;
  // One batch's standard deviation over the mean, from its successive differences; 0 before 4 recent samples.
  static double OwnSpread(const SizeStats& size);
  // The nearest measured sizes below and above `batch_size` (0 / max_batch_size + 1 where there is none).
  std::pair<int64_t, int64_t> MeasuredNeighbours(int64_t batch_size) const;
  absl::Duration ExpiryAfterResponse() const;
  absl::Time LateBound(absl::Time completed) const;
  void ForgetGoneClients(absl::Time now);
  // The last kReturnWindow return times, for their quantiles.
  class ReturnWindow {
   public:
    void Add(double seconds);
    // The q-quantile (0..1), interpolated; 0 when empty.
    double Quantile(double q) const;

   private:
    std::deque<double> recent_s_;   // oldest first
    std::vector<double> sorted_s_;  // the same, sorted
  };

  const int64_t max_batch_size_;
  std::vector<SizeStats> sizes_;  // index: batch size
  int64_t batches_ = 0;           // batches measured, every size
  double typical_spread_ = 0;     // standard deviation over mean of one batch: the median over well-measured sizes
  std::vector<double> spread_scratch_;  // RecordExecution's, kept to spare an allocation per batch
  std::deque<ClientOut> out_;     // clients out, oldest response first
  std::deque<absl::Time> arrivals_;      // last 64 arrival times
  std::deque<absl::Time> new_arrivals_;  // last 32 unmatched arrival times
  int64_t return_samples_ = 0;
  double return_mean_s_ = 0;
  double return_dev_s_ = 0;
  ReturnWindow recent_returns_;
  double mean_request_size_ = 1;
  int64_t request_samples_ = 0;
};

}  // namespace convoy::batching

#endif  // CONVOY_SERVER_BATCHING_LOAD_ESTIMATOR_H_
