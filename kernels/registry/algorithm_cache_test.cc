#include "kernels/registry/algorithm_cache.h"

#include <atomic>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"

namespace convoy {
namespace {

using ::convoy::testing::IsOk;
using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

CacheEntry RandomEntry(std::mt19937& rng) {
  CacheEntry e;
  e.algorithm = "cpu.conv2d.alg" + std::to_string(rng() % 5);
  e.time_ms = (rng() % 100000) / 1000.0;
  e.workspace_bytes = rng() % 100000;
  e.tuned = rng() % 2;
  for (int i = 0; i < 3; ++i) {
    CandidateTiming c;
    c.algorithm = "cpu.conv2d.alg" + std::to_string(i);
    c.ok = i != 1;
    c.time_ms = c.ok ? (rng() % 1000) / 7.0 : 0;
    c.skip_reason = c.ok ? "" : "needs 99 workspace bytes, limit 10";
    c.workspace_bytes = rng() % 1000;
    e.candidates.push_back(c);
  }
  return e;
}

std::string KeyFor(int i) {
  Conv2dProblem p;
  p.n = 1 + i % 4, p.h = 8 + i, p.w = 8 + i, p.c = 16, p.k = 32, p.r = p.s = 3;
  return AlgorithmCache::MakeKey(OpKind::kConv2d, p.ToString(), "cpu:test:threads=2");
}

TEST(AlgorithmCacheTest, KeysIncludeDeviceAndVersion) {
  const std::string a = AlgorithmCache::MakeKey(OpKind::kConv2d, "conv2d n=1", "cpu:A:threads=2");
  const std::string b = AlgorithmCache::MakeKey(OpKind::kConv2d, "conv2d n=1", "cpu:A:threads=1");
  EXPECT_NE(a, b);
  EXPECT_THAT(a, HasSubstr(kKernelLibraryVersion));
  EXPECT_THAT(a, HasSubstr("cpu:A:threads=2"));
}

TEST(AlgorithmCacheTest, LookupCountsHitsAndMisses) {
  AlgorithmCache cache;
  EXPECT_FALSE(cache.Lookup(KeyFor(0)).has_value());
  std::mt19937 rng(1);
  cache.Insert(KeyFor(0), RandomEntry(rng));
  EXPECT_TRUE(cache.Lookup(KeyFor(0)).has_value());
  EXPECT_TRUE(cache.Lookup(KeyFor(0)).has_value());
  const AlgorithmCacheStats s = cache.stats();
  EXPECT_EQ(s.hits, 2);
  EXPECT_EQ(s.misses, 1);
  EXPECT_EQ(s.entries, 1);
}

TEST(AlgorithmCacheTest, SaveLoadRoundTrip) {
  std::mt19937 rng(std::random_device{}());
  AlgorithmCache cache;
  std::vector<CacheEntry> entries;
  for (int i = 0; i < 20; ++i) {
    entries.push_back(RandomEntry(rng));
    cache.Insert(KeyFor(i), entries.back());
  }
  const std::string path = TempPath("roundtrip.cache");
  ASSERT_THAT(cache.Save(path), IsOk());
  AlgorithmCache loaded;
  auto count = loaded.Load(path);
  ASSERT_THAT(count, IsOk());
  EXPECT_EQ(*count, 20);
  for (int i = 0; i < 20; ++i) {
    auto e = loaded.Peek(KeyFor(i));
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->algorithm, entries[i].algorithm);
    EXPECT_DOUBLE_EQ(e->time_ms, entries[i].time_ms);
    EXPECT_EQ(e->workspace_bytes, entries[i].workspace_bytes);
    EXPECT_EQ(e->tuned, entries[i].tuned);
    ASSERT_EQ(e->candidates.size(), entries[i].candidates.size());
    for (size_t j = 0; j < e->candidates.size(); ++j) {
      EXPECT_EQ(e->candidates[j].algorithm, entries[i].candidates[j].algorithm);
      EXPECT_EQ(e->candidates[j].ok, entries[i].candidates[j].ok);
      EXPECT_EQ(e->candidates[j].skip_reason, entries[i].candidates[j].skip_reason);
    }
  }
  EXPECT_EQ(loaded.Serialize(), cache.Serialize());
}

TEST(AlgorithmCacheTest, CorruptTruncatedAndForeignFilesAreIgnored) {
  std::mt19937 rng(3);
  AlgorithmCache cache;
  for (int i = 0; i < 5; ++i) cache.Insert(KeyFor(i), RandomEntry(rng));
  const std::string text = cache.Serialize();

  AlgorithmCache target;
  target.Insert(KeyFor(100), RandomEntry(rng));
  // Truncated at every length: never crashes, never partially loads.
  for (size_t len = 0; len + 1 < text.size(); len += 7) {
    auto r = target.Deserialize(text.substr(0, len), "truncated");
    EXPECT_FALSE(r.ok()) << "length " << len;
  }
  // One flipped byte in the body.
  std::string flipped = text;
  flipped[flipped.find('\t') + 2] ^= 0x5;
  EXPECT_THAT(target.Deserialize(flipped, "flipped"),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("checksum mismatch")));
  // Another library version.
  std::string foreign = text;
  foreign.replace(foreign.find(kKernelLibraryVersion), std::string(kKernelLibraryVersion).size(), "convoy-kernels-9");
  EXPECT_THAT(target.Deserialize(foreign, "foreign"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("convoy-kernels-9")));
  EXPECT_THAT(target.Deserialize("garbage\x01\x02", "garbage"), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("garbage")));
  EXPECT_EQ(target.stats().entries, 1) << "failed loads must leave the cache untouched";
  EXPECT_THAT(target.Load(TempPath("does-not-exist.cache")), StatusIs(absl::StatusCode::kNotFound, HasSubstr("not found")));
}

TEST(AlgorithmCacheTest, SaveIsAtomicReplace) {
  std::mt19937 rng(4);
  const std::string path = TempPath("atomic.cache");
  {
    std::ofstream out(path);
    out << "old contents";
  }
  AlgorithmCache cache;
  cache.Insert(KeyFor(1), RandomEntry(rng));
  ASSERT_THAT(cache.Save(path), IsOk());
  AlgorithmCache loaded;
  EXPECT_THAT(loaded.Load(path), IsOk());
  EXPECT_EQ(loaded.stats().entries, 1);
}

// Many threads look up, insert and tune overlapping keys; exactly one thread tunes each key. Run under tsan too.
TEST(AlgorithmCacheTest, ConcurrentTuningTunesEachKeyOnce) {
  AlgorithmCache cache;
  constexpr int kKeys = 16, kThreads = 8;
  std::atomic<int> tunings_started{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int round = 0; round < 3; ++round) {
        for (int i = 0; i < kKeys; ++i) {
          const std::string key = KeyFor((i + t) % kKeys);
          if (cache.Lookup(key).has_value()) continue;
          if (cache.BeginTuning(key)) {
            tunings_started.fetch_add(1);
            std::this_thread::sleep_for(std::chrono::microseconds(200));
            cache.FinishTuning(key, RandomEntry(rng), 0.0002);
          } else {
            EXPECT_TRUE(cache.Peek(key).has_value()) << "waiter returned before the tuner finished";
          }
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(tunings_started.load(), kKeys);
  EXPECT_EQ(cache.stats().entries, kKeys);
  EXPECT_EQ(cache.stats().tunings, kKeys);
  EXPECT_GT(cache.stats().tuning_seconds, 0);
}

}  // namespace
}  // namespace convoy
