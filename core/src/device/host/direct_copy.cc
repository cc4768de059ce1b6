#include "device/host/direct_copy.h"

#include "comm/comm.h"
#include "comm/task.h"
#include "plugin/params.h"
#include "util/check.h"

#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace tutti {
namespace {

// What the probe reads from another process: a constant whose address travels through the bootstrap.
constexpr uint64_t kProbeMagic = 0x74757474692d636dull;
const uint64_t gProbeWord = kProbeMagic;

// Copies `bytes` from address `src` of process `pid` into dst. False with *err (an errno) when the kernel refuses.
bool readRemote(int pid, void* dst, const void* src, size_t bytes, int* err) {
  size_t done = 0;
  while (done < bytes) {
    iovec local{static_cast<char*>(dst) + done, bytes - done};
    iovec remote{const_cast<char*>(static_cast<const char*>(src)) + done, bytes - done};
    const ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *err = n < 0 ? errno : EFAULT;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

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
  std::vector<uint8_t> oks(n);
  oks[r] = ok;
  TUTTI_CHECK(comm->bootstrap->allGather(oks.data(), 1));
  comm->directOk = true;
  for (int p = 0; p < n; ++p) comm->directOk = comm->directOk && oks[p];
  if (comm->directOk)
    TUTTI_INFO(NCCL_INIT, "rank {}: single-copy AllGather from {} bytes, Broadcast from {} bytes, AlltoAll from {} "
               "bytes (0: never; cross memory attach)", r, comm->directMinGather, comm->directMinBcast,
               comm->directMinAlltoAll);
  else if (!ok)
    TUTTI_INFO(NCCL_INIT, "rank {}: no single-copy AllGather / Broadcast / AlltoAll: {}", r, why);
  return ncclSuccess;
}

bool directWanted(const ncclComm* comm, ncclFunc_t func, size_t bytes) {
  if (!comm->directOk || !comm->corePaths) return false;
  size_t min = 0;
  switch (func) {
    case ncclFuncAllGather: min = comm->directMinGather; break;
    case ncclFuncBroadcast: min = comm->directMinBcast; break;
    case ncclFuncAlltoAll: min = comm->directMinAlltoAll; break;
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

}  // namespace

ncclResult_t runDirectCopy(ncclComm* comm, const DirectCopy& d, const WaitContext& wait, const OpLabel& label) {
  const int n = comm->nRanks, r = comm->rank;
  const bool bcast = d.func == ncclFuncBroadcast, alltoall = d.func == ncclFuncAlltoAll;
  const char* what = funcName(d.func);
  auto owns = [&](int p) { return !bcast || p == d.root; };   // p's buffer is read by others
  auto reads = [&](int p) { return !bcast || p != d.root; };  // p reads others' buffers
  // Where rank p's part of the call sits in an owner's buffer (what p reads there), and in p's output.
  auto srcOffset = [&](int p) { return alltoall ? static_cast<size_t>(p) * d.bytes : 0; };
  auto dstOffset = [&](int p) { return bcast ? 0 : static_cast<size_t>(p) * d.bytes; };
  ResolvedRedOp copy{};
  resolveBuiltinRedOp(ncclSum, ncclInt8, 1, &copy);  // byte copy
  auto conn = [&](int p, bool isSend) -> HostConn* {
    Connection* c = commFindConnection(comm, 0, kConnColl, p, isSend);
    return c ? &c->host : nullptr;
  };
  auto sendTo = [&](int p, const void* msg, size_t bytes) -> ncclResult_t {
    HostConn* c = conn(p, true);
    if (!c) TUTTI_FAIL(ncclInternalError, "rank {}: {}: no connection to rank {}", r, what, p);
    HostPrims prims(nullptr, c, msg, nullptr, 1, copy, wait, label, TUTTI_PROTO_SIMPLE);
    return prims.send(0, bytes);
  };
  auto recvFrom = [&](int p, void* msg, size_t bytes) -> ncclResult_t {
    HostConn* c = conn(p, false);
    if (!c) TUTTI_FAIL(ncclInternalError, "rank {}: {}: no connection from rank {}", r, what, p);
    announceRecvSteps(c, 1);
    HostPrims prims(c, nullptr, nullptr, msg, 1, copy, wait, label, TUTTI_PROTO_SIMPLE);
    return prims.recv(0, bytes);
  };

  // 1. Owners tell the readers where their data is. Each connection carries at most two messages of a call (a
  // descriptor one way, a done the other), so no send waits for this call's receives.
  const char* offered = d.input;
  if (alltoall && d.input == d.output && n > 1) {  // in place: the peers read a copy while this rank overwrites
    const size_t all = d.bytes * static_cast<size_t>(n);
    if (comm->directStaging.size() < all) comm->directStaging.resize(all);
    std::memcpy(comm->directStaging.data(), d.input, all);
    offered = comm->directStaging.data();
  }
  if (owns(r)) {
    const Descriptor mine{reinterpret_cast<uintptr_t>(offered), d.bytes, static_cast<int32_t>(getpid()), 0};
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
      char* dst = d.output + dstOffset(p);
      const void* src = reinterpret_cast<const char*>(from.addr) + srcOffset(r);
      if (comm->peers[p].pidHash == myPidHash) {
        std::memcpy(dst, src, d.bytes);
      } else {
        int err = 0;
        if (!readRemote(from.pid, dst, src, d.bytes, &err))
          TUTTI_FAIL(ncclSystemError, "rank {}: {} (opCount {}): cannot read {} bytes from rank {} (pid {}): "
                     "process_vm_readv: {}", r, what, label.opCount, d.bytes, p, from.pid, std::strerror(err));
      }
      const Done done{d.bytes};
      TUTTI_CHECK(sendTo(p, &done, sizeof done));
    }
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
