// ncclParam*: the keys are the environment variables (and YAML `params:` keys), the values the effective
// ones, the typed getters refuse what their type cannot hold, and bad keys or handles fail with a message.
#include <gtest/gtest.h>
#include <nccl.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>

namespace {

class ParamApi : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : {"NCCL_BUFFSIZE", "NCCL_ALGO", "NCCL_P2P_LL_THRESHOLD", "NCCL_DEBUG_SUBSYS", "TUTTI_CONFIG"})
      unsetenv(v);
    setenv("HOME", TUTTI_TEST_TMP_DIR, 1);  // no user config
    unsetenv("XDG_CONFIG_HOME");
  }
  static ncclParamHandle_t bind(const char* key) {
    ncclParamHandle_t h = nullptr;
    EXPECT_EQ(ncclParamBind(&h, key), ncclSuccess) << ncclGetLastError(nullptr);
    return h;
  }
};

TEST_F(ParamApi, TypedGettersReadTheEffectiveValueWithinTheirRange) {
  ncclParamHandle_t h = bind("NCCL_BUFFSIZE");
  int64_t i64 = 0;
  ASSERT_EQ(ncclParamGetI64(h, &i64), ncclSuccess);
  EXPECT_EQ(i64, 4194304);  // the default
  uint32_t u32 = 0;
  EXPECT_EQ(ncclParamGetU32(h, &u32), ncclSuccess);
  EXPECT_EQ(u32, 4194304u);
  int8_t i8 = 7;
  EXPECT_EQ(ncclParamGetI8(h, &i8), ncclInvalidArgument);
  EXPECT_EQ(i8, 7) << "a refused read leaves the output alone";
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("NCCL_BUFFSIZE"), std::string::npos);
  uint16_t u16 = 0;
  EXPECT_EQ(ncclParamGetU16(h, &u16), ncclInvalidArgument);

  // The environment is read at each call: a handle sees a later setenv.
  setenv("NCCL_BUFFSIZE", "1048576", 1);
  int32_t i32 = 0;
  ASSERT_EQ(ncclParamGetI32(h, &i32), ncclSuccess);
  EXPECT_EQ(i32, 1048576);
  const char* s = nullptr;
  ASSERT_EQ(ncclParamGetStr(h, &s), ncclSuccess);
  EXPECT_STREQ(s, "1048576");

  // A negative value: signed types take it, unsigned ones refuse it.
  ncclParamHandle_t t = bind("NCCL_P2P_LL_THRESHOLD");
  int8_t neg = 0;
  ASSERT_EQ(ncclParamGetI8(t, &neg), ncclSuccess);
  EXPECT_EQ(neg, -1);
  uint64_t u64 = 0;
  EXPECT_EQ(ncclParamGetU64(t, &u64), ncclInvalidArgument);
  int16_t i16 = 0;
  EXPECT_EQ(ncclParamGetI16(t, &i16), ncclSuccess);
  uint8_t u8 = 0;
  EXPECT_EQ(ncclParamGetU8(t, &u8), ncclInvalidArgument);
}

TEST_F(ParamApi, StringParametersAndRawBytes) {
  setenv("NCCL_ALGO", "ring", 1);
  ncclParamHandle_t h = bind("NCCL_ALGO");
  int32_t i32 = 0;
  EXPECT_EQ(ncclParamGetI32(h, &i32), ncclInvalidArgument);
  const char* s = nullptr;
  ASSERT_EQ(ncclParamGetStr(h, &s), ncclSuccess);
  EXPECT_STREQ(s, "ring");

  char small[3];
  int len = 0;
  EXPECT_EQ(ncclParamGet(h, small, sizeof small, &len), ncclInvalidArgument);
  EXPECT_EQ(len, 5) << "the size needed, terminator included";
  char buf[16];
  ASSERT_EQ(ncclParamGet(h, buf, sizeof buf, &len), ncclSuccess);
  EXPECT_EQ(len, 5);
  EXPECT_STREQ(buf, "ring");

  int64_t raw = 0;
  ASSERT_EQ(ncclParamGet(bind("NCCL_BUFFSIZE"), &raw, sizeof raw, &len), ncclSuccess);
  EXPECT_EQ(len, 8);
  EXPECT_EQ(raw, 4194304);
}

