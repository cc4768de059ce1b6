// Key checking of every map level. Regression: the key check held a reference into a temporary of
// yaml-cpp's iterator (stack-use-after-scope under ASan, found by tests/fuzz/fuzz_config on the built-in
// default itself); these parses go through that path at every level, so an ASan build of this test
// (scripts/sanitize.sh or the fuzz build) catches a return of it.
#include <gtest/gtest.h>

#include <string>

#include "plugin/config.h"
#include "util/check.h"

namespace tutti {
namespace {

TEST(ConfigKeys, EveryLevelIsChecked) {
  const std::string text =
      "version: 1\ndevice: host\nplugins:\n  net:\n    - name: socket\n      required: false\n"
      "      options: {NCCL_SOCKET_NTHREADS: 2}\nparams: {NCCL_BUFFSIZE: 65536}\n"
      "tuning:\n  - {collective: allreduce, bytes: [0, 1K], protocol: ll}\n";
  Config c;
  ASSERT_EQ(configParse(text, "keys.yaml", &c), ncclSuccess) << lastErrorText();
  ASSERT_EQ(c.nets.size(), 1u);
  EXPECT_EQ(c.nets[0].name, "socket");
  ASSERT_EQ(c.tuning.size(), 1u);
}

TEST(ConfigKeys, NonScalarKeyIsAnErrorWithItsPosition) {
  Config c;
  EXPECT_EQ(configParse("version: 1\n[a, b]: 2\n", "keys.yaml", &c), ncclInvalidUsage);
  EXPECT_NE(std::string(lastErrorText()).find("keys.yaml:2:1: the top level keys must be words"),
            std::string::npos)
      << lastErrorText();
  EXPECT_EQ(configParse("plugins:\n  net:\n    - {name: x, {a: 1}: 2}\n", "keys.yaml", &c), ncclInvalidUsage);
  EXPECT_NE(std::string(lastErrorText()).find("keys.yaml:3:"), std::string::npos) << lastErrorText();
}

}  // namespace
}  // namespace tutti
