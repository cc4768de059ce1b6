// The proxy thread: one per process, progressing every network connection's transfers (the NCCL paper's
// sendProxyProgress / recvProxyProgress). A connection registers a ProxyTask for its lifetime; the thread
// calls progress() on each in turn: it spins while anything moves, yields its core between polls while data
// is expected but silent (naps after a long silence), and sleeps on a doorbell the ranks ring when nothing
// is in flight, so an idle process costs nothing measurable.
#pragma once

#include <tutti/common.h>

#include "proxy/affinity.h"

#include <memory>

namespace tutti {

class ProxyTask {
 public:
  virtual ~ProxyTask() = default;
  // Moves what can be moved without blocking; sets *active when anything happened. An error ends the task:
  // the task must first mark its connection closed so the ranks waiting on it fail instead of hanging.
  virtual ncclResult_t progress(bool* active) = 0;
  // True while the task has work in flight (posted receives, unsent or incomplete sends): the proxy thread
  // then keeps polling instead of sleeping.
  virtual bool busy() const = 0;
};

// Starts the proxy thread on first use. Thread-safe.
void proxyAdd(const std::shared_ptr<ProxyTask>& task);
// Returns once the proxy thread no longer runs `task` (it may be destroyed afterwards). Thread-safe.
void proxyRemove(ProxyTask* task);
// Wakes the proxy thread if it sleeps: called after posting work on a proxied connection. Costs one atomic
// load while the proxy is awake.
void proxyRing();

// Where the proxy thread will run (affinity.h): takes effect if the thread has not started yet (it starts
// with the process's first network connection and lives as long as the process). Thread-safe.
void proxySetAffinity(const ProxyAffinity& affinity);

}  // namespace tutti
