// AdaptiveBatchPolicy: the `policy: adaptive` of dynamic batching (docs/model_config.md). Where the fixed policy
// holds every partial batch for max_queue_delay, this one holds a batch open only while requests that can still
// join it are worth the wait, judged from what LoadEstimator (load_estimator.h) has measured: which clients are out
// and when they are due back, the open arrival rate, and the execution time of every batch size. BatchQueue asks it
// whenever an instance is free and a partial batch waits. It is a pure function of its inputs (no clock, no
// threads), so tests drive it with explicit times (adaptive_batching_test.cc, in simulation).
//
// The queueing model. One model, I instances; an instance runs a batch of b elements in t(b) (t measured per size).
// Clients form a closed population (each sends its next request a return time Z after its response) plus an open
// stream; load_estimator.h says how both are inferred from arrivals and responses alone. A client whose request is
// queued or running cannot send another one, so the requests that can still join are the returning clients out and the
// open stream, each weighed at its likely time and counted on until its late bound (a client answered with 15 others is
// likely back at the return time's 16 / 17 quantile: load_estimator.h). In a closed loop of C clients the throughput is
// X = C / (R + Z) (Little's law, R the time in the server): at a given concurrency the higher throughput IS the lower
// mean latency, so the policy weighs throughput, and counts the latency a hold adds as instance time lost.
//
// The closed loop's batch size. Where returning clients are present (and fewer than one open-stream request arrives per
// largest batch), the loop is every request in the server plus the returning clients out: P elements, at most
// max_batch_size (a larger loop already runs in turns). It could run as g balanced batches one after another (g = 2, 4,
// 8, ...: halves, quarters; for a loop of a power of two, sizes the policy measured); a batch's clients are all back
// Z(P / g) after it ends (the likely return of the last of P / g clients), so one cycle lasts max(sum of the g batches'
// times / I, t(P / g) + Z(P / g)) and serves P. One batch for all leaves the instance idle for Z every cycle; batches
// that take turns run while the others' clients are on their way back. Of the splits, the fewest batches that tie with
// the fastest; one batch for all only when it is faster than that beyond a tie: it is measured while no other request
// is handled, the split while the other batches' clients come and go, so where the server shares its core with the
// request handling a tie favours the split. The split's size (Decision::closed_loop_size) stands in for max_batch_size
// in every rule below: holds form batches up to it, the queue is cut at it (reason kClosedLoop). It is decided only
// once every power of two up to the loop was measured twice (a cold sample must not split the loop), and every 128
// batches the loop is merged once (a hold until the clients expected back complete it, reason kRefresh), so the merged
// size is measured again and the split follows the machine.
//
// The decision, for a partial batch of n elements whose state last changed at t0 (an arrival, a response, a batch
// leaving; deciding from t0 makes the answer the same until the next change, so a hold never renews itself):
//  - The requests worth waiting for are those expected before t0 + t(n), i.e. the ones that would otherwise queue
//    behind the batch sent now; one that comes later finds the instance free, and holding for it would buy a
//    merge with idle time. No such request (a lone client; clients that left; a burst that will not come back):
//    the batch runs now.
//  - Otherwise it compares, for the n queued and those k expected requests, when one instance would be done with
//    all of them (the makespan): sending now and then running each next batch as soon as it is free and someone
//    arrived, against holding until the j-th expected arrival (a spread of j up to 32 values) and doing the same
//    from there, the arrivals at their likely times. It holds for the a_j with the earliest makespan when that
//    beats sending now by more than 0.2 %, until the latest late bound among a_1..a_j (every arrival ends a hold
//    early: it is a change, decided anew).
//    In a saturated closed loop that is not split this is what merges the clients coming back into one batch instead
//    of alternating two half batches; with clients that think longer than a batch takes it never holds.
//  - The largest size measured fewer than twice that the requests due within t(n) / 2 can form is tried, when it
//    is a power of two or its estimate (the interpolation between measured neighbours) does not already put it
//    outside the best-prefix rule below (a hold for a size that rule then cuts again would never measure it and
//    repeat at every batch), so the policy learns sizes the load alone would not produce; and every power of two
//    the queue can fill is measured twice before the estimates decide (that prefix goes first, the rest right
//    after; the second sample replaces the first, which pays one-time costs), so interpolation never spans more
//    than a factor of two and a cold first batch does not make a size look slow. Both cost a handful of batches in
//    the life of the model.
//  - When more is queued than one batch, the policy sends the prefix with the best n / t(n) (the longest that ties
//    with the best, not to chase noise), so batches settle at the most efficient size when the load provides more.
//    A size cut away is sent whole again once 32 batches of other sizes ran since it was last measured (more when
//    it is much slower than the chosen size: a refresh costs at most 5 % of the instance time), and the first
//    request alone once batches of one were not measured for 32 batches and 0.5 % of the time (0.1 % in a closed
//    loop, where the lone request's client then comes back apart from the others and the loop holds for it or runs
//    split until it merges again; not while a latency target cuts batches, nor in overload), so the estimates
//    follow the machine (a noisy neighbour leaving or
//    coming, batching no longer paying) instead of freezing at an old or unlucky value; the estimator restarts such
//    a stale estimate from its new sample.
//  - With another instance free there is spare capacity and the batch runs at once.
//
// Ties. Two sizes' rates tie when they differ by less than 2 % or by less than the noise of their estimates: two
// standard errors of the difference (LoadEstimator::ExecutionTimeRelativeError: one batch's spread, from the
// differences between successive batches of a size, over the square root of the samples its mean holds), up to 25 %.
// On a core shared with the request handling one batch of the sample ResNet varies by 20-40 %, the estimates by
// several %; a policy that compared them bare ran batches of 1, 4 and 16 by turns after whichever size had been lucky
// lately. A tie keeps the longer batch, the fewer batches, the split over the merged loop.
//
// With a latency target L (target_latency), for requests that do not come from a closed loop (bursts, an open
// stream): a request is sent or held in a batch only if its queue time plus the p99 bound of that batch's execution
// (the estimator's) meets L. The batch limit is the largest b that meets it for the oldest queued request; what is
// queued is cut to it when that brings more of the queued requests in on time than the largest batch would, and
// holds never break it, so as load rises batches grow only as far as L allows. In a closed loop (returning clients
// present) a cut cannot help: it lowers the throughput, and at a given concurrency every latency rises with it
// (X = C / (R + Z)); and a hold refused because the queued half of an alternating loop already waited would keep
// the loop alternating, slower for everyone. There the target keeps holds from forming a batch whose execution
// alone would run past L, and otherwise the schedule is the throughput-optimal one, which at that concurrency is
// also the lowest-latency one. Overload, where the policy serves throughput first and the queue policy
// (max_queue_size, timeouts) bounds the queue as with the fixed policy:
//  - a closed population that cannot meet L at all: P returning clients at the best throughput X* of batches of
//    at most P see a mean latency of at least P / X* - Z; above 0.9 L the target is set aside (batches and holds
//    as without one, convoy_batcher_batch_limit = max_batch_size);
//  - not even a batch of one meets L for the oldest request, or a cut would not help: the largest batch (up to
//    max_batch_size) runs at once.
//
// max_hold (max_queue_delay_microseconds with policy adaptive, when given) caps any hold from the oldest request's
// arrival. Without it a hold still ends within t(n) of the last change.
#ifndef CONVOY_SERVER_BATCHING_ADAPTIVE_BATCH_POLICY_H_
#define CONVOY_SERVER_BATCHING_ADAPTIVE_BATCH_POLICY_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/time/time.h"
#include "server/batching/load_estimator.h"

