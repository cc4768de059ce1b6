// Data path of net-ib. The receiver posts one receive per QP and RDMA-writes a CTS record (address, rkey,
// capacity, tag) into the sender's CTS FIFO; the sender matches isends to CTS entries by tag and, once
// every entry of the slot has its isend, RDMA-writes the payloads split across the QPs and ends each QP's
// chain with RDMA_WRITE_WITH_IMM. Single receive without adaptive routing: each QP's piece travels in that
// one WRITE_WITH_IMM (data + size in one op). Grouped receives or adaptive routing: plain writes, the size
// record (grouped only), then a zero-byte WRITE_WITH_IMM per QP. The receive completes when every QP's
// immediate and the CTS write have completed; RC ordering makes the data visible before the immediate.
#include "netib.h"

#include <arpa/inet.h>

#include <cerrno>
#include <cstring>

namespace tutti::netib {

namespace {

constexpr uint64_t kSplitAlign = 128;

ncclResult_t postSend(CommBase* c, int qp, ibv_send_wr* wr) {
  ibv_send_wr* bad = nullptr;
  int rc = ibv_post_send(c->qps[qp], wr, &bad);
  if (rc != 0) {
    IB_WARN("NET/IB : %s: ibv_post_send failed: %s", c->dev->name.c_str(), std::strerror(rc));
    return failComm(c, ncclSystemError);
  }
  return ncclSuccess;
}

// Checks that [data, data+size) lies in the registration; size 0 needs no registration.
bool inRegion(const MemHandle* m, const void* data, uint64_t size) {
  if (size == 0) return true;
  if (m == nullptr || m->magic != kMrMagic) return false;
  auto b = reinterpret_cast<uintptr_t>(m->mr->addr), p = reinterpret_cast<uintptr_t>(data);
  return p >= b && p + size <= b + m->mr->length && p + size >= p;
}

// Posts the writes of the current slot once every CTS entry has its isend.
ncclResult_t postSlot(SendComm* s, int nreqs, uint32_t slot) {
  CtsRecord* entries = s->fifo[slot];
  bool fused = nreqs == 1 && !s->adaptiveRouting;
  for (int q = 0; q < s->nQps; q++) {
    for (int i = 0; i < nreqs; i++) {
      Request* r = s->matched[i];
      uint64_t off = 0, len = 0;
      splitAcrossQps(r->size, s->nQps, q, kSplitAlign, &off, &len);
      if (fused) break;  // carried by the immediate below
      if (len == 0) continue;
      ibv_sge sge{reinterpret_cast<uint64_t>(r->data) + off, static_cast<uint32_t>(len), r->lkey};
      ibv_send_wr wr;
      std::memset(&wr, 0, sizeof wr);
      wr.wr_id = makeWrId(WrKind::Data, slot);
      wr.opcode = IBV_WR_RDMA_WRITE;
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.wr.rdma.remote_addr = entries[i].addr + off;
      wr.wr.rdma.rkey = entries[i].rkey;
      if (ncclResult_t rc = postSend(s, q, &wr); rc != ncclSuccess) return rc;
    }
    if (q == 0 && nreqs > 1) {  // sizes land before any immediate of the slot completes on the receiver
      for (int i = 0; i < kMaxRecvs; i++) s->sizeStage[slot].sizes[i] = i < nreqs ? static_cast<int64_t>(s->matched[i]->size) : 0;
      ibv_sge sge{reinterpret_cast<uint64_t>(&s->sizeStage[slot]), sizeof(SizeRecord), s->sizeStageMr->lkey};
      ibv_send_wr wr;
      std::memset(&wr, 0, sizeof wr);
      wr.wr_id = makeWrId(WrKind::Data, slot);
      wr.opcode = IBV_WR_RDMA_WRITE;
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.wr.rdma.remote_addr = s->remoteAddr + slot * sizeof(SizeRecord);
      wr.wr.rdma.rkey = s->remoteRkey;
      if (ncclResult_t rc = postSend(s, q, &wr); rc != ncclSuccess) return rc;
    }
    ibv_sge sge{};
    ibv_send_wr wr;
    std::memset(&wr, 0, sizeof wr);
    wr.wr_id = makeWrId(WrKind::Data, slot);
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htonl(nreqs == 1 ? static_cast<uint32_t>(s->matched[0]->size) : 0);
    wr.wr.rdma.remote_addr = entries[0].addr;
    wr.wr.rdma.rkey = entries[0].rkey;
    if (fused) {
      Request* r = s->matched[0];
      uint64_t off = 0, len = 0;
      splitAcrossQps(r->size, s->nQps, q, kSplitAlign, &off, &len);
      sge = {reinterpret_cast<uint64_t>(r->data) + off, static_cast<uint32_t>(len), r->lkey};
      wr.wr.rdma.remote_addr = entries[0].addr + off;
      if (len > 0) {
        wr.sg_list = &sge;
        wr.num_sge = 1;
      }
    }
    if (ncclResult_t rc = postSend(s, q, &wr); rc != ncclSuccess) return rc;
  }
  s->slotEvents[slot] = s->nQps;
  for (int i = 0; i < nreqs; i++) s->matched[i]->posted = true;
  std::memset(s->matched, 0, sizeof s->matched);
  s->seq++;
  return ncclSuccess;
}

// Drains the comm's CQ and credits each completion to its request or slot.
ncclResult_t pollComm(CommBase* c) {
  ibv_wc wcs[16];
  while (true) {
    int n = ibv_poll_cq(c->cq, 16, wcs);
    if (n < 0) {
      IB_WARN("NET/IB : %s: ibv_poll_cq failed", c->dev->name.c_str());
      return failComm(c, ncclSystemError);
    }
    if (n == 0) return ncclSuccess;
    for (int k = 0; k < n; k++) {
      const ibv_wc& wc = wcs[k];
      if (wc.status != IBV_WC_SUCCESS) {
        IB_WARN("NET/IB : %s:%d: completion error %d (vendor 0x%x) on QP %u, opcode %d: the peer is gone or the "
                "fabric failed (check NCCL_IB_TIMEOUT / NCCL_IB_RETRY_CNT)",
                c->dev->name.c_str(), c->dev->port, static_cast<int>(wc.status), wc.vendor_err, wc.qp_num,
                static_cast<int>(wc.opcode));
        return failComm(c, ncclRemoteError);
      }
      uint32_t idx = wrIndex(wc.wr_id);
      switch (wrKind(wc.wr_id)) {
        case WrKind::Data:
          if (c->magic == kSendMagic && idx < static_cast<uint32_t>(kFifoDepth))
            static_cast<SendComm*>(c)->slotEvents[idx]--;
          break;
        case WrKind::Recv: {
          Request* r = c->requests.live(idx);
          if (r == nullptr) break;
          if (r->nreqs == 1) r->received[0] = ntohl(wc.imm_data);
          r->events--;
          break;
        }
        case WrKind::Cts:
        case WrKind::Flush: {
          Request* r = c->requests.live(idx);
          if (r) r->events--;
          break;
        }
      }
    }
  }
}

template <typename T>
T* asComm(void* p, uint32_t magic, const char* what) {
  auto* c = static_cast<T*>(p);
  if (c == nullptr || c->magic != magic) {
    IB_WARN("NET/IB : %s: NULL or foreign comm", what);
    return nullptr;
  }
  return c;
}

}  // namespace

// ---- registration.

namespace {
CommBase* anyComm(void* comm) {
  auto* c = static_cast<CommBase*>(comm);
  if (c == nullptr || (c->magic != kSendMagic && c->magic != kRecvMagic)) return nullptr;
  return c;
}
ncclResult_t finishReg(CommBase* c, ibv_mr* mr, int type, void** mhandle, const char* call) {
  if (mr == nullptr) {
    IB_WARN("NET/IB : %s: %s failed: %s (is the memory locked-in limit, ulimit -l, large enough?)",
            c->dev->name.c_str(), call, std::strerror(errno));
    return ncclSystemError;
  }
  if (getPd(c->dev, &c->pd) != ncclSuccess) {  // one reference per registration keeps the PD alive
    verbs().deregMr(mr);
    return ncclSystemError;
  }
  auto* m = new MemHandle();
  m->dev = c->dev;
  m->mr = mr;
  m->type = type;
  *mhandle = m;
  return ncclSuccess;
}
constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
}  // namespace

ncclResult_t netRegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  CommBase* c = anyComm(comm);
  if (c == nullptr || mhandle == nullptr || (data == nullptr && size > 0)) {
    IB_WARN("NET/IB : regMr: bad arguments (comm %p, data %p, size %zu)", comm, data, size);
    return ncclInvalidArgument;
  }
  if (type != NCCL_PTR_HOST) {
    IB_WARN("NET/IB : regMr: memory type %d is not supported by this build (host memory only)", type);
    return ncclInvalidArgument;
  }
  return finishReg(c, verbs().regMr(c->pd, data, size, kAccess), type, mhandle, "ibv_reg_mr");
}

