// Descriptors of other processes of this host, as the device runtimes import exported memory by them.
#pragma once

#include <cstdint>
#include <string>

namespace tutti::rt {

// This process's pid namespace (the inode of /proc/self/ns/pid; 0 if it cannot be read). A pid names the same
// process only between processes of one namespace: containers sharing /dev/shm may reuse each other's pids.
uint64_t pidNamespaceId();

// Descriptor `fd` of process `pid` of pid namespace `pidNs`, duplicated into this process (pidfd_getfd, else
// /proc/<pid>/fd/<fd>); -1 with *error set if it cannot be had, in particular when `pidNs` is not this
// process's namespace (the pid would name another process here).
int borrowPeerFd(int pid, uint64_t pidNs, int fd, std::string* error);

}  // namespace tutti::rt
