// Adapters for plugin ABIs whose callbacks carry no context pointer (net v6..v10 devices/getProperties,
// profiler v4 recordEventState) cannot find "their" plugin from a C function pointer alone. Each such
// adapter is a template over a slot number; a loaded plugin takes a free slot and gets the function table
// instantiated for it. kAdapterSlots bounds how many plugins of one old version may be loaded at once.
#pragma once

#include <tutti/common.h>

#include <array>
#include <atomic>
#include <mutex>
#include <utility>

namespace tutti {

inline constexpr int kAdapterSlots = 16;

// Per-slot state of one old ABI version `Old`.
template <typename Old>
class AdapterSlots {
 public:
  struct Slot {
    std::atomic<const Old*> table{nullptr};
    // Old ABIs initialise once per process; the native init is per communicator. The first native init
    // runs the old one, later ones reuse its result.
    std::mutex initMutex;
    bool initDone = false;
    ncclResult_t initResult = ncclSuccess;
  };

  // Returns a free slot index for `table`, or -1 when all are taken.
  static int acquire(const Old* table) {
    std::lock_guard<std::mutex> lock(mutex());
    for (int i = 0; i < kAdapterSlots; ++i) {
      Slot& s = slots()[i];
      if (s.table.load() == nullptr) {
        s.initDone = false;
        s.initResult = ncclSuccess;
        s.table.store(table);
        return i;
      }
    }
    return -1;
  }
  static void release(int i) {
    std::lock_guard<std::mutex> lock(mutex());
    if (i >= 0 && i < kAdapterSlots) slots()[i].table.store(nullptr);
  }
  static Slot& at(int i) { return slots()[i]; }
  static const Old* table(int i) { return slots()[i].table.load(std::memory_order_acquire); }

  // Runs `init` once per slot (see Slot::initDone) and returns its result every time.
  template <typename F>
  static ncclResult_t initOnce(int i, F&& init) {
    Slot& s = slots()[i];
    std::lock_guard<std::mutex> lock(s.initMutex);
    if (!s.initDone) {
      s.initResult = init();
      s.initDone = true;
    }
    return s.initResult;
  }

 private:
  static std::array<Slot, kAdapterSlots>& slots() {
    static std::array<Slot, kAdapterSlots> s;
    return s;
  }
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
};

// tableForSlot<Native, Maker>(slot): Maker<S>::make() for the runtime slot S, built once per slot.
// Give every Maker a name unique across the core (InitV3, PerSlotV4, ...): same-named Makers in different
// files' anonymous namespaces were observed to share one instantiation of the static table.
template <typename Native, template <int> class Maker, int... S>
Native tableForSlotImpl(int slot, std::integer_sequence<int, S...>) {
  static const std::array<Native, sizeof...(S)> tables = {Maker<S>::make()...};
  return tables[slot];
}
template <typename Native, template <int> class Maker>
Native tableForSlot(int slot) {
  return tableForSlotImpl<Native, Maker>(slot, std::make_integer_sequence<int, kAdapterSlots>{});
}

}  // namespace tutti
