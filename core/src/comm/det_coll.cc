#include "comm/det_coll.h"

#include "comm/comm.h"
#include "comm/profiler.h"
#include "device/common/dtypes.h"
#include "device/common/protocols.h"
#include "device/host/det_exchange.h"
#include "device/host/det_reduce_copy.h"
#include "device/host/direct_copy.h"
#include "device/host/oneshot.h"
#include "device/host/stream.h"
#include "plan/plan.h"
#include "plan/tuning.h"
#include "plugin/params.h"
#include "util/check.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

namespace tutti {

namespace {

// One fixed-order reduction of `len` elements: in[s] is rank s's input (rows in this rank's memory).
struct DetPart {
  std::vector<const void*> in;
  void* out = nullptr;
  size_t len = 0;
};

// One deterministic call on one rank: its phases, and the scratch its data movement fills.
struct DetCall {
  Task task;
  ResolvedRedOp op{};
  int rank = 0, nRanks = 1;
  size_t esize = 1;
  bool oneShot = false;
  // A segment of a larger call (segmentElems): which of how many, and for a ReduceScatter the
  // elements from one rank's block of the input to the next (the whole call's count; 0: this task's count).
  size_t segment = 0, segments = 1;
  size_t stride = 0;
  std::shared_ptr<const DetCall> lead;  // a later segment: the first, whose profiler event it shares
  std::vector<Task> prelude;           // device backends, per-rank PreMulSum scalars: storing this rank's
  std::vector<Task> exchange, gather;  // phases 1 and 3 (tasks of any kind, launched as a group each)
  std::vector<DetPart> parts;          // phase 2
  std::vector<Task> local;             // device backends: phase 2 as collectives of their own (Task::plan)
  // Scratch: host memory the call holds until its last phase ran (host backend; from and back to the
  // communicator's pool), or the communicator's scratch (device backends, whose calls run one after another on
  // the communicator's internal stream).
  char* scratch = nullptr;
  size_t held = 0;  // host backend: bytes of `scratch`, returned to the pool by the destructor
  DetCall() = default;
  DetCall(const DetCall&) = delete;
  DetCall& operator=(const DetCall&) = delete;
  ~DetCall();
  // A user's PreMulSum: each rank's scalar scales that rank's input (scalars may differ from rank to rank), so
  // every sender passes its scalar along with its rows; scalars[s * esize] holds rank s's.
  bool rankScaled = false;
  uint64_t ownScalar = 0;  // ResolvedRedOp::scalarBits, the source of the sends unless the scalar is a pointer
  std::vector<char> scalars;
  // Device backends: the n scalars in the scratch (device memory); this rank's is stored there by a kernel step
  // (the prelude), which the sends read and which works under capture as well.
  char* devScalars = nullptr;
  // Host backend, fused exchange of an in-place call: reduced elements whose input this rank may still be sending
  // (the tail, or a one-shot call's whole output) wait in the scratch, then go to their place (local phase).
  size_t fusedReduces = 0;  // elements the fused exchange reduces on this rank (log line)
  size_t stepBytes = 0;     // the fused exchange's step (log line; 0: no fused exchange)
  const char* parkedFrom = nullptr;
  char* parkedTo = nullptr;
  size_t parkedBytes = 0;
};

// Host pool: at most this many free buffers stay with a communicator; the largest are kept.
constexpr size_t kDetPoolBuffers = 4;

DetCall::~DetCall() {
  if (!held) return;
  ncclComm* comm = task.comm;
  std::lock_guard<std::mutex> lock(comm->detScratchMutex);
  auto& pool = comm->detScratchFree;
  pool.emplace_back(scratch, held);
  if (pool.size() > kDetPoolBuffers) {
    auto smallest = std::min_element(pool.begin(), pool.end(), [](auto& a, auto& b) { return a.second < b.second; });
    std::free(smallest->first);
    pool.erase(smallest);
  }
}

// A step of the call (NCCL_ALGO / NCCL_PROTO do not apply) on its stream: a send to or receive from `peer`, or an
// AllGather, of `elems` elements, counted in bytes.
Task stepTask(const DetCall& c, ncclFunc_t func, int peer, const void* send, void* recv, size_t elems) {
  Task p;
  p.func = func;
  p.comm = c.task.comm;
  p.sendbuff = send;
  p.recvbuff = recv;
  p.count = elems * c.esize;
  p.datatype = ncclUint8;
  p.root = peer;
  p.stream = c.task.stream;
  p.internal = true;
  return p;
}

Task p2pTask(const DetCall& c, ncclFunc_t func, int peer, const void* send, void* recv, size_t elems) {
  return stepTask(c, func, peer, send, recv, elems);
}

Task allGatherTask(const DetCall& c, const void* send, void* recv, size_t elems) {
  return stepTask(c, ncclFuncAllGather, 0, send, recv, elems);
}

ncclResult_t allocScratch(DetCall* c, size_t bytes) {
  if (bytes == 0) return ncclSuccess;
  ncclComm* comm = c->task.comm;
  if (comm->backend == Backend::Host) {
    {
      // The smallest free buffer that fits.
      std::lock_guard<std::mutex> lock(comm->detScratchMutex);
      auto& pool = comm->detScratchFree;
      auto best = pool.end();
      for (auto it = pool.begin(); it != pool.end(); ++it)
        if (it->second >= bytes && (best == pool.end() || it->second < best->second)) best = it;
      if (best != pool.end()) {
        c->scratch = static_cast<char*>(best->first);
        c->held = best->second;
        pool.erase(best);
        return ncclSuccess;
      }
    }
    c->scratch = static_cast<char*>(std::malloc(bytes));
    if (!c->scratch)
      TUTTI_FAIL(ncclSystemError, "rank {}: deterministic {}: cannot allocate {} bytes of scratch rows", c->rank,
                 funcName(c->task.func), bytes);
    c->held = bytes;
    return ncclSuccess;
  }
  void* p = nullptr;
  TUTTI_CHECK(commScratch(comm, bytes, &p));
  c->scratch = static_cast<char*>(p);
  return ncclSuccess;
}

// One-shot (small calls): an AllGather of every rank's whole input into n rows, then this rank reduces what it
// outputs from them. One collective, no second exchange.
ncclResult_t buildOneShot(DetCall* c) {
  const Task& t = c->task;
  const int n = c->nRanks, r = c->rank;
  const size_t es = c->esize;
  const size_t rowElems = t.func == ncclFuncReduceScatter ? t.count * n : t.count;
  TUTTI_CHECK(allocScratch(c, size_t(n) * rowElems * es));
  c->exchange.push_back(allGatherTask(*c, t.sendbuff, c->scratch, rowElems));
  if (t.func == ncclFuncReduce && r != t.root) return ncclSuccess;
  DetPart part;
  const size_t at = t.func == ncclFuncReduceScatter ? size_t(r) * t.count : 0;
  for (int s = 0; s < n; ++s) part.in.push_back(c->scratch + (size_t(s) * rowElems + at) * es);
  part.out = t.recvbuff;
  part.len = t.count;
  c->parts.push_back(std::move(part));
  return ncclSuccess;
}

// Phase 3 of an exchange of slices of q elements: AllReduce: an in-place AllGather of the reduced slices;
// Reduce: each leaf sends its slice (at leafSlice) to the root, which receives them in place.
void addGather(DetCall* c, size_t q, const char* leafSlice) {
  const Task& t = c->task;
  const int n = c->nRanks, r = c->rank;
  const size_t es = c->esize;
  char* recv = static_cast<char*>(t.recvbuff);
  if (q == 0 || n == 1) return;
  if (t.func == ncclFuncAllReduce) {
    c->gather.push_back(allGatherTask(*c, recv + size_t(r) * q * es, recv, q));
  } else if (t.func == ncclFuncReduce) {
    if (r != t.root) {
      c->gather.push_back(p2pTask(*c, ncclFuncSend, t.root, leafSlice, nullptr, q));
    } else {
      for (int d = 1; d < n; ++d) {
        const int from = (r + n - d) % n;
        c->gather.push_back(p2pTask(*c, ncclFuncRecv, from, nullptr, recv + size_t(from) * q * es, q));
      }
    }
  }
}

// Exchange: rank j reduces slice j (AllReduce, Reduce: the count cut into n slices of q = count / n, the last
// count % n elements, the tail, reduced by every rank; ReduceScatter: block j). Phase 1 sends each peer its
// slice (and the tail) of this rank's input; phase 3 is an in-place AllGather of the slices (AllReduce) or
// their point-to-point gather at the root (Reduce).
ncclResult_t buildExchange(DetCall* c) {
  const Task& t = c->task;
  const int n = c->nRanks, r = c->rank;
  const size_t es = c->esize;
  const bool rs = t.func == ncclFuncReduceScatter;
  const size_t q = rs ? t.count : t.count / n;
  const size_t tail = rs ? 0 : t.count % n;
  const bool leaf = t.func == ncclFuncReduce && r != t.root;
  // Rows: the peers' slices for this rank (n - 1 of q), their tails (n - 1 of `tail`), and on a Reduce leaf
  // the reduced slice it sends the root.
  const size_t sliceRows = size_t(n - 1) * q, tailRows = size_t(n - 1) * tail;
  const size_t rowBytes = (sliceRows + tailRows + (leaf ? q : 0)) * es;
  const size_t scalarsAt = (rowBytes + 15) / 16 * 16;
  c->rankScaled = c->op.kind == RedOpKind::PreMulSum && c->op.op != ncclAvg;
  const bool devScalars = c->rankScaled && t.comm->backend != Backend::Host && (q > 0 || tail > 0);
  // Where each rank's slice (block) starts in the input, in elements.
  const size_t stride = rs && c->stride ? c->stride : q;
  TUTTI_CHECK(allocScratch(c, devScalars ? scalarsAt + size_t(n) * es : rowBytes));
  if (devScalars) c->devScalars = c->scratch + scalarsAt;
  auto idx = [&](int s) { return size_t(s < r ? s : s - 1); };
  auto sliceRow = [&](int s) { return c->scratch + idx(s) * q * es; };
  auto tailRow = [&](int s) { return c->scratch + (sliceRows + idx(s) * tail) * es; };
  const char* send = static_cast<const char*>(t.sendbuff);
  char* recv = static_cast<char*>(t.recvbuff);
  const size_t tailAt = size_t(n) * q;  // AllReduce / Reduce: where the tail starts

  if (c->rankScaled && !c->devScalars) {
    c->ownScalar = c->op.scalarBits;
    c->scalars.assign(size_t(n) * es, 0);
  }
  const void* ownScalar = c->devScalars     ? c->devScalars + size_t(r) * es
                          : c->op.scalarIsPtr ? c->op.scalarPtr
                                              : static_cast<const void*>(&c->ownScalar);
  auto scalarOf = [&](int s) { return (c->devScalars ? c->devScalars : c->scalars.data()) + size_t(s) * es; };
  const bool moves = q > 0 || tail > 0;
  for (int d = 1; d < n; ++d) {
    const int to = (r + d) % n, from = (r + n - d) % n;
    if (moves) {
      if (c->rankScaled) c->exchange.push_back(p2pTask(*c, ncclFuncSend, to, ownScalar, nullptr, 1));
      if (q > 0) c->exchange.push_back(p2pTask(*c, ncclFuncSend, to, send + size_t(to) * stride * es, nullptr, q));
      if (tail > 0) c->exchange.push_back(p2pTask(*c, ncclFuncSend, to, send + tailAt * es, nullptr, tail));
      if (c->rankScaled)
        c->exchange.push_back(p2pTask(*c, ncclFuncRecv, from, nullptr, scalarOf(from), 1));
      if (q > 0) c->exchange.push_back(p2pTask(*c, ncclFuncRecv, from, nullptr, sliceRow(from), q));
      if (tail > 0) c->exchange.push_back(p2pTask(*c, ncclFuncRecv, from, nullptr, tailRow(from), tail));
    }
  }
  if (q > 0) {
    DetPart part;
    for (int s = 0; s < n; ++s) part.in.push_back(s == r ? send + size_t(r) * stride * es : sliceRow(s));
    part.out = rs ? recv : leaf ? c->scratch + (sliceRows + tailRows) * es : recv + size_t(r) * q * es;
    part.len = q;
    c->parts.push_back(std::move(part));
  }
  if (tail > 0 && !leaf) {
    DetPart part;
    for (int s = 0; s < n; ++s) part.in.push_back(s == r ? send + tailAt * es : tailRow(s));
    part.out = recv + tailAt * es;
    part.len = tail;
    c->parts.push_back(std::move(part));
  }
  addGather(c, q, c->scratch + (sliceRows + tailRows) * es);
  return ncclSuccess;
}

// Whether buildCall runs a call of `comm` as the host backend's fused exchange.
bool fusedOnHost(const ncclComm* comm) {
  return comm->backend == Backend::Host && comm->nRanks > 1 && comm->rings.size() >= 2 && comm->det.fused;
}

// The fused exchange on the host backend (device/host/det_exchange.h): phases 1 and 2 in one step that reduces
// the peers' slices straight from the connections; phase 3 as in buildExchange. `whole` (a one-shot AllReduce):
// every rank sends its whole input to every peer and reduces all of it, one step and no phase 3.
ncclResult_t buildFused(DetCall* c, bool whole) {
  const Task& t = c->task;
  const int n = c->nRanks, r = c->rank;
  const size_t es = c->esize;
  const bool rs = t.func == ncclFuncReduceScatter;
  const size_t q = rs || whole ? t.count : t.count / n;
  const size_t tail = rs || whole ? 0 : t.count % n;
  const bool leaf = t.func == ncclFuncReduce && r != t.root;
  char* recv = static_cast<char*>(t.recvbuff);
  // In place, these elements are reduced while this rank may still be sending them.
  const bool inPlace = t.sendbuff == t.recvbuff;
  const size_t parked = !inPlace || leaf ? 0 : whole ? q : tail;
  TUTTI_CHECK(allocScratch(c, ((leaf ? q : 0) + parked) * es));
  auto x = std::make_shared<DetExchange>();
  x->rank = r;
  x->nRanks = n;
  x->esize = es;
  x->op = c->op;
  x->input = static_cast<const char*>(t.sendbuff);
  x->q = q;
  x->sliceStride = whole ? 0 : q;
  x->tail = tail;
  x->tailAt = size_t(n) * q;
  c->fusedReduces = q + (leaf ? 0 : tail);
  x->sliceOut = rs ? recv : leaf ? c->scratch : whole ? (parked ? c->scratch : recv) : recv + size_t(r) * q * es;
  x->tailOut = leaf ? nullptr : tail && parked ? c->scratch : recv + x->tailAt * es;
  if (parked) {
    c->parkedFrom = c->scratch;
    c->parkedTo = whole ? recv : recv + x->tailAt * es;
    c->parkedBytes = parked * es;
  }
  c->rankScaled = x->rankScaled = c->op.kind == RedOpKind::PreMulSum && c->op.op != ncclAvg;
  x->scalarPtr = c->op.scalarIsPtr ? c->op.scalarPtr : nullptr;
  x->scalarBits = c->op.scalarBits;
  auto plan = std::make_shared<CollPlan>();
  plan->task = t;
  plan->task.api = {};
  plan->task.prof = {};
  plan->task.internal = true;
  plan->op = c->op;
  plan->eltSize = es;
  plan->algorithm = kAlgoDetExchange;
  plan->protocol = NCCL_PROTO_SIMPLE;
  plan->nBytes = (rs ? t.count * n : t.count) * es;
  plan->decider = "deterministic";
  if (!whole) addGather(c, q, c->scratch);
  // AllReduce: the AllGather joins the exchange's launch (one launch per call, as a ring AllReduce). Each of
  // its channels runs after the exchange's part on that channel, and the exchange's channels wait for the
  // reduction (DetExchange::reducedBefore); an input slice it overwrites in place was sent already (its
  // reduced form comes from the rank that received it). Reduce's leaves send their slice in a second launch.
  std::shared_ptr<CollPlan> gather;
  if (t.func == ncclFuncAllReduce && !c->gather.empty()) {
    gather = std::make_shared<CollPlan>();
    TUTTI_CHECK(planCollective(t.comm, c->gather[0], gather.get()));
    c->gather.clear();
    x->reducedBefore = true;
  }
  // Channel 0 receives and reduces, channel 1 sends (or channel 0 both, when the steps fit in the FIFOs), any
  // further channel of the AllGather waits.
  const size_t slot = t.comm->buffSizes[TUTTI_PROTO_SIMPLE] / TUTTI_STEPS;
  size_t stepBytes = t.comm->det.stepBytes;
  // Over the network every step is a message (a system call or more on each side, a wake-up of the rank that
  // folds): steps double from 64 KiB while a peer's slice still takes at least kDetNetMinSteps of them, up to a
  // slot, so that a large call sends few messages and a middling one still overlaps its receives and its fold.
  // Processes over sockets, 2 cores, two launches of `--det-pairs 2`, the deterministic call's time, 64 KiB steps ->
  // grown: AllReduce on 4 ranks 16 MiB 26.9 and 27.6 -> 18.8 and 21.0 ms, 64 MiB 105 and 111 -> 90 and 86; on 8 ranks
  // 16 MiB 71.3 and 61.5 -> 58.7 and 58.7; ReduceScatter on 4 ranks 16 MiB 13.4 and 13.8 -> 11.0 and 10.8, 64 MiB 55.7
  // and 55.9 -> 42.3 and 41.7; on 8 ranks 16 MiB 31.9 -> 26.3, 64 MiB 147 -> 117 (64 KiB steps: 9 times the default
  // ring's sendmsg calls at 16 MiB on 4 ranks). A whole slot a step (512 KiB) lost where a slice is one step
  // (AllReduce on 8 ranks, 4 MiB: 21.2 and 17.1 ms against 16.4 and 15.4 with 64 KiB steps). ReduceScatter, whose
  // exchange is the whole call, gains from fewer steps down to one a slice: six interleaved rounds of every forced
  // step from 64 KiB to 512 KiB, the fastest round, 4 steps a slice -> 1: 4 ranks 1 MiB 533 -> 350 us, 2 MiB 975 ->
  // 710, 4 MiB 2134 -> 2042; 8 ranks 2 MiB 3070 -> 2447, 4 MiB 6717 -> 5903 (2 ranks level); AllReduce showed no
  // such order among the step sizes (within the runs' 10-20% spread).
  const size_t minSteps = rs ? kDetNetMinStepsRs : kDetNetMinSteps;
  if (t.comm->det.stepGrows)
    while (stepBytes < slot && 2 * stepBytes * minSteps <= q * es) stepBytes *= 2;
  const size_t per = std::max<size_t>(1, std::min(slot, stepBytes) / es);
  x->stepElems = per;
  c->stepBytes = per * es;
  auto steps = [&](size_t elems) { return (elems + per - 1) / per; };
  const uint64_t peerSteps = (x->rankScaled ? 1 : 0) + steps(q) + steps(tail);
  // One thread only while what it sends before receiving is small: a larger exchange overlaps the two. The byte
  // limit (TUTTI_DET_ONE_THREAD_BYTES, 2 MiB) lets every exchange of at most four steps a peer take one thread up
  // to 8 ranks: 4 and 8 processes over shm on 2 cores, AllReduce and ReduceScatter of 256 KiB and 1 MiB, the
  // best of three runs, were 2-20% faster so than at 512 KiB, where a second thread per rank joined in.
  x->oneThread = peerSteps <= kDetOneThreadSteps &&
                 size_t(n - 1) * (q + tail) * es <= t.comm->det.oneThreadBytes;
  plan->work.resize(std::max<size_t>(x->oneThread ? 1 : 2, gather ? gather->work.size() : 0));
  plan->detx = std::move(x);
  Task step = plan->task;
  step.plan = std::move(plan);
  c->exchange.push_back(std::move(step));
  if (gather) {
    Task g = gather->task;
    g.plan = std::move(gather);
    c->exchange.push_back(std::move(g));
  }
  return ncclSuccess;
}

// A local symmetric step (sym.h, SymPeers::local) of `len` elements, which the collective kernel runs.
Task localStep(const DetCall& c, std::shared_ptr<SymPeers> peers, size_t len) {
  const Task& t = c.task;
  peers->local = true;
  auto plan = std::make_shared<CollPlan>();
  plan->task = t;
  plan->task.func = ncclFuncReduceScatter;
  plan->task.count = len;
  plan->task.api = {};
  plan->task.prof = {};
  plan->op = c.op;
  plan->eltSize = c.esize;
  plan->nBytes = len * c.esize;
  plan->decider = "deterministic";
  plan->sym = std::move(peers);
  plan->local = true;
  symmetricBlocks(t.comm, ncclFuncReduceScatter, len, /*ringIx=*/0, /*inPlace=*/false, plan.get());
  Task step = plan->task;
  step.plan = std::move(plan);
  return step;
}

// Device backends: each part as a local step; with per-rank scalars, first the step that stores this rank's.
ncclResult_t buildLocalSteps(DetCall* c) {
  const Task& t = c->task;
  if (c->nRanks > kSymMaxRanks)
    TUTTI_FAIL(ncclInvalidUsage, "rank {}: deterministic {} on the {} backend takes at most {} ranks (this "
               "communicator has {})", c->rank, funcName(t.func), backendName(t.comm->backend), kSymMaxRanks,
               c->nRanks);
  if (c->devScalars) {
    auto peers = std::make_shared<SymPeers>();
    peers->recv[0] = c->devScalars + size_t(c->rank) * c->esize;
    peers->storeScalar = true;
    c->prelude.push_back(localStep(*c, std::move(peers), 1));
  }
  for (const DetPart& part : c->parts) {
    auto peers = std::make_shared<SymPeers>();
    for (int s = 0; s < c->nRanks; ++s) peers->send[s] = const_cast<char*>(static_cast<const char*>(part.in[s]));
    peers->recv[0] = static_cast<char*>(part.out);
    peers->scalars = c->devScalars;
    c->local.push_back(localStep(*c, std::move(peers), part.len));
  }
  return ncclSuccess;
}

ncclResult_t buildCall(const Task& t, DetCall* c) {
  ncclComm* comm = t.comm;
  c->task = t;
  c->rank = comm->rank;
  c->nRanks = comm->nRanks;
  c->esize = dataTypeSize(t.datatype);
  TUTTI_CHECK(comm->redOps->resolve(t.op, t.datatype, &c->op, funcName(t.func)));
  // NCCL_ALGO: the fixed order is a ring-class path (it moves data only with AllGather and point-to-point
  // operations); a filter that forbids the ring for this collective forbids it.
  if (comm->tuners && t.func < kNumTunedFuncs) {
    const AlgoProtoFilter& f = comm->tuners->filter();
    bool ring = false;
    for (int p = 0; p < NCCL_NUM_PROTOCOLS; ++p) ring |= f.allows(t.func, NCCL_ALGO_RING, p);
    if (!ring)
      TUTTI_FAIL(ncclInvalidUsage, "rank {}: deterministic {}: NCCL_ALGO=\"{}\" / NCCL_PROTO=\"{}\" rule out the ring, "
                 "and the other algorithms cannot follow the fixed reduction order (allow Ring for {}, or turn "
                 "determinism off)", c->rank, funcName(t.func), paramString("NCCL_ALGO"), paramString("NCCL_PROTO"),
                 funcName(t.func));
  }
  const size_t inBytes = (t.func == ncclFuncReduceScatter ? t.count * c->nRanks : t.count) * c->esize;
  const bool rankScaled = c->op.kind == RedOpKind::PreMulSum && c->op.op != ncclAvg;
  // A segment exchanges (a ReduceScatter's has its blocks apart in the input).
  c->oneShot = c->nRanks > 1 && !rankScaled && c->segments == 1 && inBytes * size_t(c->nRanks) <= comm->det.oneShotBytes;
  // The fused exchange needs two channel threads (one sends while the other receives).
  const bool fused = fusedOnHost(comm);
  // Fused: a ReduceScatter always exchanges (its one step moves only the blocks each rank needs); a one-shot
  // AllReduce sends every peer its whole input (with its scalar, if any), which on 2 ranks moves what the
  // exchange and its AllGather move, in one step: always taken there.
  if (fused && t.func == ncclFuncReduceScatter) c->oneShot = false;
  if (fused && t.func == ncclFuncAllReduce && (c->nRanks == 2 || (!rankScaled && c->oneShot))) c->oneShot = true;
  if (fused && (t.func != ncclFuncReduce || !c->oneShot))
    TUTTI_CHECK(buildFused(c, c->oneShot));
  else
    TUTTI_CHECK(c->oneShot ? buildOneShot(c) : buildExchange(c));
  if (comm->backend != Backend::Host) TUTTI_CHECK(buildLocalSteps(c));
  return ncclSuccess;
}

// The host backend's AllReduce (fused exchange): the elements of one segment of TUTTI_DET_PIPELINE_BYTES, a multiple
// of n, or 0 when the call runs whole (the pipeline is off, the call fits one segment or takes the one-shot path).
// The exchange reduces every slice before its AllGather starts; in segments, each one's reduced slices are still in
// cache when they are gathered. 4 and 8 processes over shm on 2 cores, 2 to 32 MiB: 10-40% faster with 512 KiB
// segments than whole, while 256 KiB and 1 MiB segments gained less (a later VM: whole ahead from 6 ranks). Over the
// network, and from 5 ranks within a node, the call runs whole unless TUTTI_DET_PIPELINE_BYTES is set (comm.cc).
size_t pipelineElems(const Task& t) {
  const ncclComm* comm = t.comm;
  const size_t n = static_cast<size_t>(comm->nRanks), es = dataTypeSize(t.datatype);
  if (t.func != ncclFuncAllReduce || !fusedOnHost(comm) || comm->det.pipelineBytes == 0) return 0;
  if (t.count * es * n <= comm->det.oneShotBytes) return 0;
  const size_t len = std::max(n, comm->det.pipelineBytes / es / n * n);
  return t.count > len ? len : 0;
}

// Device backends: the elements of one segment of `t` (of each block, for a ReduceScatter) such that an
// exchange's rows fit the scratch made at init (detDeviceScratchBytes); 0 when the call runs whole. The host
// backend: pipelineElems. Every rank cuts alike (the same count, type and rank count everywhere).
size_t segmentElems(const Task& t) {
  const ncclComm* comm = t.comm;
  const size_t n = static_cast<size_t>(comm->nRanks);
  if (n == 1) return 0;
  if (comm->backend == Backend::Host) return pipelineElems(t);
  const size_t rowElems = comm->det.segmentBytes / dataTypeSize(t.datatype);
  // Rows: a ReduceScatter receives n - 1 blocks; an AllReduce or Reduce n - 1 slices of count / n (a Reduce
  // leaf also keeps its own), about the count: cut at a multiple of n, so that only the last segment has a tail.
  const size_t len = t.func == ncclFuncReduceScatter ? std::max<size_t>(1, rowElems / (n - 1))
                                                     : std::max(n, rowElems / n * n);
  return t.count > len ? len : 0;
}

// The calls that run `t`: itself, or its segments in order.
ncclResult_t buildCalls(const Task& t, std::vector<std::shared_ptr<DetCall>>* out) {
  const size_t len = segmentElems(t);
  if (len == 0) {
    out->push_back(std::make_shared<DetCall>());
    return buildCall(t, out->back().get());
  }
  const size_t segments = (t.count + len - 1) / len, es = dataTypeSize(t.datatype);
  std::shared_ptr<const DetCall> lead;
  for (size_t k = 0; k < segments; ++k) {
    const size_t at = k * len;
    Task s = t;
    s.count = std::min(len, t.count - at);
    s.sendbuff = static_cast<const char*>(t.sendbuff) + at * es;
    if (t.recvbuff) s.recvbuff = static_cast<char*>(t.recvbuff) + at * es;  // null on a Reduce leaf, maybe
    auto c = std::make_shared<DetCall>();
    c->segment = k;
    c->segments = segments;
    c->stride = t.count;
    c->lead = lead;
    TUTTI_CHECK(buildCall(s, c.get()));
    if (k == 0) lead = c;
    out->push_back(std::move(c));
  }
  return ncclSuccess;
}

// Phase 2 on the host backend, on the calling thread (stream NULL) or the stream's.
void reduceLocal(const DetCall& c) {
  if (c.rankScaled && !c.parts.empty()) {
    // This rank's own scalar, read now (a "device" scalar is read when the call runs, as the kernels do).
    const void* own = c.op.scalarIsPtr ? c.op.scalarPtr : static_cast<const void*>(&c.ownScalar);
    std::memcpy(const_cast<char*>(c.scalars.data()) + size_t(c.rank) * c.esize, own, c.esize);
  }
  ProfEvent* ch = c.task.prof ? profKernelChStart(c.task.prof.get(), 0) : nullptr;
  for (const DetPart& part : c.parts) {
    void* out = part.out;
    hostDetReduceCopy(c.op, c.nRanks, part.in.data(), 1, &out, part.len, c.rankScaled ? c.scalars.data() : nullptr);
  }
  if (c.parkedBytes) std::memcpy(c.parkedTo, c.parkedFrom, c.parkedBytes);
  if (ch) [[unlikely]] profKernelChStop(ch);
}

// Runs `fn` after the work queued so far on the call's stream, or now when it has none.
ncclResult_t onStream(const Task& t, host::WorkItem fn) {
  if (!t.stream) return fn();
  auto alive = std::make_shared<CommOpsGuard>(t.comm);
  host::HostStream::fromHandle(t.stream)->enqueue([fn = std::move(fn), alive]() mutable {
    ncclResult_t res = fn();
    fn = nullptr;  // what it holds (a call's scratch goes back to the communicator) before the communicator may go
    alive.reset();
    return res;
  });
  return ncclSuccess;
}

// One round: the k-th deterministic call of each communicator of the group, phase by phase.
ncclResult_t runRound(std::vector<std::shared_ptr<DetCall>>& calls, const DetLaunchFn& launch) {
  // One phase of every call, launched as one group (a lone call's steps as they are, without a copy).
  auto phase = [&](std::vector<Task> DetCall::*steps) -> ncclResult_t {
    if (calls.size() == 1) {
      std::vector<Task>& own = (*calls[0]).*steps;
      return own.empty() ? ncclSuccess : launch(own.data(), own.size());
    }
    std::vector<Task> all;
    for (auto& c : calls) all.insert(all.end(), ((*c).*steps).begin(), ((*c).*steps).end());
    return all.empty() ? ncclSuccess : launch(all.data(), all.size());
  };
  TUTTI_CHECK(phase(&DetCall::prelude));
  TUTTI_CHECK(phase(&DetCall::exchange));
  for (auto& c : calls) {
    if (c->task.comm->backend != Backend::Host || (c->parts.empty() && !c->parkedBytes)) continue;
    TUTTI_CHECK(onStream(c->task, [c]() {
      reduceLocal(*c);
      return ncclSuccess;
    }));
  }
  TUTTI_CHECK(phase(&DetCall::local));
  TUTTI_CHECK(phase(&DetCall::gather));
  // Queued work on the host backend: the scratch rows (and the scalar) stay until the call's last phase ran.
  for (auto& c : calls) {
    if (c->task.stream && c->task.comm->backend == Backend::Host)
      TUTTI_CHECK(onStream(c->task, [c]() { return ncclSuccess; }));
  }
  return ncclSuccess;
}

// Log line and profiler events of a round's calls, then the round.
ncclResult_t startRound(std::vector<std::shared_ptr<DetCall>>& calls, const DetLaunchFn& launch) {
  for (const auto& c : calls) {
    if (!logEnabled(NCCL_LOG_INFO, NCCL_COLL)) break;
    const Task& t = c->task;
    size_t mine = c->fusedReduces;
    for (const DetPart& p : c->parts) mine += p.len;
    TUTTI_INFO(NCCL_COLL, "{}: count {} datatype {} op {} root {} comm {} [nranks={}] deterministic {} (rank {} "
               "reduces {} elements{}){}", funcName(t.func), t.count, dataTypeName(t.datatype), static_cast<int>(t.op),
               t.root, static_cast<void*>(t.comm), c->nRanks, c->oneShot ? "one-shot" : "exchange", c->rank, mine,
               c->stepBytes ? fmt::format(", steps of {} bytes", c->stepBytes) : std::string(), c->segments > 1 ? fmt::format(", segment {} of {}", c->segment + 1, c->segments) : std::string());
  }
  // Profiling: one Coll event per call (algo "Deterministic"), the parent of its steps' channel and proxy events.
  for (auto& c : calls) {
    ncclComm* comm = c->task.comm;
    if (!comm->profiler) [[likely]] continue;
    if (c->lead) {  // a later segment: the call's one Coll event, ended when its last segment's steps are done
      c->task.prof = c->lead->task.prof;
    } else {
      ProfRef group(profGroupStart(comm));
      profDetCollStart(&c->task, group.get(), comm->collOpCount);
    }
    for (std::vector<Task>* steps : {&c->prelude, &c->exchange, &c->local, &c->gather})
      for (Task& step : *steps) step.prof = c->task.prof;
  }
  return runRound(calls, launch);
}

}  // namespace

bool detReduces(const Task& t) {
  // A call of no element has no arithmetic to order: it takes the usual (cheaper) path.
  if ((t.func != ncclFuncAllReduce && t.func != ncclFuncReduceScatter && t.func != ncclFuncReduce) || t.count == 0 ||
      !dataTypeIsFloat(t.datatype))
    return false;
  if (t.comm->deterministic.load(std::memory_order_relaxed)) return true;
  // Where these paths are the fastest (ncclComm::fixedOrderPaths), an AllReduce or ReduceScatter of any communicator,
  // from fixedOrderMinBytes of input.
  if (!t.comm->fixedOrderPaths || t.func == ncclFuncReduce) return false;
  const size_t input = t.count * dataTypeSize(t.datatype) *
                       (t.func == ncclFuncReduceScatter ? static_cast<size_t>(t.comm->nRanks) : 1);
  if (t.func == ncclFuncAllReduce && t.comm->fixedOrderKeepsHalvingDoubling &&
      input > t.comm->detTreeAllReduceMaxBytes &&
      logAllReduce(t.comm, input, /*det=*/false) == LogAllReduce::kHalvingDoubling)
    return false;
  return input >= t.comm->fixedOrderMinBytes;
}

bool detOnCorePath(const Task& t) {
  if (t.func != ncclFuncAllReduce && t.func != ncclFuncReduceScatter) return false;
  const CorePaths paths = corePaths(t.comm, t, /*preMul: no bar to a deterministic fold=*/false);
  return paths.oneShot || paths.direct;
}

bool detPairPath(const Task& t) {
  return t.comm->backend == Backend::Host && t.comm->nRanks == 2 && !t.internal &&
         (t.op == ncclSum || t.op == ncclProd || t.op == ncclAvg);
}

bool detTask(const Task& t) { return detReduces(t) && !detOnCorePath(t) && !detPairPath(t); }

size_t detDeviceScratchBytes(const ncclComm* comm) {
  // segmentElems bounds an exchange's rows by segmentBytes, but for the tail of an AllReduce or Reduce (fewer
  // than n elements from each of n - 1 peers) and the rows of a segment of fewer elements than ranks; the
  // scalars (n of at most 8 bytes) follow 16-byte aligned.
  const size_t n = static_cast<size_t>(comm->nRanks);
  return std::max(comm->det.oneShotBytes, comm->det.segmentBytes) + (n * n + n) * 8 + 64;
}

ncclResult_t detLaunchGroup(const Task* tasks, size_t nTasks, const DetLaunchFn& launch) {
  if (nTasks == 1) {  // the usual case: a call alone in its group
    std::vector<std::shared_ptr<DetCall>> calls;
    TUTTI_CHECK(buildCalls(tasks[0], &calls));
    if (calls.size() == 1) return startRound(calls, launch);
    for (auto& c : calls) {  // segments, one round each
      std::vector<std::shared_ptr<DetCall>> one{std::move(c)};
      TUTTI_CHECK(startRound(one, launch));
    }
    return ncclSuccess;
  }
  std::vector<Task> plain;
  std::vector<ncclComm*> comms;
  std::vector<std::vector<std::shared_ptr<DetCall>>> perComm;  // calls of comms[i] (segments apart), in order
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
    // Every call is checked (and its scratch found) before anything moves: a bad one fails the group whole.
    TUTTI_CHECK(buildCalls(t, &perComm[ci]));
  }
  std::vector<std::vector<std::shared_ptr<DetCall>>> rounds;
  for (size_t k = 0;; ++k) {
    std::vector<std::shared_ptr<DetCall>> calls;
    for (auto& list : perComm)
      if (k < list.size()) calls.push_back(std::move(list[k]));
    if (calls.empty()) break;
    rounds.push_back(std::move(calls));
  }
  if (!plain.empty()) TUTTI_CHECK(launch(plain.data(), plain.size()));
  for (auto& calls : rounds) TUTTI_CHECK(startRound(calls, launch));
  return ncclSuccess;
}

}  // namespace tutti
