#include "bootstrap/ifaces.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstring>

namespace tutti {
namespace {

IfaceAddr v4(const char* name, const char* ip) {
  IfaceAddr a;
  a.name = name;
  std::memset(&a.addr, 0, sizeof(a.addr));
  a.addr.sin.sin_family = AF_INET;
  inet_pton(AF_INET, ip, &a.addr.sin.sin_addr);
  return a;
}

IfaceAddr v6(const char* name, const char* ip) {
  IfaceAddr a;
  a.name = name;
  std::memset(&a.addr, 0, sizeof(a.addr));
  a.addr.sin6.sin6_family = AF_INET6;
  inet_pton(AF_INET6, ip, &a.addr.sin6.sin6_addr);
  return a;
}

std::vector<std::string> names(const std::vector<IfaceAddr>& v) {
  std::vector<std::string> r;
  for (const auto& a : v) r.push_back(a.name);
  return r;
}

const std::vector<IfaceAddr> kHost = {
    v4("lo", "127.0.0.1"),       v4("docker0", "172.17.0.1"), v4("eth0", "10.0.0.2"),
    v4("eth1", "10.0.1.2"),      v4("ib0", "192.168.0.2"),    v6("eth0", "fe80::1"),
    v6("eth0", "2001:db8::2"),   v4("enp3s0", "10.0.2.2"),
};

TEST(IfaceSpec, ParsesPrefixExcludeAndExact) {
  auto s = parseIfaceSpec("eth,ib");
  EXPECT_FALSE(s.exclude);
  EXPECT_FALSE(s.exact);
  EXPECT_EQ(s.names, (std::vector<std::string>{"eth", "ib"}));

  s = parseIfaceSpec("^docker,lo");
  EXPECT_TRUE(s.exclude);
  EXPECT_FALSE(s.exact);
  EXPECT_EQ(s.names, (std::vector<std::string>{"docker", "lo"}));

  s = parseIfaceSpec("=eth0");
  EXPECT_FALSE(s.exclude);
  EXPECT_TRUE(s.exact);
  EXPECT_EQ(s.names, (std::vector<std::string>{"eth0"}));

  s = parseIfaceSpec("^=eth0, ,eth1 ,");
  EXPECT_TRUE(s.exclude);
  EXPECT_TRUE(s.exact);
  EXPECT_EQ(s.names, (std::vector<std::string>{"eth0", "eth1"}));
}

TEST(IfaceSpec, Matching) {
  EXPECT_TRUE(ifaceMatches(parseIfaceSpec("eth,ib"), "eth10"));
  EXPECT_TRUE(ifaceMatches(parseIfaceSpec("eth,ib"), "ib0"));
  EXPECT_FALSE(ifaceMatches(parseIfaceSpec("eth,ib"), "enp3s0"));
  EXPECT_FALSE(ifaceMatches(parseIfaceSpec("^docker,lo"), "docker0"));
  EXPECT_FALSE(ifaceMatches(parseIfaceSpec("^docker,lo"), "lo"));
  EXPECT_TRUE(ifaceMatches(parseIfaceSpec("^docker,lo"), "eth0"));
  EXPECT_TRUE(ifaceMatches(parseIfaceSpec("=eth0"), "eth0"));
  EXPECT_FALSE(ifaceMatches(parseIfaceSpec("=eth0"), "eth01"));
  EXPECT_FALSE(ifaceMatches(parseIfaceSpec("^=eth0"), "eth0"));
  EXPECT_TRUE(ifaceMatches(parseIfaceSpec("^=eth0"), "eth01"));
  EXPECT_FALSE(ifaceMatches(parseIfaceSpec(""), "eth0"));
}

TEST(IfaceSelect, SpecsOverFakeHost) {
  EXPECT_EQ(names(selectIfaces(kHost, "eth,ib", AF_UNSPEC, 16)),
            (std::vector<std::string>{"eth0", "eth1", "ib0", "eth0"}));  // fe80:: skipped
  EXPECT_EQ(names(selectIfaces(kHost, "^docker,lo", AF_INET, 16)),
            (std::vector<std::string>{"eth0", "eth1", "ib0", "enp3s0"}));
  auto exact = selectIfaces(kHost, "=eth0", AF_INET6, 16);
  ASSERT_EQ(exact.size(), 1u);
  EXPECT_EQ(toString(exact[0].addr), "[2001:db8::2]:0");
  EXPECT_EQ(selectIfaces(kHost, "eth", AF_UNSPEC, 1).size(), 1u);
  EXPECT_TRUE(selectIfaces(kHost, "=eth", AF_UNSPEC, 16).empty());
}

TEST(IfaceSelect, DefaultPrefersRealThenDockerThenLoopback) {
  EXPECT_EQ(names(selectIfaces(kHost, "", AF_INET, 1)), (std::vector<std::string>{"eth0"}));
  std::vector<IfaceAddr> dockerAndLo = {v4("lo", "127.0.0.1"), v4("docker0", "172.17.0.1")};
  EXPECT_EQ(names(selectIfaces(dockerAndLo, "", AF_UNSPEC, 4)), (std::vector<std::string>{"docker0"}));
  std::vector<IfaceAddr> loOnly = {v4("lo", "127.0.0.1"), v6("lo", "::1")};
  EXPECT_EQ(selectIfaces(loOnly, "", AF_UNSPEC, 4).size(), 2u);
  EXPECT_EQ(names(selectIfaces(loOnly, "", AF_INET6, 4)), (std::vector<std::string>{"lo"}));
  EXPECT_TRUE(selectIfaces({}, "", AF_UNSPEC, 4).empty());
}

TEST(IfaceSelect, SocketFamilyParsing) {
  int f = -1;
  EXPECT_EQ(parseSocketFamily("", &f), ncclSuccess);
  EXPECT_EQ(f, AF_UNSPEC);
  EXPECT_EQ(parseSocketFamily("AF_INET6", &f), ncclSuccess);
  EXPECT_EQ(f, AF_INET6);
  EXPECT_EQ(parseSocketFamily("inet7", &f), ncclInvalidArgument);
}

TEST(SocketAddress, ParseHostPort) {
  SocketAddress a;
  ASSERT_EQ(parseHostPort("127.0.0.1:29500", &a), ncclSuccess);
  EXPECT_EQ(toString(a), "127.0.0.1:29500");
  ASSERT_EQ(parseHostPort("[::1]:80", &a), ncclSuccess);
  EXPECT_EQ(toString(a), "[::1]:80");
  EXPECT_EQ(parseHostPort("127.0.0.1", &a), ncclInvalidArgument);
  EXPECT_EQ(parseHostPort("127.0.0.1:0", &a), ncclInvalidArgument);
  EXPECT_EQ(parseHostPort("127.0.0.1:70000", &a), ncclInvalidArgument);
  EXPECT_EQ(parseHostPort("127.0.0.1:12ab", &a), ncclInvalidArgument);
  EXPECT_EQ(parseHostPort("[::1:80", &a), ncclInvalidArgument);
}

}  // namespace
}  // namespace tutti
