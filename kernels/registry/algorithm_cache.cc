#include "kernels/registry/algorithm_cache.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace convoy {
namespace {

constexpr char kFileMagic[] = "convoy-algorithm-cache";
constexpr int kFileFormat = 2;  // 2: a seventh field, the verification records

uint64_t Fnv1a(const std::string& text) {
  uint64_t h = 14695981039346656037ull;  // FNV-1a 64-bit offset basis
  for (unsigned char ch : text) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return h;
}

// Fields are tab-separated; keys and names never hold tabs or newlines, reasons are sanitized.
std::string Sanitize(std::string s) {
  for (char& ch : s) {
    if (ch == '\t' || ch == '\n' || ch == '\r' || ch == '|' || ch == ';') ch = ' ';
  }
  return s;
}

std::string SerializeCandidates(const std::vector<CandidateTiming>& candidates) {
  std::string out;
  for (const auto& c : candidates) {
    if (!out.empty()) out += ';';
    if (c.ok) {
      absl::StrAppend(&out, Sanitize(c.algorithm), "|ok|", c.time_ms, "|", c.workspace_bytes);
    } else {
      absl::StrAppend(&out, Sanitize(c.algorithm), "|skip|", Sanitize(c.skip_reason), "|", c.workspace_bytes);
    }
  }
  return out;
}

absl::StatusOr<std::vector<CandidateTiming>> ParseCandidates(const std::string& text) {
  std::vector<CandidateTiming> out;
  if (text.empty()) return out;
  for (absl::string_view item : absl::StrSplit(text, ';')) {
    std::vector<std::string> f = absl::StrSplit(item, '|');
    if (f.size() != 4) return absl::DataLossError(absl::StrCat("bad candidate '", item, "'"));
    CandidateTiming c;
    c.algorithm = f[0];
    c.ok = f[1] == "ok";
    if (c.ok && !absl::SimpleAtod(f[2], &c.time_ms)) return absl::DataLossError("bad candidate time");
    if (!c.ok) c.skip_reason = f[2];
    if (!absl::SimpleAtoi(f[3], &c.workspace_bytes)) return absl::DataLossError("bad candidate workspace");
    out.push_back(std::move(c));
  }
  return out;
}

// name|pass|max_error|trusted or name|reject:reason|max_error|trusted, ';'-separated.
std::string SerializeVerifications(const std::vector<VerificationRecord>& records) {
  std::string out;
  for (const auto& r : records) {
    if (!out.empty()) out += ';';
    absl::StrAppend(&out, Sanitize(r.algorithm), "|", r.passed ? "pass" : absl::StrCat("reject:", Sanitize(r.reason)),
                    "|", r.max_error, "|", Sanitize(r.trusted));
  }
  return out;
}

absl::StatusOr<std::vector<VerificationRecord>> ParseVerifications(const std::string& text) {
  std::vector<VerificationRecord> out;
  if (text.empty()) return out;
  for (absl::string_view item : absl::StrSplit(text, ';')) {
    std::vector<std::string> f = absl::StrSplit(item, '|');
    if (f.size() != 4) return absl::DataLossError(absl::StrCat("bad verification record '", item, "'"));
    VerificationRecord r;
    r.algorithm = f[0];
    r.passed = f[1] == "pass";
    if (!r.passed) {
      if (!absl::StartsWith(f[1], "reject:")) return absl::DataLossError(absl::StrCat("bad verdict '", f[1], "'"));
      r.reason = f[1].substr(7);
    }
    if (!absl::SimpleAtod(f[2], &r.max_error)) return absl::DataLossError("bad verification error");
    r.trusted = f[3];
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

const VerificationRecord* CacheEntry::FindVerification(absl::string_view name) const {
  for (const VerificationRecord& r : verifications) {
    if (r.algorithm == name) return &r;
  }
  return nullptr;
}

AlgorithmCache& AlgorithmCache::Global() {
  static AlgorithmCache* cache = new AlgorithmCache();
  return *cache;
}

std::string AlgorithmCache::MakeKey(OpKind op, const std::string& problem, const std::string& device_identity) {
  return Sanitize(absl::StrCat(OpKindName(op), " @ ", device_identity, " @ ", kKernelLibraryVersion, " @ ", problem));
}

std::optional<CacheEntry> AlgorithmCache::Lookup(const std::string& key) {
  convoy::MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    ++stats_.misses;
    return std::nullopt;
  }
  ++stats_.hits;
  return it->second;
}

std::optional<CacheEntry> AlgorithmCache::Peek(const std::string& key) const {
  convoy::MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

void AlgorithmCache::Insert(const std::string& key, CacheEntry entry) {
  convoy::MutexLock lock(&mu_);
  entries_[key] = std::move(entry);
}

void AlgorithmCache::InsertUnlessTuned(const std::string& key, CacheEntry entry) {
  convoy::MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it != entries_.end() && it->second.tuned) return;
  entries_[key] = std::move(entry);
}

void AlgorithmCache::MergeVerifications(const std::string& key, const std::vector<VerificationRecord>& records,
                                        const std::string& replacement) {
  convoy::MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  CacheEntry& entry = it->second;
  for (const VerificationRecord& r : records) {
    if (entry.FindVerification(r.algorithm) == nullptr) entry.verifications.push_back(r);
  }
  const VerificationRecord* chosen = entry.FindVerification(entry.algorithm);
  if (chosen != nullptr && !chosen->passed && !replacement.empty()) {
    entry.algorithm = replacement;
    for (const CandidateTiming& c : entry.candidates) {
      if (c.algorithm == replacement) entry.time_ms = c.time_ms, entry.workspace_bytes = c.workspace_bytes;
    }
  }
}

bool AlgorithmCache::BeginTuning(const std::string& key) {
  convoy::MutexLock lock(&mu_);
  if (auto it = entries_.find(key); it != entries_.end() && it->second.tuned) return false;
  if (!tuning_in_progress_.contains(key)) {
    tuning_in_progress_.insert(key);
    return true;
  }
  // Another thread is tuning this key: wait for it (bounded, so a stuck tuner never wedges a caller).
  struct Waiting {
    AlgorithmCache* cache;
    const std::string* key;
  } waiting{this, &key};
  mu_.AwaitWithTimeout(absl::Condition(
                           +[](Waiting* w) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                             return !w->cache->tuning_in_progress_.contains(*w->key);
                           },
                           &waiting),
                       absl::Seconds(120));
  return false;
}

void AlgorithmCache::FinishTuning(const std::string& key, std::optional<CacheEntry> entry, double seconds) {
  convoy::MutexLock lock(&mu_);
  tuning_in_progress_.erase(key);
  ++stats_.tunings;
  stats_.tuning_seconds += seconds;
  if (entry.has_value()) {
    entry->tuned = true;  // what a tuning produced, whatever the caller filled in
    entries_[key] = std::move(*entry);
  }
}

std::string AlgorithmCache::Serialize() const {
  std::string body;
  {
    convoy::MutexLock lock(&mu_);
    // Sorted so that the same cache always writes the same file.
    std::vector<const std::pair<const std::string, CacheEntry>*> sorted;
    for (const auto& kv : entries_) sorted.push_back(&kv);
    std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->first < b->first; });
    for (const auto* kv : sorted) {
      const CacheEntry& e = kv->second;
      absl::StrAppend(&body, kv->first, "\t", Sanitize(e.algorithm), "\t", e.time_ms, "\t", e.workspace_bytes, "\t",
                      e.tuned ? "tuned" : "heuristic", "\t", SerializeCandidates(e.candidates), "\t",
                      SerializeVerifications(e.verifications), "\n");
    }
  }
  std::string header = absl::StrCat(kFileMagic, " ", kFileFormat, "\nlibrary ", kKernelLibraryVersion, "\n");
  return absl::StrCat(header, body, "checksum ", Fnv1a(body), "\n");
}

