#include "comm/registry.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace tutti {
namespace {

// Open addressing with linear probing over atomic slots (0 = empty). Deletion shifts later entries of
// the probe run back (no tombstones, so create/destroy churn never degrades lookups), which may move an
// entry past a concurrent reader: readers therefore validate against a sequence counter (seqlock) and
// retry when a writer ran meanwhile. Writers are rare (init/destroy) and serialised by a mutex.
struct Table {
  explicit Table(size_t capacity) : mask(capacity - 1), slots(new std::atomic<uintptr_t>[capacity]) {
    for (size_t i = 0; i < capacity; ++i) slots[i].store(0, std::memory_order_relaxed);
  }
  size_t home(uintptr_t key) const { return size_t((key >> 4) * 0x9e3779b97f4a7c15ull >> 20) & mask; }
  const size_t mask;
  std::unique_ptr<std::atomic<uintptr_t>[]> slots;
};

constexpr size_t kInitialCapacity = 64;  // kept at most half full

struct Registry {
  std::mutex writer;
  std::atomic<uint64_t> sequence{0};  // odd while a writer modifies the table
  std::atomic<Table*> table{nullptr};
  // Every table ever published: a reader may still probe a replaced one. Capacities double, so this
  // holds less than twice the memory of the current table.
  std::vector<std::unique_ptr<Table>> tables;
  size_t live = 0;

  Registry() {
    tables.push_back(std::make_unique<Table>(kInitialCapacity));
    table.store(tables.back().get(), std::memory_order_release);
  }
};

// Never destroyed: communicators may be destroyed from static destructors of the application.
Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

// Index of `key` in `t`, or -1. Relaxed loads: callers validate with the sequence counter.
long find(const Table& t, uintptr_t key) {
  for (size_t i = t.home(key);; i = (i + 1) & t.mask) {
    const uintptr_t v = t.slots[i].load(std::memory_order_relaxed);
    if (v == key) return long(i);
    if (v == 0) return -1;
  }
}

void insert(Table& t, uintptr_t key) {
  size_t i = t.home(key);
  while (t.slots[i].load(std::memory_order_relaxed) != 0) i = (i + 1) & t.mask;
  t.slots[i].store(key, std::memory_order_relaxed);
}

// Empties slot i and moves back every later entry of the run whose home position no longer reaches it.
void eraseAt(Table& t, size_t i) {
  t.slots[i].store(0, std::memory_order_relaxed);
  for (size_t j = (i + 1) & t.mask;; j = (j + 1) & t.mask) {
    const uintptr_t v = t.slots[j].load(std::memory_order_relaxed);
    if (v == 0) return;
    const size_t k = t.home(v);
    // v may stay at j when its home k lies cyclically in (i, j].
    const bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
    if (stays) continue;
    t.slots[i].store(v, std::memory_order_relaxed);
    t.slots[j].store(0, std::memory_order_relaxed);
    i = j;
  }
}

// Brackets a modification for readers (seqlock write side). Caller holds the writer mutex.
struct WriteSection {
  explicit WriteSection(Registry& r) : r(r), start(r.sequence.load(std::memory_order_relaxed)) {
    r.sequence.store(start + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
  }
  ~WriteSection() { r.sequence.store(start + 2, std::memory_order_release); }
  Registry& r;
  const uint64_t start;
};

}  // namespace

void commRegistryAdd(const void* comm) {
  if (comm == nullptr) return;
  Registry& r = registry();
  const auto key = reinterpret_cast<uintptr_t>(comm);
  std::lock_guard<std::mutex> lock(r.writer);
  Table* t = r.table.load(std::memory_order_relaxed);
  if (find(*t, key) >= 0) return;  // already registered
  if (2 * (r.live + 1) > t->mask + 1) {
    // Grow first, outside the write section: readers keep using the old (still correct) table.
    auto bigger = std::make_unique<Table>(2 * (t->mask + 1));
    for (size_t i = 0; i <= t->mask; ++i)
      if (const uintptr_t v = t->slots[i].load(std::memory_order_relaxed)) insert(*bigger, v);
    insert(*bigger, key);
    WriteSection w(r);
    r.table.store(bigger.get(), std::memory_order_release);
    r.tables.push_back(std::move(bigger));
  } else {
    WriteSection w(r);
    insert(*t, key);
  }
  ++r.live;
}

void commRegistryRemove(const void* comm) {
  if (comm == nullptr) return;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.writer);
  Table* t = r.table.load(std::memory_order_relaxed);
  const long i = find(*t, reinterpret_cast<uintptr_t>(comm));
  if (i < 0) return;  // never registered, or already removed
  WriteSection w(r);
  eraseAt(*t, size_t(i));
  --r.live;
}

namespace {

// The communicator this thread last found, and the sequence it was found under: while the sequence has not moved
// (every change to the table moves it) it is still there, and a call on it costs two loads rather than a probe.
// Initial-exec: one load from the thread pointer each, no __tls_get_addr call.
[[gnu::tls_model("initial-exec")]] thread_local uintptr_t tFoundKey = 0;  // 0: none yet
[[gnu::tls_model("initial-exec")]] thread_local uint64_t tFoundSequence = 0;
[[gnu::tls_model("initial-exec")]] thread_local const std::atomic<uint64_t>* tSequence = nullptr;

[[gnu::noinline]] bool containsProbed(uintptr_t key) {
  Registry& r = registry();
  for (;;) {
    const uint64_t before = r.sequence.load(std::memory_order_acquire);
    if (before & 1) {  // a writer is in the middle of a change (rare, and short)
      std::this_thread::yield();
      continue;
    }
    const bool found = find(*r.table.load(std::memory_order_acquire), key) >= 0;
    std::atomic_thread_fence(std::memory_order_acquire);
    if (r.sequence.load(std::memory_order_relaxed) == before) {
      if (found) {
        tSequence = &r.sequence;
        tFoundSequence = before;
        tFoundKey = key;
      }
      return found;
    }
  }
}

}  // namespace

bool commRegistryContains(const void* comm) {
  const auto key = reinterpret_cast<uintptr_t>(comm);
  if (key == 0) return false;
  if (key == tFoundKey && tSequence->load(std::memory_order_acquire) == tFoundSequence) return true;
  return containsProbed(key);
}

size_t commRegistrySize() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.writer);
  return r.live;
}

}  // namespace tutti
