#include "proxy/net_transport.h"

#include "comm/profiler.h"
#include "plugin/config.h"
#include "plugin/net_plugin.h"
#include "plugin/params.h"
#include "device/common/protocols.h"
#include "device/host/wait.h"
#include "proxy/proxy.h"
#include "util/check.h"

#include <tutti/net_wait.h>

#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <utility>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace tutti {
namespace {

// ---- the selected net plugin (process-wide) ------------------------------------------------------------

struct NetState {
  std::unique_ptr<NetPlugin> plugin;
  void* ctx = nullptr;
  int nDevs = 0;
  std::string name;
  std::vector<int> ptrSupport;  // per device: NCCL_PTR_* the plugin takes
};

// Loaded on first use. A function-local static, not std::call_once: the proxy threads ask for it on every progress
// call, and call_once stores its callable in thread-local variables on each call (libstdc++), through
// __tls_get_addr from a shared library: ~10% of a proxy thread's instructions while it polled.
NetState* loadNet() {
  static NetState* const state = [] {
    auto* s = new NetState();
    const Config* cfg = nullptr;
    if (configGet(&cfg) != ncclSuccess) return s;
    const std::string forced = paramString("NCCL_NET");
    for (const PluginSpec& spec : cfg->nets) {
      std::unique_ptr<NetPlugin> p;
      if (netPluginLoad(spec.path.empty() ? spec.name : spec.path, &p) != ncclSuccess) {
        TUTTI_WARN("net plugin {} ({}) could not be loaded and is skipped: {}", spec.label(), spec.where.str(),
                   lastErrorText());
        continue;
      }
      if (!forced.empty() && strcasecmp(forced.c_str(), p->net.name) != 0) {
        TUTTI_INFO(NCCL_INIT | NCCL_NET, "net plugin {} skipped: NCCL_NET={}", p->net.name, forced);
        continue;
      }
      ncclNetCommConfig_v12_t netConfig{NCCL_NET_TRAFFIC_CLASS_UNDEF};
      void* ctx = nullptr;
      if (p->net.init(&ctx, 0, &netConfig, tuttiPluginLogger, nullptr) != ncclSuccess) {
        TUTTI_WARN("net plugin {} ({}) failed to initialise and is skipped", p->net.name, p->path);
        continue;
      }
      int n = 0;
      if (p->net.devices(&n) != ncclSuccess || n <= 0) {
        TUTTI_INFO(NCCL_INIT | NCCL_NET, "net plugin {} ({}): no device, skipped", p->net.name, p->path);
        if (p->net.finalize) p->net.finalize(ctx);
        continue;
      }
      TUTTI_INFO(NCCL_INIT | NCCL_NET, "net plugin {} ({}, ABI v{}) with {} device(s)", p->net.name, p->path,
                 p->abiVersion, n);
      s->name = p->net.name;
      for (int d = 0; d < n; ++d) {
        ncclNetProperties_v12_t props{};
        s->ptrSupport.push_back(p->net.getProperties(d, &props) == ncclSuccess ? props.ptrSupport : NCCL_PTR_HOST);
      }
      const auto* wait =
          p->library ? static_cast<const tuttiNetWait_v1_t*>(p->library->symbol(TUTTI_NET_WAIT_SYMBOL)) : nullptr;
      if (wait && wait->waitComms && paramInt("TUTTI_NET_PLUGIN_WAIT") != 0) {
        proxySetNetWait(wait->waitComms);
        TUTTI_INFO(NCCL_INIT | NCCL_NET, "net plugin {}: waits sleep in the plugin ({})", p->net.name,
                   TUTTI_NET_WAIT_SYMBOL);
      }
      s->plugin = std::move(p);
      s->ctx = ctx;
      s->nDevs = n;
      break;
    }
    if (!s->plugin) TUTTI_INFO(NCCL_INIT | NCCL_NET, "no net plugin with a device: ranks on different hosts cannot connect");
    return s;
  }();
  return state;
}

// ---- one end of a network connection ----------------------------------------------------------------

constexpr size_t kCtrlBytes = 4096;

struct NetEnd;

class NetProxyTask : public ProxyTask {
 public:
  explicit NetProxyTask(NetEnd* end) : end_(end) {}
  ncclResult_t progress(bool* active) override {
    const ncclResult_t res = run(active);
    setWaitComm(res == ncclSuccess ? inFlight() : nullptr);
    return res;
  }
  bool busy() const override;

