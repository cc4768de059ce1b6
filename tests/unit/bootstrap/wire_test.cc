// The pure validators of bootstrap/wire.h that the root, the mailbox and create() apply to socket bytes
// (tests/fuzz/fuzz_bootstrap_wire drives them with arbitrary input; these pin the decisions).
#include "bootstrap/wire.h"

#include <gtest/gtest.h>

#include <cstring>

namespace tutti::wire {
namespace {

constexpr uint64_t kMagic = 0x1122334455667788ull;

SocketAddress v4(uint16_t port) {
  SocketAddress a{};
  a.sin.sin_family = AF_INET;
  a.sin.sin_port = htons(port);
  return a;
}

TEST(BootstrapWire, RootHelloVerdicts) {
  RootHello h{kMagic, 1, 4, v4(1000), 0};
  std::string why;
  EXPECT_EQ(checkRootHello(h, kMagic, 0, &why), HelloVerdict::kAccept);
  EXPECT_EQ(checkRootHello(h, kMagic, 4, &why), HelloVerdict::kAccept);
  EXPECT_EQ(checkRootHello(h, kMagic + 1, 4, &why), HelloVerdict::kDrop);
  EXPECT_NE(why.find("wrong magic"), std::string::npos);
  EXPECT_EQ(checkRootHello(h, kMagic, 8, &why), HelloVerdict::kRefuse);
  EXPECT_NE(why.find("other ranks use 8"), std::string::npos) << why;
  h.rank = 4;
  EXPECT_EQ(checkRootHello(h, kMagic, 4, &why), HelloVerdict::kRefuse);
  EXPECT_NE(why.find("out of range"), std::string::npos) << why;
  h.rank = 0;
  h.nRanks = uint32_t(kMaxRanks) + 1;
  EXPECT_EQ(checkRootHello(h, kMagic, 0, &why), HelloVerdict::kDrop);
  h.nRanks = 4;
  h.listen.sa.sa_family = AF_UNIX;
  EXPECT_EQ(checkRootHello(h, kMagic, 0, &why), HelloVerdict::kDrop);
}

TEST(BootstrapWire, ConnectionHelloNamesTheSender) {
  int peer = kPeerUnknown;
  EXPECT_EQ(checkMsgHeader(MsgHeader{kMagic, 3, kHello, 0, 0, 0}, kMagic, 4, kPeerUnknown, &peer), "");
  EXPECT_EQ(peer, 3);
  EXPECT_EQ(checkMsgHeader(MsgHeader{kMagic, kRootRank, kHello, 0, 0, 0}, kMagic, 4, kPeerUnknown, &peer),
            "");
  EXPECT_EQ(peer, kPeerRoot);
  peer = kPeerUnknown;
  EXPECT_EQ(checkMsgHeader(MsgHeader{kMagic, 4, kHello, 0, 0, 0}, kMagic, 4, kPeerUnknown, &peer),
            "bad connection hello");
  EXPECT_EQ(checkMsgHeader(MsgHeader{kMagic, 1, kHello, 0, 0, 8}, kMagic, 4, kPeerUnknown, &peer),
            "bad connection hello");
  EXPECT_EQ(checkMsgHeader(MsgHeader{kMagic, 1, kUser, 0, 0, 0}, kMagic, 4, kPeerUnknown, &peer),
            "bad connection hello");
  EXPECT_EQ(peer, kPeerUnknown);
}

TEST(BootstrapWire, MessageHeaderBounds) {
  int unused = 0;
  EXPECT_EQ(checkMsgHeader(MsgHeader{kMagic, 2, kUser, 7, 0, 64}, kMagic, 4, 2, &unused), "");
  EXPECT_EQ(checkMsgHeader(MsgHeader{kMagic, 2, kUser, 7, 0, kMaxMessageBytes}, kMagic, 4, 2, &unused), "");
  EXPECT_NE(checkMsgHeader(MsgHeader{kMagic, 2, kUser, 7, 0, kMaxMessageBytes + 1}, kMagic, 4, 2, &unused),
            "");
  EXPECT_NE(checkMsgHeader(MsgHeader{kMagic, 1, kUser, 7, 0, 64}, kMagic, 4, 2, &unused),
            "");  // another rank
  EXPECT_NE(checkMsgHeader(MsgHeader{kMagic, 2, kHello, 0, 0, 0}, kMagic, 4, 2, &unused),
            "");  // second hello
  EXPECT_NE(checkMsgHeader(MsgHeader{kMagic, 2, kMaxKind + 1, 0, 0, 0}, kMagic, 4, 2, &unused), "");
  EXPECT_EQ(checkMsgHeader(MsgHeader{kMagic + 1, 2, kUser, 0, 0, 0}, kMagic, 4, 2, &unused), "wrong magic");
  // The root sends only its reply, bounded by the text limit; a rank never sends one.
  const uint64_t replyMax = sizeof(RootReply) + kMaxReplyText;
  EXPECT_EQ(
      checkMsgHeader(MsgHeader{kMagic, kRootRank, kRootReply, 0, 0, replyMax}, kMagic, 4, kPeerRoot, &unused),
      "");
  EXPECT_NE(checkMsgHeader(MsgHeader{kMagic, kRootRank, kRootReply, 0, 0, replyMax + 1}, kMagic, 4, kPeerRoot,
                           &unused),
            "");
  EXPECT_NE(checkMsgHeader(MsgHeader{kMagic, kRootRank, kUser, 0, 0, 8}, kMagic, 4, kPeerRoot, &unused), "");
  EXPECT_NE(checkMsgHeader(MsgHeader{kMagic, 2, kRootReply, 0, 0, 40}, kMagic, 4, 2, &unused), "");
}

TEST(BootstrapWire, RootReplyDecoding) {
  DecodedRootReply r;
  RootReply ok{0, 0, v4(2000), 0};
  ASSERT_EQ(decodeRootReply(&ok, sizeof ok, &r), "");
  EXPECT_EQ(r.result, ncclSuccess);
  EXPECT_EQ(r.next.sin.sin_port, htons(2000));
  EXPECT_NE(decodeRootReply(&ok, sizeof ok - 1, &r), "");  // truncated
  RootReply noAddr{0, 0, SocketAddress{}, 0};
  EXPECT_NE(decodeRootReply(&noAddr, sizeof noAddr, &r), "");

  // A failure: the text is cut to what the payload holds, an unknown code becomes ncclRemoteError.
  std::string payload(sizeof(RootReply), '\0');
  RootReply err{12345, 1000, SocketAddress{}, 0};
  std::memcpy(payload.data(), &err, sizeof err);
  payload += "rank 9 is out of range";
  ASSERT_EQ(decodeRootReply(payload.data(), payload.size(), &r), "");
  EXPECT_EQ(r.result, ncclRemoteError);
  EXPECT_EQ(r.text, "rank 9 is out of range");
  err.result = ncclInvalidUsage;
  err.textBytes = 4;
  std::memcpy(payload.data(), &err, sizeof err);
  ASSERT_EQ(decodeRootReply(payload.data(), payload.size(), &r), "");
  EXPECT_EQ(r.result, ncclInvalidUsage);
  EXPECT_EQ(r.text, "rank");
}

}  // namespace
}  // namespace tutti::wire
