// Profiler events as plugins see them: recording plugins (recorder.c) loaded through the config, 2 ranks as
// threads, the log parsed into events and checked for well-formedness (every handle stopped once, children
// stopped before their parents) and for the expected hierarchy and descriptor fields. Every TEST runs in
// its own process (ctest), so the configuration and the plugins' logs start empty.
#include "harness.h"

#include <gtest/gtest.h>

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace tutti::itest {
namespace {

constexpr int kRanks = 2;
// ncclProfile* bits and states (values fixed by the NCCL ABI).
constexpr long kGroup = 1, kColl = 2, kP2p = 4, kProxyOp = 8, kProxyStep = 16, kKernelCh = 64, kGroupApi = 256,
               kCollApi = 512, kP2pApi = 1024, kKernelLaunch = 2048;
constexpr int kSendWait = 9, kRecvWait = 10, kRecvGPUWait = 12, kKernelChStop = 22;

std::string recorderPath(const std::string& v) {
  return std::string(TUTTI_RECORDER_DIR) + "/libnccl-profiler-recorder-" + v + ".so";
}

std::string tempPath(const char* tag) {
  return ::testing::TempDir() + "tutti_profiler_" + tag + "_" + std::to_string(getpid());
}

// Writes a config that loads the recorders `versions` (in order) and makes it the process config.
class ProfilerConfig {
 public:
  explicit ProfilerConfig(const std::vector<std::string>& versions) {
    std::ofstream out(path_);
    out << "version: 1\nplugins:\n  profiler:\n";
    for (const auto& v : versions) out << "    - path: " << recorderPath(v) << "\n";
  }
  ~ProfilerConfig() { std::remove(path_.c_str()); }

 private:
  std::string path_ = tempPath("config") + ".yaml";
  ScopedEnv env_{"TUTTI_CONFIG", path_};
};

struct Event {
  long id = 0, type = 0, parent = 0;
  int rank = -1;
  size_t startAt = 0, stopAt = 0;  // line numbers
  int stops = 0;
  std::map<std::string, std::string> kv;
  std::vector<int> states;
  std::string get(const std::string& k) const {
    auto it = kv.find(k);
    return it == kv.end() ? "" : it->second;
  }
  long num(const std::string& k) const { return std::stol(get(k).empty() ? "-1" : get(k)); }
};

struct Log {
  std::map<long, Event> events;
  std::vector<std::string> problems;  // well-formedness violations
  int inits = 0, finalizes = 0;
  std::vector<const Event*> of(long type, int rank = -1) const {
    std::vector<const Event*> out;
    for (const auto& [id, e] : events)
      if (e.type == type && (rank < 0 || e.rank == rank)) out.push_back(&e);
    return out;
  }
  std::vector<const Event*> children(long parent, long type) const {
    std::vector<const Event*> out;
    for (const auto& [id, e] : events)
      if (e.parent == parent && e.type == type) out.push_back(&e);
    return out;
  }
};

// The recorder's log, read through its exported function (the core loaded the same library).
std::string recorderText(const std::string& v) {
  void* lib = dlopen(recorderPath(v).c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (!lib) return "<recorder " + v + " not loaded>";
  auto fn = reinterpret_cast<const char* (*)()>(dlsym(lib, "recorderLog"));
  std::string text = fn ? fn() : "<no recorderLog>";
  dlclose(lib);
  return text;
}

Log parse(const std::string& text) {
  Log log;
  std::istringstream in(text);
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n) {
    std::istringstream ls(line);
    std::string kind, tok;
    ls >> kind;
    std::map<std::string, std::string> kv;
    while (ls >> tok)
      if (auto eq = tok.find('='); eq != std::string::npos) kv[tok.substr(0, eq)] = tok.substr(eq + 1);
    if (kind == "INIT") ++log.inits;
    if (kind == "FINALIZE") ++log.finalizes;
    if (kind == "START") {
      Event e;
      e.id = std::stol(kv["id"]);
      e.type = std::stol(kv["type"]);
      e.parent = std::stol(kv["parent"]);
      e.rank = std::stoi(kv["rank"]);
      e.startAt = n;
      e.kv = kv;
      if (e.parent && !log.events.count(e.parent))
        log.problems.push_back(line + ": parent " + std::to_string(e.parent) + " was never started");
      else if (e.parent && log.events[e.parent].stops)
        log.problems.push_back(line + ": parent " + std::to_string(e.parent) + " already stopped");
      log.events[e.id] = e;
    }
    if (kind == "STOP" || kind == "STATE") {
      const long id = std::stol(kv["id"]);
      auto it = log.events.find(id);
      if (it == log.events.end()) {
        log.problems.push_back(line + ": unknown handle");
        continue;
      }
      if (it->second.stops) log.problems.push_back(line + ": handle used after its stop");
      if (kind == "STATE") {
        it->second.states.push_back(std::stoi(kv["state"]));
      } else {
        ++it->second.stops;
        it->second.stopAt = n;
      }
    }
  }
  for (const auto& [id, e] : log.events) {
    if (e.stops != 1) log.problems.push_back("event " + std::to_string(id) + " stopped " + std::to_string(e.stops) + " times");
    if (e.parent && log.events.count(e.parent) && log.events[e.parent].stopAt < e.stopAt)
      log.problems.push_back("event " + std::to_string(id) + " stopped after its parent " + std::to_string(e.parent));
    if (e.kv.count("group") && e.num("group") && log.events[e.num("group")].stopAt < e.stopAt)
      log.problems.push_back("event " + std::to_string(id) + " stopped after its group");
  }
  return log;
}

void expectWellFormed(const Log& log) {
  for (size_t i = 0; i < log.problems.size() && i < 10; ++i) ADD_FAILURE() << log.problems[i];
  EXPECT_TRUE(log.problems.empty()) << log.problems.size() << " well-formedness problem(s)";
}

// Rank r contributes r + 1: Sum gives 3, Max 2.
void allReduce(const CommSet& set, size_t count, Report& report, ncclRedOp_t op = ncclSum) {
  runPerRank(set, [&](int rank, ncclComm_t comm) {
    std::vector<float> send(count, static_cast<float>(rank + 1)), recv(count, 0.0f);
    if (!report.ok(ncclAllReduce(send.data(), recv.data(), count, ncclFloat, op, comm, nullptr),
                   "ncclAllReduce", comm))
      return;
    const float want = op == ncclMax ? 2.0f : 3.0f;
    for (size_t i = 0; i < count; ++i)
      if (recv[i] != want) {
        report.fail("rank " + std::to_string(rank) + ": element " + std::to_string(i) + " is " + std::to_string(recv[i]));
        return;
      }
  }, report, "AllReduce");
}

// Rank r sends `count` ints to the other rank and receives as many from it, in one group.
void sendRecv(const CommSet& set, size_t count, Report& report) {
  runPerRank(set, [&](int rank, ncclComm_t comm) {
    const int peer = 1 - rank;
    std::vector<int> send(count, rank + 10), recv(count, -1);
    ncclGroupStart();
    ncclSend(send.data(), count, ncclInt32, peer, comm, nullptr);
    ncclRecv(recv.data(), count, ncclInt32, peer, comm, nullptr);
    if (!report.ok(ncclGroupEnd(), "ncclGroupEnd", comm)) return;
    for (size_t i = 0; i < count; ++i)
      if (recv[i] != peer + 10) {
        report.fail("rank " + std::to_string(rank) + ": received " + std::to_string(recv[i]));
        return;
      }
  }, report, "SendRecv");
}

// Runs `work` on fresh communicators, destroys them (every event must then be stopped) and parses the log.
template <typename F>
Log runAndParse(const std::string& version, F work) {
  Report report;
  {
    CommSet set(kRanks, InitMode::kInitRank);
    EXPECT_TRUE(set.ok()) << set.error();
    if (set.ok()) work(set, report);
  }
  reportFailures(report);
  return parse(recorderText(version));
}

// ---- per ABI version ---------------------------------------------------------------------------------------

class ProfilerAbi : public ::testing::TestWithParam<std::string> {
 protected:
  int abi() const { return GetParam() == "B" ? 6 : std::stoi(GetParam()); }
};

TEST_P(ProfilerAbi, AllReduceTwoRanks) {
  ProfilerConfig cfg({GetParam()});
  ScopedEnv oneShot("TUTTI_ONESHOT_MAX_BYTES", "0");  // the tuner's ring or tree, one KernelCh per channel
  ScopedEnv direct("TUTTI_DIRECT_MIN_BYTES", "0");
  constexpr size_t kCount = 4096;
  const Log log = runAndParse(GetParam(), [&](const CommSet& set, Report& r) { allReduce(set, kCount, r); });
  expectWellFormed(log);
  EXPECT_EQ(log.inits, kRanks);
  EXPECT_EQ(log.finalizes, kRanks);
  for (int rank = 0; rank < kRanks; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const auto colls = log.of(kColl, rank);
    const auto groups = log.of(kGroup, rank);
    ASSERT_EQ(colls.size(), 1u);
    ASSERT_EQ(groups.size(), 1u);
    const Event& c = *colls[0];
    EXPECT_EQ(c.get("func"), "AllReduce");
    EXPECT_EQ(c.num("count"), static_cast<long>(kCount));
    EXPECT_EQ(c.get("dtype"), "ncclFloat32");
    EXPECT_EQ(c.num("seq"), 0);
    EXPECT_EQ(c.num("nwarps"), 0);
    EXPECT_TRUE(c.get("algo") == "Ring" || c.get("algo") == "Tree") << c.get("algo");
    EXPECT_TRUE(c.get("proto") == "LL" || c.get("proto") == "LL128" || c.get("proto") == "Simple") << c.get("proto");
    EXPECT_EQ(c.num("ctxrank"), rank);
    // One KernelCh per channel of the collective, each with the host timer at start and at stop.
    const auto chans = log.children(c.id, kKernelCh);
    EXPECT_EQ(static_cast<long>(chans.size()), c.num("nch"));
    std::set<long> ids;
    for (const Event* k : chans) {
      ids.insert(k->num("ch"));
      EXPECT_GT(k->num("timer"), 0);
      EXPECT_EQ(k->states, std::vector<int>{kKernelChStop});
    }
    EXPECT_EQ(static_cast<long>(ids.size()), c.num("nch"));
    if (abi() == 4) {
      EXPECT_EQ(c.parent, groups[0]->id);  // v4: the group is the parent
      EXPECT_TRUE(log.of(kCollApi).empty() && log.of(kGroupApi).empty()) << "v4 has no API events";
    } else {
      EXPECT_EQ(c.num("group"), groups[0]->id);
      const auto apis = log.of(kCollApi, rank);
      ASSERT_EQ(apis.size(), 1u);
      EXPECT_EQ(c.parent, apis[0]->id);
      EXPECT_EQ(apis[0]->get("func"), "AllReduce");
      const auto groupApis = log.of(kGroupApi, rank);
      ASSERT_EQ(groupApis.size(), 1u);
      EXPECT_EQ(apis[0]->parent, groupApis[0]->id);
      EXPECT_EQ(groupApis[0]->num("depth"), 1);  // implicit group (a call outside ncclGroupStart/End)
      const auto launches = log.of(kKernelLaunch, rank);
      ASSERT_EQ(launches.size(), 1u);
      EXPECT_EQ(launches[0]->parent, groupApis[0]->id);
    }
    EXPECT_TRUE(log.of(kProxyOp, rank).empty()) << "no network connection between threads of one process";
  }
}

TEST_P(ProfilerAbi, GroupedSendRecv) {
  ProfilerConfig cfg({GetParam()});
  const Log log = runAndParse(GetParam(), [&](const CommSet& set, Report& r) { sendRecv(set, 1000, r); });
  expectWellFormed(log);
  for (int rank = 0; rank < kRanks; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const auto p2ps = log.of(kP2p, rank);
    const auto groups = log.of(kGroup, rank);
    ASSERT_EQ(p2ps.size(), 2u);
    ASSERT_EQ(groups.size(), 1u);
    std::set<std::string> funcs;
    for (const Event* p : p2ps) {
      funcs.insert(p->get("func"));
      EXPECT_EQ(p->num("peer"), 1 - rank);
      EXPECT_EQ(p->num("count"), 1000);
      EXPECT_EQ(p->get("dtype"), "ncclInt32");
      EXPECT_EQ(p->num("nch"), 1);
      const auto chans = log.children(p->id, kKernelCh);
      ASSERT_EQ(chans.size(), 1u);
      EXPECT_EQ(chans[0]->num("ch"), 0);
      if (abi() == 4) {
        EXPECT_EQ(p->parent, groups[0]->id);
      } else {
        EXPECT_EQ(p->num("group"), groups[0]->id);
        ASSERT_TRUE(log.events.count(p->parent));
        const Event& api = log.events.at(p->parent);
        EXPECT_EQ(api.type, kP2pApi);
        EXPECT_EQ(api.get("func"), p->get("func"));
        ASSERT_TRUE(log.events.count(api.parent));
        EXPECT_EQ(log.events.at(api.parent).type, kGroupApi);
        EXPECT_EQ(log.events.at(api.parent).num("depth"), 2);  // the user's ncclGroupStart
      }
    }
    EXPECT_EQ(funcs, (std::set<std::string>{"Send", "Recv"}));
    if (abi() >= 5) {
      EXPECT_EQ(log.of(kGroupApi, rank).size(), 1u) << "one GroupApi per group and communicator";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Versions, ProfilerAbi, ::testing::Values("4", "5", "6"),
                         [](const auto& info) { return "v" + info.param; });

// A deterministic AllReduce (one-shot, then exchanged) is one Coll event each, algo "Deterministic", under its
// CollApi: the channel events of its steps (the AllGather, the sends and receives, the local reduction) are its
// children, and the steps get no Coll or P2p events of their own. (Off the core's one-shot and direct paths, which
// fold in the fixed order themselves and profile as any call on them; and Max: two ranks' Sum, Prod and Avg run as
// any call too, comm/det_coll.h detPairPath.)
TEST(ProfilerDeterministic, OneCollEventPerCallWithItsStepsBelow) {
  ProfilerConfig cfg({"6"});
  ScopedEnv det("TUTTI_DETERMINISTIC", "1");
  ScopedEnv oneShot("TUTTI_ONESHOT_MAX_BYTES", "0");
  ScopedEnv direct("TUTTI_DET_DIRECT_MIN_BYTES", "0");
  const Log log = runAndParse("6", [&](const CommSet& set, Report& r) {
    allReduce(set, 1024, r, ncclMax);   // 8 KiB x 2 ranks: one-shot
    allReduce(set, 70001, r, ncclMax);  // exchange
  });
  expectWellFormed(log);
  for (int rank = 0; rank < kRanks; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const auto colls = log.of(kColl, rank);
    ASSERT_EQ(colls.size(), 2u);
    EXPECT_TRUE(log.of(kP2p, rank).empty()) << "the exchange's sends and receives are steps of the call";
    const auto apis = log.of(kCollApi, rank);
    ASSERT_EQ(apis.size(), 2u);
    std::set<long> counts;
    for (const Event* c : colls) {
      EXPECT_EQ(c->get("func"), "AllReduce");
      EXPECT_EQ(c->get("algo"), "Deterministic");
      EXPECT_TRUE(c->parent == apis[0]->id || c->parent == apis[1]->id) << "parent " << c->parent;
      counts.insert(c->num("count"));
      // At least one channel event per step: one-shot (host: one fused step; sim: the AllGather and the local
      // reduction), exchange (the exchange, then the AllGather).
      const size_t chans = log.children(c->id, kKernelCh).size();
      EXPECT_GE(chans, c->num("count") == 1024 ? 1u : 2u) << "count " << c->num("count");
    }
    EXPECT_EQ(counts, (std::set<long>{1024, 70001}));
  }
}

// ---- network path: ProxyOp / ProxyStep ------------------------------------------------------------------

// Ranks of one process reach each other through net-socket and the proxy thread.
class NetPath : public ::testing::Test {
 protected:
  ScopedEnv p2p_{"NCCL_P2P_DISABLE", "1"};
  ScopedEnv shm_{"NCCL_SHM_DISABLE", "1"};
  ScopedEnv ifname_{"NCCL_SOCKET_IFNAME", "lo"};
  ScopedEnv oneShot_{"TUTTI_ONESHOT_MAX_BYTES", "0"};  // every AllReduce on the tuner's ring or tree
};

// Every ProxyOp has a Coll or P2p parent and exactly nSteps ProxySteps numbered 0..nSteps-1, whose states
// follow the engine's phases; returns the number of ProxySteps seen.
size_t checkProxyEvents(const Log& log, std::set<long> parentTypes) {
  size_t steps = 0;
  for (const Event* op : log.of(kProxyOp)) {
    SCOPED_TRACE("ProxyOp " + std::to_string(op->id));
    if (!log.events.count(op->parent)) {
      ADD_FAILURE() << "ProxyOp without a known parent";
      continue;
    }
    EXPECT_TRUE(parentTypes.count(log.events.at(op->parent).type)) << log.events.at(op->parent).type;
    EXPECT_EQ(op->num("peer"), 1 - op->rank);
    EXPECT_GT(op->num("chunk"), 0);
    const auto children = log.children(op->id, kProxyStep);
    EXPECT_EQ(static_cast<long>(children.size()), op->num("nsteps"));
    std::set<long> numbers;
    for (const Event* s : children) {
      numbers.insert(s->num("step"));
      const auto& st = s->states;
      if (op->num("send") == 1) {
        EXPECT_NE(std::find(st.begin(), st.end(), kSendWait), st.end()) << "send step without SendWait";
      } else {
        EXPECT_NE(std::find(st.begin(), st.end(), kRecvWait), st.end()) << "recv step without RecvWait";
        EXPECT_NE(std::find(st.begin(), st.end(), kRecvGPUWait), st.end()) << "recv step without RecvGPUWait";
      }
    }
    EXPECT_EQ(static_cast<long>(numbers.size()), op->num("nsteps"));
    if (!numbers.empty()) {
      EXPECT_EQ(*numbers.rbegin(), op->num("nsteps") - 1);
    }
    steps += children.size();
  }
  return steps;
}

TEST_F(NetPath, CollectiveProxyOpsAndSteps) {
  ProfilerConfig cfg({"6"});
  // 1 MiB per rank: several slots per channel.
  const Log log = runAndParse("6", [&](const CommSet& set, Report& r) { allReduce(set, 1 << 18, r); });
  expectWellFormed(log);
  for (int rank = 0; rank < kRanks; ++rank) {
    const auto ops = log.of(kProxyOp, rank);
    ASSERT_FALSE(ops.empty()) << "rank " << rank << ": no ProxyOp on the network path";
    std::set<long> sends;
    for (const Event* op : ops) sends.insert(op->num("send"));
    EXPECT_EQ(sends, (std::set<long>{0, 1})) << "rank " << rank << " should both send and receive";
  }
  EXPECT_GT(checkProxyEvents(log, {kColl}), 0u);
}

TEST_F(NetPath, SendRecvProxyOpsAndSteps) {
  ProfilerConfig cfg({"6"});
  const Log log = runAndParse("6", [&](const CommSet& set, Report& r) {
    sendRecv(set, 1 << 20, r);  // 4 MiB, Simple: several steps
    sendRecv(set, 10, r);      // LL, one step
  });
  expectWellFormed(log);
  EXPECT_EQ(log.of(kProxyOp).size(), 8u);  // per rank and group: one send, one receive
  EXPECT_GT(checkProxyEvents(log, {kP2p}), 8u);
}

// Mask: a profiler asking only for Coll gets nothing else, while another one, asking for everything, sees
// the proxy steps that happened.
TEST_F(NetPath, MaskRespected) {
  ProfilerConfig cfg({"6", "B"});
  ScopedEnv mask("REC_6_MASK", std::to_string(kColl));
  const Log log = runAndParse("6", [&](const CommSet& set, Report& r) { allReduce(set, 1 << 16, r); });
  expectWellFormed(log);
  EXPECT_EQ(log.of(kColl).size(), static_cast<size_t>(kRanks));
  EXPECT_EQ(log.events.size(), static_cast<size_t>(kRanks)) << "only Coll events were asked for";
  const Log other = parse(recorderText("B"));
  expectWellFormed(other);
  EXPECT_FALSE(other.of(kProxyStep).empty());
}

// ---- several profilers, failing init --------------------------------------------------------------------

TEST(Profilers, TwoAtOnceBothReceiveEvents) {
  ProfilerConfig cfg({"6", "5"});
  const Log a = runAndParse("6", [&](const CommSet& set, Report& r) { allReduce(set, 100, r); });
  const Log b = parse(recorderText("5"));
  for (const Log* log : {&a, &b}) {
    expectWellFormed(*log);
    EXPECT_EQ(log->inits, kRanks);
    EXPECT_EQ(log->finalizes, kRanks);
    EXPECT_EQ(log->of(kColl).size(), static_cast<size_t>(kRanks));
    EXPECT_EQ(log->of(kGroup).size(), static_cast<size_t>(kRanks));
  }
}

TEST(Profilers, FailingInitIsSkippedWithALogLine) {
  const std::string logPath = tempPath("log");
  std::remove(logPath.c_str());
  ScopedEnv debug("NCCL_DEBUG", "WARN");
  ScopedEnv file("NCCL_DEBUG_FILE", logPath);
  ScopedEnv fail("REC_6_FAIL", "1");
  ProfilerConfig cfg({"6", "B"});
  const Log a = runAndParse("6", [&](const CommSet& set, Report& r) { allReduce(set, 100, r); });
  EXPECT_TRUE(a.events.empty());
  EXPECT_EQ(a.finalizes, 0) << "finalize without a successful init";
  const Log b = parse(recorderText("B"));
  expectWellFormed(b);
  EXPECT_EQ(b.of(kColl).size(), static_cast<size_t>(kRanks));
  std::ifstream in(logPath);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_NE(ss.str().find("profiler 'recorder-v6'"), std::string::npos) << ss.str();
  EXPECT_NE(ss.str().find("init failed"), std::string::npos) << ss.str();
  std::remove(logPath.c_str());
}

}  // namespace
}  // namespace tutti::itest
