// The environment variables net-socket reads (names and meanings as in NCCL's socket transport where NCCL
// has them). Read once per first init; a malformed value fails init with a message naming the variable.
#pragma once

#include <cstddef>
#include <string>

#include <tutti/common.h>

namespace tutti::netsock {

constexpr int kAutoSockets = -2;
constexpr int kSameHostSendBuffer = -1;
// The SO_SNDBUF of a connection inside the host: the kernel makes it a send buffer of 768 KiB (see sizeSendBuffer).
constexpr int kSameHostSendBufBytes = 384 << 10;

// Helper threads and sockets per thread for a NIC whose PCI vendor id is `pciVendor` (as in
// /sys/class/net/<if>/device/vendor, e.g. "0x1d0f"; NULL or empty when unknown), NCCL's choices: cloud NICs
// whose single TCP stream is capped get parallel streams (AWS ENA 2 x 8, Google gVNIC 4 x 1); everything
// else moves every message on the control socket in the proxy's thread, which on a host with few cores
// beats waking helper threads (ring AllReduce over loopback, 4 ranks on 2 cores, 1 MiB: 2.03 -> 1.54 ms).
inline void nicSocketDefaults(const char* pciVendor, int* nThreads, int* nSocksPerThread) {
  const std::string v = pciVendor ? pciVendor : "";
  if (v.rfind("0x1d0f", 0) == 0) {
    *nThreads = 2;
    *nSocksPerThread = 8;
  } else if (v.rfind("0x1ae0", 0) == 0) {
    *nThreads = 4;
    *nSocksPerThread = 1;
  } else {
    *nThreads = 0;
    *nSocksPerThread = 1;
  }
}

struct Options {
  std::string ifname;           // NCCL_SOCKET_IFNAME: prefix list, leading ^ excludes, leading = exact
  int family = 0;               // NCCL_SOCKET_FAMILY: AF_INET / AF_INET6; 0 (AF_UNSPEC) takes either
  // NCCL_SOCKET_NTHREADS: helper threads per comm (0: no data sockets, every message on the control
  // socket); NCCL_NSOCKS_PERTHREAD: data sockets per helper thread. kAutoSockets (unset) takes the NIC's
  // defaults at listen time, see nicSocketDefaults.
  int nThreads = kAutoSockets;
  int nSocksPerThread = kAutoSockets;
  // NCCL_SOCKET_INLINE: messages up to this size travel on the control socket, moved by the caller's
  // thread, where there are data sockets. The default is the smallest chunk: a message that would be one
  // chunk gains no parallelism from the helper threads and pays two thread wake-ups (NCCL's 128 B made
  // 1 KiB..64 KiB messages slow).
  size_t inlineBytes = 65536;
  size_t minChunkBytes = 65536; // NCCL_SOCKET_MIN_TASKSIZE: smallest piece a large message is cut into
  int maxDevices = 16;          // NCCL_SOCKET_MAX_IFS: most interfaces exposed as devices
  int timeoutMs = 30000;        // TUTTI_NET_SOCKET_TIMEOUT_MS: connection setup (refused retries, handshake)
  // TUTTI_NET_SOCKET_DELAYED_ACK: 1 keeps the control socket of every receiving comm in delayed-ACK mode
  // (TCP_QUICKACK off), so that one ACK covers several segments, but for long payloads of a one-way flow; 0 leaves
  // the kernel's choice. See keepAcksDelayed and ackBulkRead (transfer.cc).
  bool delayedAck = true;
  // TUTTI_NET_SOCKET_HOLD_SMALL: 1 lets the control socket of a sending comm in a one-way flow hold messages of up to
  // 16 KiB behind an unacknowledged one (TCP_NODELAY off), the receiver acknowledging whenever its socket runs dry;
  // 0 sends every message at once (TCP_NODELAY on). See holdSmall (transfer.cc).
  bool holdSmall = true;
  // TUTTI_NET_SOCKET_SNDBUF: SO_SNDBUF of the sockets of every sending comm (Linux doubles it); 0 leaves the
  // kernel's autotuning; kSameHostSendBuffer (unset) sets kSameHostSendBufBytes where a connection stays inside the
  // host (sameHostConnection, connect.cc) and leaves the others to the kernel. See sizeSendBuffer (connect.cc).
  long long sendBufBytes = kSameHostSendBuffer;
};

// Parses the environment into *out. Bad values are logged and give ncclInvalidUsage.
ncclResult_t readOptions(Options* out);

// Helper threads and data sockets per thread for a comm listening on interface `ifname`: the variables
// where set, the NIC's defaults (nicSocketDefaults) where not; the total is trimmed to kMaxSockets.
void socketCounts(const Options& o, const std::string& ifname, int* nThreads, int* nSocksPerThread);

// The options read by the current init (valid between init and the last finalize).
const Options& options();
void setOptions(const Options& o);

}  // namespace tutti::netsock
