// Host streams (tutti.h): an in-order queue of launches run by one thread, so host-backend calls can be
// asynchronous like CUDA stream work. A stream handle is passed wherever NCCL takes a cudaStream_t.
#pragma once

#include "device/host/executor.h"

#include <nccl.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace tutti::host {

class HostStream {
 public:
  HostStream();
  ~HostStream();  // drains pending work first

  // nullptr when `handle` is not a live host stream.
  static HostStream* fromHandle(cudaStream_t handle);
  cudaStream_t handle() { return reinterpret_cast<cudaStream_t>(this); }

  void enqueue(WorkItem work);
  // Waits for everything enqueued so far; returns (and clears) the first error of that work.
  ncclResult_t synchronize();
  // ncclSuccess when idle, ncclInProgress while work is pending, or the pending error.
  ncclResult_t query();

 private:
  void loop();
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<WorkItem> queue_;
  bool running_ = false;  // an item is executing
  bool stop_ = false;
  ncclResult_t error_ = ncclSuccess;
  std::thread thread_;
};

}  // namespace tutti::host
