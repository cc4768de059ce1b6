#include "wire.h"

#include <atomic>

namespace tutti::netib {

const char* checkEndpoint(const Endpoint& e, uint64_t expectMagic) {
  if (e.marker != kEndpointMarker) return "not a net-ib endpoint record";
  if (e.version != kWireVersion) return "wire version mismatch";
  if (e.magic != expectMagic) return "wrong magic (handle of another listener, or a stale one)";
  if (e.nQps < 1 || e.nQps > kMaxQps) return "queue pair count out of range";
  if (e.linkLayer != 1 && e.linkLayer != 2) return "unknown link layer";
  if (e.mtu < 1 || e.mtu > 5) return "MTU code out of range";
  if (e.psn > 0xffffff) return "packet sequence number wider than 24 bits";
  for (int i = 0; i < e.nQps; i++)
    if (e.qpn[i] == 0 || e.qpn[i] > 0xffffff) return "queue pair number out of range";
  return nullptr;
}

CtsState examineCts(const volatile CtsRecord* entries, uint32_t seq, int* nreqs, const char** why) {
  if (entries[0].seq != seq) return CtsState::NotReady;
  std::atomic_thread_fence(std::memory_order_acquire);
  uint32_t n = entries[0].nreqs;
  if (n < 1 || n > static_cast<uint32_t>(kMaxRecvs)) {
    *why = "CTS record announces a grouped receive wider than NCCL_NET_IB_MAX_RECVS";
    return CtsState::Corrupt;
  }
  // The entries of one irecv arrive in one RDMA WRITE, but nothing orders bytes within it: wait for all.
  for (uint32_t i = 1; i < n; i++)
    if (entries[i].seq != seq) return CtsState::NotReady;
  std::atomic_thread_fence(std::memory_order_acquire);
  for (uint32_t i = 0; i < n; i++) {
    if (entries[i].nreqs != n) {
      *why = "CTS entries of one receive disagree on its width";
      return CtsState::Corrupt;
    }
  }
  *nreqs = static_cast<int>(n);
  return CtsState::Ready;
}

void splitAcrossQps(uint64_t size, int nQps, int q, uint64_t align, uint64_t* offset, uint64_t* length) {
  if (nQps < 1) nQps = 1;
  if (align == 0) align = 1;
  uint64_t per = (size + nQps - 1) / nQps;
  per = (per + align - 1) / align * align;
  uint64_t begin = per * static_cast<uint64_t>(q);
  if (begin > size) begin = size;
  uint64_t end = begin + per;
  if (end > size || q == nQps - 1) end = size;
  *offset = begin;
  *length = end - begin;
}

}  // namespace tutti::netib
