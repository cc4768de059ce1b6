#include "proxy/proxy.h"

#include "proxy/affinity.h"
#include "util/log.h"

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <iterator>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tutti {
namespace {

// Threads between proxyHandOffBegin and proxyHandOffEnd, and whether any task was ever driven inline.
std::atomic<int> gSleepers{0};
std::atomic<bool> gAnyDriven{false};

class Proxy {
 public:
  void add(const std::shared_ptr<ProxyTask>& task) {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks_.push_back(task);
    ++version_;
    if (!started_) {
      started_ = true;
      cpu_set_t cpus;
      std::string reason;
      const bool place = placement(&cpus, &reason);
      std::thread([this, place, cpus, reason] {
        pthread_setname_np(pthread_self(), "tutti-proxy");
        if (place) {
          if (sched_setaffinity(0, sizeof cpus, &cpus) == 0)
            TUTTI_INFO(NCCL_INIT | NCCL_PROXY, "proxy thread on CPUs {} ({})", formatCpuList(cpus), reason);
          else
            TUTTI_WARN("proxy thread: could not move to CPUs {} ({}): {}; it keeps its creator's CPUs",
                       formatCpuList(cpus), reason, std::strerror(errno));
        }
        loop();
      }).detach();  // process lifetime
    }
    cv_.notify_all();
  }

  void setAffinity(const ProxyAffinity& affinity) {
    std::lock_guard<std::mutex> lock(mutex_);
    affinity_ = affinity;
  }

  void remove(ProxyTask* task) {
    std::unique_lock<std::mutex> lock(mutex_);
    tasks_.erase(std::remove_if(tasks_.begin(), tasks_.end(), [&](const auto& t) { return t.get() == task; }),
                 tasks_.end());
    ++version_;
    cv_.notify_all();  // the loop may be asleep waiting for work
    // The loop works on a snapshot: wait until it has taken a snapshot without this task.
    const uint64_t wanted = version_;
    cv_.wait(lock, [&] { return seen_ >= wanted; });
  }

 private:
  // The CPUs for the proxy thread about to be created by the calling thread (affinity.h); false when it
  // should simply keep the calling thread's.
  bool placement(cpu_set_t* cpus, std::string* reason) const {
    cpu_set_t creator;
    if (sched_getaffinity(0, sizeof creator, &creator) != 0) return false;
    *cpus = proxyCpus(affinity_, creator, onlineCpus(), reason);
    return !CPU_EQUAL(cpus, &creator);
  }

  ProxyAffinity affinity_;  // guarded by mutex_; read when the thread starts

  void loop() {
    std::vector<std::shared_ptr<ProxyTask>> snapshot;
    int idleRounds = 0;
    while (true) {
      // The task list changes rarely: the lock only when it did (version_ moves under the lock), or to sleep on an
      // empty one. seen_ is written by this thread alone.
      if (snapshot.empty() || version_.load(std::memory_order_acquire) != seen_) {
        std::unique_lock<std::mutex> lock(mutex_);
        if (seen_ != version_) {
          snapshot = tasks_;
          seen_ = version_;
          cv_.notify_all();
        }
        if (snapshot.empty()) {
          cv_.wait(lock, [&] { return version_ != seen_; });
          continue;
        }
      }
      // Read before the round: a ring during the round (work posted after a task was looked at) keeps the
      // thread from sleeping after it.
      const uint32_t rung = doorbell_.load(std::memory_order_seq_cst);
      // Tasks their ranks drive (proxyProgressInline) are left to them unless a rank sleeps or handed one over.
      const bool takeOver = gSleepers.load(std::memory_order_seq_cst) > 0;
      bool active = false, busy = false;
      for (auto& t : snapshot) {
        if (t->driven() && !takeOver && !t->handedOver()) continue;
        bool moved = false, taskBusy = false;
        ncclResult_t res = ncclSuccess;
        if (!t->tryRun(&moved, &taskBusy, &res)) {
          busy = true;  // a rank is in it right now: look again soon
          continue;
        }
        if (res != ncclSuccess) {
          TUTTI_INFO(NCCL_PROXY | NCCL_NET, "proxy: a network connection failed and stops being progressed");
          proxyDrop(t.get());
        }
        active |= moved;
        busy |= taskBusy;
      }
      if (active) {
        idleRounds = 0;
        idleSince = 0;
      } else if (busy) {
        // Data is expected: keep polling. The thread that acts on what arrives (a rank waiting for tail, or
        // the peer's proxy) often shares our core, so once polling finds nothing, give the core away every
        // round: a yield costs well under a microsecond when nobody else is runnable, while waiting for the
        // scheduler tick costs milliseconds. After a long silence (a late peer), nap on the doorbell so that
        // an oversubscribed host runs the ranks instead of us (a rank that posts work rings us awake).
        if (++idleRounds >= kSpinRounds) {
          if (idleSince == 0) idleSince = nowNs();
          if (nowNs() - idleSince > kNapAfterNs) {
            sleepUntilRung(kNapNs, rung);
          } else {
            sched_yield();
          }
        }
      } else {
        idleSince = 0;
        if (++idleRounds > 256) {
          // Nothing in flight: sleep until a rank rings (or a while passes, as a safety net).
          sleepUntilRung(kIdleSleepNs, rung);
          idleRounds = 0;
        }
      }
    }
  }
  // Polls of a busy, silent proxy before it starts yielding; how long it yields before napping; the nap.
  static constexpr int kSpinRounds = 8;
  static constexpr int64_t kNapAfterNs = 10'000'000;  // beyond a scheduler tick or two: the peer is late
  static constexpr int64_t kNapNs = 100'000;
  static constexpr int64_t kIdleSleepNs = 5'000'000;
  int64_t idleSince = 0;  // when the current busy-but-silent stretch began (0: none)

  static int64_t nowNs() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
  }

  // Sleeps unless the doorbell moved since it read `seen`.
  void sleepUntilRung(int64_t ns, uint32_t seen) {
    sleeping_.store(true, std::memory_order_seq_cst);
    // Re-check after announcing the sleep: a ring between the load above and here bumped the doorbell.
    if (doorbell_.load(std::memory_order_seq_cst) == seen) {
      timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
      syscall(SYS_futex, reinterpret_cast<uint32_t*>(&doorbell_), FUTEX_WAIT_PRIVATE, seen, &ts, nullptr, 0);
    }
    sleeping_.store(false, std::memory_order_relaxed);
  }

 public:
  void ring() {
    doorbell_.fetch_add(1, std::memory_order_seq_cst);
    if (sleeping_.load(std::memory_order_seq_cst))
      syscall(SYS_futex, reinterpret_cast<uint32_t*>(&doorbell_), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
  }

 private:
  std::atomic<uint32_t> doorbell_{0};
  std::atomic<bool> sleeping_{false};

  void proxyDrop(ProxyTask* task) {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks_.erase(std::remove_if(tasks_.begin(), tasks_.end(), [&](const auto& t) { return t.get() == task; }),
                 tasks_.end());
    ++version_;
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<ProxyTask>> tasks_;
  std::atomic<uint64_t> version_{0};  // changed under mutex_
  uint64_t seen_ = 0;                 // the version of the loop's snapshot (under mutex_ too, for remove's wait)
  bool started_ = false;
};

Proxy& proxy() {
  static Proxy* p = new Proxy();  // never destroyed: the thread outlives static destruction
  return *p;
}

}  // namespace

bool ProxyTask::tryRun(bool* active, bool* busy, ncclResult_t* res) {
  // Test before taking: a rank and the proxy polling the same task should not bounce the line on every poll.
  if (running_.load(std::memory_order_relaxed) || running_.exchange(true, std::memory_order_acquire)) return false;
  // Cleared before the run and set again only if work is left: a hand-over made while we run (by a rank that
  // found the task taken) is never lost.
  const bool wasHandedOver = handedOver_.exchange(false, std::memory_order_acq_rel);
  *res = progress(active);
  *busy = *res == ncclSuccess && this->busy();
  if (*busy && wasHandedOver) handedOver_.store(true, std::memory_order_release);
  running_.store(false, std::memory_order_release);
  return true;
}

void proxyProgressInline(ProxyTask* task) {
  if (!task->driven_.load(std::memory_order_relaxed)) {
    task->driven_.store(true, std::memory_order_relaxed);
    gAnyDriven.store(true, std::memory_order_seq_cst);
  }
  bool moved = false, busy = false;
  ncclResult_t res = ncclSuccess;
  // Not run: another thread is in it (the proxy thread, taking a turn begun while this rank slept), and what that
  // run read may predate our post. Once this rank is awake the proxy thread leaves a driven task alone, so the post
  // would wait for this rank's next inline run, and a rank that goes on to wait on another connection in the net
  // plugin (proxyWaitNetwork: allowed while nothing of the process is in flight, which a step not yet handed to the
  // plugin is not) may never make it: hand the task over as proxyRelease does. The proxy thread runs it again and
  // keeps it until it finds it idle (tryRun keeps the flag while it is busy).
  if (!task->tryRun(&moved, &busy, &res)) {
    task->handedOver_.store(true, std::memory_order_release);
    proxyRing();
    return;
  }
  // A task that failed here is dropped by the proxy thread the next time it runs it (once this rank sleeps or
  // hands the task over).
  if (res != ncclSuccess) proxyRing();
}

namespace {
// The outermost scope open on this thread; initial-exec: read on every call, no __tls_get_addr.
[[gnu::tls_model("initial-exec")]] thread_local ProxyDriveScope* tScope = nullptr;
}  // namespace

void proxyRelease(ProxyTask* task) {
  bool moved = false, busy = false;
  ncclResult_t res = ncclSuccess;
  const bool ran = task->tryRun(&moved, &busy, &res);
  if (ran && res == ncclSuccess && !busy) return;
  if (ran && res == ncclSuccess && tScope) {
    ProxyDriveScope* s = tScope;
    if (std::find(s->tasks_, s->tasks_ + s->n_, task) != s->tasks_ + s->n_) return;
    if (s->n_ < ProxyDriveScope::kMaxTasks) {
      s->tasks_[s->n_++] = task;
      return;
    }
  }
  task->handedOver_.store(true, std::memory_order_release);
  proxyRing();
}

ProxyDriveScope::ProxyDriveScope() {
  if (tScope) {
    outer_ = tScope;
    return;
  }
  tScope = this;
}

ProxyDriveScope::~ProxyDriveScope() {
  if (outer_) return;
  tScope = nullptr;
  for (int i = 0; i < n_; ++i) proxyRelease(tasks_[i]);
}

void ProxyDriveScope::add(ProxyTask* task) {
  ProxyDriveScope* s = outer_ ? outer_ : this;
  if (std::find(s->tasks_, s->tasks_ + s->n_, task) != s->tasks_ + s->n_) return;
  if (s->n_ < kMaxTasks) s->tasks_[s->n_++] = task;
}

void proxyDriveScoped() {
  ProxyDriveScope* s = tScope;
  if (!s) return;
  for (int i = 0; i < s->n_; ++i) proxyProgressInline(s->tasks_[i]);
}

namespace {
std::atomic<NetWaitFn> gNetWait{nullptr};
std::atomic<int> gInFlight{0};  // tasks of the process whose waitComm is set
}  // namespace

ProxyTask::~ProxyTask() {
  if (waitComm_.load(std::memory_order_relaxed)) gInFlight.fetch_sub(1, std::memory_order_relaxed);
}

void ProxyTask::setWaitComm(void* comm) {
  // progress() runs on one thread at a time (running_), so the task's own writes are ordered: most calls leave the
  // comm as it was, and skip the read-modify-write.
  if (waitComm_.load(std::memory_order_relaxed) == comm) return;
  void* const was = waitComm_.exchange(comm, std::memory_order_relaxed);
  if (!was != !comm) gInFlight.fetch_add(comm ? 1 : -1, std::memory_order_seq_cst);
}

void proxySetNetWait(NetWaitFn fn) { gNetWait.store(fn, std::memory_order_release); }
bool proxyHasNetWait() { return gNetWait.load(std::memory_order_relaxed) != nullptr; }

int proxyWaitNetwork(ProxyTask* waited, ProxyTask* const* drive, int nDrive, int64_t timeoutNs) {
  const NetWaitFn fn = gNetWait.load(std::memory_order_acquire);
  if (!fn || !waited) return -1;
  // A sleeping rank's hand-over lets the proxy thread run every driven task: its moves would not wake a poll on the
  // sockets (and it could not run ours while we hold them, below).
  if (gSleepers.load(std::memory_order_seq_cst) > 0) return -1;
  // The tasks with transfers in flight, held (their running_ flag) for the wait: no other thread progresses or
  // closes them meanwhile, so the sockets are the only thing that can move and the comms stay valid.
  ProxyTask* held[1 + 2 * ProxyDriveScope::kMaxTasks];
  void* comms[std::size(held)];
  int n = 0;
  bool ok = true;
  auto add = [&](ProxyTask* t) {
    if (!ok || !t->waitComm() || std::find(held, held + n, t) != held + n || n == static_cast<int>(std::size(held)))
      return;
    if (t->running_.load(std::memory_order_relaxed) || t->running_.exchange(true, std::memory_order_acquire)) {
      ok = false;  // another thread is in it: its moves would not wake us
      return;
    }
    void* c = t->waitComm();  // stable while held
    if (!c || t->handedOver()) {  // done meanwhile; or the proxy thread's to finish
      ok = ok && !c;
      t->running_.store(false, std::memory_order_release);
      return;
    }
    held[n] = t;
    comms[n++] = c;
  };
  add(waited);
  if (n == 1) {
    for (int i = 0; i < nDrive; ++i) add(drive[i]);
    if (const ProxyDriveScope* s = tScope)
      for (int i = 0; i < s->n_; ++i) add(s->tasks_[i]);
  }
  int ready = -1;
  // Every task in flight must be one we hold (read after taking them: one that starts later is this thread's own
  // doing, or another thread's, which then runs it itself).
  if (ok && n > 0 && gInFlight.load(std::memory_order_seq_cst) == n) {
    const int64_t us = std::clamp<int64_t>(timeoutNs / 1000, 1, INT32_MAX);
    if (fn(comms, n, static_cast<int>(us), &ready) != ncclSuccess) ready = 1;  // the next progress reports it
  }
  for (int i = 0; i < n; ++i) held[i]->running_.store(false, std::memory_order_release);
  return ready;
}

void proxyHandOffBegin() {
  gSleepers.fetch_add(1, std::memory_order_seq_cst);
  if (gAnyDriven.load(std::memory_order_relaxed)) proxyRing();
}

void proxyHandOffEnd() { gSleepers.fetch_sub(1, std::memory_order_relaxed); }

void proxyAdd(const std::shared_ptr<ProxyTask>& task) { proxy().add(task); }
void proxyRemove(ProxyTask* task) { proxy().remove(task); }
void proxyRing() { proxy().ring(); }
void proxySetAffinity(const ProxyAffinity& affinity) { proxy().setAffinity(affinity); }

}  // namespace tutti
