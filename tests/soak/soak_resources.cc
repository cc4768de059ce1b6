#include "soak_resources.h"

#include <dirent.h>
#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace tutti::soak {

ResourceSample sampleResources() {
  malloc_trim(0);
  ResourceSample s;
  if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
    long long sizePages = 0;
    long long residentPages = 0;
    if (std::fscanf(f, "%lld %lld", &sizePages, &residentPages) == 2)
      s.rssBytes = residentPages * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
    std::fclose(f);
  }
  if (std::FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f)) {
      long long kib = 0;
      if (std::sscanf(line, "RssAnon: %lld kB", &kib) == 1) s.anonBytes = kib << 10;
      if (std::sscanf(line, "RssShmem: %lld kB", &kib) == 1) s.shmemBytes = kib << 10;
      if (std::sscanf(line, "RssFile: %lld kB", &kib) == 1) s.fileBytes = kib << 10;
      if (std::sscanf(line, "VmData: %lld kB", &kib) == 1) s.dataBytes = kib << 10;
      if (std::sscanf(line, "Threads: %lld", &kib) == 1) s.threads = kib;
    }
    std::fclose(f);
  }
  if (DIR* d = opendir("/proc/self/fd")) {
    int64_t n = 0;
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') ++n;
    }
    closedir(d);
    s.fds = n - 1;  // the directory stream itself holds one
  }
  return s;
}

std::vector<std::string> openFds() {
  std::vector<std::string> out;
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return out;
  const int self = dirfd(d);
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.' || std::atoi(e->d_name) == self) continue;
    char target[512];
    const ssize_t n = readlinkat(self, e->d_name, target, sizeof target - 1);
    target[n > 0 ? n : 0] = '\0';
    out.push_back(std::string(e->d_name) + " -> " + target);
  }
  closedir(d);
  return out;
}

}  // namespace tutti::soak
