#include "launch.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cctype>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace tutti::perf {
namespace {

// Whole-string decimal parse; false on empty, trailing junk or overflow.
bool parseInt(const char* s, int* out) {
  if (s == nullptr || *s == '\0') return false;
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < INT_MIN || v > INT_MAX) return false;
  *out = static_cast<int>(v);
  return true;
}

bool launcherPair(const char* rankVar, const char* sizeVar, int* rank, int* size, std::string* error) {
  const char* r = std::getenv(rankVar);
  const char* s = std::getenv(sizeVar);
  if (r == nullptr || s == nullptr) return false;
  if (!parseInt(r, rank) || !parseInt(s, size) || *size < 1 || *rank < 0 || *rank >= *size)
    *error = std::string(rankVar) + "='" + r + "' / " + sizeVar + "='" + s + "' do not describe a valid rank";
  return true;
}

// Replaces characters that do not belong in a file name (Open MPI job ids may contain '@' or ':').
std::string fileSafe(std::string s) {
  for (char& c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) c = '_';
  return s;
}

}  // namespace

const char* modeName(Mode m) {
  switch (m) {
    case Mode::Threads: return "threads";
    case Mode::Fork: return "processes (local fork)";
    case Mode::Mpi: return "processes (mpirun/PMI launcher)";
  }
  return "?";
}

bool detectLauncher(int* rank, int* size, std::string* error) {
  return launcherPair("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", rank, size, error) ||
         launcherPair("PMI_RANK", "PMI_SIZE", rank, size, error);
}

int bindCpuFor(int rank) {
  cpu_set_t mask;
  if (sched_getaffinity(0, sizeof mask, &mask) != 0 || CPU_COUNT(&mask) == 0) return -1;
  int k = rank % CPU_COUNT(&mask);
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &mask) && k-- == 0) return c;
  return -1;
}

bool bindToCpu(int rank, int cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  if (cpu >= 0 && cpu < CPU_SETSIZE) {
    CPU_SET(cpu, &one);
    if (sched_setaffinity(0, sizeof one, &one) == 0) return true;
  }
  std::fprintf(stderr, "rank %d: --bind: cannot bind to CPU %d: %s\n", rank, cpu, std::strerror(errno));
  return false;
}

bool forkRanks(int n, ncclUniqueId* id, int* rank, int* exitCode) {
  *exitCode = 1;
  // Anything still buffered would be printed once by every child.
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t parent = getpid();
  std::vector<pid_t> pids;
  std::vector<int> idFds;  // parent's write end of each child's id pipe
  auto closeIdFds = [&idFds] {
    for (int& fd : idFds)
      if (fd >= 0) close(fd), fd = -1;
  };
  auto stopAll = [&pids] {
    for (pid_t p : pids)
      if (p > 0) kill(p, SIGTERM);
  };
  // The children are forked while this process has no other thread: a thread of the library (the
  // rendezvous root) could hold a lock at fork time that the child then waits on forever (allocators
  // without fork handlers, e.g. the sanitizers'). The id follows through a pipe once it exists.
  for (int r = 0; r < n; ++r) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
      std::fprintf(stderr, "pipe for rank %d failed: %s\n", r, std::strerror(errno));
      closeIdFds();
      stopAll();
      while (wait(nullptr) > 0 || errno == EINTR) {}
      return false;
    }
    pid_t p = fork();
    if (p == 0) {
      // A child must not outlive a parent killed by a timeout: it would spin in the library forever.
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != parent) _exit(1);
      close(fds[1]);
      for (int fd : idFds) close(fd);  // earlier siblings' pipes: only the parent writes them
      size_t got = 0;
      while (got < sizeof *id) {
        const ssize_t k = read(fds[0], reinterpret_cast<char*>(id) + got, sizeof *id - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) _exit(1);  // the parent could not make the id (it says why)
        got += static_cast<size_t>(k);
      }
      close(fds[0]);
      *rank = r;
      return true;
    }
    close(fds[0]);
    if (p < 0) {
      std::fprintf(stderr, "fork() of rank %d failed: %s\n", r, std::strerror(errno));
      close(fds[1]);
      closeIdFds();
      stopAll();
      while (wait(nullptr) > 0 || errno == EINTR) {}
      return false;
    }
    pids.push_back(p);
    idFds.push_back(fds[1]);
  }
  if (ncclResult_t res = ncclGetUniqueId(id); res != ncclSuccess) {
    std::fprintf(stderr, "ncclGetUniqueId failed: %s (%s)\n", ncclGetErrorString(res), ncclGetLastError(nullptr));
    closeIdFds();  // the children read EOF and exit
    while (wait(nullptr) > 0 || errno == EINTR) {}
    return false;
  }
  signal(SIGPIPE, SIG_IGN);  // a child that died before reading must not kill the parent
  for (int& fd : idFds) {
    size_t put = 0;
    while (put < sizeof *id) {
      const ssize_t k = write(fd, reinterpret_cast<const char*>(id) + put, sizeof *id - put);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) break;  // that child is gone: the wait below reports it
      put += static_cast<size_t>(k);
    }
    close(fd);
    fd = -1;
  }
  bool failed = false;
  for (int left = n; left > 0;) {
    int status = 0;
    pid_t p = waitpid(-1, &status, 0);
    if (p < 0) {
      if (errno == EINTR) continue;
      break;
    }
    int r = 0;
    while (r < n && pids[r] != p) ++r;
    if (r == n) continue;
    pids[r] = -1;
    --left;
    bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok && !failed) {
      // The surviving ranks may be blocked waiting for the failed one; stop them rather than hang.
      if (WIFEXITED(status))
        std::fprintf(stderr, "rank %d (pid %d) exited with status %d; stopping the other ranks\n", r, p,
                     WEXITSTATUS(status));
      else
        std::fprintf(stderr, "rank %d (pid %d) was killed by signal %d; stopping the other ranks\n", r, p,
                     WIFSIGNALED(status) ? WTERMSIG(status) : 0);
      failed = true;
      stopAll();
    }
  }
  *exitCode = failed ? 1 : 0;
  return false;
}

