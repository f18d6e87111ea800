// AdaptiveBatchPolicy: hold a partial batch only while the expected company is worth it. See
// adaptive_batch_policy.h for the model.
#include "server/batching/adaptive_batch_policy.h"

#include <algorithm>
#include <cmath>

namespace convoy::batching {
namespace {

constexpr double kWaitGain = 1.002;        // a hold must finish the known requests this much sooner than sending now
constexpr size_t kHoldCandidates = 32;     // expected arrivals considered as hold ends, at most
constexpr double kPrefixTolerance = 0.98;  // cut a batch only for a prefix more than 2 % more efficient
constexpr double kExploreFraction = 0.5;   // try a new size when its request is due within this share of t(n)
constexpr int64_t kExploreSamples = 2;     // sizes measured fewer times than this are worth one try
constexpr int64_t kRefreshBatches = 32;    // a size cut away is sent again after this many batches of others
constexpr double kRefreshShare = 0.05;      // ...and once it costs at most this share of the time since
constexpr double kRefreshShortestShare = 0.005;  // the same for the first request alone
// ...and in a closed loop, where the lone request's client then comes back apart from the others and the loop holds
// for it or runs split until it merges again: about twice its own time, and more than that on a shared core.
constexpr double kRefreshShortestShareClosedLoop = 0.001;
constexpr double kFeasibleShare = 0.9;     // a closed loop whose mean latency bound exceeds 0.9 L cannot meet L
constexpr double kClosedLoopTolerance = 0.98;  // closed-loop schedules within 2 % tie: the split, fewer batches win
constexpr int64_t kClosedLoopRefreshBatches = 128;  // a split loop is merged once per this many batches
// Two estimated rates also tie when they differ by less than this many standard errors of their difference
// (LoadEstimator::ExecutionTimeRelativeError): a difference the estimates' own noise explains decides nothing...
constexpr double kNoiseSigmas = 2.0;
// ...up to this tolerance: a size more than a third faster wins however noisy the estimates.
constexpr double kMaxNoiseTolerance = 0.25;

bool IsPowerOfTwo(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

double Rate(int64_t elements, absl::Duration seconds) {
  return static_cast<double>(elements) / std::max(absl::ToDoubleSeconds(seconds), 1e-9);
}

// The factor within which the rate of batches of `a` elements ties with that of `b`: `tolerance` (0.98: within 2 %),
// or less where the estimates of the two sizes are noisier than that (kNoiseSigmas standard errors of the
// difference, at most kMaxNoiseTolerance). On a core shared with the request handling one batch's time varies by
// 20-40 %, and the sizes' estimates by several %: without this the policy cut, split and merged batches after
// whichever size had been lucky lately.
double TieFactor(int64_t a, int64_t b, double tolerance, const LoadEstimator& load) {
  const double error_a = load.ExecutionTimeRelativeError(a), error_b = load.ExecutionTimeRelativeError(b);
  const double noise = kNoiseSigmas * std::sqrt(error_a * error_a + error_b * error_b);
  return std::min(tolerance, 1.0 - std::min(noise, kMaxNoiseTolerance));
}

// Whether a batch of `elements` is estimated to run within the tie factor of the best rate of any smaller batch,
// i.e. whether BestPrefix would send that many together rather than cut them.
bool NotCutByBestPrefix(int64_t elements, const LoadEstimator& load) {
  const double rate = Rate(elements, *load.ExecutionTime(elements));
  for (int64_t b = 1; b < elements; ++b) {
    if (rate < TieFactor(elements, b, kPrefixTolerance, load) * Rate(b, *load.ExecutionTime(b))) return false;
  }
  return true;
}

}  // namespace

int64_t AdaptiveBatchPolicy::BatchLimit(absl::Time now, absl::Time oldest, const LoadEstimator& load) const {
  const int64_t max_batch = std::max<int64_t>(options_.max_batch_size, 1);
  if (options_.target_latency <= absl::ZeroDuration() || !load.ExecutionTimeP99(1)) return max_batch;
  const absl::Duration budget = options_.target_latency - (now - oldest);
  const auto fits = [&](int64_t b) { return *load.ExecutionTimeP99(b) <= budget; };
  if (!fits(1)) return 0;
  // Execution time grows with the batch: the largest size that fits, by bisection.
  int64_t lo = 1, hi = max_batch;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (fits(mid)) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

AdaptiveBatchPolicy::Send AdaptiveBatchPolicy::BestPrefix(const std::vector<int64_t>& sizes, int64_t limit,
                                                          const LoadEstimator& load, double shortest_share) const {
  struct Candidate {
    size_t length;
    int64_t elements;
    double rate;
  };
  std::vector<Candidate> candidates;
  const bool measured = load.ExecutionTime(1).has_value();  // any size measured: every size has an estimate
  int64_t elements = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i > 0 && elements + sizes[i] > limit) break;  // the first request goes even when it alone exceeds it
    elements += sizes[i];
    candidates.push_back({i + 1, elements, measured ? Rate(elements, *load.ExecutionTime(elements)) : 0.0});
  }
  // Without measurements nothing is known: everything within the limit goes.
  if (!measured) {
    return Send{candidates.back().length, candidates.back().elements, std::nullopt, SendReason::kUnmeasured};
  }
  const Candidate* best = &candidates.front();
  for (const Candidate& c : candidates) best = c.rate > best->rate ? &c : best;
  const Candidate* chosen = &candidates.back();
  for (auto it = candidates.rbegin(); it != candidates.rend(); ++it) {
    if (it->rate >= TieFactor(it->elements, best->elements, kPrefixTolerance, load) * best->rate) {
      chosen = &*it;
      break;
    }
  }
  // Probe: the largest power of two the queue can fill that was measured fewer than kExploreSamples times goes
  // first (the rest follows at once), so interpolation never spans more than a factor of two of batch sizes, and a
  // size whose only sample paid one-time costs (load_estimator.h) is measured again before it is judged: a cold
  // first batch of 2 at 5x its steady time otherwise made every larger size look slower, and batches of one ran
  // until the refresh below came round, seconds later.
  for (auto it = candidates.rbegin(); it != candidates.rend(); ++it) {
    const int64_t size = it->elements;
    if (size < 2 || !IsPowerOfTwo(size)) continue;
    if (load.ExecutionSamples(size) < kExploreSamples) {
      return Send{it->length, it->elements, it->rate, SendReason::kProbe};
    }
  }
  // Refresh: sending one size keeps the others from being measured again, so their estimates would never catch up
  // with a change (a noisy neighbour gone or come, a cache now warm or now too small). Every kRefreshBatches batches
  // the first request goes alone (when longer batches are chosen: the cheapest batch there is, so a stale estimate
  // of the smallest size cannot hide that batching stopped paying; not where a latency target cuts batches or in
  // overload, where the largest batch runs),
  // and the whole prefix goes (when it was cut). The estimator restarts a stale size's estimate from that sample.
  // Each refresh waits at least kRefreshBatches batches, and until it costs at most a given share of the instance
  // time spent since (a batch far slower than the chosen one, as when batching stopped paying, would otherwise cost
  // a large share of the throughput).
  const auto refresh_after = [&](const Candidate& c, double share) {
    const double time_ratio = chosen->rate / std::max(c.rate, 1e-9) * static_cast<double>(c.elements) /
                              static_cast<double>(chosen->elements);  // t(c) / t(chosen)
    return std::max<int64_t>(kRefreshBatches, std::llround(time_ratio / share));
  };
  const Candidate& shortest = candidates.front();
  if (shortest_share > 0 && chosen != &shortest &&
      load.BatchesSinceMeasured(shortest.elements) >= refresh_after(shortest, shortest_share)) {
    return Send{shortest.length, shortest.elements, shortest.rate, SendReason::kRefresh};
  }
  const Candidate& longest = candidates.back();
  if (chosen != &longest && load.BatchesSinceMeasured(longest.elements) >= refresh_after(longest, kRefreshShare)) {
    return Send{longest.length, longest.elements, longest.rate, SendReason::kRefresh};
  }
  return Send{chosen->length, chosen->elements, chosen->rate,
              chosen == &longest ? SendReason::kFull : SendReason::kBestPrefix};
}

std::optional<int64_t> AdaptiveBatchPolicy::ClosedLoopBatchSize(int64_t elements, const LoadEstimator& load) const {
  // A loop larger than one batch already runs in turns; one client is no loop to split.
  if (elements < 2 || elements > options_.max_batch_size || !load.return_time() || !load.ExecutionTime(1)) {
    return std::nullopt;
  }
  // The estimates it compares must rest on two samples of every power of two up to the loop (the policy probes
  // them, BestPrefix): a cold first batch must not decide how the loop is split.
  for (int64_t b = 2; b <= elements; b *= 2) {
    if (load.ExecutionSamples(b) < kExploreSamples) return std::nullopt;
  }
  const double instances = static_cast<double>(std::max<int64_t>(options_.instances, 1));
  const double per_request = std::max(load.mean_request_size(), 1.0);
  const auto seconds = [&](int64_t b) { return b > 0 ? absl::ToDoubleSeconds(*load.ExecutionTime(b)) : 0.0; };
  // Elements per second of the loop run as `batches` balanced batches (of `size` and of size - 1) in turn.
  const auto rate = [&](int64_t batches, int64_t size) {
    const int64_t larger = elements - batches * (size - 1);
    const double work = static_cast<double>(larger) * seconds(size) +
                        static_cast<double>(batches - larger) * seconds(size - 1);
    // A batch's clients cannot be back before its end plus the time until the last of them returns, so a cycle
    // lasts at least that (the last of 16 clients comes later than the last of 8: the likely time of the last,
    // not the late bound of each, which would make every batch size wait the same).
    const int64_t clients = std::llround(std::ceil(static_cast<double>(size) / per_request));
    const double back = absl::ToDoubleSeconds(load.ReturnTimeOfLast(clients));
    const double cycle = std::max(work / instances, seconds(size) + back);
    return static_cast<double>(elements) / std::max(cycle, 1e-9);
  };
  // The splits compared: halves, quarters, ... (sizes that were measured, for a loop of a power of two), and of
  // those the fewest batches within kClosedLoopTolerance of the fastest (the list holds at least the halves).
  std::vector<std::pair<int64_t, double>> splits;  // (batch size, rate), fewest batches first
  std::pair<int64_t, double> best{0, 0.0};
  for (int64_t batches = 2; batches <= elements; batches *= 2) {
    const int64_t size = (elements + batches - 1) / batches;
    splits.emplace_back(size, rate(batches, size));
    if (splits.back().second > best.second) best = splits.back();
  }
  const auto split = *std::find_if(splits.begin(), splits.end(), [&](const auto& s) {
    return s.second >= TieFactor(s.first, best.first, kClosedLoopTolerance, load) * best.second;
  });
  // One batch for all only when it is clearly faster: it is measured while no other request is handled, the
  // split while the other batches' clients come and go, so on a shared core a tie favours the split.
  if (rate(1, elements) * TieFactor(elements, split.first, kClosedLoopTolerance, load) > split.second) {
    return std::nullopt;
  }
  return split.first;
}

absl::Time AdaptiveBatchPolicy::Makespan(absl::Time start, int64_t elements,
                                         const std::vector<LoadEstimator::ExpectedArrival>& expected, int64_t limit,
                                         bool held, const LoadEstimator& load) const {
  const double per_request = std::max(load.mean_request_size(), 1.0);
  size_t next = 0;
  double batch = static_cast<double>(elements);
  absl::Time begin = start;
  absl::Time free_at = start;
  // A batch sent now goes with what is queued: an arrival already due (overdue, likely "now") comes after it.
  bool joinable = held;
  while (true) {
    // A batch takes at least one request, however large (requests of several elements, a limit cut below their
    // mean size): otherwise no batch would take the next arrival and this never ended.
    while (joinable && next < expected.size() && expected[next].likely <= begin &&
           (batch == 0 || batch + per_request <= limit + 1e-9)) {
      batch += per_request;
      ++next;
    }
    free_at = begin + *load.ExecutionTime(std::clamp<int64_t>(std::llround(batch), 1, limit));
    if (next == expected.size()) return free_at;
    begin = std::max(free_at, expected[next].likely);
    batch = 0;
    joinable = true;
  }
}

AdaptiveBatchPolicy::Wait AdaptiveBatchPolicy::WorthWaitingUntil(absl::Time last_change, absl::Time oldest,
                                                                 int64_t elements, int64_t limit,
                                                                 const HoldTarget& target,
                                                                 const LoadEstimator& load) const {
  Wait wait;
  const double per_request = std::max(load.mean_request_size(), 1.0);
  const int64_t wanted = static_cast<int64_t>(std::ceil(static_cast<double>(limit - elements) / per_request));
  const absl::Duration time_now = *load.ExecutionTime(elements);
  // Only requests that would queue behind the batch sent now are worth waiting for: one that comes later finds the
  // instance free, and holding for it buys a merge with idle time.
  const std::vector<LoadEstimator::ExpectedArrival> expected =
      load.ExpectedArrivals(last_change, wanted, last_change + time_now);
  if (expected.empty()) return wait;
  wait.expected = true;
  const absl::Duration send_now = Makespan(last_change, elements, expected, limit, /*held=*/false, load) - last_change;
  absl::Duration best = send_now / kWaitGain;
  // Holding until the j-th expected arrival, for a spread of j (every one when few are expected) and the last. A
  // hold is weighed at the arrivals' likely times; it lasts until the latest of their late bounds (it ends sooner
  // when they come: every arrival is a change, decided anew), within the hold cap.
  const size_t step = std::max<size_t>(1, expected.size() / kHoldCandidates);
  std::vector<size_t> candidates;
  for (size_t j = 1; j < expected.size(); j += step) candidates.push_back(j);
  candidates.push_back(expected.size());
  std::vector<absl::Time> hold_end(expected.size());  // the latest late bound of the first j, at j - 1
  for (size_t j = 0; j < expected.size(); ++j) {
    hold_end[j] = std::max(expected[j].late, j > 0 ? hold_end[j - 1] : absl::InfinitePast());
  }
  for (size_t j : candidates) {
    const absl::Time until = expected[j - 1].likely;
    const absl::Time end = std::min(hold_end[j - 1], oldest + options_.max_hold);
    const int64_t first = std::min<int64_t>(elements + std::llround(static_cast<double>(j) * per_request), limit);
    if (until - oldest > options_.max_hold) break;
    const absl::Duration waited = target.count_queue_time ? until - oldest : absl::ZeroDuration();
    if (target.latency > absl::ZeroDuration() && waited + *load.ExecutionTimeP99(first) > target.latency) {
      break;
    }
    // Explore: the largest size measured fewer than kExploreSamples times that the requests due within a share of
    // t(n) can form. Only a size the hold's end sends whole: a power of two (BestPrefix probes it) or one the
    // best-prefix rule keeps; one that rule cuts again is never measured, and holding for it would repeat at every
    // batch.
    // (The cheap conditions first: NotCutByBestPrefix estimates every smaller size.)
    if (load.ExecutionSamples(first) < kExploreSamples && until - last_change <= kExploreFraction * time_now &&
        (IsPowerOfTwo(first) || NotCutByBestPrefix(first, load))) {
      wait.explore = end;
      wait.explore_size = first;
    }
    const absl::Duration done = Makespan(until, elements, expected, limit, /*held=*/true, load) - last_change;
    if (done < best) {
      best = done;
      wait.hold = end;
    }
  }
  return wait;
}

int64_t AdaptiveBatchPolicy::OnTime(absl::Time now, const HeadBatch& head, const Send& first,
                                    const LoadEstimator& load) const {
  int64_t rest = 0;
  for (size_t i = first.length; i < head.sizes.size(); ++i) rest += head.sizes[i];
  const absl::Time first_done = now + *load.ExecutionTimeP99(first.elements);
  const absl::Time rest_done =
      first_done + (rest > 0 ? *load.ExecutionTimeP99(std::min(rest, options_.max_batch_size)) : absl::ZeroDuration());
  int64_t on_time = 0;
  for (size_t i = 0; i < head.sizes.size(); ++i) {
    const absl::Time done = i < first.length ? first_done : rest_done;
    on_time += done - head.enqueued[i] <= options_.target_latency ? 1 : 0;
  }
  return on_time;
}

bool AdaptiveBatchPolicy::TargetFeasible(int64_t population, const LoadEstimator& load) const {
  const int64_t elements = std::llround(static_cast<double>(population) * std::max(load.mean_request_size(), 1.0));
  double best_rate = 0;
  for (int64_t b = 1; b <= std::min(elements, options_.max_batch_size); ++b) {
    best_rate = std::max(best_rate, Rate(b, *load.ExecutionTime(b)));
  }
  const double mean_latency_s = static_cast<double>(elements) / best_rate -
                                absl::ToDoubleSeconds(load.return_time().value_or(absl::ZeroDuration()));
  return mean_latency_s <= kFeasibleShare * absl::ToDoubleSeconds(options_.target_latency);
}

AdaptiveBatchPolicy::Decision AdaptiveBatchPolicy::Decide(absl::Time now, absl::Time last_change,
                                                          const HeadBatch& head, const LoadEstimator& load) const {
  Decision decision;
  int64_t elements = 0;
  for (int64_t size : head.sizes) elements += size;
  const absl::Time oldest = *std::min_element(head.enqueued.begin(), head.enqueued.end());
  const int64_t max_batch = std::max<int64_t>(options_.max_batch_size, 1);
  const bool measured = load.ExecutionTime(1).has_value();
  absl::Duration target = options_.target_latency;
  decision.batch_limit = BatchLimit(now, oldest, load);
  // A closed population that cannot meet the target at all is served as if there were none (overload).
  const int64_t population = head.returning_in_system + load.ClientsExpected(last_change);
  if (target > absl::ZeroDuration() && measured && population > 0 && !TargetFeasible(population, load)) {
    decision.overload = true;
    decision.batch_limit = max_batch;
    target = absl::ZeroDuration();
  }
  // In a closed loop cutting a batch to meet the target cannot help: it lowers the throughput, and at a given
  // concurrency every latency rises with it. There the target only keeps holds from forming a batch that alone
  // would run past it.
  const bool cuts = target > absl::ZeroDuration() && population == 0;
  // A closed loop (and no open stream to speak of) is split into the batches whose steady schedule serves it
  // fastest; every kClosedLoopRefreshBatches batches the loop is merged once instead (a hold until its clients are
  // back, below), so the merged size is measured again and the split follows the machine.
  int64_t largest = max_batch;
  int64_t merge_refresh = 0;  // the merged loop's size, when this decision is that refresh
  const double per_request = std::max(load.mean_request_size(), 1.0);
  if (population > 0 && measured &&
      load.new_arrival_rate(last_change) * absl::ToDoubleSeconds(*load.ExecutionTime(max_batch)) < 1.0) {
    // Every request in the server belongs to the loop: one from a client late enough to be presumed gone came back
    // as a new arrival, and the loop is no smaller for it.
    const int64_t loop = std::llround(
        static_cast<double>(std::max(head.in_system, head.returning_in_system) + load.ClientsExpected(last_change)) *
        per_request);
    const std::optional<int64_t> split = ClosedLoopBatchSize(loop, load);
    const int64_t since = load.BatchesSinceMeasured(std::min(loop, max_batch));
    if (split && since >= kClosedLoopRefreshBatches && since % kClosedLoopRefreshBatches == 0) {
      merge_refresh = std::min(loop, max_batch);
    } else if (split) {
      largest = *split;
      decision.closed_loop_size = *split;
    }
  }
  // (No refresh of batches of one where the target cuts batches: there the target decides the sizes.)
  Send send = BestPrefix(head.sizes, cuts ? std::max<int64_t>(decision.batch_limit, 1) : largest, load,
                         cuts || decision.overload ? 0.0
                         : population > 0          ? kRefreshShortestShareClosedLoop
                                                   : kRefreshShortestShare);
  // Late: not even a batch of one meets the target for the oldest request, or cutting at the limit would not bring
  // more of the queued requests in on time than the largest batch. Throughput first, at once; the queue policy
  // bounds the rest.
  bool late = target > absl::ZeroDuration() && decision.batch_limit == 0;
  if (cuts && !late) {
    const Send largest = BestPrefix(head.sizes, max_batch, load, /*shortest_share=*/0);
    late = send.elements < largest.elements && OnTime(now, head, send, load) <= OnTime(now, head, largest, load);
  }
  if (late) {
    decision.overload = true;
    decision.batch_limit = max_batch;
    send = BestPrefix(head.sizes, largest, load, /*shortest_share=*/0);
  }
  decision.length = send.length;
  const int64_t limit = cuts ? decision.batch_limit : largest;
  // Why, if it goes now: what BestPrefix chose it for when that is shorter than the queue within the limit, else
  // why the whole of it goes.
  const bool whole = send.reason == SendReason::kFull;
  if (late) {
    decision.reason = SendReason::kLate;
  } else if (whole && cuts && send.elements < elements) {
    decision.reason = SendReason::kLatencyTarget;
  } else if (!whole) {
    decision.reason = send.reason;
  } else if (merge_refresh > 0 && elements >= merge_refresh) {
    decision.reason = SendReason::kRefresh;
  } else if (head.full || elements >= limit) {
    decision.reason = limit < max_batch && !cuts ? SendReason::kClosedLoop : SendReason::kFull;
  } else if (head.another_instance_free) {
    decision.reason = SendReason::kSpareInstance;
  } else {
    decision.reason = SendReason::kNoCompany;
  }
  // Nothing to decide when no one can join, without measurements, or when another instance is free (spare
  // capacity: a lone batch costs nobody anything).
  if (head.full || late || elements >= limit || !send.rate || head.another_instance_free) return decision;
  const Wait wait =
      WorthWaitingUntil(last_change, oldest, elements, limit, HoldTarget{target, population == 0}, load);
  // When part of the queue stays behind anyway (the best prefix is shorter), a hold can only be for trying a
  // larger power of two measured fewer than twice (BestPrefix sends it whole once the queue fills it): a size
  // whose only sample paid one-time costs, which a closed loop that runs in halves would never fill again by
  // itself. Otherwise the hold that serves the known requests soonest, else a try of a new size.
  std::optional<absl::Time> hold;
  if (send.elements < elements) {
    if (wait.explore && IsPowerOfTwo(wait.explore_size)) hold = wait.explore;
  } else {
    hold = wait.hold ? wait.hold : wait.explore;
  }
  // The merge refresh of a split loop: hold until the clients expected back complete it (never past the hold cap,
  // nor for a batch whose execution alone would miss the target); those that do not come in time are not waited for.
  if (merge_refresh > elements && send.elements == elements &&
      (target <= absl::ZeroDuration() || *load.ExecutionTimeP99(merge_refresh) <= target)) {
    const int64_t wanted =
        static_cast<int64_t>(std::ceil(static_cast<double>(merge_refresh - elements) / per_request));
    const std::vector<LoadEstimator::ExpectedArrival> back =
        load.ExpectedArrivals(last_change, wanted, last_change + *load.ExecutionTime(merge_refresh));
    if (static_cast<int64_t>(back.size()) == wanted && back.back().likely - oldest <= options_.max_hold) {
      absl::Time end = absl::InfinitePast();
      for (const LoadEstimator::ExpectedArrival& arrival : back) end = std::max(end, arrival.late);
      hold = std::min(end, oldest + options_.max_hold);
    }
  }
  if (hold && *hold > now) {
    decision.length = 0;
    decision.reason = SendReason::kNone;
    decision.hold_until = *hold;
  } else if (decision.reason == SendReason::kNoCompany && wait.expected) {
    decision.reason = SendReason::kNotWorthWaiting;
  }
  return decision;
}

const char* AdaptiveBatchPolicy::SendReasonName(SendReason reason) {
  switch (reason) {
    case SendReason::kNone: return "none";
    case SendReason::kFull: return "full";
    case SendReason::kClosedLoop: return "closed_loop";
    case SendReason::kNoCompany: return "no_company";
    case SendReason::kNotWorthWaiting: return "not_worth_waiting";
    case SendReason::kSpareInstance: return "spare_instance";
    case SendReason::kUnmeasured: return "unmeasured";
    case SendReason::kBestPrefix: return "best_prefix";
    case SendReason::kProbe: return "probe";
    case SendReason::kRefresh: return "refresh";
    case SendReason::kLatencyTarget: return "latency_target";
    case SendReason::kLate: return "late";
  }
  return "unknown";
}

}  // namespace convoy::batching
