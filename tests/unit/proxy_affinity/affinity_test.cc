// TUTTI_PROXY_AFFINITY: the CPU-list grammar and where the proxy thread goes for each creator and policy.
#include "proxy/affinity.h"

#include <gtest/gtest.h>

#include <initializer_list>

namespace tutti {
namespace {

cpu_set_t cpus(std::initializer_list<int> list) {
  cpu_set_t s;
  CPU_ZERO(&s);
  for (int c : list) CPU_SET(c, &s);
  return s;
}

std::string listOf(const char* text) {
  cpu_set_t s;
  std::string why;
  EXPECT_TRUE(parseCpuList(text, &s, &why)) << text << ": " << why;
  return formatCpuList(s);
}

std::string whyNot(const char* text) {
  cpu_set_t s;
  std::string why;
  EXPECT_FALSE(parseCpuList(text, &s, &why)) << text;
  return why;
}

TEST(CpuList, ParsesSinglesAndRangesAndFormatsThemCompactly) {
  EXPECT_EQ(listOf("0"), "0");
  EXPECT_EQ(listOf("0-3"), "0-3");
  EXPECT_EQ(listOf("0-3,8,10-11"), "0-3,8,10-11");
  EXPECT_EQ(listOf("3,1,2,0"), "0-3");  // order and overlap do not matter in a set
  EXPECT_EQ(listOf("5-5"), "5");
  EXPECT_EQ(listOf("1023"), "1023");
  EXPECT_EQ(formatCpuList(cpus({})), "none");
  EXPECT_EQ(formatCpuList(cpus({0, 2, 4, 5, 6})), "0,2,4-6");
}

TEST(CpuList, MalformedListsSayWhatIsWrong) {
  EXPECT_EQ(whyNot(""), "the CPU list is empty");
  EXPECT_EQ(whyNot("0,"), "the CPU list ends with ','");
  EXPECT_EQ(whyNot("3-1"), "range '3-1' runs backwards");
  EXPECT_EQ(whyNot("x"), "'x' is not a CPU number");
  EXPECT_EQ(whyNot("1-"), "'' is not a CPU number");
  EXPECT_EQ(whyNot("-1"), "'' is not a CPU number");
  EXPECT_EQ(whyNot("0,,1"), "'' is not a CPU number");
  EXPECT_EQ(whyNot(" 1"), "' 1' is not a CPU number");
  EXPECT_EQ(whyNot("1024"), "CPU 1024 is out of range (0..1023)");
  EXPECT_EQ(whyNot("99999999999"), "'99999999999' is not a CPU number");
}

TEST(ProxyAffinityValue, KeywordsAreCaseInsensitiveAndAListIsAList) {
  ProxyAffinity a;
  std::string why;
  ASSERT_TRUE(parseProxyAffinity("", &a, &why));
  EXPECT_EQ(a.mode, ProxyAffinity::Mode::Auto);
  ASSERT_TRUE(parseProxyAffinity("AUTO", &a, &why));
  EXPECT_EQ(a.mode, ProxyAffinity::Mode::Auto);
  ASSERT_TRUE(parseProxyAffinity("Inherit", &a, &why));
  EXPECT_EQ(a.mode, ProxyAffinity::Mode::Inherit);
  ASSERT_TRUE(parseProxyAffinity("2-3", &a, &why));
  EXPECT_EQ(a.mode, ProxyAffinity::Mode::List);
  EXPECT_EQ(formatCpuList(a.cpus), "2-3");
  EXPECT_FALSE(parseProxyAffinity("inherited", &a, &why));
  EXPECT_EQ(why, "'inherited': expected auto, inherit or a CPU list such as 0-3,8 ('inherited' is not a CPU number)");
}

std::string place(ProxyAffinity::Mode mode, cpu_set_t creator, cpu_set_t online, std::string* reason,
                  cpu_set_t list = cpus({})) {
  ProxyAffinity p;
  p.mode = mode;
  p.cpus = list;
  return formatCpuList(proxyCpus(p, creator, online, reason));
}

TEST(ProxyPlacement, AutoMovesOffTheOneCpuABoundRankHolds) {
  std::string reason;
  EXPECT_EQ(place(ProxyAffinity::Mode::Auto, cpus({0}), cpus({0, 1}), &reason), "1");
  EXPECT_EQ(reason, "off CPU 0, the one the creating rank is bound to");
  EXPECT_EQ(place(ProxyAffinity::Mode::Auto, cpus({2}), cpus({0, 1, 2, 3}), &reason), "0-1,3");
}

TEST(ProxyPlacement, AutoLeavesUnboundOrMultiCpuCreatorsAndSingleCpuHostsAlone) {
  std::string reason;
  EXPECT_EQ(place(ProxyAffinity::Mode::Auto, cpus({0, 1}), cpus({0, 1}), &reason), "0-1");
  EXPECT_EQ(reason, "inherited: the creating thread is not bound to one CPU");
  EXPECT_EQ(place(ProxyAffinity::Mode::Auto, cpus({4, 5}), cpus({0, 1, 2, 3, 4, 5}), &reason), "4-5");
  EXPECT_EQ(place(ProxyAffinity::Mode::Auto, cpus({0}), cpus({0}), &reason), "0");
  EXPECT_EQ(reason, "inherited: no other CPU is online");
}

TEST(ProxyPlacement, InheritAndExplicitLists) {
  std::string reason;
  EXPECT_EQ(place(ProxyAffinity::Mode::Inherit, cpus({0}), cpus({0, 1}), &reason), "0");
  EXPECT_EQ(reason, "inherited (TUTTI_PROXY_AFFINITY=inherit)");
  EXPECT_EQ(place(ProxyAffinity::Mode::List, cpus({0}), cpus({0, 1, 2}), &reason, cpus({1, 2, 7})), "1-2");
  EXPECT_EQ(reason, "TUTTI_PROXY_AFFINITY");
  EXPECT_EQ(place(ProxyAffinity::Mode::List, cpus({0}), cpus({0, 1}), &reason, cpus({6, 7})), "0");
  EXPECT_EQ(reason, "inherited: no CPU of TUTTI_PROXY_AFFINITY=6-7 is online");
}

TEST(ProxyPlacement, OnlineCpusIncludeTheOnesThisThreadMayUse) {
  cpu_set_t mine, both;
  ASSERT_EQ(sched_getaffinity(0, sizeof mine, &mine), 0);
  const cpu_set_t online = onlineCpus();
  CPU_AND(&both, &mine, &online);
  EXPECT_TRUE(CPU_EQUAL(&both, &mine)) << "allowed " << formatCpuList(mine) << ", online " << formatCpuList(online);
}

}  // namespace
}  // namespace tutti
