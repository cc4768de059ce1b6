#include "util/check.h"
#include "util/log.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace {

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(Log, SubsysMaskAndExclusion) {
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "COLL,NET", 1);
  tutti::logReconfigure();
  EXPECT_TRUE(tutti::logEnabled(NCCL_LOG_INFO, NCCL_COLL));
  EXPECT_TRUE(tutti::logEnabled(NCCL_LOG_INFO, NCCL_NET));
  EXPECT_FALSE(tutti::logEnabled(NCCL_LOG_INFO, NCCL_INIT));
  EXPECT_FALSE(tutti::logEnabled(NCCL_LOG_TRACE, NCCL_COLL));
  setenv("NCCL_DEBUG_SUBSYS", "^INIT", 1);
  tutti::logReconfigure();
  EXPECT_FALSE(tutti::logEnabled(NCCL_LOG_INFO, NCCL_INIT));
  EXPECT_TRUE(tutti::logEnabled(NCCL_LOG_INFO, NCCL_TUNING));
  unsetenv("NCCL_DEBUG_SUBSYS");
  unsetenv("NCCL_DEBUG");
  tutti::logReconfigure();
  EXPECT_FALSE(tutti::logEnabled(NCCL_LOG_WARN, NCCL_ALL));
}

TEST(Log, DebugFileExpandsHostAndPid) {
  std::string pattern = ::testing::TempDir() + "tutti-log-%p.txt";
  setenv("NCCL_DEBUG", "WARN", 1);
  setenv("NCCL_DEBUG_FILE", pattern.c_str(), 1);
  tutti::logReconfigure();
  TUTTI_WARN("hello {}", 42);
  tutti::reportError(ncclInvalidArgument, __FILE__, __LINE__, "bad thing");
  std::string path = ::testing::TempDir() + "tutti-log-" + std::to_string(getpid()) + ".txt";
  unsetenv("NCCL_DEBUG_FILE");
  unsetenv("NCCL_DEBUG");
  tutti::logReconfigure();  // closes the file
  std::string text = readFile(path);
  EXPECT_NE(text.find("NCCL WARN"), std::string::npos) << text;
  EXPECT_NE(text.find("hello 42"), std::string::npos) << text;
  EXPECT_STREQ(tutti::lastErrorText(), "bad thing");
  std::remove(path.c_str());
}

}  // namespace