ncclResult_t netRegMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle) {
  CommBase* c = anyComm(comm);
  if (c == nullptr || mhandle == nullptr) {
    IB_WARN("NET/IB : regMrDmaBuf: NULL or foreign comm, or NULL mhandle");
    return ncclInvalidArgument;
  }
  if (fd < 0) return netRegMr(comm, data, size, type, mhandle);
  if (verbs().regDmabufMr == nullptr || !c->dev->dmabuf) {
    IB_WARN("NET/IB : %s: DMA-BUF registration is not supported (rdma-core or provider too old)", c->dev->name.c_str());
    return ncclInvalidUsage;
  }
  ibv_mr* mr = verbs().regDmabufMr(c->pd, offset, size, reinterpret_cast<uint64_t>(data), fd, kAccess);
  return finishReg(c, mr, type, mhandle, "ibv_reg_dmabuf_mr");
}

ncclResult_t netDeregMr(void* comm, void* mhandle) {
  auto* m = static_cast<MemHandle*>(mhandle);
  if (anyComm(comm) == nullptr || m == nullptr || m->magic != kMrMagic) {
    IB_WARN("NET/IB : deregMr: NULL or foreign comm or memory handle");
    return ncclInvalidArgument;
  }
  verbs().deregMr(m->mr);
  putPd(m->dev);
  m->magic = kDeadMagic;
  delete m;
  return ncclSuccess;
}