std::string idFilePath() {
  if (const char* p = std::getenv("TUTTI_PERF_ID_FILE"); p != nullptr && *p) return p;
  std::string job;
  if (const char* j = std::getenv("OMPI_MCA_orte_ess_jobid"); j != nullptr && *j) job = j;
  else if (const char* ns = std::getenv("PMIX_NAMESPACE"); ns != nullptr && *ns) job = ns;
  else job = "ppid" + std::to_string(getppid());
  return "/tmp/tutti-perf-id-" + fileSafe(job);
}

bool shareIdThroughFile(int rank, int timeoutSec, ncclUniqueId* id) {
  const std::string path = idFilePath();
  if (rank == 0) {
    if (ncclResult_t res = ncclGetUniqueId(id); res != ncclSuccess) {
      std::fprintf(stderr, "ncclGetUniqueId failed: %s (%s)\n", ncclGetErrorString(res), ncclGetLastError(nullptr));
      return false;
    }
    // Readers only ever see a missing file or a complete one.
    const std::string tmp = path + ".tmp." + std::to_string(getpid());
    FILE* f = std::fopen(tmp.c_str(), "wb");
    bool ok = f != nullptr && std::fwrite(id, sizeof *id, 1, f) == 1;
    if (f != nullptr && std::fclose(f) != 0) ok = false;
    if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
      std::fprintf(stderr, "cannot publish the unique id at %s: %s (set TUTTI_PERF_ID_FILE to a writable path)\n",
                   path.c_str(), std::strerror(errno));
      std::remove(tmp.c_str());
      return false;
    }
    return true;
  }
  // A file left by an earlier crashed run with the same name is older than this process; ignore it.
  const time_t notBefore = time(nullptr) - 10;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeoutSec);
  while (std::chrono::steady_clock::now() < deadline) {
    struct stat st{};
    if (stat(path.c_str(), &st) == 0 && st.st_size == static_cast<off_t>(sizeof *id) && st.st_mtime >= notBefore) {
      FILE* f = std::fopen(path.c_str(), "rb");
      bool ok = f != nullptr && std::fread(id, sizeof *id, 1, f) == 1;
      if (f != nullptr) std::fclose(f);
      if (ok) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::fprintf(stderr, "rank %d: no unique id appeared at %s within %d s (is rank 0 running? set "
               "TUTTI_PERF_ID_FILE to the same path on every rank)\n", rank, path.c_str(), timeoutSec);
  return false;
}

void removeIdFile() { std::remove(idFilePath().c_str()); }

}  // namespace tutti::perf