 private:
  ncclResult_t run(bool* active);
  void* inFlight() const;  // the plugin comm while requests are in flight, else null
  NetEnd* end_;
};

struct NetEnd {
  bool recv = false;
  int dev = 0;
  int peer = -1;
  void* listenComm = nullptr;
  void* comm = nullptr;  // sendComm or recvComm
  // Control page (host memory), and one region per protocol at `data` + regionOffset. A send end has every
  // protocol's FIFO (the ranks write their slots there, the proxy sends them as they are). A receive end has
  // one landing region in the SIMPLE slot, spaced by the largest slot of any protocol (TUTTI_CONN_PROXIED):
  // the proxy does not know which protocol the next step uses, so each step lands in a slot that fits any.
  // The regions follow the control page in host memory, or, on a device backend whose net plugin takes CUDA
  // pointers (GPUDirect RDMA), live in device memory that the NIC reads and writes directly (`devData`).
  char* mem = nullptr;
  char* data = nullptr;
  const tuttiDeviceMem_t* devMem = nullptr;
  void* devData = nullptr;  // the device allocation behind `data`, or null
  bool flush = false;       // receive end in device memory: iflush each step before publishing it
  size_t geometry[TUTTI_NUM_PROTOCOLS] = {};  // the communicator's buffer sizes (what the ranks slice by)
  size_t regionOffset[TUTTI_NUM_PROTOCOLS] = {};
  size_t regionBytes[TUTTI_NUM_PROTOCOLS] = {};
  void* mhandles[TUTTI_NUM_PROTOCOLS] = {};
  size_t slotBytes = 0;  // receive end: the landing stride
  unsigned char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  bool handleCopied = false;
  // Proxy state: steps handed to the plugin and steps completed; requests of outstanding steps.
  uint64_t posted = 0, done = 0;
  bool failed = false;  // a plugin call failed: the end is closed and moves nothing more
  void* requests[TUTTI_STEPS] = {};
  std::shared_ptr<NetProxyTask> task;
  // Zero copy (netSendFrom / netRecvInto). Send end: the user buffer of each posted slot (null: the FIFO
  // slot), written by the rank before tail and cleared by the proxy when it posts the step. Receive end: the
  // user steps not posted yet, in step order (under userMutex; nUser counts them). Either end: the
  // registration of a user buffer in flight, per slot, deregistered when its step completes.
  const void* sendFrom[TUTTI_STEPS] = {};
  std::mutex userMutex;
  std::deque<NetUserStep> userSteps;
  std::atomic<size_t> nUser{0};
  void* userMh[TUTTI_STEPS] = {};
  std::atomic<bool> closedLocally{false};  // closed after a local cancel: the plugin touches no buffer again
  bool userLogged = false;                 // the first user-buffer step was logged
  void* userPtr[TUTTI_STEPS] = {};
  size_t userBytes[TUTTI_STEPS] = {};
  // Profiling: ProxyOps the ranks queued (under profMutex, in step order) and the ProxyStep of each slot in
  // flight. The counters belong to the proxy thread; `profiled` turns on with the first queued op.
  struct ProfOp {
    ProfEvent* ev;
    uint64_t first, end;  // the op's steps [first, end)
    bool begun;
  };
  std::atomic<bool> profiled{false};
  std::mutex profMutex;
  std::deque<ProfOp> profOps;
  ProfEvent* stepEv[TUTTI_STEPS] = {};
  bool profSynced = false;   // counters below aligned with posted / done
  uint64_t profStarted = 0;  // steps whose ProxyStep was started (or that belong to no op)
  uint64_t profStopped = 0;  // receive end: steps whose ProxyStep was stopped
  tuttiConnCtrl_t* ctrl() { return reinterpret_cast<tuttiConnCtrl_t*>(mem); }
  char* region(int proto) { return regionBytes[proto] ? data + regionOffset[proto] : nullptr; }
  // Receive end: where step `step` lands. Send end: the slot of `step` in protocol `proto`'s FIFO.
  char* landing(uint64_t step) { return data + regionOffset[TUTTI_PROTO_SIMPLE] + (step % TUTTI_STEPS) * slotBytes; }
  char* sendSlot(int proto, uint64_t step) {
    return data + regionOffset[proto] + (step % TUTTI_STEPS) * (regionBytes[proto] / TUTTI_STEPS);
  }
};

void publishCounter(uint64_t* counter, uint32_t* waiters, uint32_t* seq, uint64_t value) {
  host::publish(counter, waiters, seq, value, false);
}

void markClosed(NetEnd* e) {
  // The remote end is gone: flag the side the local primitives wait on.
  std::atomic_ref<uint32_t>(e->recv ? e->ctrl()->senderClosed : e->ctrl()->receiverClosed).store(1);
  publishCounter(&e->ctrl()->tail, &e->ctrl()->tailWaiters, &e->ctrl()->tailSeq,
                 std::atomic_ref<uint64_t>(e->ctrl()->tail).load());
  publishCounter(&e->ctrl()->head, &e->ctrl()->headWaiters, &e->ctrl()->headSeq,
                 std::atomic_ref<uint64_t>(e->ctrl()->head).load());
}

// ---- profiler ProxySteps (proxy thread; only once a ProxyOp was queued on the end) ------------------------

// Starts the ProxyStep of step `s` (== e->profStarted) in `state` when a queued op covers it. A step no op
// covers is passed over when `skipUncovered` (it is being posted: no op will come for it); otherwise the
// call returns false and the step is retried later (its op may not be queued yet).
bool profStepBegin(NetEnd* e, uint64_t s, ncclProfilerEventState_v6_t state, size_t bytes, bool skipUncovered) {
  ProfEvent* op = nullptr;
  bool first = false, last = false;
  uint64_t index = 0;
  {
    std::lock_guard<std::mutex> lock(e->profMutex);
    while (!e->profOps.empty() && e->profOps.front().end <= s) {  // steps that were never seen: op ends
      profRelease(e->profOps.front().ev);
      e->profOps.pop_front();
    }
    if (!e->profOps.empty() && e->profOps.front().first <= s) {
      NetEnd::ProfOp& o = e->profOps.front();
      op = o.ev;
      first = !o.begun;
      o.begun = true;
      index = s - o.first;
      last = s + 1 == o.end;
      if (last) e->profOps.pop_front();  // the queue's reference is dropped once the step holds its own
    }
  }
  if (!op) {
    if (!skipUncovered) return false;
    e->stepEv[s % TUTTI_STEPS] = nullptr;
    e->profStarted = s + 1;
    return true;
  }
  if (first) profRecordState(op, ncclProfilerProxyOpInProgress_v4, nullptr);
  ncclProfilerEventDescr_v6_t d{};
  d.type = ncclProfileProxyStep;
  d.rank = op->prof->rank;
  d.proxyStep.step = static_cast<int>(index);
  ProfEvent* step = profStart(op->prof, op, nullptr, &d);
  ncclProfilerEventStateArgs_v6_t a{};
  a.proxyStep.transSize = bytes;
  profRecordState(step, state, &a);
  e->stepEv[s % TUTTI_STEPS] = step;
  e->profStarted = s + 1;
  if (last) profRelease(op);
  return true;
}

void profStepState(NetEnd* e, uint64_t s, ncclProfilerEventState_v6_t state, size_t bytes) {
  if (s >= e->profStarted) profStepBegin(e, s, state, bytes, true);
  if (ProfEvent* step = e->stepEv[s % TUTTI_STEPS]) {
    ncclProfilerEventStateArgs_v6_t a{};
    a.proxyStep.transSize = bytes;
    profRecordState(step, state, &a);
  }
}

void profStepEnd(NetEnd* e, uint64_t s) {
  ProfEvent*& step = e->stepEv[s % TUTTI_STEPS];
  if (s < e->profStarted && step) {
    profRelease(step);
    step = nullptr;
  }
}

// First profiled round of an end: steps already in flight belong to no op.
void profSync(NetEnd* e) {
  e->profStarted = e->profStopped = e->posted;
  e->profSynced = true;
}

// Stops whatever the end still holds (it is being freed).
void profDrop(NetEnd* e) {
  for (ProfEvent*& step : e->stepEv)
    if (step) profRelease(std::exchange(step, nullptr));
  std::lock_guard<std::mutex> lock(e->profMutex);
  for (const NetEnd::ProfOp& o : e->profOps) profRelease(o.ev);
  e->profOps.clear();
}

ncclResult_t NetProxyTask::run(bool* active) {
  NetEnd* e = end_;
  NetState* net = loadNet();
  const ncclNet_v12_t& api = net->plugin->net;
  tuttiConnCtrl_t* ctrl = e->ctrl();
  auto fail = [&](const char* what) {
    e->failed = true;
    TUTTI_WARN("net: {} {} rank {} failed (see the plugin's message above)", what, e->recv ? "from" : "to", e->peer);
    markClosed(e);
    return ncclRemoteError;
  };
  // This end was closed locally (its communicator cancelled its operations after a failure, a revoke or a
  // shrink): close the network connection now, so the peer's proxy sees it end and the peer's ranks stop
  // waiting on us, even though this communicator lives on (a shrink still needs its bootstrap).
  if (std::atomic_ref<uint32_t>(e->recv ? ctrl->receiverClosed : ctrl->senderClosed).load(std::memory_order_acquire)) {
    if (e->comm) {
      for (void*& mh : e->mhandles)
        if (mh) api.deregMr(e->comm, std::exchange(mh, nullptr));
      for (void*& mh : e->userMh)
        if (mh) api.deregMr(e->comm, std::exchange(mh, nullptr));
      (e->recv ? api.closeRecv : api.closeSend)(std::exchange(e->comm, nullptr));
    }
    e->closedLocally.store(true, std::memory_order_release);
    return ncclRemoteError;  // the proxy stops progressing this end
  }
  // A failed end stays failed: the rank driving it may poll it again before the proxy thread drops it.
  if (e->failed) return ncclRemoteError;
  if (!e->recv) {
    // Sender: isend every step the primitives posted, oldest first; complete them in order.
    const uint64_t tail = std::atomic_ref<uint64_t>(ctrl->tail).load(std::memory_order_acquire);
    const bool prof = e->profiled.load(std::memory_order_relaxed);
    if (prof) [[unlikely]] {
      if (!e->profSynced) profSync(e);
      // Steps whose slot is free but whose data the rank has not posted yet: waiting for the "GPU".
      while (e->profStarted < e->done + TUTTI_STEPS &&
             profStepBegin(e, e->profStarted, ncclProfilerProxyStepSendGPUWait, 0, false)) {
      }
    }
    while (e->posted < tail && e->posted - e->done < TUTTI_STEPS) {
      const int slot = static_cast<int>(e->posted % TUTTI_STEPS);
      const int64_t bytes = std::atomic_ref<int64_t>(ctrl->sizes[slot]).load(std::memory_order_relaxed);
      const int32_t proto = std::atomic_ref<int32_t>(ctrl->protos[slot]).load(std::memory_order_relaxed);
      // An LL / LL128 slot goes out as its lines (flags included); the receiver reads them once tail says so.
      if (proto < 0 || proto >= TUTTI_NUM_PROTOCOLS || !e->regionBytes[proto]) return fail("send (bad protocol)");
      void* data = e->sendSlot(proto, e->posted);
      const size_t wire = lineWireBytes(proto, static_cast<size_t>(bytes));
      void* mh = e->mhandles[proto];
      if (const void* user = std::atomic_ref<const void*>(e->sendFrom[slot]).load(std::memory_order_relaxed)) {
        data = const_cast<void*>(user);
        // Registered once per step, kept across a busy plugin's retries.
        if (!e->userMh[slot] && api.regMr(e->comm, data, wire, NCCL_PTR_HOST, &e->userMh[slot]) != ncclSuccess)
          return fail("registering a user buffer to send");
        mh = e->userMh[slot];
        if (!std::exchange(e->userLogged, true))
          TUTTI_INFO(NCCL_NET, "net: steps to rank {} leave from user buffers (zero copy, {} bytes first)", e->peer,
                     wire);
      }
      void* req = nullptr;
      if (api.isend(e->comm, data, wire, 0, mh, nullptr, &req) != ncclSuccess) return fail("isend");
      if (!req) break;  // plugin busy: retry later
      std::atomic_ref<const void*>(e->sendFrom[slot]).store(nullptr, std::memory_order_relaxed);
      if (prof) [[unlikely]] profStepState(e, e->posted, ncclProfilerProxyStepSendWait, wire);
      e->requests[slot] = req;
      ++e->posted;
      *active = true;
    }
    while (e->done < e->posted) {
      int isDone = 0, size = 0;
      if (api.test(e->requests[e->done % TUTTI_STEPS], &isDone, &size) != ncclSuccess) return fail("send test");
      if (!isDone) break;
      if (prof) [[unlikely]] profStepEnd(e, e->done);
      if (void*& mh = e->userMh[e->done % TUTTI_STEPS]) api.deregMr(e->comm, std::exchange(mh, nullptr));
      ++e->done;
      publishCounter(&ctrl->head, &ctrl->headWaiters, &ctrl->headSeq, e->done);
      *active = true;
    }
  } else {
    // Receiver: keep an irecv posted into every free slot; publish completed ones in order.
    // Only steps an operation announced are received, so an idle connection has nothing posted.
    const uint64_t head = std::atomic_ref<uint64_t>(ctrl->head).load(std::memory_order_acquire);
    // Acquire: the user steps registered before an announcement are seen with it.
    const uint64_t wanted = std::atomic_ref<uint64_t>(ctrl->recvWanted).load(std::memory_order_acquire);
    const bool prof = e->profiled.load(std::memory_order_relaxed);
    if (prof) [[unlikely]] {
      if (!e->profSynced) profSync(e);
      // Steps the rank has consumed (head passed them): their ProxyStep ends.
      for (; e->profStopped < head && e->profStopped < e->done; ++e->profStopped) profStepEnd(e, e->profStopped);
    }
    while (e->posted < head + TUTTI_STEPS && e->posted < wanted && e->posted - e->done < TUTTI_STEPS) {
      const int slot = static_cast<int>(e->posted % TUTTI_STEPS);
      void* data = e->landing(e->posted);
      size_t size = e->slotBytes;
      void* mh = e->mhandles[TUTTI_PROTO_SIMPLE];
      if (!e->userMh[slot] && e->nUser.load(std::memory_order_acquire)) {
        std::lock_guard<std::mutex> lock(e->userMutex);
        while (!e->userSteps.empty() && e->userSteps.front().step < e->posted) e->userSteps.pop_front();
        if (!e->userSteps.empty() && e->userSteps.front().step == e->posted) {
          const NetUserStep u = e->userSteps.front();
          e->userSteps.pop_front();
          if (api.regMr(e->comm, u.ptr, u.bytes, NCCL_PTR_HOST, &e->userMh[slot]) != ncclSuccess)
            return fail("registering a user buffer to receive into");
          e->userPtr[slot] = u.ptr;
          e->userBytes[slot] = u.bytes;
        }
        e->nUser.store(e->userSteps.size(), std::memory_order_relaxed);
      }
      if (e->userMh[slot]) {  // this step lands in the user's buffer (kept across a busy plugin's retries)
        data = e->userPtr[slot];
        size = e->userBytes[slot];
        mh = e->userMh[slot];
        if (!std::exchange(e->userLogged, true))
          TUTTI_INFO(NCCL_NET, "net: steps from rank {} land in user buffers (zero copy, {} bytes first)", e->peer,
                     size);
      }
      int tag = 0;
      void* req = nullptr;
      if (api.irecv(e->comm, 1, &data, &size, &tag, &mh, nullptr, &req) != ncclSuccess) return fail("irecv");
      if (!req) break;
      if (prof) [[unlikely]] profStepState(e, e->posted, ncclProfilerProxyStepRecvWait, size);
      e->requests[e->posted % TUTTI_STEPS] = req;
      ++e->posted;
      *active = true;
    }
    while (e->done < e->posted) {
      int isDone = 0, size = 0;
      if (api.test(e->requests[e->done % TUTTI_STEPS], &isDone, &size) != ncclSuccess) return fail("receive test");
      if (!isDone) break;
      // Data the NIC wrote into device memory is visible to the kernels only after a flush (a read through
      // the NIC that orders its earlier writes), done before tail publishes the step.
      if (e->flush && size > 0) {
        void* data = e->landing(e->done);
        int flushSize = size;
        void* flush = nullptr;
        if (api.iflush(e->comm, 1, &data, &flushSize, &e->mhandles[TUTTI_PROTO_SIMPLE], &flush) != ncclSuccess)
          return fail("flush");
        for (int flushed = !flush; !flushed;)
          if (api.test(flush, &flushed, &flushSize) != ncclSuccess) return fail("flush test");
      }
      // Received: the step now waits for the rank to consume it (host memory needs no flush).
      if (prof) [[unlikely]] profStepState(e, e->done, ncclProfilerProxyStepRecvGPUWait, static_cast<size_t>(size));
      std::atomic_ref<int64_t>(ctrl->sizes[e->done % TUTTI_STEPS]).store(size, std::memory_order_relaxed);
      std::atomic_ref<int32_t>(ctrl->protos[e->done % TUTTI_STEPS]).store(-1, std::memory_order_relaxed);
      if (void*& mh = e->userMh[e->done % TUTTI_STEPS]) api.deregMr(e->comm, std::exchange(mh, nullptr));
      ++e->done;
      publishCounter(&ctrl->tail, &ctrl->tailWaiters, &ctrl->tailSeq, e->done);
      *active = true;
    }
  }
  return ncclSuccess;
}

void* NetProxyTask::inFlight() const {
  const NetEnd* e = end_;
  return e->posted != e->done && !e->failed ? e->comm : nullptr;
}

bool NetProxyTask::busy() const {
  const NetEnd* e = end_;
  if (e->posted != e->done) return true;
  const tuttiConnCtrl_t* ctrl = reinterpret_cast<const tuttiConnCtrl_t*>(e->mem);
  const uint64_t posted = std::atomic_ref<const uint64_t>(e->recv ? ctrl->recvWanted : ctrl->tail)
                              .load(std::memory_order_relaxed);
  return posted > e->posted;
}

// Whether the FIFOs of a connection of this request go in device memory, registered with the plugin directly.
bool useDeviceFifos(const tuttiConnectRequest_t* req, int dev) {
  const NetState* net = loadNet();
  if (!req->devMem || dev >= static_cast<int>(net->ptrSupport.size())) return false;
  if (!(net->ptrSupport[dev] & (NCCL_PTR_CUDA | NCCL_PTR_DMABUF))) return false;
  return strcasecmp(paramString("NCCL_NET_GDR_LEVEL").c_str(), "LOC") != 0;
}

void freeEnd(NetEnd* e) {
  if (e->devData && e->devMem->free(e->devData) != ncclSuccess)
    TUTTI_WARN("net: freeing the device FIFOs of the connection with rank {} failed", e->peer);
  std::free(e->mem);
  delete e;
}

ncclResult_t allocEnd(const tuttiConnectRequest_t* req, bool recv, NetEnd** out) {
  auto e = std::make_unique<NetEnd>();
  e->recv = recv;
  e->peer = req->peer;
  e->dev = loadNet()->nDevs > 0 ? req->channel % loadNet()->nDevs : 0;
  const bool device = useDeviceFifos(req, e->dev);
  size_t total = device ? 0 : kCtrlBytes;
  for (int p = 0; p < TUTTI_NUM_PROTOCOLS; ++p) {
    e->geometry[p] = req->buffSizes[p];
    e->slotBytes = std::max(e->slotBytes, req->buffSizes[p] / TUTTI_STEPS);
  }
  for (int p = 0; p < TUTTI_NUM_PROTOCOLS; ++p) {
    const size_t bytes = recv ? (p == TUTTI_PROTO_SIMPLE ? e->slotBytes * TUTTI_STEPS : 0) : req->buffSizes[p];
    e->regionOffset[p] = total;
    e->regionBytes[p] = bytes;
    total += (bytes + 4095) & ~size_t{4095};
  }
  e->mem = static_cast<char*>(std::aligned_alloc(4096, device ? kCtrlBytes : total));
  if (!e->mem) TUTTI_FAIL(ncclSystemError, "net: cannot allocate {} bytes of FIFO", total);
  std::memset(e->mem, 0, kCtrlBytes);
  // The Simple region in host memory too: its first 4 MiB are faulted in now rather than during the first calls
  // that reach them (1024 faults). The rest of a larger region (a point-to-point connection's, TUTTI_NET_P2P_BUFFSIZE,
  // whose long steps mostly move between user buffers and the wire) and the other regions fault in on first use.
  if (!device && e->regionBytes[TUTTI_PROTO_SIMPLE])
    std::memset(e->mem + e->regionOffset[TUTTI_PROTO_SIMPLE], 0,
                std::min(e->regionBytes[TUTTI_PROTO_SIMPLE], size_t{4} << 20));
  e->data = e->mem;
  if (device) {
    if (req->devMem->alloc(&e->devData, total) != ncclSuccess) {
      std::free(e->mem);
      TUTTI_FAIL(ncclSystemError, "net: cannot allocate {} bytes of device memory for the FIFOs of the connection "
                 "with rank {} (NCCL_NET_GDR_LEVEL=LOC keeps them in host memory)", total, e->peer);
    }
    e->devMem = req->devMem;
    e->data = static_cast<char*>(e->devData);
    e->flush = recv && loadNet()->plugin->net.iflush && paramInt("NCCL_GDR_FLUSH_DISABLE") == 0;
  }
  *out = e.release();
  return ncclSuccess;
}

// Registers one region with the plugin: host memory as NCCL_PTR_HOST; device memory through a DMA-BUF fd where
// the plugin and the runtime both can, else as NCCL_PTR_CUDA.
ncclResult_t registerRegion(NetEnd* e, int proto) {
  NetState* net = loadNet();
  const ncclNet_v12_t& api = net->plugin->net;
  void* base = e->region(proto);
  const size_t bytes = e->regionBytes[proto];
  if (!e->devData) {
    if (api.regMr(e->comm, base, bytes, NCCL_PTR_HOST, &e->mhandles[proto]) != ncclSuccess)
      TUTTI_FAIL(ncclSystemError, "net: {} could not register {} bytes of host memory", net->name, bytes);
    return ncclSuccess;
  }
  int fd = -1;
  uint64_t offset = 0;
  if ((net->ptrSupport[e->dev] & NCCL_PTR_DMABUF) && api.regMrDmaBuf && e->devMem->dmabufFd)
    TUTTI_CHECK(e->devMem->dmabufFd(base, bytes, &fd, &offset));
  ncclResult_t res;
  if (fd >= 0) {
    res = api.regMrDmaBuf(e->comm, base, bytes, NCCL_PTR_CUDA, offset, fd, &e->mhandles[proto]);
    close(fd);  // the registration holds its own reference
  } else {
    res = api.regMr(e->comm, base, bytes, NCCL_PTR_CUDA, &e->mhandles[proto]);
  }
  if (res != ncclSuccess)
    TUTTI_FAIL(ncclSystemError, "net: {} could not register {} bytes of device memory{} (NCCL_NET_GDR_LEVEL=LOC keeps "
               "the FIFOs in host memory)", net->name, bytes, fd >= 0 ? " through DMA-BUF" : "");
  TUTTI_INFO(NCCL_NET, "net: connection {} rank {}: {} FIFO of {} bytes in device memory, registered{}",
             e->recv ? "from" : "to", e->peer,
             proto == TUTTI_PROTO_LL ? "LL" : proto == TUTTI_PROTO_LL128 ? "LL128" : "Simple", bytes, fd >= 0 ? " through DMA-BUF" : " as CUDA memory");
  return ncclSuccess;
}

ncclResult_t registerAndStart(NetEnd* e, tuttiConnector_t* conn) {
  for (int p = 0; p < TUTTI_NUM_PROTOCOLS; ++p)
    if (e->regionBytes[p]) TUTTI_CHECK(registerRegion(e, p));
  std::memset(conn, 0, sizeof *conn);
  // Sizes are the communicator's geometry on both ends; a receive end's buffers all point at the landing
  // region (prims read every proxied slot there).
  for (int p = 0; p < TUTTI_NUM_PROTOCOLS; ++p) {
    conn->buffSizes[p] = e->geometry[p];
    conn->buffs[p] = e->geometry[p] ? (e->recv ? e->region(TUTTI_PROTO_SIMPLE) : e->region(p)) : nullptr;
  }
  conn->ctrl = e->ctrl();
  conn->shared = 0;
  // Whole slots arrive through the proxy: readers wait for tail, then every line is complete.
  conn->flags = TUTTI_CONN_PROXIED;
  e->task = std::make_shared<NetProxyTask>(e);
  proxyAdd(e->task);
  return ncclSuccess;
}

// ---- the transport table ----------------------------------------------------------------------------

ncclResult_t netInit(ncclDebugLogger_t, void** ctx) {
  *ctx = nullptr;
  return ncclSuccess;
}

ncclResult_t netCanConnect(void*, const tuttiPeerInfo_t*, const tuttiPeerInfo_t*, int* ret) {
  NetState* s = loadNet();
  *ret = s->plugin != nullptr && s->nDevs > 0;
  return ncclSuccess;
}

ncclResult_t netRecvSetup(void*, const tuttiConnectRequest_t* req, const tuttiPeerInfo_t*, const tuttiPeerInfo_t*,
                          void* info, void** res) {
  NetEnd* e = nullptr;
  TUTTI_CHECK(allocEnd(req, true, &e));
  NetState* net = loadNet();
  if (net->plugin->net.listen(net->ctx, e->dev, e->handle, &e->listenComm) != ncclSuccess) {
    const int dev = e->dev;
    freeEnd(e);
    TUTTI_FAIL(ncclSystemError, "net: {} could not listen on device {}", net->name, dev);
  }
  std::memcpy(info, e->handle, NCCL_NET_HANDLE_MAXSIZE);
  *res = e;
  return ncclSuccess;
}

ncclResult_t netSendSetup(void*, const tuttiConnectRequest_t* req, const tuttiPeerInfo_t*, const tuttiPeerInfo_t*,
                          void*, void** res) {
  NetEnd* e = nullptr;
  TUTTI_CHECK(allocEnd(req, false, &e));
  *res = e;
  return ncclSuccess;
}

ncclResult_t netRecvConnect(void* res, const void*, tuttiConnector_t* conn) {
  auto* e = static_cast<NetEnd*>(res);
  NetState* net = loadNet();
  ncclNetDeviceHandle_v12_t* devHandle = nullptr;
  if (net->plugin->net.accept(e->listenComm, &e->comm, &devHandle) != ncclSuccess)
    TUTTI_FAIL(ncclRemoteError, "net: {} accept from rank {} failed", net->name, e->peer);
  if (!e->comm) return ncclInProgress;
  net->plugin->net.closeListen(e->listenComm);
  e->listenComm = nullptr;
  return registerAndStart(e, conn);
}

ncclResult_t netSendConnect(void* res, const void* peerInfo, tuttiConnector_t* conn) {
  auto* e = static_cast<NetEnd*>(res);
  NetState* net = loadNet();
  // NCCL plugins keep connect state in the handle between retries: copy it only once.
  if (!e->handleCopied) {
    std::memcpy(e->handle, peerInfo, NCCL_NET_HANDLE_MAXSIZE);
    e->handleCopied = true;
  }
  ncclNetDeviceHandle_v12_t* devHandle = nullptr;
  if (net->plugin->net.connect(net->ctx, e->dev, e->handle, &e->comm, &devHandle) != ncclSuccess)
    TUTTI_FAIL(ncclRemoteError, "net: {} connect to rank {} failed", net->name, e->peer);
  if (!e->comm) return ncclInProgress;
  return registerAndStart(e, conn);
}

// A send completes for the primitives once its slot is posted; the proxy may still be pushing it out.
// Before closing, let the proxy finish what was posted, unless either end is gone (bounded wait).
void drainSends(NetEnd* e) {
  tuttiConnCtrl_t* ctrl = e->ctrl();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    proxyRelease(e->task.get());  // a rank may have driven this end: whatever is left is the proxy's now
    const uint64_t tail = std::atomic_ref<uint64_t>(ctrl->tail).load(std::memory_order_acquire);
    const uint64_t head = std::atomic_ref<uint64_t>(ctrl->head).load(std::memory_order_acquire);
    if (head >= tail || std::atomic_ref<uint32_t>(ctrl->senderClosed).load() ||
        std::atomic_ref<uint32_t>(ctrl->receiverClosed).load())
      return;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  TUTTI_WARN("net: closing the connection to rank {} with data still unsent after 10 s", e->peer);
}

ncclResult_t netFree(void* res) {
  auto* e = static_cast<NetEnd*>(res);
  if (!e) return ncclSuccess;
  const ncclNet_v12_t& api = loadNet()->plugin->net;
  if (e->task && !e->recv) drainSends(e);
  if (e->task) proxyRemove(e->task.get());
  profDrop(e);  // before the communicator's profilers are finalized
  for (void* mh : e->mhandles)
    if (mh) api.deregMr(e->comm, mh);
  for (void* mh : e->userMh)
    if (mh) api.deregMr(e->comm, mh);
  if (e->comm) (e->recv ? api.closeRecv : api.closeSend)(e->comm);
  if (e->listenComm) api.closeListen(e->listenComm);
  freeEnd(e);
  return ncclSuccess;
}

tuttiTransport_v1_t makeTable() {
  tuttiTransport_v1_t t;
  std::memset(&t, 0, sizeof t);
  t.size = sizeof t;
  t.version = TUTTI_TRANSPORT_ABI_VERSION;
  t.name = "net";
  t.init = netInit;
  t.canConnect = netCanConnect;
  t.recvSetup = netRecvSetup;
  t.sendSetup = netSendSetup;
  t.recvConnect = netRecvConnect;
  t.sendConnect = netSendConnect;
  t.free = netFree;
  t.caps = TUTTI_TRANSPORT_CAP_LL128;  // whole slots are moved after tail, never a partial line
  return t;
}

}  // namespace