absl::StatusOr<int> AlgorithmCache::Deserialize(const std::string& text, const std::string& source_name) {
  auto corrupt = [&](const std::string& why) {
    return absl::DataLossError(absl::StrCat("algorithm cache ", source_name, " ignored: ", why));
  };
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  if (lines.size() < 3 || lines[0] != absl::StrCat(kFileMagic, " ", kFileFormat)) {
    return corrupt(absl::StrCat("expected first line '", kFileMagic, " ", kFileFormat, "'"));
  }
  if (lines[1] != absl::StrCat("library ", kKernelLibraryVersion)) {
    return absl::FailedPreconditionError(absl::StrCat("algorithm cache ", source_name, " ignored: it is for ",
                                                      lines[1], ", this is ", kKernelLibraryVersion));
  }
  // Find the checksum line; everything between the header and it is the body.
  size_t end = lines.size();
  while (end > 2 && lines[end - 1].empty()) --end;
  if (end <= 2 || !absl::StartsWith(lines[end - 1], "checksum ")) return corrupt("truncated (no checksum line)");
  std::string body;
  for (size_t i = 2; i + 1 < end; ++i) absl::StrAppend(&body, lines[i], "\n");
  uint64_t checksum = 0;
  if (!absl::SimpleAtoi(lines[end - 1].substr(9), &checksum) || checksum != Fnv1a(body)) {
    return corrupt("checksum mismatch (the file is damaged)");
  }
  absl::flat_hash_map<std::string, CacheEntry> parsed;
  for (size_t i = 2; i + 1 < end; ++i) {
    std::vector<std::string> f = absl::StrSplit(lines[i], '\t');
    if (f.size() != 7) return corrupt(absl::StrCat("line ", i + 1, " has ", f.size(), " fields, expected 7"));
    CacheEntry e;
    e.algorithm = f[1];
    if (!absl::SimpleAtod(f[2], &e.time_ms) || !absl::SimpleAtoi(f[3], &e.workspace_bytes)) {
      return corrupt(absl::StrCat("line ", i + 1, " has a bad number"));
    }
    e.tuned = f[4] == "tuned";
    auto candidates = ParseCandidates(f[5]);
    if (!candidates.ok()) return corrupt(absl::StrCat("line ", i + 1, ": ", candidates.status().message()));
    e.candidates = std::move(candidates).value();
    auto verifications = ParseVerifications(f[6]);
    if (!verifications.ok()) return corrupt(absl::StrCat("line ", i + 1, ": ", verifications.status().message()));
    e.verifications = std::move(verifications).value();
    parsed[f[0]] = std::move(e);
  }
  convoy::MutexLock lock(&mu_);
  for (auto& kv : parsed) entries_[kv.first] = std::move(kv.second);
  return static_cast<int>(parsed.size());
}