namespace convoy::batching {

class AdaptiveBatchPolicy {
 public:
  struct Options {
    int64_t max_batch_size = 1;
    absl::Duration target_latency = absl::ZeroDuration();   // p99 queue + compute; zero: none
    absl::Duration max_hold = absl::InfiniteDuration();     // longest hold from the oldest arrival; infinite: none
    int64_t instances = 1;                                  // instances serving the queue
  };

  // The partial batch an instance could take now, as BatchQueue gathered it.
  struct HeadBatch {
    std::vector<int64_t> sizes;        // batch sizes of its requests, in batch order (at least one)
    std::vector<absl::Time> enqueued;  // their enqueue times
    bool full = false;                 // the next request of the same shape does not fit: no one can join
    bool another_instance_free = false;  // besides the one asking
    int64_t returning_in_system = 0;     // queued or running requests from returning clients (load_estimator.h)
    int64_t in_system = 0;               // queued or running requests, all of them
  };

  // Why a batch was sent now (the `reason` label of convoy_batcher_batches_total, docs/metrics.md).
  enum class SendReason {
    kNone,            // held (length 0)
    kFull,            // no one can join: the queue fills the batch, or the next request does not fit
    kClosedLoop,      // the queue fills the batch size that serves the closed loop best; the rest goes next
    kNoCompany,       // no request is expected before the batch would be done
    kNotWorthWaiting, // requests are expected in time, but no hold would serve the known requests sooner
    kSpareInstance,   // another instance is free
    kUnmeasured,      // nothing measured yet: everything within the limit goes
    kBestPrefix,      // more is queued than the most efficient batch: its prefix goes
    kProbe,           // a power of two measured fewer than twice goes first
    kRefresh,         // a size not measured lately goes (the first request alone, or the whole queue)
    kLatencyTarget,   // cut to what the latency target allows
    kLate,            // even a batch of one misses the target, or a cut would not help: the largest goes
  };
  static const char* SendReasonName(SendReason reason);

