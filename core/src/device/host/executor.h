// Threads that run the host backend's work items. Items may block on each other (a send waits for its
// receiver), so every submitted item gets a thread at once: idle threads are reused, new ones are
// started when none is idle. Idle threads sleep; they never spin.
#pragma once

#include <tutti/common.h>

#include <condition_variable>
#include <functional>
#include <mutex>

namespace tutti::host {

using WorkItem = std::function<ncclResult_t()>;

// Completion of a set of work items: the first error wins.
class WorkGroup {
 public:
  void add(int n);
  void done(ncclResult_t res);
  ncclResult_t wait();  // blocks until every added item is done
  bool finished();

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int pending_ = 0;
  ncclResult_t result_ = ncclSuccess;
};

// Runs `items` concurrently: all but the last on executor threads, the last on the calling thread (a
// lone item never pays a thread hand-off). Returns when all are done, with the first error.
ncclResult_t runConcurrently(std::vector<WorkItem>& items);

// Starts `item` on an executor thread; `group` is told when it ends.
void executorSubmit(WorkItem item, WorkGroup* group);

}  // namespace tutti::host
