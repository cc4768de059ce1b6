#include "comm/det_coll.h"

#include "comm/comm.h"
#include "device/common/dtypes.h"
#include "device/host/det_reduce_copy.h"
#include "device/host/stream.h"
#include "plan/plan.h"
#include "device/common/protocols.h"
#include "util/check.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

namespace tutti {

namespace {

// One deterministic call on one rank: its three phases, and the scratch rows its exchange fills.
struct DetCall {
  Task task;
  ResolvedRedOp op{};
  int rank = 0, nRanks = 1;
  size_t esize = 1;
  size_t mine = 0;      // elements this rank reduces
  size_t mineOff = 0;   // ... at this element offset of the input (AllReduce, Reduce) / output block (RS: 0)
  std::vector<Task> exchange, gather;  // phases 1 and 3
  // Rows of the peers' inputs for this rank's part (rank order, this rank's own left out), then, on a
  // non-root rank of a Reduce, the reduced part it sends the root.
  // Host memory owned by the call (host backend), or the communicator's scratch (device backends, whose
  // calls run one after another on the communicator's internal stream).
  char* rows = nullptr;
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> owned;
  Task local;  // device backends: the local step as a collective of its own (Task::plan)
  // A user's PreMulSum: each rank's scalar scales that rank's input (scalars may differ from rank to rank),
  // so every sender passes its scalar along with its rows; scalars[s * esize] holds rank s's.
  bool rankScaled = false;
  uint64_t ownScalar = 0;  // ResolvedRedOp::scalarBits, the source of the sends unless the scalar is a pointer
  std::vector<char> scalars;

