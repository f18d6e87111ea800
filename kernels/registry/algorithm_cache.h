// The per-shape algorithm cache: one process-wide table from (problem, device, library version) to the algorithm
// that was measured fastest, shared by all models and threads.
//
// Key: MakeKey(op, problem.ToString(), device.Identity()) — the problem string lists every field, including dtype,
// layout and epilogue — plus the library version, so a new kernel library never trusts old measurements.
// Value: the chosen algorithm, its time, its workspace, every candidate's measured time or skip reason, and the
// verification record of every algorithm checked on the device for the problem (verification.h). Heuristic choices
// that were verified are entries too (tuned = false), so their verification survives a restart; a kTune selection
// still tunes such a key.
//
// Persistence: Save() writes a versioned text file atomically (temp file + rename); Load() reads one and merges its
// entries, or returns an error and leaves the cache untouched when the file is corrupt, truncated, or from another
// library version (callers log it as a warning and carry on). Files from other devices load fine: their keys simply
// never match here, which is how a fleet ships one file for all its GPU types.
//
// Thread safety: all methods are safe to call concurrently. BeginTuning/FinishTuning make sure one thread tunes a
// given key while the others wait for its result instead of timing the same candidates again.
#ifndef CONVOY_KERNELS_REGISTRY_ALGORITHM_CACHE_H_
#define CONVOY_KERNELS_REGISTRY_ALGORITHM_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/common/mutex.h"
#include "kernels/common/problems.h"

namespace convoy {

// Version of the kernel library, part of every cache key and of the cache file header. Bump it when an algorithm's
// behaviour or speed changes enough that old measurements (and verifications) should not be trusted.
// 0.2.0: split-K and 8-warp tensor-core candidates, the staged epilogue, verified choices.
inline constexpr const char kKernelLibraryVersion[] = "convoy-kernels-0.2.0";

// The outcome of comparing one algorithm's output for a problem with a trusted result on the device
// (verification.h). Kept in the problem's cache entry, so a saved cache file carries it across restarts.
struct VerificationRecord {
  std::string algorithm;
  bool passed = false;
  double max_error = 0;  // worst |actual - trusted| over the allowed deviation, across the output (<= 1 passes)
  std::string reason;    // when rejected: "mismatch", "non_finite" or "run_failed"
  std::string trusted;   // what it was compared with: "reference" (the CPU reference) or the trusted algorithm
  std::string detail;    // the worst element or the run's error (not saved to the cache file)
};

struct CandidateTiming {
  std::string algorithm;
  bool ok = false;
  // When ok: the candidate's time, the fastest of its timed runs (autotuner.h: a slow spell on a shared machine
  // only ever makes a run slower, so the fastest run is the candidate's own speed).
  double time_ms = 0;
  size_t workspace_bytes = 0;
  std::string skip_reason;  // when !ok: why it was not timed or failed
};

struct CacheEntry {
  std::string algorithm;
  double time_ms = 0;           // median of the chosen algorithm; 0 for heuristic picks
  size_t workspace_bytes = 0;
  bool tuned = false;           // measured (true) or heuristic (false)
  std::vector<CandidateTiming> candidates;
  std::vector<VerificationRecord> verifications;  // every algorithm verified for this problem on this device

  // The record of `algorithm`, or null when it was never verified here.
  const VerificationRecord* FindVerification(absl::string_view algorithm) const;
};

struct AlgorithmCacheStats {
  int64_t hits = 0;
  int64_t misses = 0;
  int64_t tunings = 0;
  double tuning_seconds = 0;
  int64_t entries = 0;
};

class AlgorithmCache {
 public:
  AlgorithmCache() = default;
  AlgorithmCache(const AlgorithmCache&) = delete;
  AlgorithmCache& operator=(const AlgorithmCache&) = delete;

  // The process-wide cache the runtime uses.
  static AlgorithmCache& Global();

  static std::string MakeKey(OpKind op, const std::string& problem, const std::string& device_identity);

  // Counts a hit or a miss.
  std::optional<CacheEntry> Lookup(const std::string& key);
  // Does not count (for inspection and export).
  std::optional<CacheEntry> Peek(const std::string& key) const;
  void Insert(const std::string& key, CacheEntry entry);
  // Inserts `entry` unless a tuned entry is there (a heuristic choice never replaces a measurement).
  void InsertUnlessTuned(const std::string& key, CacheEntry entry);
  // Adds to the entry at `key` (if any) the records of algorithms it has no record of; a tuned entry whose chosen
  // algorithm is rejected switches to `replacement` when given (the fastest candidate that verified).
  void MergeVerifications(const std::string& key, const std::vector<VerificationRecord>& records,
                          const std::string& replacement = "");

  // Tuning coordination. BeginTuning returns true if the caller must tune `key` (and then call FinishTuning): there
  // is no tuned entry for it (a heuristic entry does not count); false if another thread just finished tuning it
  // (Lookup will hit) or the caller should use its fallback because waiting timed out.
  bool BeginTuning(const std::string& key);
  void FinishTuning(const std::string& key, std::optional<CacheEntry> entry, double seconds);

  absl::Status Save(const std::string& path) const;
  // Returns how many entries were read.
  absl::StatusOr<int> Load(const std::string& path);
  std::string Serialize() const;
  absl::StatusOr<int> Deserialize(const std::string& text, const std::string& source_name);

  AlgorithmCacheStats stats() const;
  std::vector<std::string> Keys() const;
  void Clear();

 private:
  mutable convoy::Mutex mu_;
  absl::flat_hash_map<std::string, CacheEntry> entries_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> tuning_in_progress_ ABSL_GUARDED_BY(mu_);
  AlgorithmCacheStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace convoy

#endif  // CONVOY_KERNELS_REGISTRY_ALGORITHM_CACHE_H_
