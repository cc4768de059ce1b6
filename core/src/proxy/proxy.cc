#include "proxy/proxy.h"

#include "util/log.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace tutti {
namespace {

class Proxy {
 public:
  void add(const std::shared_ptr<ProxyTask>& task) {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks_.push_back(task);
    ++version_;
    if (!started_) {
      started_ = true;
      std::thread([this] { loop(); }).detach();  // process lifetime
    }
    cv_.notify_all();
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
  void loop() {
    std::vector<std::shared_ptr<ProxyTask>> snapshot;
    int idleRounds = 0;
    while (true) {
      {
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
      bool active = false;
      for (auto& t : snapshot) {
        bool moved = false;
        if (t->progress(&moved) != ncclSuccess) {
          TUTTI_INFO(NCCL_PROXY | NCCL_NET, "proxy: a network connection failed and stops being progressed");
          proxyDrop(t.get());
        }
        active |= moved;
      }
      if (active) {
        idleRounds = 0;
      } else if (++idleRounds > 64) {
        // Idle: sleep a little longer each round, up to 200 us (the first message after idling pays it).
        auto us = std::min(200, (idleRounds - 64) * 10);
        std::this_thread::sleep_for(std::chrono::microseconds(us));
      }
    }
  }

  void proxyDrop(ProxyTask* task) {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks_.erase(std::remove_if(tasks_.begin(), tasks_.end(), [&](const auto& t) { return t.get() == task; }),
                 tasks_.end());
    ++version_;
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<ProxyTask>> tasks_;
  uint64_t version_ = 0, seen_ = 0;
  bool started_ = false;
};

Proxy& proxy() {
  static Proxy* p = new Proxy();  // never destroyed: the thread outlives static destruction
  return *p;
}

}  // namespace

void proxyAdd(const std::shared_ptr<ProxyTask>& task) { proxy().add(task); }
void proxyRemove(ProxyTask* task) { proxy().remove(task); }

}  // namespace tutti
