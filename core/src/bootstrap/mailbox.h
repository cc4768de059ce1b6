// The receiving half of a Bootstrap: one thread owns the listen socket and every incoming connection,
// reads whole messages as they arrive and queues them by (peer, kind, tag). Because incoming data is
// always drained, a sender only waits while the kernel's socket buffers are full, never on the receiving
// application, and two ranks sending large messages to each other cannot deadlock.
#pragma once

#include "bootstrap/socket.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace tutti {

class BootstrapMailbox {
 public:
  // `aborted` belongs to the owning Bootstrap and outlives the mailbox.
  BootstrapMailbox(uint64_t magic, int nRanks, Socket listen, const std::atomic<bool>* aborted);
  ~BootstrapMailbox();  // stops and joins the receiver thread, closes every socket
  BootstrapMailbox(const BootstrapMailbox&) = delete;
  BootstrapMailbox& operator=(const BootstrapMailbox&) = delete;

  ncclResult_t start();

  // Removes the oldest message from `peer` (a rank, or -1 for the root) with this kind and tag, waiting
  // until the deadline. Fails if the bootstrap is aborted, the peer closed its connection with nothing
  // left queued, or the receiver thread failed. `what` names the wait in error messages.
  ncclResult_t take(int peer, uint32_t kind, int tag, std::vector<char>* payload, int64_t deadlineMs,
                    const char* what);
  // As take, but a wait that ends without the message returns its code silently (a poll, not a failure).
  ncclResult_t poll(int peer, uint32_t kind, int tag, std::vector<char>* payload, int64_t deadlineMs);
  // Queues a message as if it had arrived (send to self).
  void deliver(int peer, uint32_t kind, int tag, std::vector<char> payload);
  // Wakes every waiter so it re-checks the abort flag.
  void wake();
  // Raised (to 1, never lowered) once rank `peer`'s connection to this mailbox has ended: the kernel closes
  // the sockets of a process that dies, zombie or not, whatever its pid namespace, so a peer that has sent
  // here holds a lifeline. Lives as long as the mailbox; null for a rank out of range.
  const std::atomic<uint8_t>* goneFlag(int peer) const {
    return peer >= 0 && peer < nRanks_ ? &gone_[peer] : nullptr;
  }

 private:
  struct Conn;
  void run();
  bool progress(Conn& c);  // false: drop the connection
  void markClosed(int peer, std::string why);

  using Key = std::tuple<int, uint32_t, int>;
  const uint64_t magic_;
  const int nRanks_;
  Socket listen_;
  const std::atomic<bool>* aborted_;
  int stopFd_ = -1;  // eventfd: readable when the receiver must exit
  std::thread thread_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<Key, std::deque<std::vector<char>>> queue_;
  std::map<int, std::string> closed_;  // peer rank -> why its connection ended
  std::unique_ptr<std::atomic<uint8_t>[]> gone_;  // per rank: closed_ has it (read without mu_)
  std::string fatal_;  // non-empty once the receiver thread failed
};

}  // namespace tutti
