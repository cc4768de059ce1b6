// Ranks as separate processes, through the public NCCL API only.
//
// runProcesses() forks one child per rank and runs a rank body in it. The children never touch gtest:
// a body returns an exit code and may leave a short message (setMessage); the child's stdout and stderr
// go to a file the parent reads back, so everything a rank printed ends up in the test log. A watchdog in
// the parent kills every child past the deadline, so a hung collective fails the test instead of CI.
//
// The test process itself never calls the library: the library reads its settings (NCCL_DEBUG, ...) once
// per process, and a child forked from a process that already did would inherit them instead of its own
// environment. With IdSource::kRootProcess a first child calls ncclGetUniqueId (which starts the
// rendezvous root in it), passes the id back and keeps the root alive until every rank has exited; the
// rank children then start with that id. With IdSource::kCommIdEnv every rank calls ncclGetUniqueId
// itself with NCCL_COMM_ID set in `env` (rank 0's init runs the root).
#pragma once

#include <nccl.h>

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace tutti::itest {

class Report;

enum class IdSource { kRootProcess, kCommIdEnv };

struct RankContext {
  int rank = 0;
  int nranks = 0;
  ncclUniqueId id{};  // ready to pass to ncclCommInitRank (from the root process or NCCL_COMM_ID)
};

// Rank bodies return 0 on success, anything else on failure (the parent reports it with the message).
using RankBody = std::function<int(const RankContext&)>;

// Leaves a one-line message for the parent (the last call wins; at most ~3.5 KiB are kept).
void setMessage(const std::string& msg);

using EnvList = std::vector<std::pair<std::string, std::string>>;

struct MpOptions {
  int nranks = 2;
  IdSource idSource = IdSource::kRootProcess;
  EnvList env;  // set in every child before the body runs
  // Extra variables per rank (e.g. TUTTI_HOSTNAME), applied after `env`.
  std::function<EnvList(int rank)> rankEnv;
  int timeoutSeconds = 60;  // the watchdog kills every child after this
  // Ranks whose exit is reaped only once every other rank has exited: one that dies stays a zombie meanwhile.
  std::vector<int> reapLast;
  // Each rank in a pid namespace of its own (needs root): the rank runs as pid 2 under the namespace's init,
  // so every rank has the same pid. The child the parent sees passes on how the rank ended.
  bool pidNamespaces = false;
};

struct ChildResult {
  int rank = 0;
  pid_t pid = 0;
  pid_t selfPid = 0;    // the rank's pid as it sees it (its own namespace's): `pid`, or 2 with pidNamespaces
  bool exited = false;  // normal exit (exitCode valid); otherwise killed by `signal`
  int exitCode = -1;
  int signal = 0;
  bool killedByWatchdog = false;
  std::string message;  // what the body left with setMessage
  std::string output;   // the child's stdout + stderr
  bool ok() const { return exited && exitCode == 0; }
  std::string describe() const;  // "rank 2 (pid 123): exit 1: <message>"
};

struct MpResult {
  std::vector<ChildResult> children;
  bool timedOut = false;
  std::string setupError;  // fork / pipe failure, or no unique id from the root process
  std::string rootOutput;  // stdout + stderr of the root process (kRootProcess)
  double seconds = 0;
};

// Runs `body` in `opts.nranks` children and waits for all of them (or the watchdog).
MpResult runProcesses(const MpOptions& opts, const RankBody& body);

// A port for NCCL_COMM_ID=127.0.0.1:<port>: bound once with port 0 and released (the small race with
// other programs picking the same port is acceptable in tests).
int freeTcpPort();

// A fresh empty directory under TMPDIR (or /tmp); removed by removeTree.
std::string makeTempDir(const char* prefix);
void removeTree(const std::string& dir);

// Names of /dev/shm entries starting with "tutti-shm-<pid>-" for any of `pids` (the shm plugin puts
// the creating process in the name, so concurrent tests of other programs are not counted).
std::vector<std::string> shmLeftovers(const std::vector<pid_t>& pids);

// One "rank R channel C <coll|p2p> <->|<-> rank P via T" line from the INIT log.
struct TransportUse {
  int rank = -1;
  int peer = -1;
  std::string transport;
};

// Parses every transport line in the files of `dir` (NCCL_DEBUG_FILE=<dir>/log.%p).
std::vector<TransportUse> readTransportLog(const std::string& dir);

// Checks that every connection in `uses` went over `sameNodeTransport` when both ranks map to the same
// node by `nodeOf` and over `crossNodeTransport` otherwise, and that every rank in [0, nranks) logged at
// least one connection. Returns "" or a description of the first problems.
std::string checkTransports(const std::vector<TransportUse>& uses, int nranks,
                            const std::function<int(int)>& nodeOf, const std::string& sameNodeTransport,
                            const std::string& crossNodeTransport);

// The environment for a logged run: NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT, NCCL_DEBUG_FILE in `dir`.
EnvList initLogEnv(const std::string& dir);

// The environment that sends every connection between ranks of one host through the net plugin over
// loopback (no shm, no p2p): how tests run the network path on one machine.
EnvList netOverLoopbackEnv();

// CLOCK_MONOTONIC in nanoseconds: one clock for every process on the host (times compared across ranks).
int64_t monotonicNs();

}  // namespace tutti::itest
