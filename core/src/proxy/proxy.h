// The proxy thread: one per process, progressing every network connection's transfers (the NCCL paper's
// sendProxyProgress / recvProxyProgress). A connection registers a ProxyTask for its lifetime; the thread
// calls progress() on each in turn: it spins while anything moves, yields its core between polls while data
// is expected but silent (naps after a long silence), and sleeps on a doorbell the ranks ring when nothing
// is in flight, so an idle process costs nothing measurable.
#pragma once

#include <tutti/common.h>

#include "proxy/affinity.h"

#include <atomic>
#include <memory>

namespace tutti {

class ProxyTask {
 public:
  virtual ~ProxyTask();
  // Moves what can be moved without blocking; sets *active when anything happened. An error ends the task:
  // the task must first mark its connection closed so the ranks waiting on it fail instead of hanging.
  virtual ncclResult_t progress(bool* active) = 0;
  // True while the task has work in flight (posted receives, unsent or incomplete sends): the proxy thread
  // then keeps polling instead of sleeping.
  virtual bool busy() const = 0;
  // The plugin comm whose socket the task's next move waits on: set by progress() (setWaitComm) while it leaves
  // transfers in flight, null otherwise. Read by proxyWaitNetwork.
  void* waitComm() const { return waitComm_.load(std::memory_order_relaxed); }

  // Runs progress() then busy() unless another thread is running them (the proxy thread, or a rank driving
  // its own connection: proxyProgressInline). False when it did not run. A task found idle is no longer
  // handed over (see handedOver).
  bool tryRun(bool* active, bool* busy, ncclResult_t* res);
  // Whether ranks drive this task themselves (proxyProgressInline was called on it): the proxy thread then
  // progresses it only while a rank has handed its work over (proxyHandOffBegin).
  bool driven() const { return driven_.load(std::memory_order_relaxed); }
  // A driven task its rank left with work in flight (proxyRelease), or found taken when it posted more
  // (proxyProgressInline): the proxy thread finishes it.
  bool handedOver() const { return handedOver_.load(std::memory_order_acquire); }

 protected:
  // Called by progress(): `comm` while transfers are in flight (counted process-wide, see proxyWaitNetwork).
  void setWaitComm(void* comm);

 private:
  std::atomic<void*> waitComm_{nullptr};
  friend void proxyProgressInline(ProxyTask* task);
  friend void proxyRelease(ProxyTask* task);
  friend int proxyWaitNetwork(ProxyTask* waited, ProxyTask* const* drive, int nDrive, int64_t timeoutNs);
  std::atomic<bool> running_{false};
  std::atomic<bool> driven_{false};
  std::atomic<bool> handedOver_{false};
};

// Starts the proxy thread on first use. Thread-safe.
void proxyAdd(const std::shared_ptr<ProxyTask>& task);
// Returns once the proxy thread no longer runs `task` (it may be destroyed afterwards). Thread-safe.
void proxyRemove(ProxyTask* task);
// Wakes the proxy thread if it sleeps: called after posting work on a proxied connection. Costs one atomic
// load while the proxy is awake.
void proxyRing();

// Progresses `task` on the calling thread, now: a host rank sends and receives on its own network connections,
// so a small message pays no wake-up of the proxy thread on either side. Marks the task driven (see
// ProxyTask::driven): from then on the proxy thread leaves it to its rank, except while that rank sleeps, so
// every thread that progresses a task inline must call proxyHandOffBegin before it sleeps. A task another thread
// is in (the proxy thread, on a turn begun while the rank slept) is handed over instead (see handedOver), and the
// proxy rung: that run may have read the rank's counters before its last post. Rings the proxy when the task
// failed too (the proxy then drops it).
void proxyProgressInline(ProxyTask* task);

// A rank stops driving `task` for now (its primitives are done with the connection): what is still in flight
// (a send the plugin has not completed) is handed to the proxy thread.
void proxyRelease(ProxyTask* task);

// One operation's network ends that its thread keeps driving while it waits on other ends: an operation that
// sends to one peer and then waits for another's data (point-to-point groups, one-shot collectives) keeps its
// sends moving from the same thread, instead of handing them to the proxy thread, whose wake-up and share of the
// cores cost more than the sends themselves. While a scope is open on a thread, proxyRelease keeps a task that
// is still busy in the scope; every spin of a wait on the thread (waitAtLeast) progresses the scope's tasks; the
// scope's end releases what is left (proxyRelease). A thread that sleeps hands its work over as always
// (proxyHandOffBegin). Scopes nest: an inner scope adds to the outermost. Stack objects only.
class ProxyDriveScope {
 public:
  ProxyDriveScope();
  ~ProxyDriveScope();
  ProxyDriveScope(const ProxyDriveScope&) = delete;
  ProxyDriveScope& operator=(const ProxyDriveScope&) = delete;
  // Drives `task` on every wait of this thread until the scope ends (at most kMaxTasks; more are left to
  // proxyRelease's hand-over).
  void add(ProxyTask* task);
  static constexpr int kMaxTasks = 16;

 private:
  friend void proxyRelease(ProxyTask* task);
  friend void proxyDriveScoped();
  friend int proxyWaitNetwork(ProxyTask* waited, ProxyTask* const* drive, int nDrive, int64_t timeoutNs);
  ProxyDriveScope* outer_ = nullptr;  // the scope already open on this thread (this one then forwards to it)
  ProxyTask* tasks_[kMaxTasks];  // the first n_ are set (left uninitialized: a scope opens on every call)
  int n_ = 0;
};
// Progresses the tasks of the scope open on the calling thread (none: nothing to do, one thread-local load).
void proxyDriveScoped();

// The net plugin's blocking wait (tutti/net_wait.h, tuttiNetWait_v1.waitComms), set when the plugin that carries
// the process's network connections exports it; null: none.
using NetWaitFn = ncclResult_t (*)(void* const* comms, int nComms, int timeoutUs, int* ready);
void proxySetNetWait(NetWaitFn fn);
bool proxyHasNetWait();
// Sleeps in the net plugin until one of the network connections the calling thread drives can move data, for at
// most timeoutNs: `waited` (the connection the thread waits on), `drive` and the scope's tasks (ProxyDriveScope)
// that have transfers in flight. The thread then progresses them itself (proxyProgressInline): no hand-over to the
// proxy thread and no futex wake-up. The tasks are held meanwhile (as tryRun holds them): no other thread moves
// their data or closes them. Returns 1 (something may have moved, or the wait failed: the next progress reports it),
// 0 (timed out), or -1 where it cannot wait so: no such plugin wait, `waited` has nothing in flight, a network
// connection of the process that it would not progress has transfers in flight (a receive posted ahead, another
// channel's: the proxy thread must move them while this thread sleeps, or a peer waiting on them could wait as long
// as we do), another thread is in one of the tasks, another rank of the process sleeps, or the plugin declined. The
// caller then sleeps as it would without it (proxyHandOffBegin).
int proxyWaitNetwork(ProxyTask* waited, ProxyTask* const* drive, int nDrive, int64_t timeoutNs);

// A thread that may leave inline-driven network work unfinished (it is about to sleep) hands it to the proxy
// thread, which progresses every busy task until the matching proxyHandOffEnd. Cheap in a process that never
// drove a task inline: one atomic increment, no system call.
void proxyHandOffBegin();
void proxyHandOffEnd();

// Where the proxy thread will run (affinity.h): takes effect if the thread has not started yet (it starts
// with the process's first network connection and lives as long as the process). Thread-safe.
void proxySetAffinity(const ProxyAffinity& affinity);

}  // namespace tutti
