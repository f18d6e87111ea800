// Algorithm selection through the cache: the one entry point the runtime uses to pick a kernel for a problem.
//
//   auto selected = SelectAlgorithm<Conv2dOp>(problem, device, AlgorithmCache::Global(),
//                                             AlgorithmSelection::kTune, TuningOptions());
//
// kHeuristic never times anything: a cached entry if one exists (tuned earlier or shipped in a cache file), else the
// registry's heuristic default. kTune looks the problem up and, on a miss (no tuned entry), times every candidate on
// `device` with fresh random inputs (warm-up runs, then several timed runs, the fastest of them; the slower ones
// rechecked, the two leaders confirmed in alternation; the device warmed up once before its first timing), skipping
// with a reason the candidates that fail or need more workspace than allowed, stores the result and returns the
// fastest. Why the fastest run and not the median: a slow spell only ever makes a run slower, so the fastest run is
// the nearest to the candidate's own speed, and one clean run is enough. It cannot help where every run is slowed:
// on a shared machine a oneDNN primitive's OpenMP team waits at its barriers for a thread the OS has descheduled,
// while the own kernels' pool, whose calling thread takes any chunk, only loses the share (measured under a load of
// 6-9 on 2 cores: MobileNetV2's first convolution, 0.08 ms alone, fastest oneDNN run 4.7-13.8 ms in 4 of 6 tunings,
// against 3.2-7.7 ms for im2col, which then won; docs/kernels.md, "How the autotuner times candidates"). Tuning "ahead
// of time" is calling this with kTune for each batch size at model load, so no request ever waits for it.
//
// Verification (options.verification, verification.h): whichever way the algorithm is picked, it is used only once its
// output for this problem has been compared on this device (now, or earlier as recorded in the cache entry) with a
// trusted result and agreed. The autotuner verifies every candidate before timing it; the heuristic walks its order
// (HeuristicOrder) to the first candidate that verifies; a cached choice that fails falls back the same way. Every
// rejection is recorded in the entry, counted in AlgorithmRejections and returned in SelectedAlgorithm::rejected.
#ifndef CONVOY_KERNELS_REGISTRY_AUTOTUNER_H_
#define CONVOY_KERNELS_REGISTRY_AUTOTUNER_H_

#include <algorithm>
#include <functional>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "kernels/common/status_macros.h"
#include "kernels/registry/algorithm_cache.h"
#include "kernels/registry/device.h"
#include "kernels/registry/registry.h"
#include "kernels/registry/residual_in_output.h"
#include "kernels/registry/verification.h"

