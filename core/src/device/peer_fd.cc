#include "device/peer_fd.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tutti::rt {

uint64_t pidNamespaceId() {
  struct stat ns {};
  return stat("/proc/self/ns/pid", &ns) == 0 ? static_cast<uint64_t>(ns.st_ino) : 0;
}

int borrowPeerFd(int pid, uint64_t pidNs, int fd, std::string* error) {
  if (pidNs != pidNamespaceId()) {
    *error = fmt::format("process {} is in another pid namespace (exported memory is imported only between "
                         "processes of one namespace)", pid);
    return -1;
  }
  if (pid == getpid()) return fcntl(fd, F_DUPFD_CLOEXEC, 0);
  int err = 0;
#if defined(SYS_pidfd_open) && defined(SYS_pidfd_getfd)
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  err = errno;
  if (pidfd >= 0) {
    const int got = static_cast<int>(syscall(SYS_pidfd_getfd, pidfd, fd, 0));
    err = errno;
    close(pidfd);
    if (got >= 0) return got;
  }
  *error = fmt::format("{}: {} (errno {}); ", pidfd < 0 ? "pidfd_open" : "pidfd_getfd", std::strerror(err), err);
#endif
  const std::string path = fmt::format("/proc/{}/fd/{}", pid, fd);
  const int got = open(path.c_str(), O_RDWR | O_CLOEXEC);
  err = errno;
  if (got < 0) *error += fmt::format("open {}: {} (errno {})", path, std::strerror(err), err);
  return got;
}

}  // namespace tutti::rt
