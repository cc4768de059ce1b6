// Request bookkeeping of net-ib, free of verbs so it is unit-tested without an HCA: a fixed pool of
// request slots per comm (NCCL_NET_MAX_REQUESTS of them, as the ABI allows) handed out and returned by
// index, and the per-request completion counter the CQ poller decrements.
#pragma once

#include <cstdint>

#include "wire.h"

namespace tutti::netib {

enum class ReqKind : uint8_t { Free, Send, Recv, Flush };

struct Request {
  ReqKind kind = ReqKind::Free;
  void* comm = nullptr;  // owning SendComm / RecvComm
  uint32_t index = 0;    // position in the pool, carried in work-request ids
  uint32_t slot = 0;     // CTS FIFO slot (send / recv)
  int events = 0;        // completions still expected (recv: one per QP + the CTS write; flush: one)
  int nreqs = 1;         // buffers of a grouped receive
  bool posted = false;   // send: the slot's writes are on the wire
  // send
  char* data = nullptr;
  uint64_t size = 0;
  uint32_t lkey = 0;
  int entry = -1;  // CTS entry matched by tag
  // recv: capacities, then sizes received
  int64_t capacity[kMaxRecvs] = {};
  int64_t received[kMaxRecvs] = {};
};

// A fixed set of N requests. alloc() returns nullptr when all are in use (the caller reports it);
// release() of a request not from this pool, or already free, returns false and changes nothing.
template <int N>
class RequestPool {
 public:
  RequestPool() {
    for (int i = 0; i < N; i++) reqs_[i].index = static_cast<uint32_t>(i);
  }
  Request* alloc(ReqKind kind, void* comm) {
    for (int k = 0; k < N; k++) {
      int i = (next_ + k) % N;
      if (reqs_[i].kind != ReqKind::Free) continue;
      Request& r = reqs_[i];
      uint32_t index = r.index;
      r = Request{};
      r.index = index;
      r.kind = kind;
      r.comm = comm;
      next_ = (i + 1) % N;
      inUse_++;
      return &r;
    }
    return nullptr;
  }
  bool release(Request* r) {
    if (!owns(r) || r->kind == ReqKind::Free) return false;
    r->kind = ReqKind::Free;
    inUse_--;
    return true;
  }
  // The request at index i when it is in use, else nullptr (a completion for a stale id).
  Request* live(uint32_t i) {
    if (i >= static_cast<uint32_t>(N) || reqs_[i].kind == ReqKind::Free) return nullptr;
    return &reqs_[i];
  }
  bool owns(const Request* r) const { return r >= reqs_ && r < reqs_ + N; }
  int inUse() const { return inUse_; }
  static constexpr int capacity() { return N; }

 private:
  Request reqs_[N];
  int next_ = 0;
  int inUse_ = 0;
};

}  // namespace tutti::netib