namespace convoy {

enum class AlgorithmSelection { kHeuristic, kTune };

struct TuningOptions {
  int warmup_runs = 2;
  int timed_runs = 5;           // at least this many timed runs per candidate...
  double min_timed_ms = 20;     // ...and at least this much timed run time (short kernels run more often)...
  int max_timed_runs = 100;     // ...but never more runs than this
  // The two fastest candidates are re-timed in alternation when the second is within this factor of the first.
  double confirm_margin = 1.25;
  int confirm_rounds = 7;
  // A device's first runs in a process are slow in ways that have nothing to do with the candidate: OpenMP starts
  // oneDNN's team, idle cores wake up, pages are touched for the first time. Before the first candidate a device
  // times, every prepared candidate of that problem runs untimed, one run each in turn, for at least this many
  // milliseconds of run time (at least one round, at most max_timed_runs rounds). 0: off.
  double cold_start_warmup_ms = 200;
  // After the first pass every candidate slower than the fastest is timed again, in reverse order, with up to this
  // many runs (fewer for slow ones: see RecheckRuns), and keeps the faster of its two times, so that a slow spell
  // during its first pass (the cold start, a busy neighbour) does not decide against it. 0: off.
  int recheck_runs = 3;
  size_t max_workspace_bytes = size_t{256} << 20;
  // Checks every choice on the device before it is used (verification.h).
  VerificationOptions verification;
};

template <typename Op>
struct SelectedAlgorithm {
  const typename Op::AlgorithmType* algorithm = nullptr;
  size_t workspace_bytes = 0;
  bool from_cache = false;
  bool tuned = false;
  double time_ms = 0;  // measured time (the fastest timed run) when tuned
  bool verified = false;                     // its output was checked on the device (now or in an earlier run)
  std::vector<VerificationRecord> rejected;  // candidates this selection rejected (verified now and disagreed)
};

// Buffers with random contents for timing one problem on a device. Specialized for the ops that have several
// algorithms (tuning_buffers.cc); other ops are never timed (one algorithm each, or the heuristic decides).
template <typename Op>
struct TuningBuffers {
  static constexpr bool kSupported = false;
  static absl::StatusOr<std::unique_ptr<TuningBuffers>> Create(const typename Op::Problem&, Device&) {
    return absl::UnimplementedError("no tuning buffers for this op");
  }
  typename Op::Args args;
};

template <>
struct TuningBuffers<Conv2dOp> {
  static constexpr bool kSupported = true;
  static absl::StatusOr<std::unique_ptr<TuningBuffers>> Create(const Conv2dProblem& problem, Device& device);
  std::vector<DeviceAllocation> allocations;
  Conv2dArgs args;
};

template <>
struct TuningBuffers<GemmOp> {
  static constexpr bool kSupported = true;
  static absl::StatusOr<std::unique_ptr<TuningBuffers>> Create(const GemmProblem& problem, Device& device);
  std::vector<DeviceAllocation> allocations;
  GemmArgs args;
};

// INT8 convolutions: oneDNN's first choice and its jit_int8 kernels on the CPU (quantized_conv2d_onednn.h), the
// implicit-GEMM tile shapes on CUDA.
template <>
struct TuningBuffers<QuantizedConv2dOp> {
  static constexpr bool kSupported = true;
  static absl::StatusOr<std::unique_ptr<TuningBuffers>> Create(const QuantizedConv2dProblem& problem, Device& device);
  std::vector<DeviceAllocation> allocations;
  QuantizedConv2dArgs args;
};

namespace autotuner_internal {

// Points the filter argument of args at packed (per op).
inline void SetFilter(Conv2dArgs& args, const void* filter) { args.w = filter; }
inline const void* GetFilter(const Conv2dArgs& args) { return args.w; }
inline void SetFilter(GemmArgs& args, const void* filter) { args.b = filter; }
inline const void* GetFilter(const GemmArgs& args) { return args.b; }
inline void SetFilter(QuantizedConv2dArgs& args, const void* filter) { args.w = static_cast<const int8_t*>(filter); }
inline const void* GetFilter(const QuantizedConv2dArgs& args) { return args.w; }
template <typename Args>
void SetFilter(Args&, const void*) {}
template <typename Args>
const void* GetFilter(const Args&) { return nullptr; }

// An algorithm that adds the residual onto the output buffer (residual_in_output.h) runs in a plan with the output
// in the residual's storage wherever nothing reads the residual afterwards (every residual block of a ResNet), so it
// is timed that way, args.residual == args.y: with two buffers its runs would include a copy of the residual into
// the output that the plan never makes, and lose to candidates that read the residual where it is.
inline void TimeAsPlanned(const Conv2dAlgorithm& algorithm, const Conv2dProblem& problem, Conv2dArgs& args) {
  if (AccumulatesOntoOutput(algorithm, problem)) args.residual = args.y;
}
inline void TimeAsPlanned(const QuantizedConv2dAlgorithm& algorithm, const QuantizedConv2dProblem& problem,
                          QuantizedConv2dArgs& args) {
  if (AccumulatesOntoOutput(algorithm, problem)) args.residual = args.y;
}
template <typename Algorithm, typename Problem, typename Args>
void TimeAsPlanned(const Algorithm&, const Problem&, Args&) {}

double Median(std::vector<double> values);
// The smallest value (0 for none): a candidate's time from its runs.
double Fastest(const std::vector<double>& values);

// Verifies candidates of one problem on one device as SelectAlgorithm needs them: records are looked up in and
// added to `records` (the problem's cache entry's), the session with the inputs and the trusted result is made on
// first use, rejections are counted in AlgorithmRejections. With verification off every candidate is accepted.
template <typename Op>
class ChoiceVerifier {
 public:
  ChoiceVerifier(const typename Op::Problem& problem, Device& device, const VerificationOptions& options,
                 std::vector<VerificationRecord>& records)
      : problem_(problem), device_(device), options_(options), records_(records),
        enabled_(VerificationApplies<Op>(device, options)) {}

