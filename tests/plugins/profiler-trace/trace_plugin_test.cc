// The trace profiler driven directly through its exported ncclProfiler_v6 table (dlopen), with synthetic
// events: nesting of group > coll > proxy op > proxy step > states, several threads at once, the event cap,
// option errors, file naming. The written files are read back line by line (one event per line) and
// validated with `tutti-trace check`.
#include <tutti/profiler.h>

#include <gtest/gtest.h>

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace fs = std::filesystem;

std::mutex gLogMutex;
std::string gLog;

void captureLog(ncclDebugLogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lock(gLogMutex);
  gLog += (level == NCCL_LOG_WARN ? "WARN " : "INFO ") + std::string(buf) + "\n";
}

// One "X" event line of the trace, as the plugin writes it.
struct Ev {
  std::string name, cat, args;
  int pid = -1, tid = -1;
  double ts = 0, dur = 0;
  double end() const { return ts + dur; }
};

std::string field(const std::string& line, const std::string& key) {
  std::string k = "\"" + key + "\":";
  size_t p = line.find(k);
  if (p == std::string::npos) return "";
  p += k.size();
  if (line[p] == '"') {
    size_t e = line.find('"', p + 1);
    return line.substr(p + 1, e - p - 1);
  }
  size_t e = line.find_first_of(",}", p);
  return line.substr(p, e - p);
}

struct Trace {
  std::string text;
  std::vector<Ev> events;
  std::map<int, std::string> threadNames;  // tid -> name
};

Trace readTrace(const std::string& path) {
  Trace t;
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  t.text = ss.str();
  std::istringstream lines(t.text);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("\"ph\":\"X\"") != std::string::npos) {
      Ev e;
      e.name = field(line, "name");
      e.cat = field(line, "cat");
      e.pid = std::stoi(field(line, "pid"));
      e.tid = std::stoi(field(line, "tid"));
      e.ts = std::stod(field(line, "ts"));
      e.dur = std::stod(field(line, "dur"));
      size_t a = line.find("\"args\":");
      e.args = a == std::string::npos ? "" : line.substr(a);
      t.events.push_back(e);
    } else if (line.find("\"thread_name\"") != std::string::npos) {
      size_t a = line.find("\"args\":");
      t.threadNames[std::stoi(field(line, "tid"))] = field(line.substr(a), "name");
    }
  }
  return t;
}

