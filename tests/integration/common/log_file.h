// This process's log lines of some subsystems (NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS) in a file while the object
// lives, read back with count(); the log goes back to the environment's settings after.
#pragma once

#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <string>

namespace tutti::itest {

class LogFile {
 public:
  explicit LogFile(const char* subsystems) : path_("/tmp/tutti-test-log." + std::to_string(getpid())) {
    setenv("NCCL_DEBUG", "INFO", 1);
    setenv("NCCL_DEBUG_SUBSYS", subsystems, 1);
    setenv("NCCL_DEBUG_FILE", path_.c_str(), 1);
    reset();
  }
  ~LogFile() {
    unsetenv("NCCL_DEBUG");
    unsetenv("NCCL_DEBUG_SUBSYS");
    unsetenv("NCCL_DEBUG_FILE");
    reset();
    std::remove(path_.c_str());
  }
  LogFile(const LogFile&) = delete;
  LogFile& operator=(const LogFile&) = delete;

  // Lines that contain `what`.
  size_t count(const std::string& what) const { return countAll({what}); }
  // Lines that contain every one of `parts`.
  size_t countAll(std::initializer_list<std::string> parts) const {
    std::ifstream in(path_);
    std::string line;
    size_t k = 0;
    while (std::getline(in, line))
      k += std::all_of(parts.begin(), parts.end(), [&](const std::string& p) { return line.find(p) != std::string::npos; });
    return k;
  }

 private:
  static void reset() {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    ncclResetDebugInit();
#pragma GCC diagnostic pop
  }
  std::string path_;
};

}  // namespace tutti::itest