// ---- isend / irecv.

ncclResult_t netIsend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request) {
  auto* s = asComm<SendComm>(sendComm, kSendMagic, "isend");
  if (s == nullptr || request == nullptr) return ncclInvalidArgument;
  *request = nullptr;
  if (s->error != ncclSuccess) return s->error;
  auto* m = static_cast<MemHandle*>(mhandle);
  if (!inRegion(m, data, size)) {
    IB_WARN("NET/IB : isend: %zu bytes at %p are not inside the registration given", size, data);
    return ncclInvalidArgument;
  }
  uint32_t slot = (s->seq - 1) % kFifoDepth;
  if (s->slotEvents[slot] > 0) {
    // Completions of this slot's previous lap are not reaped yet; reusing its counter now would let them
    // complete the new lap early.
    if (ncclResult_t rc = pollComm(s); rc != ncclSuccess) return rc;
    if (s->slotEvents[slot] > 0) return ncclSuccess;
  }
  int nreqs = 0;
  const char* why = nullptr;
  switch (examineCts(s->fifo[slot], s->seq, &nreqs, &why)) {
    case CtsState::NotReady:
      return ncclSuccess;  // the receiver has not posted yet: the core retries
    case CtsState::Corrupt:
      IB_WARN("NET/IB : isend: %s", why);
      return failComm(s, ncclRemoteError);
    case CtsState::Ready:
      break;
  }
  const CtsRecord* entries = s->fifo[slot];
  int entry = -1;
  for (int i = 0; i < nreqs && entry < 0; i++)
    if (entries[i].tag == tag && s->matched[i] == nullptr) entry = i;
  if (entry < 0) return ncclSuccess;  // this receive waits for other tags: retry later
  if (size > entries[entry].size) {
    IB_WARN("NET/IB : isend of %zu bytes (tag %d) to a receive of %llu bytes", size, tag,
            static_cast<unsigned long long>(entries[entry].size));
    return failComm(s, ncclInvalidUsage);
  }
  Request* r = s->requests.alloc(ReqKind::Send, s);
  if (r == nullptr) {
    IB_WARN("NET/IB : isend: more than %d requests outstanding on one comm", s->requests.capacity());
    return ncclInvalidUsage;
  }
  r->slot = slot;
  r->data = static_cast<char*>(data);
  r->size = size;
  r->lkey = size > 0 ? m->mr->lkey : 0;
  r->entry = entry;
  s->matched[entry] = r;
  int have = 0;
  for (int i = 0; i < nreqs; i++) have += s->matched[i] != nullptr;
  if (have == nreqs) {
    if (ncclResult_t rc = postSlot(s, nreqs, slot); rc != ncclSuccess) return rc;
  }
  *request = r;
  return ncclSuccess;
}

