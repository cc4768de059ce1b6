#include "harness.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace tutti::itest {

namespace {
constexpr int kSetupTimeoutSeconds = 120;  // creating or destroying up to 8 communicators

// A ctest variant's environment (tests/CMakeLists.txt, tutti_discovered_env) starts with TUTTI_TEST_ENV, the
// names of the variables that follow it. One of them missing means the variant would silently repeat the
// plain test (as when only the first entry of a list-valued ENVIRONMENT reached the test), so the program fails
// instead.
class VariantEnvironmentCheck : public testing::Environment {
 public:
  void SetUp() override {
    const char* names = std::getenv("TUTTI_TEST_ENV");
    if (names == nullptr) return;
    std::stringstream list(names);
    std::string missing;
    for (std::string name; std::getline(list, name, ',');) {
      if (!name.empty() && std::getenv(name.c_str()) == nullptr) missing += " " + name;
    }
    // Not FAIL(): gtest would then skip the tests, and ctest counts a skipped test as no failure.
    if (!missing.empty()) ADD_FAILURE() << "TUTTI_TEST_ENV=" << names << " but these are not set:" << missing;
  }
};
[[maybe_unused]] testing::Environment* const kVariantEnvironmentCheck =
    testing::AddGlobalTestEnvironment(new VariantEnvironmentCheck);
}  // namespace

const char* resultName(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "ncclSuccess";
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
    case ncclTimeout: return "ncclTimeout";
    default: return "unknown ncclResult_t";
  }
}

void Report::fail(std::string msg) {
  std::fprintf(stderr, "[ failure ] %s\n", msg.c_str());
  std::fflush(stderr);
  std::lock_guard<std::mutex> lock(mu_);
  failures_.push_back(std::move(msg));
}

bool Report::ok(ncclResult_t r, const std::string& what, ncclComm_t comm) {
  if (r == ncclSuccess) return true;
  const char* last = ncclGetLastError(comm);
  fail(what + " returned " + resultName(r) + " (" + (last ? last : "no last error") + ")");
  return false;
}

bool Report::empty() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failures_.empty();
}

std::vector<std::string> Report::take() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::move(failures_);
}

namespace {

// On the sim backend, a failed test names the emulator seed it ran under, so the failure can be replayed
// (TUTTI_SIM_SEED picks the switch points; 1 when unset).
class SimSeedListener : public testing::EmptyTestEventListener {
  void OnTestEnd(const testing::TestInfo& info) override {
    const char* device = std::getenv("TUTTI_DEVICE");
    if (!info.result()->Failed() || !device || std::string(device) != "sim") return;
    const char* seed = std::getenv("TUTTI_SIM_SEED");
    std::printf("%s.%s failed on the sim backend: replay with TUTTI_DEVICE=sim TUTTI_SIM_SEED=%s\n",
                info.test_suite_name(), info.name(), seed ? seed : "1 (the default)");
  }
};

const bool kSimSeedListener = [] {
  testing::UnitTest::GetInstance()->listeners().Append(new SimSeedListener);
  return true;
}();

}  // namespace

void reportFailures(Report& report, size_t maxShown) {
  std::vector<std::string> failures = report.take();
  for (size_t i = 0; i < failures.size() && i < maxShown; ++i) ADD_FAILURE() << failures[i];
  if (failures.size() > maxShown) ADD_FAILURE() << (failures.size() - maxShown) << " more failures not shown";
}

namespace {

// Waits for `remaining` to reach zero; past the deadline prints where each rank was and exits, because
// threads blocked inside the library cannot be cancelled and gtest cannot report a hung test.
class Watchdog {
 public:
  explicit Watchdog(int workers) : remaining_(workers), where_(workers) {}
  void setWhere(int worker, std::string where) {
    std::lock_guard<std::mutex> lock(mu_);
    where_[worker] = std::move(where);
  }
  void done() {
    std::lock_guard<std::mutex> lock(mu_);
    if (--remaining_ == 0) cv_.notify_all();
  }
  // A worker that stopped after a failed call leaves its peers blocked; shorten the wait to a grace period.
  void abandon() {
    std::lock_guard<std::mutex> lock(mu_);
    abandoned_ = true;
    cv_.notify_all();
  }
  void wait(int timeoutSeconds, const char* what) {
    std::unique_lock<std::mutex> lock(mu_);
    auto finished = [&] { return remaining_ == 0; };
    if (cv_.wait_for(lock, std::chrono::seconds(timeoutSeconds), [&] { return finished() || abandoned_; })) {
      if (finished() || cv_.wait_for(lock, std::chrono::seconds(kGraceSeconds), finished)) return;
    }
    std::fprintf(stderr,
                 "[ timeout ] %s did not finish (limit %d s, %d s after a failed call); ranks were in:\n",
                 what, timeoutSeconds, kGraceSeconds);
    for (size_t i = 0; i < where_.size(); ++i) std::fprintf(stderr, "  rank %zu: %s\n", i, where_[i].c_str());
    std::fflush(stderr);
    std::_Exit(3);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  static constexpr int kGraceSeconds = 10;
  int remaining_;
  bool abandoned_ = false;
  std::vector<std::string> where_;
};

}  // namespace

CommSet::CommSet(int nranks, InitMode mode) {
  std::vector<ncclComm_t> comms(nranks, nullptr);
  if (mode == InitMode::kInitAll) {
    ncclResult_t r = ncclCommInitAll(comms.data(), nranks, nullptr);
    if (r != ncclSuccess) {
      error_ = std::string("ncclCommInitAll(") + std::to_string(nranks) + ") returned " + resultName(r);
      return;
    }
    comms_ = std::move(comms);
    return;
  }
  ncclUniqueId id;
  ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) {
    error_ = std::string("ncclGetUniqueId returned ") + resultName(r);
    return;
  }
  // ncclCommInitRank blocks until every rank has joined, so each rank needs its own thread.
  std::vector<ncclResult_t> results(nranks, ncclSuccess);
  std::vector<std::thread> threads;
  Watchdog dog(nranks);
  for (int rank = 0; rank < nranks; ++rank) {
    threads.emplace_back([&, rank] {
      dog.setWhere(rank, "ncclCommInitRank");
      results[rank] = ncclCommInitRank(&comms[rank], nranks, id, rank);
      dog.setWhere(rank, "(finished)");
      dog.done();
    });
  }
  dog.wait(kSetupTimeoutSeconds, "communicator creation");
  for (auto& t : threads) t.join();
  for (int rank = 0; rank < nranks; ++rank) {
    if (results[rank] != ncclSuccess) {
      error_ += "ncclCommInitRank(rank " + std::to_string(rank) + "/" + std::to_string(nranks) +
                ") returned " + resultName(results[rank]) + "; ";
    }
  }
  comms_ = std::move(comms);
}

