// The per-shape algorithm cache: one process-wide table from (problem, device, library version) to the algorithm
// that was measured fastest, shared by all models and threads.
//
// Key: MakeKey(op, problem.ToString(), device.Identity()) — the problem string lists every field, including dtype,
// layout and epilogue — plus the library version, so a new kernel library never trusts old measurements.
// Value: the chosen algorithm, its time, its workspace, and every candidate's measured time or skip reason.
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
#include "kernels/common/mutex.h"
#include "kernels/common/problems.h"

namespace convoy {

// Version of the kernel library, part of every cache key and of the cache file header. Bump it when an algorithm's
// behaviour or speed changes enough that old measurements should not be trusted.
inline constexpr const char kKernelLibraryVersion[] = "convoy-kernels-0.1.0";

struct CandidateTiming {
  std::string algorithm;
  bool ok = false;
  double median_ms = 0;        // when ok
  size_t workspace_bytes = 0;
  std::string skip_reason;     // when !ok: why it was not timed or failed
};

struct CacheEntry {
  std::string algorithm;
  double time_ms = 0;           // median of the chosen algorithm; 0 for heuristic picks
  size_t workspace_bytes = 0;
  bool tuned = false;           // measured (true) or heuristic (false)
  std::vector<CandidateTiming> candidates;
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

  // Tuning coordination. BeginTuning returns true if the caller must tune `key` (and then call FinishTuning);
  // false if another thread just finished tuning it (Lookup will hit) or the caller should use its fallback because
  // waiting timed out.
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
