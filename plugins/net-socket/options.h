// The environment variables net-socket reads (names and meanings as in NCCL's socket transport where NCCL
// has them). Read once per first init; a malformed value fails init with a message naming the variable.
#pragma once

#include <cstddef>
#include <string>

#include <tutti/common.h>

namespace tutti::netsock {

struct Options {
  std::string ifname;           // NCCL_SOCKET_IFNAME: prefix list, leading ^ excludes, leading = exact
  int family = 0;               // NCCL_SOCKET_FAMILY: AF_INET / AF_INET6; 0 (AF_UNSPEC) takes either
  int nThreads = 1;             // NCCL_SOCKET_NTHREADS: helper threads per comm (0: no data sockets)
  int nSocksPerThread = 2;      // NCCL_NSOCKS_PERTHREAD: data sockets per helper thread
  // NCCL_SOCKET_INLINE: messages up to this size travel on the control socket, moved by the caller's
  // thread. The default is the smallest chunk: a message that would be one chunk gains no parallelism from
  // the helper threads and pays two thread wake-ups (NCCL's 128 B made 1 KiB..64 KiB messages slow).
  size_t inlineBytes = 65536;
  size_t minChunkBytes = 65536; // NCCL_SOCKET_MIN_TASKSIZE: smallest piece a large message is cut into
  int maxDevices = 16;          // NCCL_SOCKET_MAX_IFS: most interfaces exposed as devices
  int timeoutMs = 30000;        // TUTTI_NET_SOCKET_TIMEOUT_MS: connection setup (refused retries, handshake)
};

// Parses the environment into *out. Bad values are logged and give ncclInvalidUsage.
ncclResult_t readOptions(Options* out);

// The options read by the current init (valid between init and the last finalize).
const Options& options();
void setOptions(const Options& o);

}  // namespace tutti::netsock