absl::Status AlgorithmCache::Save(const std::string& path) const {
  const std::string text = Serialize();
  const std::string tmp = absl::StrCat(path, ".tmp.", absl::ToUnixNanos(absl::Now()));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return absl::UnavailableError(absl::StrCat("cannot write algorithm cache temp file ", tmp));
    out << text;
    out.flush();
    if (!out) return absl::UnavailableError(absl::StrCat("short write to ", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return absl::UnavailableError(absl::StrCat("cannot rename ", tmp, " to ", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> AlgorithmCache::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("algorithm cache file ", path, " not found"));
  std::stringstream ss;
  ss << in.rdbuf();
  return Deserialize(ss.str(), path);
}

AlgorithmCacheStats AlgorithmCache::stats() const {
  convoy::MutexLock lock(&mu_);
  AlgorithmCacheStats s = stats_;
  s.entries = static_cast<int64_t>(entries_.size());
  return s;
}

std::vector<std::string> AlgorithmCache::Keys() const {
  convoy::MutexLock lock(&mu_);
  std::vector<std::string> keys;
  for (const auto& kv : entries_) keys.push_back(kv.first);
  std::sort(keys.begin(), keys.end());
  return keys;
}

void AlgorithmCache::Clear() {
  convoy::MutexLock lock(&mu_);
  entries_.clear();
  stats_ = AlgorithmCacheStats();
}

}  // namespace convoy