const tuttiTransport_v1_t& netTransportTable() {
  static const tuttiTransport_v1_t table = makeTable();
  return table;
}

bool netTransportIs(const tuttiTransport_v1_t& api) { return api.free == netFree; }

void netProfilePost(void* res, ProfEvent* op, uint64_t firstStep, uint64_t nSteps) {
  auto* e = static_cast<NetEnd*>(res);
  {
    std::lock_guard<std::mutex> lock(e->profMutex);
    e->profOps.push_back({op, firstStep, firstStep + nSteps, false});
  }
  e->profiled.store(true, std::memory_order_release);
}

bool netTakesUserBuffers(void* res) {
  const NetState* net = loadNet();
  const int dev = static_cast<NetEnd*>(res)->dev;
  return !static_cast<NetEnd*>(res)->devData && dev < static_cast<int>(net->ptrSupport.size()) &&
         (net->ptrSupport[dev] & NCCL_PTR_HOST);
}

size_t netZeroCopyAutoMinBytes(void* res) {
  // Measured once per process, on the first end asked about: a registration and its release of a 64 KiB buffer,
  // the best of three.
  static std::atomic<int64_t> costNs{-1};
  int64_t cost = costNs.load(std::memory_order_acquire);
  if (cost < 0) {
    auto* e = static_cast<NetEnd*>(res);
    const ncclNet_v12_t& api = loadNet()->plugin->net;
    constexpr size_t kProbeBytes = size_t{64} << 10;
    std::vector<char> probe(kProbeBytes, 1);
    cost = INT64_MAX;
    for (int i = 0; i < 3 && e->comm; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      void* mh = nullptr;
      if (api.regMr(e->comm, probe.data(), probe.size(), NCCL_PTR_HOST, &mh) != ncclSuccess) break;
      api.deregMr(e->comm, mh);
      cost = std::min<int64_t>(
          cost, std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
    }
    costNs.store(cost, std::memory_order_release);
    TUTTI_INFO(NCCL_INIT | NCCL_NET, "net: registering 64 KiB of user memory with {} costs {}", loadNet()->name,
               cost == INT64_MAX ? std::string("(failed)") : std::to_string(cost) + " ns");
  }
  if (cost == INT64_MAX) return 0;
  // Zero copy from the step whose copy, at 10 bytes per ns, would cost at least the registration: never under
  // 16 KiB, where the copy is a few hundred ns and the FIFO path measured as fast.
  size_t min = size_t{16} << 10;
  while (min < (size_t{1} << 30) && static_cast<int64_t>(min / 10) < cost) min <<= 1;
  return min;
}

bool netEndClosed(void* res) { return static_cast<NetEnd*>(res)->closedLocally.load(std::memory_order_acquire); }

void netSendFrom(void* res, uint64_t step, const void* data) {
  auto* e = static_cast<NetEnd*>(res);
  std::atomic_ref<const void*>(e->sendFrom[step % TUTTI_STEPS]).store(data, std::memory_order_relaxed);
}

void netRecvInto(void* res, const NetUserStep* steps, size_t n) {
  if (n == 0) return;
  auto* e = static_cast<NetEnd*>(res);
  std::lock_guard<std::mutex> lock(e->userMutex);
  e->userSteps.insert(e->userSteps.end(), steps, steps + n);
  e->nUser.store(e->userSteps.size(), std::memory_order_release);
}

ProxyTask* netProxyTaskOf(void* res) { return static_cast<NetEnd*>(res)->task.get(); }

const char* netTransportPluginName() { return loadNet()->name.c_str(); }

}  // namespace tutti