  bool enabled() const { return enabled_; }
  // True when `algorithm` may be used for the problem: verification is off, or its record passed.
  bool Accepts(const typename Op::AlgorithmType& algorithm) {
    if (!enabled_) return true;
    for (const VerificationRecord& r : records_) {
      if (r.algorithm == algorithm.name()) return r.passed;
    }
    if constexpr (VerificationSupported<Op>::value) {
      if (session_ == nullptr) session_ = std::make_unique<VerificationSession<Op>>(problem_, device_, options_);
      VerificationRecord record = session_->Verify(algorithm);
      added_ = true;
      records_.push_back(record);
      if (!record.passed) {
        AlgorithmRejections::Global().Record(record.algorithm, record.reason);
        rejected_.push_back(record);
      }
      return record.passed;
    } else {
      return true;
    }
  }
  // The record of a rejected candidate, for skip reasons.
  const VerificationRecord* Find(absl::string_view name) const {
    for (const VerificationRecord& r : records_) {
      if (r.algorithm == name) return &r;
    }
    return nullptr;
  }
  bool added() const { return added_; }
  const std::vector<VerificationRecord>& rejected() const { return rejected_; }

 private:
  const typename Op::Problem& problem_;
  Device& device_;
  const VerificationOptions& options_;
  std::vector<VerificationRecord>& records_;
  const bool enabled_;
  bool added_ = false;
  std::vector<VerificationRecord> rejected_;
  // The session exists (and is instantiated) only for the verified ops.
  std::conditional_t<VerificationSupported<Op>::value, std::unique_ptr<VerificationSession<Op>>, bool> session_{};
};

// Whether this is the first time the autotuner warms `device` up in this process (then it must, and later calls say
// false). Devices are told apart by address: a device must live as long as the process tunes on it.
bool ClaimColdStart(const Device& device);

// The recheck's run count for a candidate whose first pass measured `time_ms`: options.recheck_runs, cut so that
// the recheck costs about a quarter of options.min_timed_ms (slow candidates get one run), at least one.
int RecheckRuns(double time_ms, const TuningOptions& options);

// Re-times the two fastest ok candidates in alternation (options.confirm_rounds rounds, one run each per round) when
// they are within options.confirm_margin, and replaces their times with the alternating runs' fastest.
void ConfirmLeaders(std::vector<CandidateTiming>& candidates, const TuningOptions& options,
                    const std::function<absl::StatusOr<double>(size_t)>& time_one_run);

}  // namespace autotuner_internal

// One candidate ready to run: its workspace and (when it wants one) its packed filter, made once.
template <typename Op>
struct PreparedCandidate {
  const typename Op::AlgorithmType* algorithm = nullptr;
  typename Op::Args args;
  DeviceAllocation workspace;
  DeviceAllocation packed_filter;
  std::unique_ptr<AlgorithmState> state;  // Algorithm::Prepare's, made once
  size_t workspace_bytes = 0;
};

// Allocates the candidate's workspace and packs its filter; the status says why it cannot run.
template <typename Op>
absl::Status PrepareCandidate(const typename Op::Problem& problem, TuningBuffers<Op>& buffers, Device& device,
                              const TuningOptions& options, PreparedCandidate<Op>& prepared) {
  const auto& algorithm = *prepared.algorithm;
  prepared.workspace_bytes = algorithm.WorkspaceBytes(problem);
  if (prepared.workspace_bytes > options.max_workspace_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("needs ", prepared.workspace_bytes,
                                                     " workspace bytes, limit ", options.max_workspace_bytes));
  }
  CONVOY_ASSIGN_OR_RETURN(prepared.workspace, device.Allocate(prepared.workspace_bytes));
  CONVOY_ASSIGN_OR_RETURN(prepared.state, algorithm.Prepare(problem, device.context()));
  prepared.args = buffers.args;
  autotuner_internal::TimeAsPlanned(algorithm, problem, prepared.args);
  if (const size_t packed_bytes = algorithm.PackedFilterBytes(problem); packed_bytes > 0) {
    CONVOY_ASSIGN_OR_RETURN(prepared.packed_filter, device.Allocate(packed_bytes));
    CONVOY_RETURN_IF_ERROR(algorithm.PackFilter(problem, autotuner_internal::GetFilter(prepared.args),
                                                prepared.packed_filter.data(), device.context()));
    autotuner_internal::SetFilter(prepared.args, prepared.packed_filter.data());
  }
  return absl::OkStatus();
}