CommSet::CommSet(std::vector<ncclComm_t> comms) : comms_(std::move(comms)) {}

CommSet::~CommSet() {
  // ncclCommDestroy may synchronise with peers (as NCCL's does), so destroy from one thread per rank.
  std::vector<std::thread> threads;
  Watchdog dog(static_cast<int>(comms_.size()));
  for (size_t rank = 0; rank < comms_.size(); ++rank) {
    threads.emplace_back([&, rank] {
      dog.setWhere(static_cast<int>(rank), "ncclCommDestroy");
      if (comms_[rank] != nullptr) ncclCommDestroy(comms_[rank]);
      dog.setWhere(static_cast<int>(rank), "(finished)");
      dog.done();
    });
  }
  dog.wait(kSetupTimeoutSeconds, "communicator destruction");
  for (auto& t : threads) t.join();
}

namespace {

void runThreaded(const CommSet& set, CaseList& cases, Report& report, int timeoutSeconds) {
  const int n = set.size();
  Watchdog dog(n);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < n; ++rank) {
    threads.emplace_back([&, rank] {
      ncclComm_t comm = set.comm(rank);
      try {
        for (auto& c : cases) {
          dog.setWhere(rank, c->label());
          c->prepare(rank, comm, report);
          if (!report.ok(c->issue(rank, comm), c->label() + " rank " + std::to_string(rank), comm)) {
            dog.abandon();
            break;
          }
          c->verify(rank, comm, report);
        }
        dog.setWhere(rank, "(finished)");
      } catch (const std::exception& e) {
        report.fail(std::string("exception on rank ") + std::to_string(rank) + ": " + e.what());
      }
      dog.done();
    });
  }
  dog.wait(timeoutSeconds, "runCases");
  for (auto& t : threads) t.join();
}

void runGrouped(const CommSet& set, CaseList& cases, Report& report, int timeoutSeconds) {
  const int n = set.size();
  Watchdog dog(1);
  std::thread driver([&] {
    try {
      for (auto& c : cases) {
        dog.setWhere(0, c->label() + " (one thread, grouped)");
        for (int rank = 0; rank < n; ++rank) c->prepare(rank, set.comm(rank), report);
        bool ok = report.ok(ncclGroupStart(), c->label() + " ncclGroupStart", nullptr);
        for (int rank = 0; ok && rank < n; ++rank) {
          ok = report.ok(c->issue(rank, set.comm(rank)), c->label() + " rank " + std::to_string(rank),
                         set.comm(rank));
        }
        // End the group even after a failed call so the thread's group state is left clean.
        ncclResult_t end = ncclGroupEnd();
        if (!ok || !report.ok(end, c->label() + " ncclGroupEnd", nullptr)) break;
        for (int rank = 0; rank < n; ++rank) c->verify(rank, set.comm(rank), report);
      }
    } catch (const std::exception& e) {
      report.fail(std::string("exception in group driver: ") + e.what());
    }
    dog.done();
  });
  dog.wait(timeoutSeconds, "runCases (grouped)");
  driver.join();
}

}  // namespace

void runCases(const CommSet& set, Drive drive, CaseList& cases, Report& report, int timeoutSeconds) {
  if (drive == Drive::kThreads)
    runThreaded(set, cases, report, timeoutSeconds);
  else
    runGrouped(set, cases, report, timeoutSeconds);
}

void runPerRank(const CommSet& set, const std::function<void(int, ncclComm_t)>& fn, Report& report,
                const char* what, int timeoutSeconds) {
  const int n = set.size();
  Watchdog dog(n);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < n; ++rank) {
    threads.emplace_back([&, rank] {
      dog.setWhere(rank, what);
      try {
        fn(rank, set.comm(rank));
      } catch (const std::exception& e) {
        report.fail(std::string(what) + ": exception on rank " + std::to_string(rank) + ": " + e.what());
      }
      dog.setWhere(rank, "(finished)");
      dog.done();
    });
  }
  dog.wait(timeoutSeconds, what);
  for (auto& t : threads) t.join();
}

ScopedEnv::ScopedEnv(const char* name, const std::string& value) : name_(name) {
  const char* old = std::getenv(name);
  hadOld_ = old != nullptr;
  if (hadOld_) old_ = old;
  setenv(name, value.c_str(), 1);
}

ScopedEnv::~ScopedEnv() {
  if (hadOld_)
    setenv(name_.c_str(), old_.c_str(), 1);
  else
    unsetenv(name_.c_str());
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> linesWith(const std::string& text, const std::string& needle) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line))
    if (line.find(needle) != std::string::npos) out.push_back(line);
  return out;
}

}  // namespace tutti::itest
