// Ranks as forked processes, for tests of memory shared across processes: body(comm, rank) runs in one
// child per rank (on a communicator of n ranks). A child reports its own failure on stderr and in its exit
// status; the parent returns one line per failed rank.
//
// The rendezvous is NCCL_COMM_ID on a free local port, set in each child, so rank 0's child runs the root:
// the parent starts no thread before it forks (a child forked while another thread holds an allocator lock,
// as a sanitizer's may, would wait for it forever). Call it before the test process starts threads.
#pragma once

#include <nccl.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace tutti::itest {

// A TCP port of 127.0.0.1 nobody listens on right now (0 if none could be found).
inline int freeLocalPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

// beforeInit(rank), when given, runs in each child before its communicator is made (per-rank environment).
inline std::vector<std::string> onForkedRanks(int n, const std::function<std::string(ncclComm_t, int)>& body,
                                              const std::function<void(int)>& beforeInit = {}) {
  std::vector<std::string> failed;
  const int port = freeLocalPort();
  if (port == 0) return {"no free local port for NCCL_COMM_ID"};
  const std::string commId = "127.0.0.1:" + std::to_string(port);
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    const pid_t pid = fork();
    if (pid < 0) {
      failed.push_back("fork failed");
      break;
    }
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a test binary that died
      setenv("NCCL_COMM_ID", commId.c_str(), 1);
      if (beforeInit) beforeInit(r);
      ncclUniqueId id;
      ncclComm_t comm = nullptr;
      std::string e;
      if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, n, id, r) != ncclSuccess)
        e = std::string("init: ") + ncclGetLastError(nullptr);
      else
        e = body(comm, r);
      if (comm && ncclCommDestroy(comm) != ncclSuccess && e.empty()) e = "destroy failed";
      if (!e.empty()) std::fprintf(stderr, "rank %d: %s\n", r, e.c_str());
      std::fflush(stderr);
      _exit(e.empty() ? 0 : 1);
    }
    pids.push_back(pid);
  }
  for (size_t r = 0; r < pids.size(); ++r) {
    int status = 0;
    if (waitpid(pids[r], &status, 0) != pids[r] || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
      failed.push_back("rank " + std::to_string(r) + " failed (see its stderr)");
  }
  return failed;
}

}  // namespace tutti::itest