// Per-run milliseconds of a prepared candidate: `warmup` untimed runs, then `reps` timed ones.
template <typename Op>
absl::StatusOr<std::vector<double>> TimePrepared(const typename Op::Problem& problem, PreparedCandidate<Op>& prepared,
                                                 Device& device, int warmup, int reps) {
  const Workspace ws{prepared.workspace.data(), prepared.workspace_bytes, prepared.state.get()};
  const ExecutionContext context = device.context();
  return device.TimeRuns([&] { return prepared.algorithm->Run(problem, prepared.args, ws, context); }, warmup,
                         reps);
}

// Times a prepared candidate: warm-up, then timed runs until both options.timed_runs runs and options.min_timed_ms
// of run time are reached (short kernels get more runs, up to options.max_timed_runs). Fills record.ok and
// record.time_ms (the fastest run), or record.skip_reason with the run's error.
template <typename Op>
void MeasurePrepared(const typename Op::Problem& problem, PreparedCandidate<Op>& prepared, Device& device,
                     const TuningOptions& options, CandidateTiming& record) {
  auto times = TimePrepared<Op>(problem, prepared, device, options.warmup_runs, options.timed_runs);
  double total = 0;
  while (times.ok()) {
    for (double t : *times) total += t;
    const int done = static_cast<int>(times->size());
    if (total >= options.min_timed_ms || done >= options.max_timed_runs) break;
    auto more = TimePrepared<Op>(problem, prepared, device, 0, std::min(done, options.max_timed_runs - done));
    if (!more.ok()) {
      times = more.status();
      break;
    }
    total = 0;
    times->insert(times->end(), more->begin(), more->end());
  }
  if (!times.ok()) {
    record.skip_reason = std::string(times.status().message());
    return;
  }
  record.ok = true;
  record.time_ms = autotuner_internal::Fastest(*times);
}

// Prepares one algorithm (PrepareCandidate) and times it (MeasurePrepared). Returns the candidate record (ok, or
// with the skip reason); `keep`, when given, receives the prepared candidate.
template <typename Op>
CandidateTiming TimeCandidate(const typename Op::AlgorithmType& algorithm, const typename Op::Problem& problem,
                              TuningBuffers<Op>& buffers, Device& device, const TuningOptions& options,
                              PreparedCandidate<Op>* keep = nullptr) {
  CandidateTiming record;
  record.algorithm = std::string(algorithm.name());
  PreparedCandidate<Op> local;
  PreparedCandidate<Op>& prepared = keep != nullptr ? *keep : local;
  prepared.algorithm = &algorithm;
  absl::Status ready = PrepareCandidate<Op>(problem, buffers, device, options, prepared);
  record.workspace_bytes = prepared.workspace_bytes;
  if (!ready.ok()) {
    record.skip_reason = std::string(ready.message());
    return record;
  }
  MeasurePrepared<Op>(problem, prepared, device, options, record);
  return record;
}