  char* row(int peer) const { return rows + size_t(peer < rank ? peer : peer - 1) * mine * esize; }
  char* reducedPart() const { return rows + size_t(nRanks - 1) * mine * esize; }
};

// Slice j of `count` elements cut into n: the first count % n slices hold one element more.
size_t sliceOff(size_t count, int n, int j) { return (count / n) * j + std::min<size_t>(j, count % n); }
size_t sliceLen(size_t count, int n, int j) { return count / n + (size_t(j) < count % n ? 1 : 0); }

Task p2pTask(const DetCall& c, ncclFunc_t func, int peer, const void* send, void* recv, size_t elems) {
  Task p;
  p.func = func;
  p.comm = c.task.comm;
  p.sendbuff = send;
  p.recvbuff = recv;
  p.count = elems * c.esize;
  p.datatype = ncclUint8;
  p.root = peer;
  p.stream = c.task.stream;
  return p;
}

// Phase 2: this rank's part, reduced in the fixed order from its own input (in[rank]) and the peers' rows into
// out.
void partPointers(const DetCall& c, const void** in, void** out) {
  const Task& t = c.task;
  const size_t es = c.esize;
  const char* own = static_cast<const char*>(t.sendbuff) +
                    (t.func == ncclFuncReduceScatter ? size_t(c.rank) * t.count : c.mineOff) * es;
  for (int s = 0; s < c.nRanks; ++s) in[s] = s == c.rank ? own : c.row(s);
  *out = t.func == ncclFuncReduceScatter ? t.recvbuff
         : (t.func == ncclFuncReduce && c.rank != t.root)
             ? static_cast<void*>(c.reducedPart())
             : static_cast<void*>(static_cast<char*>(t.recvbuff) + c.mineOff * es);
}

// Device backends: phase 2 as a local symmetric step (sym.h, SymPeers::local) the collective kernel runs.
ncclResult_t buildLocalStep(DetCall* c) {
  const Task& t = c->task;
  if (c->nRanks > kSymMaxRanks)
    TUTTI_FAIL(ncclInvalidUsage, "rank {}: deterministic {} on the {} backend takes at most {} ranks (this "
               "communicator has {})", c->rank, funcName(t.func), backendName(t.comm->backend), kSymMaxRanks,
               c->nRanks);
  if (c->rankScaled)
    TUTTI_FAIL(ncclInvalidUsage, "rank {}: deterministic {} with a ncclRedOpCreatePreMulSum op runs on the host "
               "backend only for now (each rank's scalar scales its own input; the {} backend's kernels take one "
               "scalar)", c->rank, funcName(t.func), backendName(t.comm->backend));
  auto peers = std::make_shared<SymPeers>();
  const void* in[kSymMaxRanks];
  void* out = nullptr;
  partPointers(*c, in, &out);
  for (int s = 0; s < c->nRanks; ++s) peers->send[s] = const_cast<char*>(static_cast<const char*>(in[s]));
  peers->recv[0] = static_cast<char*>(out);
  peers->local = true;
  auto plan = std::make_shared<CollPlan>();
  plan->task = t;
  plan->task.func = ncclFuncReduceScatter;
  plan->task.count = c->mine;
  plan->task.api = {};
  plan->task.prof = {};
  plan->op = c->op;
  plan->eltSize = c->esize;
  plan->algorithm = kAlgoSymmetric;
  plan->protocol = TUTTI_PROTO_SIMPLE;
  plan->nBytes = c->mine * c->esize;
  plan->decider = "deterministic";
  plan->sym = std::move(peers);
  plan->local = true;
  const int nb = static_cast<int>(std::clamp<size_t>(divUp(plan->nBytes, kMinBytesPerChannel), 1,
                                                     std::min(t.comm->nChannels, kSymMaxBlocks)));
  const size_t align = std::max<size_t>(1, 64 / c->esize);
  const size_t perBlock = alignUp(divUp(c->mine, nb), align);
  for (int b = 0; b < nb; ++b) {
    CollWork w{};
    w.func = ncclFuncReduceScatter;
    w.nRanks = c->nRanks;
    w.ringIx = 0;
    w.count = c->mine;
    w.chOffset = std::min(c->mine, perBlock * b);
    w.chCount = std::min(perBlock, c->mine - w.chOffset);
    w.chunkCount = w.chCount;
    w.align = align;
    plan->work.push_back(w);
  }
  c->local = plan->task;
  c->local.plan = std::move(plan);
  return ncclSuccess;
}

ncclResult_t buildCall(const Task& t, DetCall* c) {
  ncclComm* comm = t.comm;
  c->task = t;
  c->rank = comm->rank;
  c->nRanks = comm->nRanks;
  c->esize = dataTypeSize(t.datatype);
  TUTTI_CHECK(comm->redOps->resolve(t.op, t.datatype, &c->op, funcName(t.func)));
  const int n = c->nRanks, r = c->rank;
  const char* send = static_cast<const char*>(t.sendbuff);
  char* recv = static_cast<char*>(t.recvbuff);
  const size_t es = c->esize;
  if (t.func == ncclFuncReduceScatter) {
    c->mine = t.count;
    c->mineOff = 0;
  } else {
    c->mine = sliceLen(t.count, n, r);
    c->mineOff = sliceOff(t.count, n, r);
  }
  const bool reduceLeaf = t.func == ncclFuncReduce && r != t.root;
  const size_t rows = size_t(n - 1) + (reduceLeaf ? 1 : 0);
  if (rows > 0 && c->mine > 0) {
    const size_t bytes = rows * c->mine * es;
    if (comm->backend == Backend::Host) {
      c->owned.reset(static_cast<char*>(std::malloc(bytes)));
      if (!c->owned)
        TUTTI_FAIL(ncclSystemError, "rank {}: deterministic {}: cannot allocate {} bytes of scratch rows", r,
                   funcName(t.func), bytes);
      c->rows = c->owned.get();
    } else {
      void* p = nullptr;
      TUTTI_CHECK(commScratch(comm, bytes, &p));
      c->rows = static_cast<char*>(p);
    }
  }
  c->rankScaled = c->op.kind == RedOpKind::PreMulSum && c->op.op != ncclAvg;
  if (c->rankScaled) {
    c->ownScalar = c->op.scalarBits;
    c->scalars.assign(size_t(n) * es, 0);
  }
  const void* ownScalar = c->op.scalarIsPtr ? c->op.scalarPtr : static_cast<const void*>(&c->ownScalar);
  for (int d = 1; d < n; ++d) {
    const int to = (r + d) % n, from = (r + n - d) % n;
    // What `to` reduces of this rank's input.
    const size_t toOff = t.func == ncclFuncReduceScatter ? size_t(to) * t.count : sliceOff(t.count, n, to);
    const size_t toLen = t.func == ncclFuncReduceScatter ? t.count : sliceLen(t.count, n, to);
    if (toLen > 0) {
      if (c->rankScaled) c->exchange.push_back(p2pTask(*c, ncclFuncSend, to, ownScalar, nullptr, 1));
      c->exchange.push_back(p2pTask(*c, ncclFuncSend, to, send + toOff * es, nullptr, toLen));
    }
    if (c->mine > 0) {
      if (c->rankScaled)
        c->exchange.push_back(p2pTask(*c, ncclFuncRecv, from, nullptr, c->scalars.data() + size_t(from) * es, 1));
      c->exchange.push_back(p2pTask(*c, ncclFuncRecv, from, nullptr, c->row(from), c->mine));
    }
  }
  if (comm->backend != Backend::Host && c->mine > 0) TUTTI_CHECK(buildLocalStep(c));
  if (t.func == ncclFuncAllReduce) {
    for (int d = 1; d < n; ++d) {
      const int to = (r + d) % n, from = (r + n - d) % n;
      if (c->mine > 0) c->gather.push_back(p2pTask(*c, ncclFuncSend, to, recv + c->mineOff * es, nullptr, c->mine));
      const size_t fromLen = sliceLen(t.count, n, from);
      if (fromLen > 0)
        c->gather.push_back(
            p2pTask(*c, ncclFuncRecv, from, nullptr, recv + sliceOff(t.count, n, from) * es, fromLen));
    }
  } else if (t.func == ncclFuncReduce) {
    if (reduceLeaf && c->mine > 0) {
      c->gather.push_back(p2pTask(*c, ncclFuncSend, t.root, c->reducedPart(), nullptr, c->mine));
    } else if (!reduceLeaf) {
      for (int from = 0; from < n; ++from) {
        const size_t fromLen = sliceLen(t.count, n, from);
        if (from != r && fromLen > 0)
          c->gather.push_back(
              p2pTask(*c, ncclFuncRecv, from, nullptr, recv + sliceOff(t.count, n, from) * es, fromLen));
      }
    }
  }
  return ncclSuccess;
}

// Phase 2 on the host backend, on the calling thread (stream NULL) or the stream's.
void reduceLocal(const DetCall& c) {
  if (c.mine == 0) return;
  const size_t es = c.esize;
  std::vector<const void*> in(c.nRanks);
  void* out = nullptr;
  partPointers(c, in.data(), &out);
  if (c.rankScaled) {
    // This rank's own scalar, read now (a "device" scalar is read when the call runs, as the kernels do).
    const void* own = c.op.scalarIsPtr ? c.op.scalarPtr : static_cast<const void*>(&c.ownScalar);
    std::memcpy(const_cast<char*>(c.scalars.data()) + size_t(c.rank) * es, own, es);
  }
  hostDetReduceCopy(c.op, c.nRanks, in.data(), 1, &out, c.mine, c.rankScaled ? c.scalars.data() : nullptr);
}

// Runs `fn` after the work queued so far on the call's stream, or now when it has none.
ncclResult_t onStream(const Task& t, host::WorkItem fn) {
  if (!t.stream) return fn();
  auto alive = std::make_shared<CommOpsGuard>(t.comm);
  host::HostStream::fromHandle(t.stream)->enqueue([fn = std::move(fn), alive]() mutable {
    ncclResult_t res = fn();
    alive.reset();
    return res;
  });
  return ncclSuccess;
}

// One round: the k-th deterministic call of each communicator of the group, phase by phase.
ncclResult_t runRound(std::vector<std::shared_ptr<DetCall>>& calls, const DetLaunchFn& launch) {
  std::vector<Task> phase;
  for (auto& c : calls) phase.insert(phase.end(), c->exchange.begin(), c->exchange.end());
  if (!phase.empty()) TUTTI_CHECK(launch(phase.data(), phase.size()));
  for (auto& c : calls) {
    if (c->task.comm->backend != Backend::Host) continue;
    TUTTI_CHECK(onStream(c->task, [c]() {
      reduceLocal(*c);
      return ncclSuccess;
    }));
  }
  phase.clear();
  for (auto& c : calls)
    if (c->local.plan) phase.push_back(c->local);
  if (!phase.empty()) TUTTI_CHECK(launch(phase.data(), phase.size()));
  phase.clear();
  for (auto& c : calls) phase.insert(phase.end(), c->gather.begin(), c->gather.end());
  if (!phase.empty()) TUTTI_CHECK(launch(phase.data(), phase.size()));
  // Queued work: the scratch rows stay until the call's last phase has run.
  for (auto& c : calls) {
    if (c->task.stream && c->task.comm->backend == Backend::Host)
      TUTTI_CHECK(onStream(c->task, [c]() { return ncclSuccess; }));
  }
  return ncclSuccess;
}

}  // namespace

bool detTask(const Task& t) {
  return (t.func == ncclFuncAllReduce || t.func == ncclFuncReduceScatter || t.func == ncclFuncReduce) &&
         t.comm->deterministic.load(std::memory_order_relaxed) && dataTypeIsFloat(t.datatype);
}

ncclResult_t detLaunchGroup(const Task* tasks, size_t nTasks, const DetLaunchFn& launch) {
  std::vector<Task> plain;
  std::vector<ncclComm*> comms;
  std::vector<std::vector<const Task*>> perComm;  // deterministic tasks of comms[i], in issue order
  for (size_t i = 0; i < nTasks; ++i) {
    const Task& t = tasks[i];
    if (!detTask(t)) {
      plain.push_back(t);
      continue;
    }
    const size_t ci = std::find(comms.begin(), comms.end(), t.comm) - comms.begin();
    if (ci == comms.size()) {
      comms.push_back(t.comm);
      perComm.emplace_back();
    }
    perComm[ci].push_back(&t);
  }
  if (!plain.empty()) TUTTI_CHECK(launch(plain.data(), plain.size()));
  for (size_t k = 0;; ++k) {
    std::vector<std::shared_ptr<DetCall>> calls;
    for (const auto& list : perComm) {
      if (k >= list.size()) continue;
      auto c = std::make_shared<DetCall>();
      TUTTI_CHECK(buildCall(*list[k], c.get()));
      if (logEnabled(NCCL_LOG_INFO, NCCL_COLL)) {
        const Task& t = c->task;
        TUTTI_INFO(NCCL_COLL, "{}: count {} datatype {} op {} root {} comm {} [nranks={}] deterministic exchange "
                   "(rank {} reduces {} elements)", funcName(t.func), t.count, dataTypeName(t.datatype),
                   static_cast<int>(t.op), t.root, static_cast<void*>(t.comm), c->nRanks, c->rank, c->mine);
      }
      calls.push_back(std::move(c));
    }
    if (calls.empty()) break;
    TUTTI_CHECK(runRound(calls, launch));
  }
  return ncclSuccess;
}

}  // namespace tutti