TEST_F(ParamApi, KeyBasedAccessAndTheKeyList) {
  const char* value = nullptr;
  int len = -1;
  ASSERT_EQ(ncclParamGetParameter("NCCL_DEBUG_SUBSYS", &value, &len), ncclSuccess);
  EXPECT_STREQ(value, "INIT,ENV");
  EXPECT_EQ(len, 8);

  EXPECT_EQ(ncclParamGetParameter("NCCL_NO_SUCH_THING", &value, &len), ncclInvalidArgument);
  EXPECT_EQ(value, nullptr);
  EXPECT_EQ(len, 0);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("NCCL_NO_SUCH_THING"), std::string::npos);

  const char** keys = nullptr;
  int n = 0;
  ASSERT_EQ(ncclParamGetAllParameterKeys(&keys, &n), ncclSuccess);
  ASSERT_GT(n, 20);
  std::set<std::string> seen;
  for (int i = 0; i < n; ++i) {
    EXPECT_TRUE(seen.insert(keys[i]).second) << "duplicate key " << keys[i];
    // Every listed key binds and reads as a string.
    ncclParamHandle_t h = nullptr;
    ASSERT_EQ(ncclParamBind(&h, keys[i]), ncclSuccess) << keys[i];
    const char* s = nullptr;
    EXPECT_EQ(ncclParamGetStr(h, &s), ncclSuccess) << keys[i];
  }
  for (const char* k : {"NCCL_BUFFSIZE", "NCCL_ALGO", "NCCL_DEBUG", "TUTTI_TIMEOUT"}) EXPECT_TRUE(seen.count(k)) << k;
}

TEST_F(ParamApi, TheConfigFilesParamsAreTheSameKeys) {
  std::string path = std::string(TUTTI_TEST_TMP_DIR) + "/param_api.yaml";
  std::ofstream(path) << "params:\n  NCCL_BUFFSIZE: 2097152\n  NCCL_PROTO: Simple\n";
  setenv("TUTTI_CONFIG", path.c_str(), 1);
  int64_t v = 0;
  ASSERT_EQ(ncclParamGetI64(bind("NCCL_BUFFSIZE"), &v), ncclSuccess);
  EXPECT_EQ(v, 2097152);
  const char* value = nullptr;
  int len = 0;
  ASSERT_EQ(ncclParamGetParameter("NCCL_PROTO", &value, &len), ncclSuccess);
  EXPECT_STREQ(value, "Simple");

  testing::internal::CaptureStdout();
  ncclParamDumpAll();
  std::string dump = testing::internal::GetCapturedStdout();
  EXPECT_NE(dump.find("NCCL_BUFFSIZE=2097152 (" + path + ":2:"), std::string::npos) << dump;
  EXPECT_NE(dump.find("NCCL_ALGO= (default)"), std::string::npos) << dump;
}

TEST_F(ParamApi, BadArgumentsFailWithoutCrashing) {
  ncclParamHandle_t h = nullptr;
  EXPECT_EQ(ncclParamBind(&h, "NCCL_NOT_A_PARAMETER"), ncclInvalidArgument);
  EXPECT_EQ(h, nullptr);
  EXPECT_EQ(ncclParamBind(nullptr, "NCCL_BUFFSIZE"), ncclInvalidArgument);
  EXPECT_EQ(ncclParamBind(&h, nullptr), ncclInvalidArgument);
  int64_t v = 0;
  int garbage = 0;
  EXPECT_EQ(ncclParamGetI64(reinterpret_cast<ncclParamHandle_t>(&garbage), &v), ncclInvalidArgument);
  EXPECT_EQ(ncclParamGetI64(nullptr, &v), ncclInvalidArgument);
  EXPECT_EQ(ncclParamGetI64(bind("NCCL_BUFFSIZE"), nullptr), ncclInvalidArgument);
  const char* s = nullptr;
  EXPECT_EQ(ncclParamGetStr(nullptr, &s), ncclInvalidArgument);
  int len = 0;
  EXPECT_EQ(ncclParamGet(bind("NCCL_BUFFSIZE"), &v, -1, &len), ncclInvalidArgument);
  const char** keys = nullptr;
  EXPECT_EQ(ncclParamGetAllParameterKeys(&keys, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclParamGetParameter("NCCL_BUFFSIZE", nullptr, &len), ncclInvalidArgument);
}

}  // namespace
