#include "topo/topo.h"

#include "device/peer_fd.h"
#include "plugin/params.h"
#include "util/check.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <set>

namespace tutti {
namespace {

uint64_t fnv1a(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ull) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

}  // namespace

ncclResult_t topoLocalPeerInfo(int rank, int cudaDev, tuttiPeerInfo_t* out) {
  std::memset(out, 0, sizeof *out);
  std::string host = paramString("TUTTI_HOSTNAME");
  if (host.empty()) {
    char buf[256] = {};
    if (gethostname(buf, sizeof buf - 1) != 0) TUTTI_FAIL(ncclSystemError, "gethostname failed");
    host = buf;
  }
  out->rank = rank;
  out->cudaDev = cudaDev;
  out->hostHash = fnv1a(host.data(), host.size());
  int pid = getpid();
  out->pid = pid;
  // Threads of one process share the pid. Processes in different pid namespaces (containers sharing /dev/shm)
  // may have the same pid, so the namespace is part of the identity too (its inode), with the host's.
  out->pidNs = rt::pidNamespaceId();
  const uint64_t h = fnv1a(&out->pidNs, sizeof out->pidNs, out->hostHash);
  out->pidHash = fnv1a(&pid, sizeof pid, h);
  out->busId = -1;
  out->backend = 0;
  return ncclSuccess;
}

int topoNodeCount(const std::vector<tuttiPeerInfo_t>& peers) {
  std::set<uint64_t> hosts;
  for (const auto& p : peers) hosts.insert(p.hostHash);
  return static_cast<int>(hosts.size());
}

std::vector<int> topoRing(const std::vector<tuttiPeerInfo_t>& peers, int channel) {
  (void)channel;  // every channel follows the same order on the host backend
  std::vector<uint64_t> hostOrder;
  for (const auto& p : peers)
    if (std::find(hostOrder.begin(), hostOrder.end(), p.hostHash) == hostOrder.end()) hostOrder.push_back(p.hostHash);
  std::vector<int> ring;
  ring.reserve(peers.size());
  for (uint64_t h : hostOrder)
    for (const auto& p : peers)
      if (p.hostHash == h) ring.push_back(p.rank);
  return ring;
}

int topoChannelCount(int nRanks) {
  (void)nRanks;
  int lo = static_cast<int>(std::clamp<int64_t>(paramInt("NCCL_MIN_NCHANNELS"), 1, kMaxChannels));
  int hi = static_cast<int>(std::clamp<int64_t>(paramInt("NCCL_MAX_NCHANNELS"), 1, kMaxChannels));
  return std::max(lo, hi);
}

}  // namespace tutti
