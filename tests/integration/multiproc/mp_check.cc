#include "mp_check.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace tutti::itest {

std::string tail(const std::string& text, size_t maxBytes) {
  if (text.size() <= maxBytes) return text;
  size_t from = text.size() - maxBytes;
  size_t nl = text.find('\n', from);
  if (nl != std::string::npos && nl + 1 < text.size()) from = nl + 1;
  return "[...]\n" + text.substr(from);
}

namespace {
std::string readLog(const std::string& logDir, pid_t pid) {
  std::ifstream in(logDir + "/log." + std::to_string(pid));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

void logChildren(const MpResult& r) {
  std::printf("%zu processes, %.2f s\n", r.children.size(), r.seconds);
  for (const ChildResult& c : r.children) {
    std::printf("  %s\n", c.describe().c_str());
  }
  for (const ChildResult& c : r.children) {
    if (c.output.empty()) continue;
    std::printf("----- rank %d (pid %d) output -----\n%s", c.rank, static_cast<int>(c.pid), tail(c.output).c_str());
    if (c.output.back() != '\n') std::printf("\n");
  }
  std::fflush(stdout);
}

void expectAllSucceeded(const MpResult& r, const std::string& logDir) {
  EXPECT_TRUE(r.setupError.empty()) << r.setupError;
  EXPECT_FALSE(r.timedOut) << "the watchdog killed the ranks still running after " << r.seconds << " s";
  for (const ChildResult& c : r.children) {
    if (c.ok()) continue;
    std::string detail = c.describe() + "\n--- output ---\n" + tail(c.output);
    if (!logDir.empty()) detail += "\n--- log ---\n" + tail(readLog(logDir, c.pid));
    ADD_FAILURE() << detail;
  }
}

void expectNoShmLeftovers(const MpResult& r) {
  std::vector<pid_t> pids;
  for (const ChildResult& c : r.children) pids.push_back(c.selfPid);
  for (const std::string& name : shmLeftovers(pids)) ADD_FAILURE() << "left behind: /dev/shm/" << name;
}

}  // namespace tutti::itest