ncclResult_t netIrecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request) {
  auto* c = asComm<RecvComm>(recvComm, kRecvMagic, "irecv");
  if (c == nullptr || request == nullptr) return ncclInvalidArgument;
  *request = nullptr;
  if (n < 1 || n > kMaxRecvs || data == nullptr || sizes == nullptr || tags == nullptr || mhandles == nullptr) {
    IB_WARN("NET/IB : irecv: %d buffers (1..%d) or NULL arrays", n, kMaxRecvs);
    return ncclInvalidArgument;
  }
  if (c->error != ncclSuccess) return c->error;
  for (int i = 0; i < n; i++) {
    if (!inRegion(static_cast<MemHandle*>(mhandles[i]), data[i], sizes[i])) {
      IB_WARN("NET/IB : irecv: buffer %d (%zu bytes at %p) is not inside its registration", i, sizes[i], data[i]);
      return ncclInvalidArgument;
    }
  }
  Request* r = c->requests.inUse() < kFifoDepth ? c->requests.alloc(ReqKind::Recv, c) : nullptr;
  if (r == nullptr) {
    IB_WARN("NET/IB : irecv: more than %d requests outstanding on one comm", NCCL_NET_MAX_REQUESTS);
    return ncclInvalidUsage;
  }
  uint32_t slot = (c->seq - 1) % kFifoDepth;
  r->slot = slot;
  r->nreqs = n;
  r->events = c->nQps + 1;
  for (int i = 0; i < n; i++) r->capacity[i] = static_cast<int64_t>(sizes[i]);
  for (int q = 0; q < c->nQps; q++) {
    ibv_recv_wr wr;
    std::memset(&wr, 0, sizeof wr);
    wr.wr_id = makeWrId(WrKind::Recv, r->index);
    ibv_recv_wr* bad = nullptr;
    if (int rc = ibv_post_recv(c->qps[q], &wr, &bad); rc != 0) {
      IB_WARN("NET/IB : %s: ibv_post_recv failed: %s", c->dev->name.c_str(), std::strerror(rc));
      return failComm(c, ncclSystemError);
    }
  }
  CtsRecord* cts = c->ctsStage[slot];
  for (int i = 0; i < n; i++) {
    auto* m = static_cast<MemHandle*>(mhandles[i]);
    cts[i] = CtsRecord{reinterpret_cast<uint64_t>(data[i]), sizes[i], m && sizes[i] ? m->mr->rkey : 0, tags[i],
                       static_cast<uint32_t>(n), c->seq};
  }
  ibv_sge sge{reinterpret_cast<uint64_t>(cts), static_cast<uint32_t>(n * sizeof(CtsRecord)), c->ctsStageMr->lkey};
  ibv_send_wr wr;
  std::memset(&wr, 0, sizeof wr);
  wr.wr_id = makeWrId(WrKind::Cts, r->index);
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.wr.rdma.remote_addr = c->remoteAddr + slot * kMaxRecvs * sizeof(CtsRecord);
  wr.wr.rdma.rkey = c->remoteRkey;
  if (ncclResult_t rc = postSend(c, 0, &wr); rc != ncclSuccess) return rc;
  c->seq++;
  *request = r;
  return ncclSuccess;
}

