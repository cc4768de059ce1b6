// Line-oriented messages between the two ends of a connection check (a socketpair, so the same code
// serves a peer thread and a forked peer process). The receiving end drives; the sending end executes.
#pragma once

#include <string>

namespace tutti::check {

class Link {
 public:
  Link() = default;
  explicit Link(int fd) : fd_(fd) {}
  bool send(const std::string& line);
  // Next line, without its newline. False on EOF, error or after timeoutSec without a line.
  bool recv(std::string* line, int timeoutSec);
  // A line already sent by the peer, without waiting. False when none is there yet.
  bool poll(std::string* line);
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  std::string buf_;
};

}  // namespace tutti::check
