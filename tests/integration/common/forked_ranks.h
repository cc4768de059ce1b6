// Ranks as forked processes, for tests of memory shared across processes: body(comm, rank) runs in one
// child per rank (on a communicator of n ranks made from one ncclGetUniqueId). A child reports its own
// failure on stderr and in its exit status; the parent returns one line per failed rank. Call it before the
// test process starts threads of its own.
#pragma once

#include <nccl.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace tutti::itest {

inline std::vector<std::string> onForkedRanks(int n, const std::function<std::string(ncclComm_t, int)>& body) {
  std::vector<std::string> failed;
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return {std::string("ncclGetUniqueId: ") + ncclGetLastError(nullptr)};
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    const pid_t pid = fork();
    if (pid < 0) {
      failed.push_back("fork failed");
      break;
    }
    if (pid == 0) {
      ncclComm_t comm = nullptr;
      std::string e = ncclCommInitRank(&comm, n, id, r) == ncclSuccess
                          ? body(comm, r)
                          : std::string("init: ") + ncclGetLastError(nullptr);
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