// Host buffers need no flush (the CPU sees RDMA writes once the completion is seen), and this build
// registers host memory only, so there is never anything to flush.
ncclResult_t netIflush(void* recvComm, int n, void**, int*, void**, void** request) {
  auto* c = asComm<RecvComm>(recvComm, kRecvMagic, "iflush");
  if (c == nullptr || request == nullptr || n < 0 || n > kMaxRecvs) return ncclInvalidArgument;
  *request = nullptr;
  return c->error;
}

// ---- test.

ncclResult_t netTest(void* request, int* done, int* sizes) {
  auto* r = static_cast<Request*>(request);
  if (r == nullptr || done == nullptr || r->comm == nullptr) {
    IB_WARN("NET/IB : test: NULL request or done");
    return ncclInvalidArgument;
  }
  auto* c = static_cast<CommBase*>(r->comm);
  if ((c->magic != kSendMagic && c->magic != kRecvMagic) || !c->requests.owns(r) || r->kind == ReqKind::Free) {
    IB_WARN("NET/IB : test: not a live net-ib request");
    return ncclInvalidArgument;
  }
  *done = 0;
  if (c->error != ncclSuccess) return c->error;
  if (ncclResult_t rc = pollComm(c); rc != ncclSuccess) return rc;
  if (r->kind == ReqKind::Send) {
    auto* s = static_cast<SendComm*>(c);
    if (!r->posted || s->slotEvents[r->slot] > 0) return ncclSuccess;
    if (sizes) sizes[0] = static_cast<int>(r->size);
  } else {
    if (r->events > 0) return ncclSuccess;
    auto* rc = static_cast<RecvComm*>(c);
    if (r->kind == ReqKind::Recv && r->nreqs > 1)
      for (int i = 0; i < r->nreqs; i++) r->received[i] = rc->sizeFifo[r->slot].sizes[i];
    for (int i = 0; i < r->nreqs; i++) {
      if (r->received[i] < 0 || r->received[i] > r->capacity[i]) {
        IB_WARN("NET/IB : test: the sender reports %lld bytes for a receive of %lld",
                static_cast<long long>(r->received[i]), static_cast<long long>(r->capacity[i]));
        return failComm(c, ncclRemoteError);
      }
      if (sizes) sizes[i] = static_cast<int>(r->received[i]);
    }
  }
  c->requests.release(r);
  *done = 1;
  return ncclSuccess;
}

// ---- close: outstanding requests are abandoned; their buffers must stay valid until close returns.

ncclResult_t netCloseSend(void* sendComm) {
  if (sendComm == nullptr) return ncclSuccess;
  auto* s = asComm<SendComm>(sendComm, kSendMagic, "closeSend");
  if (s == nullptr) return ncclInvalidArgument;
  destroyComm(s);
  return ncclSuccess;
}

ncclResult_t netCloseRecv(void* recvComm) {
  if (recvComm == nullptr) return ncclSuccess;
  auto* r = asComm<RecvComm>(recvComm, kRecvMagic, "closeRecv");
  if (r == nullptr) return ncclInvalidArgument;
  destroyComm(r);
  return ncclSuccess;
}

}  // namespace tutti::netib
