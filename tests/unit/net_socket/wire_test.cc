// The pure validators of plugins/net-socket/wire.h (tests/fuzz/fuzz_net_socket_wire drives them with
// arbitrary input). Includes the regression for a chunk count that wrapped around 2^64.
#include "wire.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstdint>

namespace tutti::netsock {
namespace {

TEST(NetSocketWire, ChunkCountDoesNotWrap) {
  EXPECT_EQ(chunkCount(0, 4), 0u);
  EXPECT_EQ(chunkCount(1, 4), 1u);
  EXPECT_EQ(chunkCount(8, 4), 2u);
  EXPECT_EQ(chunkCount(9, 4), 3u);
  // (size + chunkBytes - 1) / chunkBytes gave 0 here: the receiver queued no chunk for a 10-byte message.
  EXPECT_EQ(chunkCount(10, UINT64_MAX), 1u);
  EXPECT_EQ(chunkCount(UINT64_MAX, 2), (UINT64_MAX >> 1) + 1);
}

TEST(NetSocketWire, MessageHeaderChunks) {
  EXPECT_EQ(msgHeaderProblem(MsgHeader{kMsgMarker, kMsgInline, 100, 0}, 0), nullptr);
  EXPECT_EQ(msgHeaderProblem(MsgHeader{kMsgMarker, 0, 1 << 20, 1 << 18}, 4), nullptr);
  EXPECT_NE(msgHeaderProblem(MsgHeader{kMsgMarker, 0, 1 << 20, (1 << 18) - 1}, 4), nullptr);  // 5 chunks
  EXPECT_NE(msgHeaderProblem(MsgHeader{kMsgMarker, 0, 100, 0}, 4), nullptr);
  EXPECT_NE(msgHeaderProblem(MsgHeader{kMsgMarker, 0, 100, 100}, 0), nullptr);
  EXPECT_NE(msgHeaderProblem(MsgHeader{kMsgMarker + 1, kMsgInline, 1, 0}, 4), nullptr);
  // Regression (found by fuzz_net_socket_wire): the wrapped sum made 2^63 chunks look like 0.
  EXPECT_NE(msgHeaderProblem(MsgHeader{kMsgMarker, 0, UINT64_MAX, 2}, 4), nullptr);
  EXPECT_EQ(msgHeaderProblem(MsgHeader{kMsgMarker, 0, 10, UINT64_MAX}, 4), nullptr);
}

TEST(NetSocketWire, HandleAndHello) {
  Handle h{};
  h.marker = kHandleMarker;
  h.version = kWireVersion;
  h.magic = 7;
  h.addr.sin.sin_family = AF_INET;
  h.addr.sin.sin_port = htons(4000);
  h.nSocks = 4;
  h.nThreads = 2;
  EXPECT_EQ(handleProblem(h), nullptr);
  h.nThreads = 5;  // a thread without a socket
  EXPECT_NE(handleProblem(h), nullptr);
  h.nThreads = 2;
  h.nSocks = kMaxSockets + 1;
  EXPECT_NE(handleProblem(h), nullptr);
  h.nSocks = 4;
  h.addr.sin.sin_port = 0;
  EXPECT_NE(handleProblem(h), nullptr);

  Hello hello{kHelloMarker, kWireVersion, 0, 7, 99, 4, 4, 2, 0};
  EXPECT_EQ(helloProblem(hello, 7, 4, 2), nullptr);  // index 4 = the control socket
  hello.index = 5;
  EXPECT_NE(helloProblem(hello, 7, 4, 2), nullptr);
  hello.index = 0;
  EXPECT_NE(helloProblem(hello, 8, 4, 2), nullptr);
  EXPECT_NE(helloProblem(hello, 7, 2, 2), nullptr);
}

}  // namespace
}  // namespace tutti::netsock