// The cold-start warm-up (TuningOptions::cold_start_warmup_ms): every prepared candidate (null entries are skipped)
// runs untimed, one run each in turn, until the device's timer has counted the budget. Failed runs are ignored here
// (the timed pass records them).
template <typename Op>
void WarmUpColdDevice(const typename Op::Problem& problem,
                      const std::vector<std::unique_ptr<PreparedCandidate<Op>>>& prepared, Device& device,
                      const TuningOptions& options) {
  double spent_ms = 0;
  for (int round = 0; round < std::max(1, options.max_timed_runs); ++round) {
    for (const auto& candidate : prepared) {
      if (candidate == nullptr) continue;
      auto t = TimePrepared<Op>(problem, *candidate, device, 0, 1);
      if (t.ok()) spent_ms += t->front();
    }
    if (spent_ms >= options.cold_start_warmup_ms) return;
  }
}

// The recheck (TuningOptions::recheck_runs): every ok candidate slower than the fastest, in reverse order, timed
// again; the faster of its two times stays.
template <typename Op>
void RecheckSlowerCandidates(const typename Op::Problem& problem,
                             const std::vector<std::unique_ptr<PreparedCandidate<Op>>>& prepared, Device& device,
                             const TuningOptions& options, std::vector<CandidateTiming>& candidates) {
  if (options.recheck_runs <= 0) return;
  double fastest = 0;
  bool any = false;
  for (const CandidateTiming& c : candidates) {
    if (c.ok && (!any || c.time_ms < fastest)) fastest = c.time_ms, any = true;
  }
  for (size_t i = candidates.size(); i-- > 0;) {
    CandidateTiming& c = candidates[i];
    if (!c.ok || c.time_ms <= fastest || prepared[i] == nullptr) continue;
    auto times = TimePrepared<Op>(problem, *prepared[i], device, 0,
                                  autotuner_internal::RecheckRuns(c.time_ms, options));
    if (times.ok()) c.time_ms = std::min(c.time_ms, autotuner_internal::Fastest(*times));
  }
}

