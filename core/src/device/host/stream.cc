#include "device/host/stream.h"

#include <set>

namespace tutti::host {
namespace {

std::mutex gRegistryMutex;
std::set<HostStream*>& registry() {
  static auto* s = new std::set<HostStream*>();
  return *s;
}

}  // namespace

HostStream::HostStream() {
  thread_ = std::thread([this] { loop(); });
  std::lock_guard<std::mutex> lock(gRegistryMutex);
  registry().insert(this);
}

HostStream::~HostStream() {
  {
    std::lock_guard<std::mutex> lock(gRegistryMutex);
    registry().erase(this);
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

HostStream* HostStream::fromHandle(cudaStream_t handle) {
  auto* s = reinterpret_cast<HostStream*>(handle);
  std::lock_guard<std::mutex> lock(gRegistryMutex);
  return registry().count(s) ? s : nullptr;
}

void HostStream::enqueue(WorkItem work) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(work));
  }
  cv_.notify_all();
}

void HostStream::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ and drained
    WorkItem work = std::move(queue_.front());
    queue_.pop_front();
    running_ = true;
    lock.unlock();
    ncclResult_t res = work();
    work = nullptr;  // its captures go before synchronize() can return
    lock.lock();
    running_ = false;
    if (res != ncclSuccess && error_ == ncclSuccess) error_ = res;
    cv_.notify_all();
  }
}

ncclResult_t HostStream::synchronize() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return queue_.empty() && !running_; });
  ncclResult_t res = error_;
  error_ = ncclSuccess;
  return res;
}

ncclResult_t HostStream::query() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (error_ != ncclSuccess) return error_;
  return queue_.empty() && !running_ ? ncclSuccess : ncclInProgress;
}

}  // namespace tutti::host
