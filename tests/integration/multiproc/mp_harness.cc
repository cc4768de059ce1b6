#include "mp_harness.h"

#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

namespace tutti::itest {

namespace {

constexpr size_t kMaxMessage = 3584;
std::string& childMessage() {
  static std::string msg;
  return msg;
}

std::string readFd(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  return out;
}

bool writeAll(int fd, const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = write(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

bool readAll(int fd, void* data, size_t bytes) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    ssize_t n = read(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void applyEnv(const EnvList& env) {
  for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
}

// Runs in a rank child after fork: never returns.
[[noreturn]] void childMain(const MpOptions& opts, const RankBody& body, RankContext ctx, int outFd, int msgFd) {
  // Die with the parent: a crashed test binary must not leave ranks spinning on the machine.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  dup2(outFd, STDOUT_FILENO);
  dup2(outFd, STDERR_FILENO);
  close(outFd);
  applyEnv(opts.env);
  if (opts.rankEnv) applyEnv(opts.rankEnv(ctx.rank));
  int code = 0;
  if (opts.idSource == IdSource::kCommIdEnv) {
    ncclResult_t r = ncclGetUniqueId(&ctx.id);
    if (r != ncclSuccess) {
      setMessage(std::string("ncclGetUniqueId with NCCL_COMM_ID failed: ") + ncclGetLastError(nullptr));
      code = 92;
    }
  }
  if (code == 0) {
    try {
      code = body(ctx);
    } catch (const std::exception& e) {
      setMessage(std::string("exception: ") + e.what());
      code = 91;
    } catch (...) {
      setMessage("unknown exception");
      code = 91;
    }
  }
  const std::string& msg = childMessage();
  writeAll(msgFd, msg.data(), msg.size());
  close(msgFd);
  std::fflush(nullptr);
  // _exit: the child is a copy of the gtest process; its static destructors and atexit handlers belong to
  // the parent.
  _exit(code);
}

// The rank in a pid namespace of its own: this process (in the test's namespace) forks the namespace's init,
// which forks the rank as pid 2 (an init process ignores the signals it sends itself, so a rank that raises
// SIGKILL must not be it) and exits as the rank did; this process then ends the same way. Each level dies
// with its parent, so the watchdog's SIGKILL of this process ends the whole namespace.
[[noreturn]] void childInPidNamespace(const MpOptions& opts, const RankBody& body, const RankContext& ctx, int outFd,
                                      int msgFd) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (unshare(CLONE_NEWPID) != 0) {
    const std::string msg = std::string("unshare(CLONE_NEWPID) failed (root needed): ") + std::strerror(errno);
    writeAll(msgFd, msg.data(), msg.size());
    _exit(97);
  }
  const pid_t init = fork();
  if (init == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    const pid_t rank = fork();
    if (rank == 0) childMain(opts, body, ctx, outFd, msgFd);
    int st = 0;
    while (rank > 0 && waitpid(rank, &st, 0) < 0 && errno == EINTR) {
    }
    _exit(rank < 0 ? 96 : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st));
  }
  close(outFd);
  close(msgFd);
  int st = 0;
  while (init > 0 && waitpid(init, &st, 0) < 0 && errno == EINTR) {
  }
  const int code = init < 0 || !WIFEXITED(st) ? 96 : WEXITSTATUS(st);
  if (code > 128 && code < 128 + 65) {
    signal(code - 128, SIG_DFL);
    kill(getpid(), code - 128);
  }
  _exit(code);
}

// The process that owns the rendezvous root (kRootProcess).
struct RootProcess {
  pid_t pid = -1;
  int stayFd = -1;  // closing it tells the root process to exit
  std::string outPath;
};

// Forks the root process and waits (bounded) for the unique id it creates. Returns "" or why it failed.
std::string startRoot(const MpOptions& opts, const std::string& outDir, RootProcess* root, ncclUniqueId* id) {
  root->outPath = outDir + "/root.out";
  int outFd = open(root->outPath.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
  int idPipe[2];
  int stayPipe[2];
  if (outFd < 0 || pipe2(idPipe, O_CLOEXEC) != 0 || pipe2(stayPipe, O_CLOEXEC) != 0)
    return std::string("cannot create the root process's pipes: ") + std::strerror(errno);
  pid_t pid = fork();
  if (pid < 0) return std::string("fork failed: ") + std::strerror(errno);
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(outFd, STDOUT_FILENO);
    dup2(outFd, STDERR_FILENO);
    close(idPipe[0]);
    close(stayPipe[1]);
    applyEnv(opts.env);
    ncclUniqueId mine;
    if (ncclGetUniqueId(&mine) != ncclSuccess) {
      std::fprintf(stderr, "root process: ncclGetUniqueId failed: %s\n", ncclGetLastError(nullptr));
      std::fflush(nullptr);
      _exit(1);
    }
    writeAll(idPipe[1], &mine, sizeof mine);
    close(idPipe[1]);
    char byte;
    while (read(stayPipe[0], &byte, 1) < 0 && errno == EINTR) {
    }
    std::fflush(nullptr);
    _exit(0);
  }
  close(outFd);
  close(idPipe[1]);
  close(stayPipe[0]);
  root->pid = pid;
  root->stayFd = stayPipe[1];
  pollfd pfd{idPipe[0], POLLIN, 0};
  const bool ready = poll(&pfd, 1, 30000) == 1;
  const bool got = ready && readAll(idPipe[0], id, sizeof *id);
  close(idPipe[0]);
  return got ? "" : "the root process produced no unique id: " + readFile(root->outPath);
}

void stopRoot(RootProcess* root, MpResult* result) {
  if (root->pid <= 0) return;
  close(root->stayFd);
  int status = 0;
  for (int i = 0; i < 500 && waitpid(root->pid, &status, WNOHANG) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (waitpid(root->pid, &status, WNOHANG) == 0) {
    kill(root->pid, SIGKILL);
    waitpid(root->pid, &status, 0);
  }
  result->rootOutput = readFile(root->outPath);
}

}  // namespace

void setMessage(const std::string& msg) { childMessage() = msg.substr(0, kMaxMessage); }

std::string ChildResult::describe() const {
  std::string d = "rank " + std::to_string(rank) + " (pid " + std::to_string(pid) + "): ";
  if (killedByWatchdog)
    d += "killed by the watchdog";
  else if (exited)
    d += "exit " + std::to_string(exitCode);
  else
    d += std::string("killed by signal ") + std::to_string(signal) + " (" + strsignal(signal) + ")";
  if (!message.empty()) d += ": " + message;
  return d;
}

MpResult runProcesses(const MpOptions& opts, const RankBody& body) {
  MpResult result;
  const auto start = std::chrono::steady_clock::now();
  const std::string outDir = makeTempDir("tutti-mp-out");
  struct Child {
    pid_t pid = -1;
    int msgFd = -1;
    std::string outPath;
    bool done = false;
    int status = 0;
  };
  std::vector<Child> children(opts.nranks);
  // Buffered gtest output would otherwise be printed again by every child.
  std::fflush(nullptr);
  RootProcess root;
  RankContext ctx;
  ctx.nranks = opts.nranks;
  if (opts.idSource == IdSource::kRootProcess) result.setupError = startRoot(opts, outDir, &root, &ctx.id);
  for (int rank = 0; result.setupError.empty() && rank < opts.nranks; ++rank) {
    Child& c = children[rank];
    c.outPath = outDir + "/rank" + std::to_string(rank) + ".out";
    int outFd = open(c.outPath.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
    int msgPipe[2];
    if (outFd < 0 || pipe2(msgPipe, O_CLOEXEC) != 0) {
      result.setupError = std::string("cannot create output file or pipe: ") + std::strerror(errno);
      break;
    }
    pid_t pid = fork();
    if (pid < 0) {
      result.setupError = std::string("fork failed: ") + std::strerror(errno);
      close(outFd);
      break;
    }
    if (pid == 0) {
      close(msgPipe[0]);
      // Parent-side ends inherited from the fork: the root's stay pipe must close when the parent's does,
      // and earlier siblings' message pipes must see EOF when those siblings exit.
      if (root.stayFd >= 0) close(root.stayFd);
      for (int r = 0; r < rank; ++r) close(children[r].msgFd);
      ctx.rank = rank;
      if (opts.pidNamespaces) childInPidNamespace(opts, body, ctx, outFd, msgPipe[1]);
      childMain(opts, body, ctx, outFd, msgPipe[1]);
    }
    close(outFd);
    close(msgPipe[1]);
    c.pid = pid;
    c.msgFd = msgPipe[0];
  }

  // Watchdog loop: reap children as they exit; past the deadline kill whoever is left.
  const auto deadline = start + std::chrono::seconds(opts.timeoutSeconds);
  for (;;) {
    bool all = true, othersDone = true;
    for (int rank = 0; rank < opts.nranks; ++rank) {
      const Child& c = children[rank];
      const bool last = std::find(opts.reapLast.begin(), opts.reapLast.end(), rank) != opts.reapLast.end();
      othersDone &= last || c.pid <= 0 || c.done;
    }
    for (int rank = 0; rank < opts.nranks; ++rank) {
      Child& c = children[rank];
      if (c.pid <= 0 || c.done) continue;
      const bool last = std::find(opts.reapLast.begin(), opts.reapLast.end(), rank) != opts.reapLast.end();
      if (last && !othersDone) {  // left a zombie if it died
        all = false;
        continue;
      }
      pid_t w = waitpid(c.pid, &c.status, WNOHANG);
      if (w == c.pid) {
        c.done = true;
      } else {
        all = false;
      }
    }
    if (all) break;
    if (std::chrono::steady_clock::now() > deadline) {
      result.timedOut = true;
      for (Child& c : children) {
        if (c.pid > 0 && !c.done) kill(c.pid, SIGKILL);
      }
      for (Child& c : children) {
        if (c.pid > 0 && !c.done) {
          waitpid(c.pid, &c.status, 0);
          c.done = true;
          c.status = -1;  // marks "killed by the watchdog"
        }
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }

  for (int rank = 0; rank < opts.nranks; ++rank) {
    Child& c = children[rank];
    if (c.pid <= 0) continue;
    ChildResult cr;
    cr.rank = rank;
    cr.pid = c.pid;
    cr.selfPid = opts.pidNamespaces ? 2 : c.pid;
    if (c.status == -1) {
      cr.killedByWatchdog = true;
      cr.signal = SIGKILL;
    } else if (WIFEXITED(c.status)) {
      cr.exited = true;
      cr.exitCode = WEXITSTATUS(c.status);
    } else if (WIFSIGNALED(c.status)) {
      cr.signal = WTERMSIG(c.status);
    }
    cr.message = readFd(c.msgFd);
    close(c.msgFd);
    cr.output = readFile(c.outPath);
    result.children.push_back(std::move(cr));
  }
  stopRoot(&root, &result);
  removeTree(outDir);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

int freeTcpPort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

std::string makeTempDir(const char* prefix) {
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/" + prefix + "-XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) return "/tmp";
  return buf.data();
}

void removeTree(const std::string& dir) {
  if (dir.empty() || dir == "/tmp") return;
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

std::vector<std::string> shmLeftovers(const std::vector<pid_t>& pids) {
  std::vector<std::string> found;
  DIR* d = opendir("/dev/shm");
  if (d == nullptr) return found;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    for (pid_t pid : pids) {
      if (name.rfind("tutti-shm-" + std::to_string(pid) + "-", 0) == 0) found.push_back(name);
    }
  }
  closedir(d);
  return found;
}

std::vector<TransportUse> readTransportLog(const std::string& dir) {
  static const std::regex line(R"(rank (\d+) channel \d+ (?:coll|p2p) (?:->|<-) rank (\d+) via (\w+))");
  std::vector<TransportUse> uses;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::ifstream in(entry.path());
    std::string text;
    while (std::getline(in, text)) {
      std::smatch m;
      if (!std::regex_search(text, m, line)) continue;
      uses.push_back({std::stoi(m[1]), std::stoi(m[2]), m[3]});
    }
  }
  return uses;
}

std::string checkTransports(const std::vector<TransportUse>& uses, int nranks,
                            const std::function<int(int)>& nodeOf, const std::string& sameNodeTransport,
                            const std::string& crossNodeTransport) {
  std::string problems;
  int shown = 0;
  std::set<int> logged;
  std::map<std::string, int> tally;
  for (const TransportUse& u : uses) {
    logged.insert(u.rank);
    const bool same = nodeOf(u.rank) == nodeOf(u.peer);
    const std::string& want = same ? sameNodeTransport : crossNodeTransport;
    ++tally[u.transport];
    if (u.transport != want && shown++ < 5) {
      problems += "rank " + std::to_string(u.rank) + " -> rank " + std::to_string(u.peer) + " used " +
                  u.transport + ", expected " + want + (same ? " (same node)" : " (different nodes)") + "; ";
    }
  }
  for (int r = 0; r < nranks; ++r) {
    if (!logged.count(r)) problems += "rank " + std::to_string(r) + " logged no connection; ";
  }
  if (!problems.empty()) {
    problems += "transports seen:";
    for (const auto& [name, n] : tally) problems += " " + name + " x" + std::to_string(n);
  }
  return problems;
}

EnvList initLogEnv(const std::string& dir) {
  return {{"NCCL_DEBUG", "INFO"}, {"NCCL_DEBUG_SUBSYS", "INIT"}, {"NCCL_DEBUG_FILE", dir + "/log.%p"}};
}

EnvList netOverLoopbackEnv() {
  return {{"NCCL_SHM_DISABLE", "1"}, {"NCCL_P2P_DISABLE", "1"}, {"NCCL_SOCKET_IFNAME", "lo"}};
}

int64_t monotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

}  // namespace tutti::itest
