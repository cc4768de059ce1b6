#include "device/host/executor.h"

#include <pthread.h>

#include <atomic>
#include <deque>
#include <thread>
#include <vector>

namespace tutti::host {

void WorkGroup::add(int n) {
  std::lock_guard<std::mutex> lock(mutex_);
  pending_ += n;
}

void WorkGroup::done(ncclResult_t res) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (res != ncclSuccess && result_ == ncclSuccess) result_ = res;
  if (--pending_ == 0) cv_.notify_all();
}

ncclResult_t WorkGroup::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return pending_ == 0; });
  return result_;
}

bool WorkGroup::finished() {
  std::lock_guard<std::mutex> lock(mutex_);
  return pending_ == 0;
}

namespace {

struct Job {
  WorkItem item;
  WorkGroup* group;
};

// Process-wide pool. Threads are detached and live until exit; the pool object is never destroyed so
// late work during static destruction cannot touch a dead mutex.
class Pool {
 public:
  void submit(Job job) {
    std::unique_lock<std::mutex> lock(mutex_);
    jobs_.push_back(std::move(job));
    if (idle_ > static_cast<int>(jobs_.size()) - 1) {
      cv_.notify_one();
      return;
    }
    lock.unlock();
    std::thread([this] { workerLoop(); }).detach();
  }

 private:
  void workerLoop() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      while (jobs_.empty()) {
        ++idle_;
        cv_.wait(lock);
        --idle_;
      }
      Job job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      ncclResult_t res;
      try {
        res = job.item();
      } catch (...) {
        res = ncclInternalError;
      }
      // The item's captures (plans, profiler references into the communicator) are released before the
      // group hears of the result: once it does, the caller may return and destroy the communicator.
      WorkGroup* group = job.group;
      job = Job{};
      group->done(res);
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  int idle_ = 0;
};

// The pool of this process. A child forked after the pool started threads has none of them (fork copies only
// the calling thread) and may have inherited its mutex locked: it gets a fresh pool, and the parent's is left
// behind, so a process that forks after running collectives (ranks as forked processes) can run them again.
std::atomic<Pool*> gPool{nullptr};

Pool& pool() {
  static const bool made = [] {
    gPool.store(new Pool(), std::memory_order_release);
    pthread_atfork(nullptr, nullptr, [] { gPool.store(new Pool(), std::memory_order_release); });
    return true;
  }();
  (void)made;
  return *gPool.load(std::memory_order_acquire);
}

}  // namespace

void executorSubmit(WorkItem item, WorkGroup* group) { pool().submit(Job{std::move(item), group}); }

ncclResult_t runConcurrently(std::vector<WorkItem>& items) {
  if (items.empty()) return ncclSuccess;
  // A lone item (one channel, no point-to-point: every small collective) runs right here; no completion
  // object, lock or wake-up is needed for an error that can only be its own.
  if (items.size() == 1) {
    try {
      return items[0]();
    } catch (...) {
      return ncclInternalError;
    }
  }
  // Every item, the inline one included, reports to the group, which keeps the first error in time:
  // a failure on one channel makes the others fail as a consequence, and the cause is what to report.
  WorkGroup group;
  group.add(static_cast<int>(items.size()));
  for (size_t i = 0; i + 1 < items.size(); ++i) executorSubmit(std::move(items[i]), &group);
  ncclResult_t mine;
  try {
    mine = items.back()();
  } catch (...) {
    mine = ncclInternalError;
  }
  group.done(mine);
  return group.wait();
}

}  // namespace tutti::host
