// One-sided operations towards ranks of other hosts (rma/window.h), over the network transport.
//
// Each rank keeps one connection to and one from every rank of another host (connIndex kConnRma, through
// the proxy and the configured net plugin, like any network connection). A put or signal sends a 64-byte
// header (what, which window, where, how many bytes) and then the data, with the host primitives, on the
// caller's thread in stream order. On the target a service thread (one per communicator) watches the
// receiving ends: when a header has arrived it announces the data's steps, receives the data straight into
// the window and then bumps the signal counter the source owns there (release, waking waiters), so a
// waiter that sees the count sees the data. Messages of one source are handled in the order sent, so its
// puts and signals to a target arrive in order, as NCCL guarantees.
//
// On the device backends (sim, cuda) buffers and counters are device memory, which the host primitives do
// not touch: the source's stream first copies the data into pinned staging memory and a host function on
// it sends that (rma/device_ops.cc); the service receives into staging and copies into the window, then
// writes the new count, with the runtime on a stream of its own.
#pragma once

#include "device/runtime.h"

#include <nccl.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

struct ncclComm;

namespace tutti {
struct Connection;
}

namespace tutti::rma {

class CommRma;

class NetRma {
 public:
  // Collective over the ranks of other hosts: connects to and from each of them, then starts the service.
  // rt: the device backend's runtime, null on the host backend.
  static ncclResult_t create(ncclComm* comm, CommRma* rma, rt::Runtime* rt, std::unique_ptr<NetRma>* out);
  ~NetRma();  // stops the service (the operations have ended)
  NetRma(const NetRma&) = delete;
  NetRma& operator=(const NetRma&) = delete;

  bool reaches(int peer) const { return peer >= 0 && peer < static_cast<int>(send_.size()) && send_[peer]; }
  // Sends a put of [src, src + bytes) into `peer`'s window `window` at `offset`, then a signal; or a signal
  // alone (bytes == 0 and window == kNoWindow). Returns once sent; callers to one peer are serialized here.
  ncclResult_t send(int peer, uint32_t window, uint64_t offset, const void* src, size_t bytes);
  static constexpr uint32_t kNoWindow = ~0u;

 private:
  NetRma(ncclComm* comm, CommRma* rma, rt::Runtime* rt) : comm_(comm), rma_(rma), rt_(rt) {}
  void serve();
  ncclResult_t receive(int peer);  // one message from `peer`, whose header has arrived
  ncclResult_t signalArrived(int peer);

  ncclComm* comm_;
  CommRma* rma_;
  rt::Runtime* rt_;                      // device backends: the runtime of the window and counter memory
  rt::Stream stream_ = nullptr;          // device backends: the service's stream
  char* staging_ = nullptr;              // device backends: pinned, stagingBytes_ long (grows)
  size_t stagingBytes_ = 0;
  uint64_t* countWord_ = nullptr;        // device backends: pinned source of the counters' new values
  std::vector<uint64_t> counts_;         // device backends: signals delivered per source
  std::vector<Connection*> send_, recv_;  // by rank: null for ranks of this host
  std::unique_ptr<std::mutex[]> sendMutex_;
  std::atomic<bool> stop_{false};
  std::thread service_;
};

}  // namespace tutti::rma
