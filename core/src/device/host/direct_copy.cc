#include "device/host/direct_copy.h"

#include "comm/comm.h"
#include "comm/task.h"
#include "device/host/det_reduce_copy.h"
#include "device/host/reduce_copy.h"
#include "plugin/params.h"
#include "util/check.h"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

namespace tutti {
namespace {

// What the probe reads from another process: a constant whose address travels through the bootstrap.
constexpr uint64_t kProbeMagic = 0x74757474692d636dull;
const uint64_t gProbeWord = kProbeMagic;

// Copies `bytes` between this process's `mine` and address `theirs` of process `pid`: from there when !write, to there
// when write. False with *err (an errno) when the kernel refuses.
bool copyRemote(int pid, void* mine, void* theirs, size_t bytes, bool write, int* err) {
  size_t done = 0;
  while (done < bytes) {
    iovec local{static_cast<char*>(mine) + done, bytes - done};
    iovec remote{static_cast<char*>(theirs) + done, bytes - done};
    const ssize_t n = write ? process_vm_writev(pid, &local, 1, &remote, 1, 0)
                            : process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *err = n < 0 ? errno : EFAULT;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

bool readRemote(int pid, void* dst, const void* src, size_t bytes, int* err) {
  return copyRemote(pid, dst, const_cast<void*>(src), bytes, /*write=*/false, err);
}

bool writeRemote(int pid, void* dst, const void* src, size_t bytes, int* err) {
  return copyRemote(pid, const_cast<void*>(src), dst, bytes, /*write=*/true, err);
}

// What a cross-memory-attach read of 256 KiB costs here against a memcpy of the same bytes, in percent: the best of
// seven of each, in turn, both buffers in cache (this process reads itself: the kernel pins and copies as for a
// peer). 0 where a read fails.
int measureReadCost() {
  constexpr size_t kBytes = size_t{256} << 10;
  std::vector<char> from(kBytes, 1), to(kBytes, 2);
  const int pid = getpid();
  int64_t copyNs = INT64_MAX, readNs = INT64_MAX;
  auto now = [] { return std::chrono::steady_clock::now(); };
  for (int i = 0; i < 7; ++i) {
    auto t0 = now();
    std::memcpy(to.data(), from.data(), kBytes);
    asm volatile("" : : "r"(to.data()) : "memory");  // the copy is not elided
    auto t1 = now();
    int err = 0;
    if (!readRemote(pid, to.data(), from.data(), kBytes, &err)) return 0;
    auto t2 = now();
    copyNs = std::min<int64_t>(copyNs, std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
    readNs = std::min<int64_t>(readNs, std::chrono::duration_cast<std::chrono::nanoseconds>(t2 - t1).count());
  }
  return static_cast<int>(std::min<int64_t>(100 * readNs / std::max<int64_t>(copyNs, 1), 100000));
}

// Reads that cost at least this many copies (percent) leave AllGather to the one-shot and ring paths, whose two
// copies stay in cache (comm.cc, directReadCostGate), an AllReduce of 3 or 4 ranks to the ring, and a deterministic
// AllReduce to the exchange (directDetReadCostGate).
constexpr int kCostlyReadPercent = 250;
// Where reads cost that much, no AllGather reads. Three sets on 2-core VMs, processes over shm, interleaved runs, us,
// reads -> ring or one-shot. In the first, a read of 256 KiB costing 3.4 copies, the ring won from 16 MiB of output:
// 2 ranks 16 MiB 1858 -> 1032, 64 MiB 8108 -> 5828 (8 MiB 361 -> 394); 4 ranks 4 MiB 722 -> 523, 16 MiB 3669 -> 2448,
// 256 MiB 81460 -> 53713 (Open MPI 61568); 8 ranks 2 MiB 980 -> 737, 16 MiB 10707 -> 7871, 256 MiB 185683 -> 123755.
// In the second, a read costing 4.0-4.2 copies, the ring lost below 16 MiB (4 ranks 4 MiB 1060-1425 -> 2212-2495,
// 8 ranks 4 MiB 2482-2605 -> 3572-3930), so the reads kept 1 or 2 MiB to 16 MiB. In the third, a read costing 4.3
// copies, the reads lost at every size from 1 MiB on every rank count, three to five runs each, the medians (Open MPI
// in the same runs): 2 ranks 1 MiB 54 -> 47 (51), 2 MiB 113 -> 93 (105), 4 MiB 214 -> 190 (207), 8 MiB 451 -> 386
// (439); 4 ranks 2 MiB 402 -> 260 (631), 4 MiB 856 -> 540 (1291), 8 MiB 2122 -> 1196 (3191); 8 ranks 2 MiB 991 -> 750
// (1336), 4 MiB 1889 -> 1623 (2743), 8 MiB 4894 -> 3467 (6341). The ring's loss in the second set kept it within Open
// MPI's spread (4 ranks 4 MiB: 1994-2915); the reads' losses in the third put 2 ranks behind Open MPI.
// AlltoAll where reads cost that much: sends and receives through the FIFOs, but on 8 ranks or more from 128 MiB of
// output. Processes over shm, 2-core AMD EPYC VM, a read costing 4.16 copies, three interleaved runs each, us, reads
// -> sends (Open MPI beside): 2 ranks 128 KiB 10.8/10.8/12.2 -> 5.8/6.3/5.6 (8.8/10.7/10.2), 256 KiB 13.6/14.4/16.7 ->
// 9.9/11.0/10.5 (11.3/12.3/14.3), 1 MiB 64/66/63 -> 51/53/49 (52/56/53), 4 MiB 244/239/225 -> 207/191/196
// (171/198/221), 16 MiB 1606/1720/1664 -> 1464/1653/1247 (1458/1543/1640); 4 ranks 512 KiB 123/136/143 -> 81/82/75,
// 4 MiB 783/775/713 -> 674/670/578, 16 MiB 5490/4850/4869 -> 3888/4003/2965 (5106/5014/3859), 64 MiB
// 20563/19182/21623 -> 16365/15322/15822, 256 MiB 66321/61518/63838 -> 51924/49929/47166; 8 ranks 1 MiB 617/642/562
// -> 446/486/482, 16 MiB 10588/10365/9969 -> 7056/6989/10713, 64 MiB 27773/33176/36554 -> 29395/29542/26217, 128 MiB
// even (59933/60130/62383 -> 66581/57118/53068), 256 MiB 105221/102606/129037 -> 130921/144441/129161. An earlier set
// on a VM whose reads cost 3.5 copies had the 2-rank sends behind at 1 MiB in one run of two (169 against 84 us).
// Returns the smallest AlltoAll that reads (0: none).
size_t costlyReadMinAlltoAll(int nRanks) { return nRanks >= 8 ? size_t{128} << 20 : 0; }
// A 2-rank Broadcast where reads cost that much reads from 512 KiB; below, its one send through the FIFO (same VM,
// three interleaved runs, us, reads -> send, Open MPI beside): 128 KiB 9.8/9.4/9.7 -> 4.4/4.9/4.5 (9.2/12.2/8.1), 256
// KiB 11.4/11.4/11.2 -> 8.4/8.1/8.6 (12.8/12.4/12.5); from 512 KiB the reads win (16/16/16 -> 24/21/21, 1 MiB 28/30/29
// -> 41/42/36).
constexpr size_t kCostlyReadMinPairBcast = size_t{512} << 10;

}  // namespace

ncclResult_t directProbe(ncclComm* comm) {
  comm->directOk = false;
  const int n = comm->nRanks, r = comm->rank;
  if (comm->backend != Backend::Host || n < 2) return ncclSuccess;
  const tuttiPeerInfo_t& me = comm->peers[r];
  bool otherProcess = false;
  for (const tuttiPeerInfo_t& p : comm->peers) {
    if (p.hostHash != me.hostHash) return ncclSuccess;  // another host: nothing to read there
    otherProcess |= p.pidHash != me.pidHash;
  }
  // Ranks left only the network (shm and p2p disabled) move their data over it: what the user asked to run.
  int overNetwork = -1;
  for (int p = 0; p < n && overNetwork < 0; ++p) {
    bool net = false;
    if (p != r) TUTTI_CHECK(commPeerOverNetwork(comm, p, &net));
    if (net) overNetwork = p;
  }
  if (!otherProcess) {  // threads of one process: plain copies (every thread sees the same transports)
    comm->directOk = overNetwork < 0;
    return ncclSuccess;
  }
  std::vector<uint64_t> addrs(n);
  addrs[r] = reinterpret_cast<uintptr_t>(&gProbeWord);
  TUTTI_CHECK(comm->bootstrap->allGather(addrs.data(), sizeof(uint64_t)));
  uint8_t ok = overNetwork < 0;
  std::string why = ok ? "" : fmt::format("rank {} is reached through the network transport", overNetwork);
  for (int p = 0; p < n && ok; ++p) {
    const tuttiPeerInfo_t& peer = comm->peers[p];
    if (peer.pidHash == me.pidHash) continue;
    if (peer.pidNs == 0 || peer.pidNs != me.pidNs) {  // its pid names another process here, or none
      ok = 0;
      why = fmt::format("rank {} is in another pid namespace", p);
      break;
    }
    uint64_t value = 0;
    int err = 0;
    if (!readRemote(peer.pid, &value, reinterpret_cast<const void*>(addrs[p]), sizeof value, &err) ||
        value != kProbeMagic) {
      ok = 0;
      why = fmt::format("process_vm_readv from rank {} (pid {}): {}", p, peer.pid,
                        err ? std::strerror(err) : "read the wrong bytes");
    }
  }
  // Each rank's verdict, and what a read costs it against a copy (measured unless TUTTI_DIRECT_READ_COST is set).
  struct Verdict {
    uint32_t ok;
    int32_t readCost;
  };
  std::vector<Verdict> verdicts(n);
  const int64_t setCost = paramInt("TUTTI_DIRECT_READ_COST");
  const bool gated = comm->directReadCostGate || comm->directDetReadCostGate;
  verdicts[r] = {ok, !ok || !gated ? 0
                     : setCost >= 0                   ? static_cast<int32_t>(std::min<int64_t>(setCost, 100000))
                                                      : measureReadCost()};
  TUTTI_CHECK(comm->bootstrap->allGather(verdicts.data(), sizeof(Verdict)));
  const int64_t maxGather = paramInt("TUTTI_DIRECT_MAX_GATHER_BYTES");
  comm->directMaxGather = maxGather > 0 ? static_cast<size_t>(maxGather) : 0;
  const int64_t maxAlltoAll = paramInt("TUTTI_DIRECT_MAX_ALLTOALL_BYTES");
  comm->directMaxAlltoAll = maxAlltoAll > 0 ? static_cast<size_t>(maxAlltoAll) : 0;
  comm->directOk = true;
  for (int p = 0; p < n; ++p) comm->directOk = comm->directOk && verdicts[p].ok;
  // The median of the ranks' costs (every rank computes it from the same values, so every rank decides alike).
  if (comm->directOk && gated) {
    std::vector<int32_t> costs(n);
    for (int p = 0; p < n; ++p) costs[p] = verdicts[p].readCost;
    std::nth_element(costs.begin(), costs.begin() + n / 2, costs.end());
    comm->directReadCost = costs[n / 2];
    if (comm->directReadCost >= kCostlyReadPercent && comm->directReadCostGate) {
      comm->directMinGather = 0;
      if (maxAlltoAll < 0) comm->directMinAlltoAll = costlyReadMinAlltoAll(n);
      if (n == 2 && comm->directMinBcast > 0)
        comm->directMinBcast = std::max(comm->directMinBcast, kCostlyReadMinPairBcast);
      comm->directMinReduce = 0;  // the ring's copies in cache (comm.cc)
    }
    if (comm->directReadCost >= kCostlyReadPercent && comm->directDetReadCostGate) comm->directMinDetReduce = 0;
  }
  if (comm->directOk)
    TUTTI_INFO(NCCL_INIT, "rank {}: single-copy AllGather from {} bytes{}, Broadcast from {} bytes, AlltoAll from {} "
               "bytes{}, AllReduce from {} bytes, ReduceScatter from {} bytes (deterministic: {} and {}, AllReduce of 2 ranks {}) "
               "(0: never; cross memory attach{}); a Broadcast's root writes 1/n of each reader's buffer from {} bytes", r,
               comm->directMinGather,
               comm->directMaxGather ? fmt::format(" below {} bytes", comm->directMaxGather) : std::string(),
               comm->directMinBcast, comm->directMinAlltoAll,
               comm->directMaxAlltoAll ? fmt::format(" below {} bytes", comm->directMaxAlltoAll) : std::string(),
               comm->directMinReduce, comm->directMinReduceScatter, comm->directMinDetReduce, comm->directMinDetReduceScatter,
               comm->directMinDetPairReduce,
               comm->directReadCost > 0 ? fmt::format(", a read costing {}.{:02} copies", comm->directReadCost / 100,
                                                      comm->directReadCost % 100)
                                        : std::string(),
               comm->directRootShareMin);
  else if (!ok)
    TUTTI_INFO(NCCL_INIT, "rank {}: no single-copy AllGather / Broadcast / AlltoAll / reductions: {}", r, why);
  return ncclSuccess;
}

bool directWanted(const ncclComm* comm, ncclFunc_t func, size_t bytes, bool det, bool preMul, bool detPair) {
  if (!comm->directOk || !comm->corePaths) return false;
  size_t min = 0;
  switch (func) {
    case ncclFuncAllGather:
      if (comm->directMaxGather && bytes >= comm->directMaxGather) return false;
      min = comm->directMinGather;
      break;
    case ncclFuncBroadcast: min = comm->directMinBcast; break;
    case ncclFuncAlltoAll:
      if (comm->directMaxAlltoAll && bytes >= comm->directMaxAlltoAll) return false;
      min = comm->directMinAlltoAll;
      break;
    case ncclFuncAllReduce:
    case ncclFuncReduceScatter:
      if ((!det && preMul) || comm->nRanks > kDirectReduceMaxRanks) return false;
      if (det && detPair && func == ncclFuncAllReduce) min = comm->directMinDetPairReduce;
      else if (det) min = func == ncclFuncAllReduce ? comm->directMinDetReduce : comm->directMinDetReduceScatter;
      else min = func == ncclFuncAllReduce ? comm->directMinReduce : comm->directMinReduceScatter;
      break;
    default: return false;
  }
  return min > 0 && bytes >= min;
}

namespace host {
namespace {

struct Descriptor {
  uint64_t addr;
  uint64_t bytes;
  int32_t pid;
  int32_t pad;
};

struct Done {
  uint64_t bytes;  // what the reader read: a check against a mismatched call
};

// A reduction's descriptor: where rank p's input and output are, its count, and its PreMulSum scalar.
struct ReduceDescriptor {
  uint64_t input;
  uint64_t output;
  uint64_t count;
  uint64_t scalar;  // the datatype's bytes, low first (a per-rank PreMulSum on the fixed order)
  int32_t pid;
  int32_t func;   // ncclFunc_t, and the element size: checks against a mismatched call
  int32_t esize;
  int32_t det;    // the fold: fixed order or not
};

// Single-slot messages over channel 0's collective connections.
struct Links {
  ncclComm* comm;
  const char* what;
  const WaitContext& wait;
  const OpLabel& label;
  ResolvedRedOp copy{};
  Links(ncclComm* c, const char* w, const WaitContext& wt, const OpLabel& l) : comm(c), what(w), wait(wt), label(l) {
    resolveBuiltinRedOp(ncclSum, ncclInt8, 1, &copy);  // byte copy
  }
  HostConn* conn(int p, bool isSend) const {
    Connection* c = commCollConnection(comm, p, isSend);
    return c ? &c->host : nullptr;
  }
  ncclResult_t sendTo(int p, const void* msg, size_t bytes) const {
    HostConn* c = conn(p, true);
    if (!c) TUTTI_FAIL(ncclInternalError, "rank {}: {}: no connection to rank {}", comm->rank, what, p);
    HostPrims prims(nullptr, c, msg, nullptr, 1, copy, wait, label, TUTTI_PROTO_SIMPLE);
    return prims.send(0, bytes);
  }
  ncclResult_t recvFrom(int p, void* msg, size_t bytes) const {
    HostConn* c = conn(p, false);
    if (!c) TUTTI_FAIL(ncclInternalError, "rank {}: {}: no connection from rank {}", comm->rank, what, p);
    announceRecvSteps(c, 1);
    HostPrims prims(c, nullptr, nullptr, msg, 1, copy, wait, label, TUTTI_PROTO_SIMPLE);
    return prims.recv(0, bytes);
  }
};

// Bytes of each peer's rows a reduction stages per chunk (processes): the n rows of a chunk stay in the caches.
constexpr size_t kReduceChunkBytes = 128 * 1024;
// A slice whose rows together reach this many bytes (twice a Zen 4 core's L2) is read from memory.
constexpr size_t kColdRowsBytes = size_t(2) << 20;

ncclResult_t runDirectReduce(ncclComm* comm, const DirectCopy& d, const Links& links) {
  const int n = comm->nRanks, r = comm->rank;
  const bool allReduce = d.func == ncclFuncAllReduce;
  const size_t es = d.esize;
  const OpLabel& label = links.label;
  // Rank p's slice: AllReduce: [lo(p), hi(p)) of the buffer, in 64-byte multiples; ReduceScatter: block p.
  const size_t align = std::max<size_t>(1, 64 / es);
  const size_t per = allReduce ? (d.count + n - 1) / n : d.count;
  const size_t slice = allReduce ? (per + align - 1) / align * align : d.count;
  auto lo = [&](int p) { return allReduce ? std::min(d.count, static_cast<size_t>(p) * slice) : 0; };
  auto hi = [&](int p) { return allReduce ? std::min(d.count, static_cast<size_t>(p + 1) * slice) : d.count; };
  // Where slice p sits in a rank's input (ReduceScatter: block p) and in its output.
  auto inAt = [&](int p) { return allReduce ? lo(p) : static_cast<size_t>(p) * d.count; };
  auto outAt = [&](int p) { return allReduce ? lo(p) : 0; };
  const bool rankScaled = d.det && d.op.kind == RedOpKind::PreMulSum && d.op.op != ncclAvg;

  // 1. Descriptors to every peer.
  ReduceDescriptor mine{reinterpret_cast<uintptr_t>(d.input), reinterpret_cast<uintptr_t>(d.output), d.count, 0,
                        static_cast<int32_t>(getpid()), static_cast<int32_t>(d.func), static_cast<int32_t>(es),
                        d.det ? 1 : 0};
  if (rankScaled) std::memcpy(&mine.scalar, d.op.scalarIsPtr ? d.op.scalarPtr : &d.op.scalarBits, es);
  for (int k = 1; k < n; ++k) TUTTI_CHECK(links.sendTo((r + k) % n, &mine, sizeof mine));
  std::array<ReduceDescriptor, kDirectReduceMaxRanks> peer{};
  peer[r] = mine;
  const uint64_t myPidHash = comm->peers[r].pidHash;
  std::array<bool, kDirectReduceMaxRanks> local{};  // p is a thread of this process: its memory is ours
  for (int k = 1; k < n; ++k) {
    const int p = (r + n - k) % n;
    TUTTI_CHECK(links.recvFrom(p, &peer[p], sizeof peer[p]));
    const ReduceDescriptor& o = peer[p];
    if (o.count != d.count || o.func != mine.func || o.esize != mine.esize || o.det != mine.det)
      TUTTI_FAIL(ncclInvalidUsage, "rank {}: {} (opCount {}): rank {} runs {} of {} elements of {} bytes{} where this "
                 "rank runs {} of {} elements of {} bytes{} (mismatched calls or settings across ranks?)", r,
                 links.what, label.opCount, p, funcName(static_cast<ncclFunc_t>(o.func)), o.count, o.esize,
                 o.det ? ", deterministic" : "", links.what, d.count, es, d.det ? ", deterministic" : "");
    local[p] = comm->peers[p].pidHash == myPidHash;
  }
  local[r] = true;
  std::array<uint64_t, kDirectReduceMaxRanks> scalars{};  // rank p's scalar at p * es bytes (packed)
  if (rankScaled)
    for (int p = 0; p < n; ++p) std::memcpy(reinterpret_cast<char*>(scalars.data()) + size_t(p) * es, &peer[p].scalar, es);

  // 2. This rank's slice, a chunk at a time: the peers' rows staged, the fold in rank order (this rank's row first off
  // the fixed order, where the output may alias it).
  const size_t chunk = std::max<size_t>(1, kReduceChunkBytes / es);
  const size_t first = lo(r), last = hi(r);
  int remote = 0;
  for (int p = 0; p < n; ++p) remote += local[p] ? 0 : 1;
  const size_t stride = std::min(chunk, last - first) * es;  // of a peer's staged row
  if (remote && first < last) {
    const size_t need = static_cast<size_t>(n) * stride;
    if (comm->directStaging.size() < need) comm->directStaging.resize(need);
  }
  // The rows are the ranks' inputs in place (threads), read once, and together more than the core's L2 holds: the
  // fixed order's fold prefetches them (hostDetReduceCopy's coldRows). Staged rows were just written: in cache.
  const bool coldRows = remote == 0 && static_cast<size_t>(n) * (last - first) * es >= kColdRowsBytes;
  for (size_t a = first; a < last; a += chunk) {
    const size_t len = std::min(chunk, last - a);
    std::array<const void*, kDirectReduceMaxRanks> rows{};
    const size_t at = inAt(r) + (a - first);
    for (int p = 0; p < n; ++p) {
      const char* src = reinterpret_cast<const char*>(peer[p].input) + at * es;
      if (local[p]) {
        rows[p] = src;
        continue;
      }
      char* stage = comm->directStaging.data() + static_cast<size_t>(p) * stride;
      int err = 0;
      if (!readRemote(peer[p].pid, stage, src, len * es, &err))
        TUTTI_FAIL(ncclSystemError, "rank {}: {} (opCount {}): cannot read {} bytes from rank {} (pid {}): "
                   "process_vm_readv: {}", r, links.what, label.opCount, len * es, p, peer[p].pid, std::strerror(err));
      rows[p] = stage;
    }
    void* out = d.output + (outAt(r) + (a - first)) * es;
    if (d.det) {
      hostDetReduceCopy(d.op, n, rows.data(), 1, &out, len, rankScaled ? scalars.data() : nullptr, coldRows);
    } else {
      std::array<const void*, kDirectReduceMaxRanks> order{};
      for (int k = 0; k < n; ++k) order[k] = rows[(r + k) % n];  // own row first: it may be the output
      hostReduceCopy(d.op, n, order.data(), 1, &out, len, /*preOpFirstSrc=*/false, /*postOp=*/true);
    }
  }
  // 3. AllReduce: the reduced slice into every peer's output, then a "reduced" to each. Only this rank reads slice r
  // of a peer's input, and it has: the peer's buffer is free there even in place.
  const Done reduced{d.count};
  const size_t mineBytes = (last - first) * es;
  for (int k = 1; k < n; ++k) {
    const int p = (r + k) % n;
    if (allReduce && mineBytes) {
      const char* src = d.output + first * es;
      char* dst = reinterpret_cast<char*>(peer[p].output) + first * es;
      int err = 0;
      if (local[p]) std::memcpy(dst, src, mineBytes);
      else if (!writeRemote(peer[p].pid, dst, src, mineBytes, &err))
        TUTTI_FAIL(ncclSystemError, "rank {}: {} (opCount {}): cannot write {} bytes to rank {} (pid {}): "
                   "process_vm_writev: {}", r, links.what, label.opCount, mineBytes, p, peer[p].pid,
                   std::strerror(err));
    }
    TUTTI_CHECK(links.sendTo(p, &reduced, sizeof reduced));
  }
  // 4. Every peer's "reduced": it read what it needed of this rank's input and wrote its slice of this rank's output.
  for (int k = 1; k < n; ++k) {
    Done done{};
    TUTTI_CHECK(links.recvFrom((r + n - k) % n, &done, sizeof done));
  }
  return ncclSuccess;
}

}  // namespace

ncclResult_t runDirectCopy(ncclComm* comm, const DirectCopy& d, const WaitContext& wait, const OpLabel& label) {
  const int n = comm->nRanks, r = comm->rank;
  const Links links(comm, funcName(d.func), wait, label);
  if (d.func == ncclFuncAllReduce || d.func == ncclFuncReduceScatter) return runDirectReduce(comm, d, links);
  const bool bcast = d.func == ncclFuncBroadcast, alltoall = d.func == ncclFuncAlltoAll;
  const char* what = funcName(d.func);
  auto owns = [&](int p) { return !bcast || p == d.root; };   // p's buffer is read by others
  auto reads = [&](int p) { return !bcast || p != d.root; };  // p reads others' buffers
  // Where rank p's part of the call sits in an owner's buffer (what p reads there), and in p's output.
  auto srcOffset = [&](int p) { return alltoall ? static_cast<size_t>(p) * d.bytes : 0; };
  auto dstOffset = [&](int p) { return bcast ? 0 : static_cast<size_t>(p) * d.bytes; };
  auto sendTo = [&](int p, const void* msg, size_t bytes) { return links.sendTo(p, msg, bytes); };
  auto recvFrom = [&](int p, void* msg, size_t bytes) { return links.recvFrom(p, msg, bytes); };

  // A Broadcast's root may write the last `share` bytes of every reader's buffer itself while the readers read the
  // rest (comm->directRootShareMin): then each reader first sends the root where its buffer is.
  const size_t share = bcast && comm->directRootShareMin > 0 && d.bytes >= comm->directRootShareMin
                           ? d.bytes / static_cast<size_t>(n) / 4096 * 4096
                           : 0;
  if (share > 0 && r != d.root) {
    const Descriptor mine{reinterpret_cast<uintptr_t>(d.output), d.bytes, static_cast<int32_t>(getpid()), 1};
    TUTTI_CHECK(sendTo(d.root, &mine, sizeof mine));
  }

  // 1. Owners tell the readers where their data is. Each connection carries at most two messages of a call each way
  // (a descriptor, then a done; a root that takes a share sends a reader a descriptor and a "written", and the
  // reader sends it a descriptor and a done), so no send waits for this call's receives.
  const char* offered = d.input;
  if (alltoall && d.input == d.output && n > 1) {  // in place: the peers read a copy while this rank overwrites
    const size_t all = d.bytes * static_cast<size_t>(n);
    if (comm->directStaging.size() < all) comm->directStaging.resize(all);
    std::memcpy(comm->directStaging.data(), d.input, all);
    offered = comm->directStaging.data();
  }
  if (owns(r)) {
    const Descriptor mine{reinterpret_cast<uintptr_t>(offered), d.bytes, static_cast<int32_t>(getpid()),
                          share > 0 ? 1 : 0};
    for (int k = 1; k < n; ++k)
      if (const int p = (r + k) % n; reads(p)) TUTTI_CHECK(sendTo(p, &mine, sizeof mine));
  }
  // The rank's own part.
  char* own = d.output + dstOffset(r);
  if (owns(r) && own != d.input + srcOffset(r)) std::memcpy(own, d.input + srcOffset(r), d.bytes);

  // 2. Readers copy each owner's block once, then tell the owner it may go on.
  if (reads(r)) {
    const uint64_t myPidHash = comm->peers[r].pidHash;
    for (int k = 1; k < n; ++k) {
      const int p = (r + n - k) % n;
      if (!owns(p)) continue;
      Descriptor from{};
      TUTTI_CHECK(recvFrom(p, &from, sizeof from));
      if (from.bytes != d.bytes)
        TUTTI_FAIL(ncclInvalidUsage, "rank {}: {} (opCount {}): rank {} offers {} bytes where this rank expects {} "
                   "(mismatched calls across ranks?)", r, what, label.opCount, p, from.bytes, d.bytes);
      if ((from.pad != 0) != (share > 0))
        TUTTI_FAIL(ncclInvalidUsage, "rank {}: {} (opCount {}): root {} {} a share of the copy where this rank expects "
                   "it {} (TUTTI_DIRECT_ROOT_SHARE_MIN_BYTES differs across ranks?)", r, what, label.opCount, p,
                   from.pad ? "writes" : "does not write", share > 0 ? "to" : "not to");
      char* dst = d.output + dstOffset(p);
      const void* src = reinterpret_cast<const char*>(from.addr) + srcOffset(r);
      const size_t len = d.bytes - share;
      if (comm->peers[p].pidHash == myPidHash) {
        std::memcpy(dst, src, len);
      } else {
        int err = 0;
        if (!readRemote(from.pid, dst, src, len, &err))
          TUTTI_FAIL(ncclSystemError, "rank {}: {} (opCount {}): cannot read {} bytes from rank {} (pid {}): "
                     "process_vm_readv: {}", r, what, label.opCount, len, p, from.pid, std::strerror(err));
      }
      const Done done{d.bytes};
      TUTTI_CHECK(sendTo(p, &done, sizeof done));
    }
  }

  // 2b. A root that takes a share writes the last `share` bytes of each reader's buffer, then says so; the reader
  // returns only after that.
  if (share > 0 && r == d.root) {
    const uint64_t myPidHash = comm->peers[r].pidHash;
    for (int k = 1; k < n; ++k) {
      const int p = (r + k) % n;
      Descriptor to{};
      TUTTI_CHECK(recvFrom(p, &to, sizeof to));
      if (to.bytes != d.bytes || to.pad == 0)
        TUTTI_FAIL(ncclInvalidUsage, "rank {}: {} (opCount {}): rank {} expects {} bytes{} where this rank sends {} "
                   "(mismatched calls or settings across ranks?)", r, what, label.opCount, p, to.bytes,
                   to.pad ? "" : " without the root's share", d.bytes);
      const char* src = d.input + (d.bytes - share);
      char* dst = reinterpret_cast<char*>(to.addr) + (d.bytes - share);
      if (comm->peers[p].pidHash == myPidHash) {
        std::memcpy(dst, src, share);
      } else {
        int err = 0;
        if (!writeRemote(to.pid, dst, src, share, &err))
          TUTTI_FAIL(ncclSystemError, "rank {}: {} (opCount {}): cannot write {} bytes to rank {} (pid {}): "
                     "process_vm_writev: {}", r, what, label.opCount, share, p, to.pid, std::strerror(err));
      }
      const Done written{share};
      TUTTI_CHECK(sendTo(p, &written, sizeof written));
    }
  }
  if (share > 0 && r != d.root) {
    Done written{};
    TUTTI_CHECK(recvFrom(d.root, &written, sizeof written));
    if (written.bytes != share)
      TUTTI_FAIL(ncclInternalError, "rank {}: {} (opCount {}): root {} wrote {} bytes of this rank's buffer where "
                 "{} were due", r, what, label.opCount, d.root, written.bytes, share);
  }

  // 3. Owners return only once every reader is done with their buffer.
  if (owns(r)) {
    for (int k = 1; k < n; ++k) {
      const int p = (r + k) % n;
      if (!reads(p)) continue;
      Done done{};
      TUTTI_CHECK(recvFrom(p, &done, sizeof done));
    }
  }
  return ncclSuccess;
}

}  // namespace host
}  // namespace tutti
