// Host streams (tutti.h): in-order queues of work run by one thread each, so host- and sim-backend calls can
// be asynchronous like CUDA stream work. A stream handle is passed wherever NCCL takes a cudaStream_t.
//
// They are also the sim runtime's CUDA streams (device/runtime.h), with what that needs:
//   - events: a record is a marker in the stream; a wait holds the stream until the marker recorded last
//     before the wait has run. An event carries the recording stream's error, so a stream that waits on a
//     failed one fails too (the CPU's counterpart of CUDA's sticky errors).
//   - capture: between beginCapture and endCapture, work given to the stream is recorded, not run. A stream
//     that waits on an event recorded in a capture joins that capture (as in CUDA), with its own lane; every
//     such stream must be joined back (the origin waits on an event recorded last in its lane) before
//     endCapture. The result is a graph: lanes of work, records and waits, replayed with one thread per
//     lane each time the graph is launched on a stream.
#pragma once

#include "device/host/executor.h"

#include <nccl.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tutti::host {

struct Capture;
class HostStream;

struct EventState;

// An event of host streams (tutti.h tuttiEvent_t, the sim runtime's events). Destroying it while records or
// waits are pending is safe: they hold its state.
class StreamEvent {
 public:
  StreamEvent();
  ~StreamEvent();
  static StreamEvent* fromHandle(const void* handle);  // nullptr when not a live event
  // ncclSuccess when the last record has run (or none was made), ncclInProgress before; a recorded error.
  ncclResult_t query();
  ncclResult_t synchronize();

 private:
  friend class HostStream;
  std::shared_ptr<EventState> state_;
};

// A captured graph (tuttiGraph_t): immutable once made; launches of one graph run one after another, in the
// order they were made.
class StreamGraph {
 public:
  explicit StreamGraph(std::shared_ptr<Capture> c);
  ~StreamGraph();
  static StreamGraph* fromHandle(const void* handle);
  // Queues one run of the graph on `stream` (lane 0 on the stream's thread, the others on executor threads).
  void launch(HostStream* stream);
  size_t nodes() const;

 private:
  std::shared_ptr<Capture> capture_;
};

class HostStream {
 public:
  HostStream();
  ~HostStream();  // drains pending work first (a capture in progress is abandoned)

  // nullptr when `handle` is not a live host stream.
  static HostStream* fromHandle(cudaStream_t handle);
  cudaStream_t handle() { return reinterpret_cast<cudaStream_t>(this); }

  // Runs `work` after everything enqueued before it; during a capture, records it instead.
  void enqueue(WorkItem work);
  // Waits for everything enqueued so far; returns (and clears) the first error of that work.
  ncclResult_t synchronize();
  // ncclSuccess when idle, ncclInProgress while work is pending, or the pending error.
  ncclResult_t query();

  ncclResult_t recordEvent(StreamEvent* e);
  ncclResult_t waitEvent(StreamEvent* e);
  // External record and wait (CUDA's cudaEventRecordExternal / cudaEventWaitExternal): ordering only, no error
  // carried. In a capture they become nodes that act on the event itself each time the graph runs instead of
  // joining the capture: at each launch of the graph the record counts as the event's newest record and the
  // wait binds to the record newest then, so replays and uncaptured work order themselves through the event.
  ncclResult_t recordEventExternal(StreamEvent* e);
  ncclResult_t waitEventExternal(StreamEvent* e);

  ncclResult_t beginCapture();
  // Ends the capture this stream started; *graph is the graph (owned by the caller).
  ncclResult_t endCapture(StreamGraph** graph);
  // Whether the stream is capturing (it started a capture or joined one) and that capture's id.
  bool capturing(uint64_t* id = nullptr);
  // Hands `obj` to the capture this stream takes part in: destroy(obj) when its graph is gone.
  ncclResult_t keepWithCapture(void* obj, void (*destroy)(void*));

  // The error slot of the work running on this thread (a stream's item or a graph lane), or null: work that
  // cannot return its error (a host function) fails through it.
  static void failCurrent(ncclResult_t res);

 private:
  friend class StreamGraph;
  void loop();
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<WorkItem> queue_;
  bool running_ = false;  // an item is executing
  bool stop_ = false;
  ncclResult_t error_ = ncclSuccess;
  std::shared_ptr<Capture> capture_;  // the capture this stream records into, if any
  int lane_ = -1;                     // its lane there
  std::thread thread_;
};

}  // namespace tutti::host