int runCheck(const std::string& path) {
  std::string cmd = "python3 " TUTTI_TRACE_TOOL " check '" + path + "' > /dev/null 2>&1";
  int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

class TracePlugin : public ::testing::Test {
 protected:
  void SetUp() override {
    handle_ = dlopen(TUTTI_TEST_LIB_DIR "/libtutti-profiler-trace.so", RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle_, nullptr) << dlerror();
    prof_ = static_cast<const ncclProfiler_v6_t*>(dlsym(handle_, "ncclProfiler_v6"));
    ASSERT_NE(prof_, nullptr);
    dir_ = fs::temp_directory_path() / ("tutti-trace-test-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    setenv("TUTTI_TRACE_FILE", (dir_ / "t-r%r.json").c_str(), 1);
    unsetenv("TUTTI_TRACE_MASK");
    unsetenv("TUTTI_TRACE_MAX_EVENTS");
    gLog.clear();
  }
  void TearDown() override {
    unsetenv("TUTTI_TRACE_FILE");
    unsetenv("TUTTI_TRACE_MASK");
    unsetenv("TUTTI_TRACE_MAX_EVENTS");
    if (!HasFailure() && !std::getenv("TUTTI_TRACE_TEST_KEEP")) fs::remove_all(dir_);
    // The library stays loaded: it remembers the paths it wrote (dlclose would not reset that anyway).
  }

  void* start(void* ctx, ncclProfilerEventDescr_v6_t d) {
    void* h = nullptr;
    EXPECT_EQ(prof_->startEvent(ctx, &h, &d), ncclSuccess);
    return h;
  }
  static ncclProfilerEventDescr_v6_t coll(void* group, uint64_t seq, int rank) {
    ncclProfilerEventDescr_v6_t d{};
    d.type = ncclProfileColl;
    d.rank = rank;
    d.coll.seqNumber = seq;
    d.coll.func = "AllReduce";
    d.coll.count = 1024;
    d.coll.datatype = "ncclFloat32";
    d.coll.algo = "RING";
    d.coll.proto = "SIMPLE";
    d.coll.nChannels = 2;
    d.coll.nWarps = 8;
    d.coll.parentGroup = group;
    return d;
  }
  static ncclProfilerEventDescr_v6_t proxyOp(void* parent, int ch, int peer, bool send) {
    ncclProfilerEventDescr_v6_t d{};
    d.type = ncclProfileProxyOp;
    d.parentObj = parent;
    d.proxyOp.channelId = static_cast<uint8_t>(ch);
    d.proxyOp.peer = peer;
    d.proxyOp.nSteps = 3;
    d.proxyOp.chunkSize = 65536;
    d.proxyOp.isSend = send;
    return d;
  }
  static ncclProfilerEventDescr_v6_t step(void* op, int s) {
    ncclProfilerEventDescr_v6_t d{};
    d.type = ncclProfileProxyStep;
    d.parentObj = op;
    d.proxyStep.step = s;
    return d;
  }

  void* handle_ = nullptr;
  const ncclProfiler_v6_t* prof_ = nullptr;
  fs::path dir_;
};

TEST_F(TracePlugin, NestsGroupCollProxyOpStepsAndStates) {
  void* ctx = nullptr;
  int mask = 0;
  ASSERT_EQ(prof_->init(&ctx, 0xabcdef, &mask, "test", 1, 4, 2, captureLog), ncclSuccess);
  EXPECT_EQ(mask, ncclProfileGroup | ncclProfileColl | ncclProfileP2p | ncclProfileProxyOp |
                      ncclProfileProxyStep | ncclProfileKernelCh);
  ncclProfilerEventDescr_v6_t g{};
  g.type = ncclProfileGroup;
  void* group = start(ctx, g);
  ASSERT_NE(group, nullptr);
  void* c = start(ctx, coll(group, 7, 2));
  ncclProfilerEventDescr_v6_t k{};
  k.type = ncclProfileKernelCh;
  k.parentObj = c;
  k.kernelCh.channelId = 1;
  void* kch = start(ctx, k);
  void* op = start(ctx, proxyOp(c, 1, 3, true));
  for (int s = 0; s < 3; ++s) {
    void* st = start(ctx, step(op, s));
    ASSERT_NE(st, nullptr);
    ncclProfilerEventStateArgs_v6_t a{};
    a.proxyStep.transSize = 65536;
    EXPECT_EQ(prof_->recordEventState(st, ncclProfilerProxyStepSendGPUWait, nullptr), ncclSuccess);
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    EXPECT_EQ(prof_->recordEventState(st, ncclProfilerProxyStepSendWait, &a), ncclSuccess);
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    EXPECT_EQ(prof_->stopEvent(st), ncclSuccess);
  }
  EXPECT_EQ(prof_->stopEvent(op), ncclSuccess);
  EXPECT_EQ(prof_->recordEventState(kch, ncclProfilerKernelChStop, nullptr), ncclSuccess);
  EXPECT_EQ(prof_->stopEvent(kch), ncclSuccess);
  EXPECT_EQ(prof_->stopEvent(c), ncclSuccess);
  EXPECT_EQ(prof_->stopEvent(group), ncclSuccess);
  ASSERT_EQ(prof_->finalize(ctx), ncclSuccess);

  std::string path = (dir_ / "t-r2.json").string();
  ASSERT_TRUE(fs::exists(path)) << gLog;
  Trace t = readTrace(path);
  EXPECT_NE(t.text.find("\"process_name\",\"pid\":2,\"args\":{\"name\":\"rank 2 ("), std::string::npos);
  EXPECT_NE(t.text.find("\"commId\":\"0x0000000000abcdef\""), std::string::npos);
  EXPECT_NE(t.text.find("\"droppedEvents\":0"), std::string::npos);
  EXPECT_EQ(t.threadNames[1], "collectives");
  EXPECT_EQ(t.threadNames[101], "channel 1");
  EXPECT_EQ(t.threadNames[701], "proxy ch 1 send");

  const Ev *grp = nullptr, *cl = nullptr, *po = nullptr, *kc = nullptr;
  std::vector<const Ev*> steps, states;
  for (const Ev& e : t.events) {
    EXPECT_EQ(e.pid, 2);
    if (e.cat == "group") grp = &e;
    if (e.cat == "coll") cl = &e;
    if (e.cat == "proxyop") po = &e;
    if (e.cat == "kernelch") kc = &e;
    if (e.cat == "proxystep") steps.push_back(&e);
    if (e.cat == "state") states.push_back(&e);
  }
  ASSERT_TRUE(grp && cl && po && kc);
  EXPECT_EQ(cl->name, "AllReduce");
  for (const char* arg : {"\"seq\":7", "\"algo\":\"RING\"", "\"proto\":\"SIMPLE\"", "\"nChannels\":2",
                          "\"count\":1024", "\"datatype\":\"ncclFloat32\"", "\"transport\":\"net\""})
    EXPECT_NE(cl->args.find(arg), std::string::npos) << arg << " in " << cl->args;
  EXPECT_EQ(cl->tid, grp->tid);
  EXPECT_TRUE(cl->ts >= grp->ts && cl->end() <= grp->end());
  EXPECT_EQ(po->name, "ProxySend peer 3");
  EXPECT_EQ(po->tid, 701);
  EXPECT_EQ(kc->tid, 101);
  ASSERT_EQ(steps.size(), 3u);
  ASSERT_EQ(states.size(), 6u);
  for (const Ev* s : steps) {
    EXPECT_EQ(s->tid, po->tid) << "a step that fits stays on its proxy op's lane";
    EXPECT_TRUE(s->ts >= po->ts && s->end() <= po->end() + 1e-9) << s->name;
    EXPECT_NE(s->args.find("\"transSize\":65536"), std::string::npos);
  }
  for (const Ev* s : states) EXPECT_TRUE(s->name == "SendGPUWait" || s->name == "SendWait") << s->name;
  EXPECT_EQ(runCheck(path), 0);
}

TEST_F(TracePlugin, ConcurrentThreadsProduceAWellNestedTrace) {
  void* ctx = nullptr;
  int mask = 0;
  ASSERT_EQ(prof_->init(&ctx, 1, &mask, nullptr, 1, 2, 0, captureLog), ncclSuccess);
  constexpr int kThreads = 8, kColls = 200;
  std::atomic<int> nullHandles{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kColls; ++i) {
        void* h = nullptr;
        auto cd = coll(nullptr, static_cast<uint64_t>(t * kColls + i), 0);
        prof_->startEvent(ctx, &h, &cd);
        // Two channels' send and recv ops overlap each other: the layout must keep lanes nested.
        void* ops[2];
        for (int o = 0; o < 2; ++o) {
          auto od = proxyOp(h, t % 2, 1, o == 0);
          prof_->startEvent(ctx, &ops[o], &od);
        }
        for (int s = 0; s < 2; ++s) {
          for (void* op : ops) {
            void* st = nullptr;
            auto sd = step(op, s);
            prof_->startEvent(ctx, &st, &sd);
            prof_->recordEventState(st, ncclProfilerProxyStepRecvWait, nullptr);
            prof_->stopEvent(st);
            if (st == nullptr) nullHandles++;
          }
        }
        prof_->stopEvent(ops[0]);
        prof_->stopEvent(ops[1]);
        prof_->stopEvent(h);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(nullHandles.load(), 0);
  ASSERT_EQ(prof_->finalize(ctx), ncclSuccess);
  std::string path = (dir_ / "t-r0.json").string();
  Trace t = readTrace(path);
  int colls = 0, ops = 0, steps = 0;
  for (const Ev& e : t.events) {
    colls += e.cat == "coll";
    ops += e.cat == "proxyop";
    steps += e.cat == "proxystep";
  }
  EXPECT_EQ(colls, kThreads * kColls);
  EXPECT_EQ(ops, 2 * kThreads * kColls);
  EXPECT_EQ(steps, 4 * kThreads * kColls);
  EXPECT_NE(t.text.find("\"droppedEvents\":0"), std::string::npos);
  EXPECT_EQ(runCheck(path), 0) << "overlapping slices must be spread over lanes";
}

TEST_F(TracePlugin, CapDropsAndCountsExcessEvents) {
  setenv("TUTTI_TRACE_MAX_EVENTS", "100", 1);
  void* ctx = nullptr;
  int mask = 0;
  ASSERT_EQ(prof_->init(&ctx, 2, &mask, "cap", 1, 1, 0, captureLog), ncclSuccess);
  std::atomic<int> traced{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 250; ++i) {
        void* h = nullptr;
        auto d = coll(nullptr, static_cast<uint64_t>(t * 250 + i), 0);
        EXPECT_EQ(prof_->startEvent(ctx, &h, &d), ncclSuccess);
        if (h) traced++;
        EXPECT_EQ(prof_->stopEvent(h), ncclSuccess);  // a NULL handle is harmless
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(traced.load(), 100);
  ASSERT_EQ(prof_->finalize(ctx), ncclSuccess);
  std::string path = (dir_ / "t-r0.json").string();
  Trace t = readTrace(path);
  EXPECT_EQ(t.events.size(), 100u);
  EXPECT_NE(t.text.find("\"droppedEvents\":900"), std::string::npos);
  EXPECT_NE(t.text.find("\"maxEvents\":100"), std::string::npos);
  EXPECT_NE(t.text.find("dropped 900 events over TUTTI_TRACE_MAX_EVENTS=100"), std::string::npos);
  EXPECT_EQ(runCheck(path), 0);
}

TEST_F(TracePlugin, MaskFromEnvironmentFiltersEvents) {
  setenv("TUTTI_TRACE_MASK", "coll, proxystep", 1);
  void* ctx = nullptr;
  int mask = 0;
  ASSERT_EQ(prof_->init(&ctx, 3, &mask, nullptr, 1, 1, 0, captureLog), ncclSuccess);
  EXPECT_EQ(mask, ncclProfileColl | ncclProfileProxyStep);
  ncclProfilerEventDescr_v6_t g{};
  g.type = ncclProfileGroup;
  EXPECT_EQ(start(ctx, g), nullptr) << "a type outside the mask gets no handle";
  void* c = start(ctx, coll(nullptr, 1, 0));
  EXPECT_NE(c, nullptr);
  prof_->stopEvent(c);
  void* unfinished = start(ctx, coll(nullptr, 2, 0));
  EXPECT_NE(unfinished, nullptr);
  ASSERT_EQ(prof_->finalize(ctx), ncclSuccess);
  Trace t = readTrace((dir_ / "t-r0.json").string());
  EXPECT_EQ(t.events.size(), 1u);
  EXPECT_NE(t.text.find("\"unfinishedEvents\":1"), std::string::npos);

  setenv("TUTTI_TRACE_MASK", "0x6", 1);
  ASSERT_EQ(prof_->init(&ctx, 3, &mask, nullptr, 1, 1, 0, captureLog), ncclSuccess);
  EXPECT_EQ(mask, ncclProfileColl | ncclProfileP2p);
  ASSERT_EQ(prof_->finalize(ctx), ncclSuccess);
  EXPECT_TRUE(fs::exists(dir_ / "t-r0-1.json")) << "a second context on one path gets a suffix, not an overwrite";
}

TEST_F(TracePlugin, BadOptionsFailInitWithAClearMessage) {
  void* ctx = nullptr;
  int mask = 0;
  setenv("TUTTI_TRACE_MASK", "coll,bogus", 1);
  EXPECT_EQ(prof_->init(&ctx, 4, &mask, nullptr, 1, 1, 0, captureLog), ncclInvalidUsage);
  EXPECT_NE(gLog.find("unknown event 'bogus'"), std::string::npos) << gLog;
  unsetenv("TUTTI_TRACE_MASK");
  for (const char* bad : {"0", "-5", "12abc", "999999999999"}) {
    setenv("TUTTI_TRACE_MAX_EVENTS", bad, 1);
    gLog.clear();
    EXPECT_EQ(prof_->init(&ctx, 4, &mask, nullptr, 1, 1, 0, captureLog), ncclInvalidUsage) << bad;
    EXPECT_NE(gLog.find("TUTTI_TRACE_MAX_EVENTS"), std::string::npos) << gLog;
  }
  unsetenv("TUTTI_TRACE_MAX_EVENTS");
  EXPECT_EQ(prof_->init(&ctx, 4, &mask, nullptr, 1, 2, 5, captureLog), ncclInvalidArgument) << "rank >= nranks";
  EXPECT_EQ(prof_->init(nullptr, 4, &mask, nullptr, 1, 2, 0, captureLog), ncclInvalidArgument);
}

TEST_F(TracePlugin, FilePatternAndUnwritableDirectory) {
  setenv("TUTTI_TRACE_FILE", (dir_ / "x-%h-%p-r%r-%c-%%.json").c_str(), 1);
  void* ctx = nullptr;
  int mask = 0;
  ASSERT_EQ(prof_->init(&ctx, 0x10, &mask, nullptr, 1, 2, 1, captureLog), ncclSuccess);
  ASSERT_EQ(prof_->finalize(ctx), ncclSuccess);
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::string h = host;
  if (size_t dot = h.find('.'); dot != std::string::npos) h.resize(dot);
  std::string expected = "x-" + h + "-" + std::to_string(getpid()) + "-r1-0000000000000010-%.json";
  EXPECT_TRUE(fs::exists(dir_ / expected)) << expected;

  setenv("TUTTI_TRACE_FILE", (dir_ / "missing-dir" / "t.json").c_str(), 1);
  ASSERT_EQ(prof_->init(&ctx, 5, &mask, nullptr, 1, 1, 0, captureLog), ncclSuccess);
  gLog.clear();
  EXPECT_EQ(prof_->finalize(ctx), ncclSystemError);
  EXPECT_NE(gLog.find("cannot write"), std::string::npos) << gLog;
}

}  // namespace