// Times every candidate and returns the cache entry (NOT_FOUND if none ran). Each candidate is verified first
// (`verifier`); a rejected one is skipped with the reason. Every candidate is prepared before any is timed, so that a
// device's first tuning in the process can warm it up with all of them (options.cold_start_warmup_ms). After the
// first pass the slower candidates are timed again in reverse order and keep their faster time
// (options.recheck_runs), and the two fastest, when within options.confirm_margin of each other, are timed again in
// alternation (A B A B ...): slow spells of a noisy machine (and the process's cold start) only ever make a run
// slower, so neither a candidate that ran during one nor one that ran during the quiet part decides by luck.
template <typename Op>
absl::StatusOr<CacheEntry> TuneProblem(const typename Op::Problem& problem, Device& device,
                                       const TuningOptions& options, autotuner_internal::ChoiceVerifier<Op>& verifier) {
  CONVOY_ASSIGN_OR_RETURN(auto buffers, TuningBuffers<Op>::Create(problem, device));
  CacheEntry entry;
  entry.tuned = true;
  // 1. Every candidate that implements the problem and verifies, prepared (workspace, packed filter, state); the
  //    others recorded with the reason. entry.candidates[i] and prepared[i] belong together (null: not timed).
  std::vector<std::unique_ptr<PreparedCandidate<Op>>> prepared;
  for (const auto* algorithm : OpRegistry<Op>::Global().All(device.backend())) {
    CandidateTiming record;
    record.algorithm = std::string(algorithm->name());
    absl::Status can = algorithm->CanImplement(problem);
    if (can.ok() && !verifier.Accepts(*algorithm)) {
      const VerificationRecord* r = verifier.Find(algorithm->name());
      can = absl::FailedPreconditionError(absl::StrCat("rejected by verification: ", r->reason, ", max error ",
                                                       r->max_error, " x the tolerance"));
    }
    auto candidate = std::make_unique<PreparedCandidate<Op>>();
    candidate->algorithm = algorithm;
    if (can.ok()) can = PrepareCandidate<Op>(problem, *buffers, device, options, *candidate);
    record.workspace_bytes = candidate->workspace_bytes;
    if (!can.ok()) {
      record.skip_reason = std::string(can.message());
      candidate = nullptr;
    }
    entry.candidates.push_back(std::move(record));
    prepared.push_back(std::move(candidate));
  }
  // 2. The device's first tuning in the process warms it up first.
  if (options.cold_start_warmup_ms > 0 && autotuner_internal::ClaimColdStart(device)) {
    WarmUpColdDevice<Op>(problem, prepared, device, options);
  }
  // 3. The first pass, 4. the recheck of the slower ones, 5. the leaders in alternation.
  for (size_t i = 0; i < prepared.size(); ++i) {
    if (prepared[i] != nullptr) MeasurePrepared<Op>(problem, *prepared[i], device, options, entry.candidates[i]);
  }
  RecheckSlowerCandidates<Op>(problem, prepared, device, options, entry.candidates);
  autotuner_internal::ConfirmLeaders(
      entry.candidates, options, [&](size_t i) -> absl::StatusOr<double> {
        auto t = TimePrepared<Op>(problem, *prepared[i], device, 0, 1);
        if (!t.ok()) return t.status();
        return t->front();
      });
  for (const CandidateTiming& timing : entry.candidates) {
    if (timing.ok && (entry.algorithm.empty() || timing.time_ms < entry.time_ms)) {
      entry.algorithm = timing.algorithm;
      entry.time_ms = timing.time_ms;
      entry.workspace_bytes = timing.workspace_bytes;
    }
  }
  if (entry.algorithm.empty()) {
    std::string reasons;
    for (const auto& c : entry.candidates) absl::StrAppend(&reasons, "\n  ", c.algorithm, ": ", c.skip_reason);
    return absl::NotFoundError(absl::StrCat("no algorithm could run ", problem.ToString(), reasons));
  }
  return entry;
}

// Times every candidate without verification (benchmarks that compare timings only).
template <typename Op>
absl::StatusOr<CacheEntry> TuneProblem(const typename Op::Problem& problem, Device& device,
                                       const TuningOptions& options) {
  std::vector<VerificationRecord> records;
  VerificationOptions off = options.verification;
  off.enabled = false;
  autotuner_internal::ChoiceVerifier<Op> verifier(problem, device, off, records);
  return TuneProblem<Op>(problem, device, options, verifier);
}