  struct Decision {
    size_t length = 0;                               // requests to send now, from the front; 0: hold
    SendReason reason = SendReason::kNone;
    absl::Time hold_until = absl::InfiniteFuture();  // with length 0: decide again then at the latest
    int64_t batch_limit = 0;                         // the largest batch the latency target allows now
    int64_t closed_loop_size = 0;                    // the batch size that serves the closed loop best; 0: none
    bool overload = false;                           // even a batch of one misses the target
  };

  explicit AdaptiveBatchPolicy(const Options& options) : options_(options) {}

  // `now`: the time of the question; `last_change`: when the queue, the responses or the arrivals last changed.
  Decision Decide(absl::Time now, absl::Time last_change, const HeadBatch& head, const LoadEstimator& load) const;

  const Options& options() const { return options_; }

 private:
  struct Send {
    size_t length = 0;
    int64_t elements = 0;
    std::optional<double> rate;  // elements per second of instance time; unknown before any measurement
    SendReason reason = SendReason::kFull;  // kFull: the whole queue within the limit; else why it is shorter
  };
  // The largest b whose p99 execution fits the oldest request's remaining target; 0 when not even 1 fits.
  int64_t BatchLimit(absl::Time now, absl::Time oldest, const LoadEstimator& load) const;
  // The prefix of `sizes` within `limit` that runs most efficiently (the longest that ties with the best), or a
  // probe or refresh of another size (the first request alone may be that refresh, at most `shortest_share` of the
  // instance time; 0: never).
  Send BestPrefix(const std::vector<int64_t>& sizes, int64_t limit, const LoadEstimator& load,
                  double shortest_share) const;
  // When to send if waiting is worth it: the expected arrival whose hold serves the known requests soonest, or
  // the one that lets a size measured fewer than twice be tried; neither: send now.
  // What a hold must respect: the latency target (zero: none), counting the time the oldest request already
  // waited (requests outside a closed loop), or only the batch's own execution (in a closed loop).
  struct HoldTarget {
    absl::Duration latency;
    bool count_queue_time;
  };
  struct Wait {
    std::optional<absl::Time> hold;     // the hold that serves the known requests soonest
    std::optional<absl::Time> explore;  // the hold that forms the largest size measured fewer than twice
    int64_t explore_size = 0;
    bool expected = false;              // some request is expected before the batch sent now would be done
  };
  Wait WorthWaitingUntil(absl::Time last_change, absl::Time oldest, int64_t elements, int64_t limit,
                         const HoldTarget& target, const LoadEstimator& load) const;
  // With a target: how many requests of `head` meet it when `first` runs now and the rest right after.
  int64_t OnTime(absl::Time now, const HeadBatch& head, const Send& first, const LoadEstimator& load) const;
  // With a target: whether a closed population of P clients (returning ones in the server and out) can meet it at
  // all: at the best throughput X* of batches of at most P elements they see a mean latency of at least P / X* - Z.
  bool TargetFeasible(int64_t population, const LoadEstimator& load) const;
  // In a closed loop of `elements` (the returning clients' requests), each batch's clients all back the likely return
  // time of the last of them after its end: the batch size whose steady schedule serves them fastest (the model above);
  // nullopt when there is no closed loop to speak of or the sizes it compares were not measured twice yet.
  std::optional<int64_t> ClosedLoopBatchSize(int64_t elements, const LoadEstimator& load) const;
  // When one instance would be done with `elements` queued plus the `expected` arrivals (at their likely times),
  // starting the first batch at `start` (`held`: with every arrival likely by then; else with the queued ones
  // alone), and each next batch as soon as it is free and someone arrived.
  absl::Time Makespan(absl::Time start, int64_t elements, const std::vector<LoadEstimator::ExpectedArrival>& expected,
                      int64_t limit, bool held, const LoadEstimator& load) const;

  const Options options_;
};

}  // namespace convoy::batching

#endif  // CONVOY_SERVER_BATCHING_ADAPTIVE_BATCH_POLICY_H_
