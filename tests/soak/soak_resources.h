// Resident memory and open file descriptors of the calling process, for leak checks over a long run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tutti::soak {

struct ResourceSample {
  int64_t rssBytes = -1;  // resident set (/proc/self/statm, shared pages included); -1 when unreadable
  int64_t fds = -1;       // entries of /proc/self/fd; -1 when unreadable
  // The parts of the resident set (/proc/self/status): private memory (heap, stacks), shared memory
  // (shm segments, touched page by page), file-backed pages (code of the library and its plugins).
  int64_t anonBytes = -1;
  int64_t shmemBytes = -1;
  int64_t fileBytes = -1;
  // VmData: committed private writable memory (heap arenas, private mappings), resident or not. A heap or
  // mapping leak grows it; the first touch of an already mapped buffer does not.
  int64_t dataBytes = -1;
  int64_t threads = -1;  // a new thread shows in VmData too (its stack), so report it beside
};

// Returns free heap to the system first (malloc_trim), so the sample measures memory still in use
// rather than how much the allocator kept of the test's own freed buffers.
ResourceSample sampleResources();

// What each open descriptor refers to ("3 -> /tmp/x/log.123", "4 -> socket:[991]"), for a message that
// names the descriptors a leak check found.
std::vector<std::string> openFds();

}  // namespace tutti::soak
