// The communicator registry (comm/registry.h): idempotent add/remove, growth, deletion inside probe runs,
// and lookups racing with writers (no false answer for a key whose state does not change meanwhile).
#include "comm/registry.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace tutti {
namespace {

// Distinct fake handles: addresses inside one buffer, 16 bytes apart (like heap blocks), never read.
class Keys {
 public:
  explicit Keys(size_t n) : bytes_(16 * n + 16) {}
  const void* operator[](size_t i) const { return bytes_.data() + 16 * i; }

 private:
  std::vector<unsigned char> bytes_;
};

TEST(CommRegistry, AddRemoveAreIdempotent) {
  Keys k(2);
  const size_t before = commRegistrySize();
  EXPECT_FALSE(commRegistryContains(k[0]));
  commRegistryAdd(k[0]);
  commRegistryAdd(k[0]);  // early registration, then again when complete
  EXPECT_TRUE(commRegistryContains(k[0]));
  EXPECT_FALSE(commRegistryContains(k[1]));
  EXPECT_EQ(commRegistrySize(), before + 1);
  commRegistryRemove(k[0]);
  commRegistryRemove(k[0]);
  commRegistryRemove(k[1]);  // never registered
  EXPECT_FALSE(commRegistryContains(k[0]));
  EXPECT_EQ(commRegistrySize(), before);
  commRegistryAdd(nullptr);
  EXPECT_FALSE(commRegistryContains(nullptr));
}

// A thread remembers the communicator it found last; a removal by any thread, or one added in its place, is seen
// on its next lookup.
TEST(CommRegistry, ALookupSeesRemovalsByOtherThreads) {
  Keys k(2);
  commRegistryAdd(k[0]);
  ASSERT_TRUE(commRegistryContains(k[0]));
  ASSERT_TRUE(commRegistryContains(k[0]));  // the remembered answer
  std::thread([&] { commRegistryRemove(k[0]); }).join();
  EXPECT_FALSE(commRegistryContains(k[0]));
  std::thread([&] { commRegistryAdd(k[1]); }).join();
  EXPECT_FALSE(commRegistryContains(k[0]));
  EXPECT_TRUE(commRegistryContains(k[1]));
  std::thread([&] {
    commRegistryRemove(k[1]);
    commRegistryAdd(k[0]);
  }).join();
  EXPECT_FALSE(commRegistryContains(k[1]));
  EXPECT_TRUE(commRegistryContains(k[0]));
  commRegistryRemove(k[0]);
  EXPECT_FALSE(commRegistryContains(k[0]));
}

TEST(CommRegistry, GrowsAndKeepsEveryKeyThroughRemovals) {
  constexpr size_t kN = 5000;  // many times the initial capacity
  Keys k(kN);
  for (size_t i = 0; i < kN; ++i) commRegistryAdd(k[i]);
  for (size_t i = 0; i < kN; ++i) ASSERT_TRUE(commRegistryContains(k[i])) << i;
  // Removing every third key shifts later entries of each probe run back; none may get lost.
  for (size_t i = 0; i < kN; i += 3) commRegistryRemove(k[i]);
  for (size_t i = 0; i < kN; ++i) ASSERT_EQ(commRegistryContains(k[i]), i % 3 != 0) << i;
  for (size_t i = 0; i < kN; ++i) commRegistryRemove(k[i]);
  for (size_t i = 0; i < kN; ++i) ASSERT_FALSE(commRegistryContains(k[i])) << i;
}

TEST(CommRegistry, LookupsRaceWithWriters) {
  constexpr size_t kPinned = 64, kChurn = 4000, kAbsent = 64;
  Keys k(kPinned + kChurn + kAbsent);
  for (size_t i = 0; i < kPinned; ++i) commRegistryAdd(k[i]);
  std::atomic<bool> stop{false};
  std::atomic<long> wrong{0}, lookups{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 2; ++t) {
    readers.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        for (size_t i = 0; i < kPinned; ++i) wrong += !commRegistryContains(k[i]);
        for (size_t i = 0; i < kAbsent; ++i) wrong += commRegistryContains(k[kPinned + kChurn + i]);
        lookups += kPinned + kAbsent;
      }
    });
  }
  // Writers grow the table and shift entries around the pinned keys.
  for (int round = 0; round < 100; ++round) {
    for (size_t i = 0; i < kChurn; ++i) commRegistryAdd(k[kPinned + i]);
    for (size_t i = 0; i < kChurn; ++i) commRegistryRemove(k[kPinned + (i * 7919) % kChurn]);
  }
  stop = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(wrong.load(), 0) << "of " << lookups.load() << " lookups";
  EXPECT_GT(lookups.load(), 0);
  for (size_t i = 0; i < kPinned; ++i) commRegistryRemove(k[i]);
}

}  // namespace
}  // namespace tutti
