// Ranks as threads, through the public NCCL API only.
//
// A CommSet owns k communicators (ncclGetUniqueId + k threads in ncclCommInitRank, or ncclCommInitAll).
// Work is a list of RankCase objects, each split into per-rank steps (prepare / issue / verify) so the
// same case runs either with one thread per rank (Drive::kThreads) or with one thread issuing every
// rank's call inside ncclGroupStart/End (Drive::kGroup). Worker threads never touch gtest: they record
// failures in a Report, which the main thread turns into gtest failures (reportFailures).
#pragma once

#include <nccl.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace tutti::itest {

enum class InitMode { kInitRank, kInitAll };
enum class Drive { kThreads, kGroup };

const char* resultName(ncclResult_t r);

// Thread-safe list of failure messages. Every message is also written to stderr at once, so a run
// that later hangs (and is killed by the watchdog or ctest) still shows what went wrong first.
class Report {
 public:
  void fail(std::string msg);
  // Records a failure when `r` is not ncclSuccess; returns whether it was.
  bool ok(ncclResult_t r, const std::string& what, ncclComm_t comm);
  bool empty() const;
  std::vector<std::string> take();

 private:
  mutable std::mutex mu_;
  std::vector<std::string> failures_;
};

// Reports every failure recorded in `report` as a gtest failure on the calling (main) thread; caps the
// number printed so a systematic bug stays readable.
void reportFailures(Report& report, size_t maxShown = 20);

class CommSet {
 public:
  // Creates `nranks` communicators; on failure comms() is empty and error() says why.
  CommSet(int nranks, InitMode mode);
  // Adopts communicators created elsewhere (e.g. by ncclCommSplit); NULL entries are allowed and skipped.
  explicit CommSet(std::vector<ncclComm_t> comms);
  ~CommSet();
  CommSet(const CommSet&) = delete;
  CommSet& operator=(const CommSet&) = delete;

  bool ok() const { return !comms_.empty() && error_.empty(); }
  const std::string& error() const { return error_; }
  int size() const { return static_cast<int>(comms_.size()); }
  ncclComm_t comm(int rank) const { return comms_[rank]; }
  const std::vector<ncclComm_t>& comms() const { return comms_; }

 private:
  std::vector<ncclComm_t> comms_;
  std::string error_;
};

// One operation on every rank of a CommSet. Each method is called for every rank; calls for different
// ranks may run concurrently (Drive::kThreads), so a rank touches only its own state.
class RankCase {
 public:
  virtual ~RankCase() = default;
  // Human-readable description used in every failure message ("AllReduce float sum count=7 ...").
  virtual std::string label() const = 0;
  // Allocates and fills buffers; may create per-communicator objects (user reduction ops).
  virtual void prepare(int rank, ncclComm_t comm, Report& report) = 0;
  // Issues the NCCL call(s) for this rank (inside a group when driven by kGroup).
  virtual ncclResult_t issue(int rank, ncclComm_t comm) = 0;
  // Checks the result after completion and releases what prepare made.
  virtual void verify(int rank, ncclComm_t comm, Report& report) = 0;
};

using CaseList = std::vector<std::unique_ptr<RankCase>>;

// Runs every case in order on `set`. With kThreads, one thread per rank walks the list; with kGroup the
// calling thread prepares all ranks, issues them inside one ncclGroupStart/End, then verifies. A call
// that fails stops that rank (peers would otherwise wait forever); a watchdog ends the process with the
// labels each rank was in if the whole run exceeds `timeoutSeconds`.
void runCases(const CommSet& set, Drive drive, CaseList& cases, Report& report, int timeoutSeconds = 150);

// Runs `fn(rank, comm)` on one thread per communicator and waits (same watchdog as runCases).
void runPerRank(const CommSet& set, const std::function<void(int, ncclComm_t)>& fn, Report& report,
                const char* what, int timeoutSeconds = 150);

// Sets an environment variable for the lifetime of the object (restores the old value afterwards).
// Communicators read NCCL_* variables at init, so create comms after constructing this.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::string old_;
  bool hadOld_;
};

// Log checks: the whole text of a file ("" when it cannot be read), and the lines of `text` containing
// `needle`.
std::string readFile(const std::string& path);
std::vector<std::string> linesWith(const std::string& text, const std::string& needle);

}  // namespace tutti::itest
