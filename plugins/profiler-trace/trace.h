// Event records of the trace profiler: one fixed-size Record per started event, taken from a bounded
// pool, filled at startEvent / recordEventState / stopEvent and turned into JSON only at finalize.
#pragma once

#include <tutti/profiler.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "options.h"

namespace tutti::profilertrace {

// Names from the core (func, datatype, algo, proto) are valid only during the call: copied, truncated.
constexpr int kNameLen = 16;
// State changes kept per event (a proxy step goes through at most three in each direction).
constexpr int kMaxStates = 6;
// Channel of a proxy step / net event whose parent was dropped or not traced.
constexpr uint8_t kUnknownChannel = 255;

struct StateMark {
  int64_t ns;
  int32_t state;  // ncclProfilerEventState_t
};

// One event. Written by the thread that starts it (then by whoever records states or stops it, which the
// core orders after the start); read only at finalize, after the core has stopped calling in.
struct Record {
  int64_t startNs = 0;
  int64_t stopNs = 0;  // 0: never stopped
  Record* parent = nullptr;  // the parent event's record (same communicator), if traced
  uint32_t index = 0;  // position in the pool
  uint64_t type = 0;   // one ncclProfile* bit
  uint8_t channel = kUnknownChannel;
  uint8_t nStates = 0;
  StateMark states[kMaxStates];
  union {
    struct {
      uint64_t seq;
      uint64_t count;
      int32_t root;
      uint8_t nChannels, nWarps;
      char func[kNameLen], datatype[kNameLen], algo[kNameLen], proto[kNameLen];
    } coll;
    struct {
      uint64_t count;
      int32_t peer;
      uint8_t nChannels;
      char func[kNameLen], datatype[kNameLen];
    } p2p;
    struct {  // CollApi / P2pApi / GroupApi
      uint64_t count;
      int32_t root;      // CollApi
      int32_t groupDepth;  // GroupApi
      char func[kNameLen], datatype[kNameLen];
    } api;
    struct {
      int32_t pid, peer, nSteps, chunkSize, isSend;
    } proxyOp;
    struct {
      int32_t step;
      uint64_t transSize;
    } proxyStep;
    struct {
      int64_t chStopNs;  // ncclProfilerKernelChStop: when the channel finished (0: not recorded)
      uint64_t pTimerStart, pTimerStop;
    } kernelCh;
    struct {
      int64_t id;
    } netPlugin;
  } u{};
};

// Bounded record pool: fixed capacity, allocated in blocks of kBlock records (the first at construction)
// so a small run costs little memory and a long one never more than capacity x sizeof(Record). acquire()
// is lock-free except for the one call per block that allocates it. Thread-safe.
class RecordPool {
 public:
  static constexpr size_t kBlock = 4096;

  explicit RecordPool(size_t capacity);
  ~RecordPool();
  RecordPool(const RecordPool&) = delete;
  RecordPool& operator=(const RecordPool&) = delete;

  // A zeroed record, or nullptr once `capacity` records were handed out (counted in dropped()).
  Record* acquire();
  size_t used() const;
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  size_t capacity() const { return capacity_; }
  // Record i < used(); only after every acquire has returned.
  Record* at(size_t i) const;

 private:
  size_t capacity_;
  size_t nBlocks_;
  std::atomic<size_t> next_{0};
  std::atomic<uint64_t> dropped_{0};
  std::unique_ptr<std::atomic<Record*>[]> blocks_;
  std::mutex growMutex_;
};

// One communicator's profiler context.
struct Context {
  uint64_t commId = 0;
  std::string commName;
  int rank = 0, nRanks = 0, nNodes = 0;
  int pid = 0;
  std::string host;
  int64_t initNs = 0;
  Options options;
  ncclDebugLogger_t log = nullptr;
  RecordPool pool;

  explicit Context(size_t capacity) : pool(capacity) {}
};

// CLOCK_REALTIME in ns: comparable across processes and (up to clock skew) hosts.
int64_t realtimeNs();

// Writes the context's trace to its file (TUTTI_TRACE_FILE expanded). Returns false with *error set.
bool writeTrace(const Context& ctx, std::string* path, std::string* error);

// Expands %r (rank), %p (pid), %h (host), %c (commId, hex) and %% in a file pattern.
std::string expandPattern(const std::string& pattern, int rank, int pid, const std::string& host,
                          uint64_t commId);

}  // namespace tutti::profilertrace
