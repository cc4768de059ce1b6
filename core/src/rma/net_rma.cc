#include "rma/net_rma.h"

#include "comm/comm.h"
#include "device/common/reduce_ops.h"
#include "device/host/prims.h"
#include "rma/window.h"
#include "util/check.h"
#include "util/log.h"

#include <algorithm>
#include <chrono>

namespace tutti::rma {

namespace {

constexpr uint64_t kHeaderMagic = 0x7475747469526d61ull;  // "tuttiRma"

struct alignas(64) Header {
  uint64_t magic;
  uint32_t window;   // the window's serial (CommRma), or kNoWindow for a signal alone
  uint32_t pad;
  uint64_t offset;
  uint64_t bytes;
  uint64_t spare[4];
};
static_assert(sizeof(Header) == 64, "one header is 64 bytes");

ResolvedRedOp byteCopy() {
  ResolvedRedOp op{};
  resolveBuiltinRedOp(ncclSum, ncclInt8, 1, &op);
  return op;
}

}  // namespace

ncclResult_t NetRma::create(ncclComm* comm, CommRma* rma, rt::Runtime* rt, std::unique_ptr<NetRma>* out) {
  const int n = comm->nRanks;
  const uint64_t host = comm->peers[comm->rank].hostHash;
  std::vector<ConnRequest> wanted;
  for (int p = 0; p < n; ++p) {
    if (comm->peers[p].hostHash == host) continue;
    wanted.push_back({0, kConnRma, p, true});
    wanted.push_back({0, kConnRma, p, false});
  }
  if (wanted.empty()) return ncclSuccess;
  TUTTI_CHECK(commConnect(comm, wanted));
  std::unique_ptr<NetRma> net(new NetRma(comm, rma, rt));
  if (rt) {
    TUTTI_CHECK(rt->streamCreate(&net->stream_));
    void* word = nullptr;
    TUTTI_CHECK(rt->hostAlloc(&word, sizeof(uint64_t)));
    net->countWord_ = static_cast<uint64_t*>(word);
    net->counts_.assign(n, 0);
  }
  net->send_.assign(n, nullptr);
  net->recv_.assign(n, nullptr);
  net->sendMutex_ = std::make_unique<std::mutex[]>(n);
  for (const ConnRequest& r : wanted) {
    Connection* c = commFindConnection(comm, r.channel, r.connIndex, r.peer, r.isSend);
    if (!c) TUTTI_FAIL(ncclInternalError, "rank {}: no one-sided connection {} rank {}", comm->rank,
                       r.isSend ? "to" : "from", r.peer);
    (r.isSend ? net->send_ : net->recv_)[r.peer] = c;
  }
  // The first header of every source is expected from the start: the proxy keeps a receive posted for it.
  for (Connection* c : net->recv_)
    if (c) host::announceRecvSteps(&c->host, 1);
  net->service_ = std::thread([raw = net.get()] { raw->serve(); });
  *out = std::move(net);
  return ncclSuccess;
}

NetRma::~NetRma() {
  stop_.store(true, std::memory_order_release);
  if (service_.joinable()) service_.join();
  if (!rt_) return;
  LastErrorKeeper keep;
  if (stream_ && rt_->streamDestroy(stream_) != ncclSuccess)
    TUTTI_WARN("rank {}: cannot destroy the one-sided service's stream: {}", comm_->rank, lastErrorText());
  for (void* p : {static_cast<void*>(staging_), static_cast<void*>(countWord_)})
    if (p && rt_->hostFree(p) != ncclSuccess)
      TUTTI_WARN("rank {}: cannot free the one-sided service's staging memory: {}", comm_->rank, lastErrorText());
}

ncclResult_t NetRma::signalArrived(int peer) {
  if (!rt_) {
    rma_->netSignal(peer);
    return ncclSuccess;
  }
  // The counter is device memory: its new value is copied there (the data's copy came before, in order).
  *countWord_ = ++counts_[peer];
  TUTTI_CHECK(rt_->memcpyAsync(rma_->localSignalWord(peer), countWord_, sizeof(uint64_t), stream_));
  return rt_->streamSynchronize(stream_);
}

ncclResult_t NetRma::send(int peer, uint32_t window, uint64_t offset, const void* src, size_t bytes) {
  Connection* c = send_[peer];
  const ResolvedRedOp copy = byteCopy();
  const host::WaitContext wait = commWaitContext(comm_);
  host::OpLabel label{comm_->rank, bytes || window != kNoWindow ? "ncclPutSignal" : "ncclSignal", 0, 0,
                      &comm_->failure, commAskFailure, comm_};
  Header h{kHeaderMagic, window, 0, offset, bytes, {}};
  std::lock_guard<std::mutex> lock(sendMutex_[peer]);
  host::HostPrims head(nullptr, &c->host, &h, nullptr, 1, copy, wait, label, TUTTI_PROTO_SIMPLE);
  TUTTI_CHECK(head.send(0, sizeof h));
  if (bytes > 0) {
    host::HostPrims data(nullptr, &c->host, src, nullptr, 1, copy, wait, label, TUTTI_PROTO_SIMPLE);
    TUTTI_CHECK(data.send(0, bytes));
  }
  return ncclSuccess;
}

ncclResult_t NetRma::receive(int peer) {
  Connection* c = recv_[peer];
  const ResolvedRedOp copy = byteCopy();
  const host::WaitContext wait = commWaitContext(comm_);
  host::OpLabel label{comm_->rank, "ncclPutSignal (receiving)", 0, 0, &comm_->failure, commAskFailure, comm_};
  Header h{};
  {
    host::HostPrims head(&c->host, nullptr, nullptr, &h, 1, copy, wait, label, TUTTI_PROTO_SIMPLE);
    TUTTI_CHECK(head.recv(0, sizeof h));
  }
  if (h.magic != kHeaderMagic)
    TUTTI_FAIL(ncclInternalError, "rank {}: a one-sided message from rank {} has no valid header", comm_->rank, peer);
  if (h.bytes > 0) {
    char* dst = rma_->netTarget(h.window, h.offset, h.bytes);
    if (!dst)
      TUTTI_FAIL(ncclInvalidUsage, "rank {}: rank {} put {} bytes at offset {} of window #{}, which this rank does "
                 "not have (deregistered?) or which is too small", comm_->rank, peer, h.bytes, h.offset, h.window);
    char* into = dst;
    if (rt_ && stagingBytes_ < h.bytes) {  // device memory: received into staging, then copied
      if (staging_) TUTTI_CHECK(rt_->hostFree(staging_));
      staging_ = nullptr;
      stagingBytes_ = 0;
      void* p = nullptr;
      TUTTI_CHECK(rt_->hostAlloc(&p, h.bytes));
      staging_ = static_cast<char*>(p);
      stagingBytes_ = h.bytes;
    }
    if (rt_) into = staging_;
    host::HostStepCounter steps(&c->host, TUTTI_PROTO_SIMPLE, 1);
    steps.recv(0, h.bytes);
    host::announceRecvSteps(&c->host, steps.recvSteps());
    host::HostPrims data(&c->host, nullptr, nullptr, into, 1, copy, wait, label, TUTTI_PROTO_SIMPLE);
    TUTTI_CHECK(data.recv(0, h.bytes));
    if (rt_) TUTTI_CHECK(rt_->memcpyAsync(dst, staging_, h.bytes, stream_));
  }
  host::announceRecvSteps(&c->host, 1);  // the next header
  return signalArrived(peer);
}

void NetRma::serve() {
  logSetThreadRank(comm_->rank);
  auto pause = std::chrono::microseconds(10);
  while (!stop_.load(std::memory_order_acquire) && !comm_->abortFlag.load(std::memory_order_acquire)) {
    bool any = false;
    for (size_t p = 0; p < recv_.size(); ++p) {
      Connection* c = recv_[p];
      if (!c) continue;
      if (std::atomic_ref<uint64_t>(c->host.conn.ctrl->tail).load(std::memory_order_acquire) <= c->host.step) continue;
      any = true;
      if (const ncclResult_t res = receive(static_cast<int>(p)); res != ncclSuccess) {
        // The message is lost: the communicator fails, as a failed collective makes it.
        ncclResult_t expected = ncclSuccess;
        comm_->asyncError.compare_exchange_strong(expected, res);
        commCancelOps(comm_);
        return;
      }
    }
    if (any) {
      pause = std::chrono::microseconds(10);
      continue;
    }
    std::this_thread::sleep_for(pause);  // idle: back off to 1 ms between looks
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::microseconds(1000));
  }
}

}  // namespace tutti::rma