template <typename Op>
absl::StatusOr<SelectedAlgorithm<Op>> SelectAlgorithm(const typename Op::Problem& problem, Device& device,
                                                      AlgorithmCache& cache, AlgorithmSelection selection,
                                                      const TuningOptions& options = TuningOptions()) {
  using AlgorithmType = typename Op::AlgorithmType;
  CONVOY_RETURN_IF_ERROR(problem.Validate());
  const auto& registry = OpRegistry<Op>::Global();
  const std::string key = AlgorithmCache::MakeKey(Op::kKind, problem.ToString(), device.Identity());
  auto usable = [&](const std::string& name) -> const AlgorithmType* {
    const auto* a = registry.Find(name);
    return (a != nullptr && a->backend() == device.backend() && a->CanImplement(problem).ok()) ? a : nullptr;
  };
  const std::optional<CacheEntry> cached = cache.Lookup(key);
  std::vector<VerificationRecord> records;  // what is known about this problem on this device, and what is learnt
  if (cached.has_value()) records = cached->verifications;
  autotuner_internal::ChoiceVerifier<Op> verifier(problem, device, options.verification, records);
  auto chosen = [&](const AlgorithmType* a, const CacheEntry& entry, bool from_cache) {
    SelectedAlgorithm<Op> s;
    s.algorithm = a;
    s.workspace_bytes = a->WorkspaceBytes(problem);
    s.from_cache = from_cache;
    s.tuned = entry.tuned && entry.algorithm == a->name();
    s.time_ms = s.tuned ? entry.time_ms : 0;
    s.verified = verifier.enabled();
    s.rejected = verifier.rejected();
    return s;
  };
  // A tuned entry's choice, or if it fails verification the fastest of its timed candidates that verifies.
  auto from_entry = [&](const CacheEntry& entry) -> const AlgorithmType* {
    if (const auto* a = usable(entry.algorithm); a != nullptr && verifier.Accepts(*a)) return a;
    if (!entry.tuned) return nullptr;
    std::vector<const CandidateTiming*> timed;
    for (const CandidateTiming& c : entry.candidates) {
      if (c.ok) timed.push_back(&c);
    }
    std::sort(timed.begin(), timed.end(), [](auto* x, auto* y) { return x->time_ms < y->time_ms; });
    for (const CandidateTiming* c : timed) {
      if (const auto* a = usable(c->algorithm); a != nullptr && verifier.Accepts(*a)) return a;
    }
    return nullptr;
  };

  const bool can_tune = TuningBuffers<Op>::kSupported && selection == AlgorithmSelection::kTune &&
                        registry.Candidates(problem, device.backend()).size() > 1;
  // 1. What the cache knows: a tuned entry always; a heuristic one unless this selection tunes.
  if (cached.has_value() && (cached->tuned || !can_tune)) {
    if (const auto* a = from_entry(*cached)) {
      if (verifier.added()) cache.MergeVerifications(key, records, std::string(a->name()));
      return chosen(a, *cached, true);
    }
  }
  // 2. Tuning (or waiting for the thread that tunes this key).
  if (can_tune && cache.BeginTuning(key)) {
    const absl::Time start = absl::Now();
    auto tuned = TuneProblem<Op>(problem, device, options, verifier);
    if (tuned.ok()) tuned->verifications = records;
    cache.FinishTuning(key, tuned.ok() ? std::optional<CacheEntry>(*tuned) : std::nullopt,
                       absl::ToDoubleSeconds(absl::Now() - start));
    if (!tuned.ok()) return tuned.status();
  }
  if (auto peeked = cache.Peek(key); peeked.has_value() && peeked->tuned) {
    for (const VerificationRecord& r : peeked->verifications) {
      if (verifier.Find(r.algorithm) == nullptr) records.push_back(r);
    }
    if (const auto* a = from_entry(*peeked)) {
      if (verifier.added()) cache.MergeVerifications(key, records, std::string(a->name()));
      return chosen(a, *peeked, false);
    }
  }
  // 3. The heuristic's order, to the first candidate that verifies.
  CONVOY_ASSIGN_OR_RETURN(const std::vector<const AlgorithmType*> order,
                          registry.HeuristicOrder(problem, device.backend()));
  for (const AlgorithmType* a : order) {
    if (!verifier.Accepts(*a)) continue;
    CacheEntry entry;
    entry.algorithm = std::string(a->name());
    entry.workspace_bytes = a->WorkspaceBytes(problem);
    entry.verifications = records;
    if (verifier.enabled()) cache.InsertUnlessTuned(key, entry);  // keeps the verification across restarts
    return chosen(a, entry, false);
  }
  std::string reasons;
  for (const VerificationRecord& r : verifier.rejected()) {
    absl::StrAppend(&reasons, "\n  ", DescribeRejection(r, problem.ToString()));
  }
  return absl::FailedPreconditionError(
      absl::StrCat("every algorithm that implements ", problem.ToString(), " failed verification on ",
                   device.Identity(), reasons));
}

}  // namespace convoy

#endif  // CONVOY_KERNELS_REGISTRY_AUTOTUNER_H_
