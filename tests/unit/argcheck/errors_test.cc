// Version, error strings, last error and the exception barrier of the entry-point wrapper.
#include "api/api.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace {

// An entry point defined with NCCL_API, as the real ones are.
int gCalls = 0;
}  // namespace

NCCL_API(ncclResult_t, tuttiTestEntryPoint, int mode) {
  return tutti::apiGuard("tuttiTestEntryPoint", [&]() -> ncclResult_t {
    ++gCalls;
    if (mode == 1) throw std::runtime_error("boom from the engine");
    if (mode == 2) throw 42;
    if (mode == 3) throw std::bad_alloc();
    return ncclSuccess;
  });
}

TEST(Errors, VersionMatchesHeader) {
  int v = 0;
  ASSERT_EQ(ncclGetVersion(&v), ncclSuccess);
  EXPECT_EQ(v, NCCL_VERSION_CODE);
  EXPECT_EQ(NCCL_VERSION_CODE, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH));
  EXPECT_EQ(NCCL_VERSION(2, 30, 7), 23007);
  EXPECT_EQ(NCCL_VERSION(2, 8, 4), 2804);  // old two-digit-minor encoding
  EXPECT_EQ(ncclGetVersion(nullptr), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("version"), std::string::npos);
  // The pnccl twin is the same function.
  int pv = 0;
  ASSERT_EQ(pncclGetVersion(&pv), ncclSuccess);
  EXPECT_EQ(pv, v);
}

TEST(Errors, EveryResultHasAString) {
  for (int r = 0; r < ncclNumResults; ++r) {
    const char* s = ncclGetErrorString(ncclResult_t(r));
    ASSERT_NE(s, nullptr);
    EXPECT_GT(std::string(s).size(), 3u) << r;
  }
  EXPECT_STREQ(ncclGetErrorString(ncclSuccess), "no error");
  EXPECT_STRNE(ncclGetErrorString(ncclInvalidArgument), ncclGetErrorString(ncclInvalidUsage));
  EXPECT_NE(ncclGetErrorString(ncclResult_t(99)), nullptr);
  EXPECT_STREQ(pncclGetErrorString(ncclTimeout), ncclGetErrorString(ncclTimeout));
}

TEST(Errors, ExceptionsBecomeInternalErrors) {
  EXPECT_EQ(tuttiTestEntryPoint(0), ncclSuccess);
  EXPECT_EQ(tuttiTestEntryPoint(1), ncclInternalError);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("boom from the engine"), std::string::npos);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("tuttiTestEntryPoint"), std::string::npos);
  EXPECT_EQ(ptuttiTestEntryPoint(2), ncclInternalError);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("unknown exception"), std::string::npos);
  EXPECT_EQ(tuttiTestEntryPoint(3), ncclInternalError);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("memory"), std::string::npos);
  EXPECT_EQ(gCalls, 4);
}
