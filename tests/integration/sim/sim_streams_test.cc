// NCCL's CUDA stream semantics on the sim backend, through the public API (nccl.h, tutti.h): a group's
// kernel waits for every user stream of the group (fan-in) and every user stream waits for it (fan-out),
// ncclGroupEnd returns before the work has run, and collectives issued on a capturing stream become part of
// the graph and run each time it is launched (and not at capture), mixed with uncaptured work.
#include <nccl.h>
#include <tutti.h>

#include "harness.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace {

using tutti::itest::CommSet;
using tutti::itest::InitMode;
using tutti::itest::Report;
using tutti::itest::ScopedEnv;

constexpr size_t kCount = 1000;

// A host function held until the test opens its gate, then filling a buffer: work queued behind it on the
// same stream cannot have started before the gate opened.
struct GatedFill {
  std::atomic<bool>* gate;
  std::vector<float>* buf;
  float value;
  static void run(void* arg) {
    auto* g = static_cast<GatedFill*>(arg);
    while (!g->gate->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    for (float& x : *g->buf) x = g->value;
  }
};

// A host function copying a buffer: what the stream sees at that point of its order.
struct Snapshot {
  const std::vector<float>* from;
  std::vector<float> copy;
  static void run(void* arg) {
    auto* s = static_cast<Snapshot*>(arg);
    s->copy = *s->from;
  }
};

TEST(SimStreams, GroupFansInEveryUserStreamAndFansOutToEach) {
  ScopedEnv device("TUTTI_DEVICE", "sim");
  constexpr int kRanks = 2;
  CommSet set(kRanks, InitMode::kInitAll);
  ASSERT_TRUE(set.ok()) << set.error();
  std::atomic<bool> gate{false};
  std::vector<cudaStream_t> a(kRanks), b(kRanks);
  std::vector<std::vector<float>> inA(kRanks, std::vector<float>(kCount, -1)), inB = inA;
  std::vector<std::vector<float>> outA(kRanks, std::vector<float>(kCount, 0)), outB = outA;
  std::vector<GatedFill> fills;
  fills.reserve(2 * kRanks);
  std::vector<Snapshot> seenOnA(kRanks), seenOnB(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(tuttiStreamCreate(&a[r]), ncclSuccess);
    ASSERT_EQ(tuttiStreamCreate(&b[r]), ncclSuccess);
    // The inputs are written by the user streams' own earlier work, after the group has been issued.
    fills.push_back({&gate, &inA[r], float(r + 1)});
    ASSERT_EQ(tuttiLaunchHostFunc(a[r], GatedFill::run, &fills.back()), ncclSuccess);
    fills.push_back({&gate, &inB[r], float(10 * (r + 1))});
    ASSERT_EQ(tuttiLaunchHostFunc(b[r], GatedFill::run, &fills.back()), ncclSuccess);
  }
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(ncclAllReduce(inA[r].data(), outA[r].data(), kCount, ncclFloat32, ncclSum, set.comm(r), a[r]), ncclSuccess);
    ASSERT_EQ(ncclAllReduce(inB[r].data(), outB[r].data(), kCount, ncclFloat32, ncclSum, set.comm(r), b[r]), ncclSuccess);
  }
  // The group returns while its inputs cannot even exist yet: the kernels wait for the streams.
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(tuttiStreamQuery(a[r]), ncclInProgress);
    EXPECT_EQ(tuttiStreamQuery(b[r]), ncclInProgress);
    // Each user stream's later work sees both collectives done: the kernel ran both, and each stream waits for it.
    seenOnA[r].from = &outB[r];
    seenOnB[r].from = &outA[r];
    ASSERT_EQ(tuttiLaunchHostFunc(a[r], Snapshot::run, &seenOnA[r]), ncclSuccess);
    ASSERT_EQ(tuttiLaunchHostFunc(b[r], Snapshot::run, &seenOnB[r]), ncclSuccess);
  }
  gate = true;
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(tuttiStreamSynchronize(a[r]), ncclSuccess);
    ASSERT_EQ(tuttiStreamSynchronize(b[r]), ncclSuccess);
  }
  for (int r = 0; r < kRanks; ++r) {
    for (size_t i = 0; i < kCount; ++i) {
      ASSERT_EQ(outA[r][i], 3.0f) << "rank " << r << " element " << i;
      ASSERT_EQ(outB[r][i], 30.0f) << "rank " << r << " element " << i;
      ASSERT_EQ(seenOnA[r].copy[i], 30.0f) << "stream A of rank " << r << " ran on before the kernel ended";
      ASSERT_EQ(seenOnB[r].copy[i], 3.0f) << "stream B of rank " << r << " ran on before the kernel ended";
    }
    EXPECT_EQ(tuttiStreamDestroy(a[r]), ncclSuccess);
    EXPECT_EQ(tuttiStreamDestroy(b[r]), ncclSuccess);
  }
}

// Per rank: a graph of AllReduce + Broadcast captured once, launched several times with new inputs, with an
// uncaptured AllReduce on the same stream between launches.
void captureAndReplay(int rank, int nRanks, ncclComm_t comm, Report& report) {
  cudaStream_t s = nullptr;
  if (!report.ok(tuttiStreamCreate(&s), "tuttiStreamCreate", comm)) return;
  std::vector<float> in(kCount), sum(kCount, -7), bcast(kCount, -7), eagerIn(kCount), eagerOut(kCount);
  tuttiGraph_t graph = nullptr;
  bool ok = report.ok(tuttiStreamBeginCapture(s), "tuttiStreamBeginCapture", comm) &&
            report.ok(ncclAllReduce(in.data(), sum.data(), kCount, ncclFloat32, ncclSum, comm, s), "AllReduce", comm) &&
            report.ok(ncclBroadcast(sum.data(), bcast.data(), kCount, ncclFloat32, 1 % nRanks, comm, s), "Broadcast",
                      comm) &&
            report.ok(tuttiStreamEndCapture(s, &graph), "tuttiStreamEndCapture", comm);
  if (!ok) return;
  int capturing = 1;
  report.ok(tuttiStreamIsCapturing(s, &capturing), "tuttiStreamIsCapturing", comm);
  if (capturing) report.fail("rank " + std::to_string(rank) + ": still capturing after tuttiStreamEndCapture");
  report.ok(tuttiStreamSynchronize(s), "sync after capture", comm);
  if (sum[0] != -7 || bcast[0] != -7)
    report.fail("rank " + std::to_string(rank) + ": a captured collective ran at capture time");
  for (int it = 0; it < 4 && report.empty(); ++it) {
    for (size_t i = 0; i < kCount; ++i) in[i] = float(rank + 1) * float(it + 1) + float(i % 7);
    ok = report.ok(tuttiGraphLaunch(graph, s), "tuttiGraphLaunch", comm) &&
         report.ok(tuttiStreamSynchronize(s), "sync after launch", comm);
    if (!ok) break;
    const float ranks = float(nRanks) * float(nRanks + 1) / 2;
    for (size_t i = 0; i < kCount; ++i) {
      const float want = ranks * float(it + 1) + float(nRanks) * float(i % 7);
      if (sum[i] != want || bcast[i] != want) {
        report.fail("rank " + std::to_string(rank) + " launch " + std::to_string(it) + " element " +
                    std::to_string(i) + ": sum " + std::to_string(sum[i]) + " bcast " + std::to_string(bcast[i]) +
                    ", want " + std::to_string(want));
        break;
      }
    }
    // Uncaptured work of the same communicator between launches.
    for (size_t i = 0; i < kCount; ++i) eagerIn[i] = float(rank + it);
    ok = report.ok(ncclAllReduce(eagerIn.data(), eagerOut.data(), kCount, ncclFloat32, ncclMax, comm, s), "eager", comm) &&
         report.ok(tuttiStreamSynchronize(s), "sync after eager", comm);
    if (ok && eagerOut[kCount - 1] != float(nRanks - 1 + it))
      report.fail("rank " + std::to_string(rank) + ": uncaptured AllReduce between launches gave " +
                  std::to_string(eagerOut[kCount - 1]));
  }
  report.ok(tuttiGraphDestroy(graph), "tuttiGraphDestroy", comm);
  report.ok(tuttiStreamDestroy(s), "tuttiStreamDestroy", comm);
}

TEST(SimStreams, CapturedCollectivesReplayManyTimesMixedWithUncapturedWork) {
  ScopedEnv device("TUTTI_DEVICE", "sim");
  for (int nRanks : {2, 3}) {
    CommSet set(nRanks, InitMode::kInitAll);
    ASSERT_TRUE(set.ok()) << set.error();
    Report report;
    tutti::itest::runPerRank(set, [&](int r, ncclComm_t c) { captureAndReplay(r, nRanks, c, report); }, report,
                             "capture and replay");
    tutti::itest::reportFailures(report);
  }
}

// NCCL_GRAPH_MIXING_SUPPORT: per rank, a captured AllReduce replayed on one stream while uncaptured collectives
// of the same communicator are queued on another, with no synchronisation between the two streams. Each
// launch orders itself after the communicator's previous one (in issue order, the same on every rank), so
// neither garbles the other on the shared connections.
void replayBesideUncapturedWork(int rank, int nRanks, ncclComm_t comm, Report& report) {
  cudaStream_t g = nullptr, e = nullptr;
  if (!report.ok(tuttiStreamCreate(&g), "tuttiStreamCreate", comm) ||
      !report.ok(tuttiStreamCreate(&e), "tuttiStreamCreate", comm))
    return;
  constexpr int kLaunches = 4;
  std::vector<float> in(kCount), sum(kCount);
  std::vector<std::vector<float>> eagerIn(kLaunches, std::vector<float>(kCount)), eagerOut = eagerIn;
  tuttiGraph_t graph = nullptr;
  bool ok = report.ok(tuttiStreamBeginCapture(g), "tuttiStreamBeginCapture", comm) &&
            report.ok(ncclAllReduce(in.data(), sum.data(), kCount, ncclFloat32, ncclSum, comm, g), "AllReduce", comm) &&
            report.ok(tuttiStreamEndCapture(g, &graph), "tuttiStreamEndCapture", comm);
  for (size_t i = 0; i < kCount; ++i) in[i] = float(rank + 1) + float(i % 5);
  for (int it = 0; ok && it < kLaunches; ++it) {
    for (size_t i = 0; i < kCount; ++i) eagerIn[it][i] = float(rank * 10 + it) + float(i % 3);
    ok = report.ok(tuttiGraphLaunch(graph, g), "tuttiGraphLaunch", comm) &&
         report.ok(ncclAllReduce(eagerIn[it].data(), eagerOut[it].data(), kCount, ncclFloat32, ncclMax, comm, e),
                   "eager AllReduce", comm);
  }
  report.ok(tuttiStreamSynchronize(g), "sync graph stream", comm);
  report.ok(tuttiStreamSynchronize(e), "sync eager stream", comm);
  const float ranks = float(nRanks) * float(nRanks + 1) / 2;
  for (size_t i = 0; ok && i < kCount; ++i)
    if (sum[i] != ranks + float(nRanks) * float(i % 5)) {
      report.fail("rank " + std::to_string(rank) + ": replayed AllReduce element " + std::to_string(i) + " is " +
                  std::to_string(sum[i]));
      break;
    }
  for (int it = 0; ok && it < kLaunches; ++it)
    for (size_t i = 0; i < kCount; ++i)
      if (eagerOut[it][i] != float((nRanks - 1) * 10 + it) + float(i % 3)) {
        report.fail("rank " + std::to_string(rank) + ": uncaptured AllReduce " + std::to_string(it) + " element " +
                    std::to_string(i) + " is " + std::to_string(eagerOut[it][i]));
        break;
      }
  if (graph) report.ok(tuttiGraphDestroy(graph), "tuttiGraphDestroy", comm);
  report.ok(tuttiStreamDestroy(g), "tuttiStreamDestroy", comm);
  report.ok(tuttiStreamDestroy(e), "tuttiStreamDestroy", comm);
}

TEST(SimStreams, GraphReplaysAndUncapturedWorkOnOtherStreamsDoNotInterleave) {
  ScopedEnv device("TUTTI_DEVICE", "sim");
  for (int nRanks : {2, 3}) {
    CommSet set(nRanks, InitMode::kInitAll);
    ASSERT_TRUE(set.ok()) << set.error();
    Report report;
    tutti::itest::runPerRank(set, [&](int r, ncclComm_t c) { replayBesideUncapturedWork(r, nRanks, c, report); },
                             report, "graph beside uncaptured work");
    tutti::itest::reportFailures(report);
  }
}

TEST(SimStreams, OneThreadCapturesEveryRankInOneGroup) {
  ScopedEnv device("TUTTI_DEVICE", "sim");
  constexpr int kRanks = 2;
  CommSet set(kRanks, InitMode::kInitAll);
  ASSERT_TRUE(set.ok()) << set.error();
  std::vector<cudaStream_t> s(kRanks);
  std::vector<tuttiGraph_t> g(kRanks);
  std::vector<std::vector<int32_t>> in(kRanks, std::vector<int32_t>(kCount)), out = in;
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(tuttiStreamCreate(&s[r]), ncclSuccess);
    ASSERT_EQ(tuttiStreamBeginCapture(s[r]), ncclSuccess);
  }
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r)
    ASSERT_EQ(ncclAllGather(in[r].data() + r * (kCount / kRanks), out[r].data(), kCount / kRanks, ncclInt32,
                            set.comm(r), s[r]), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r) ASSERT_EQ(tuttiStreamEndCapture(s[r], &g[r]), ncclSuccess);
  for (int it = 0; it < 3; ++it) {
    for (int r = 0; r < kRanks; ++r)
      for (size_t i = 0; i < kCount; ++i) in[r][i] = int32_t(1000 * it + 100 * r + i);
    for (int r = 0; r < kRanks; ++r) ASSERT_EQ(tuttiGraphLaunch(g[r], s[r]), ncclSuccess);
    for (int r = 0; r < kRanks; ++r) ASSERT_EQ(tuttiStreamSynchronize(s[r]), ncclSuccess);
    for (int r = 0; r < kRanks; ++r)
      for (size_t i = 0; i < kCount; ++i) {
        const size_t owner = i / (kCount / kRanks);
        ASSERT_EQ(out[r][i], int32_t(1000 * it + 100 * owner + i)) << "launch " << it << " rank " << r << " i " << i;
      }
  }
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(tuttiGraphDestroy(g[r]), ncclSuccess);
    EXPECT_EQ(tuttiStreamDestroy(s[r]), ncclSuccess);
  }
}

// A collective that fails inside a replayed graph (its peer never launches its own) reports the error on the
// stream and the communicator, names the operation, and leaves nothing held: the next launch is not blocked and
// the communicators are destroyed.
TEST(SimStreams, AFailureInAReplayedGraphIsReportedAndReleasesTheCommunicator) {
  ScopedEnv device("TUTTI_DEVICE", "sim");
  ScopedEnv timeout("TUTTI_TIMEOUT", "1");
  constexpr int kRanks = 2;
  CommSet set(kRanks, InitMode::kInitAll);
  ASSERT_TRUE(set.ok()) << set.error();
  std::vector<cudaStream_t> s(kRanks);
  std::vector<tuttiGraph_t> g(kRanks);
  std::vector<std::vector<float>> in(kRanks, std::vector<float>(kCount, 1)), out = in;
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(tuttiStreamCreate(&s[r]), ncclSuccess);
    ASSERT_EQ(tuttiStreamBeginCapture(s[r]), ncclSuccess);
  }
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r)
    ASSERT_EQ(ncclAllReduce(in[r].data(), out[r].data(), kCount, ncclFloat32, ncclSum, set.comm(r), s[r]), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r) ASSERT_EQ(tuttiStreamEndCapture(s[r], &g[r]), ncclSuccess);
  // Only rank 0 runs its graph: it times out waiting for rank 1.
  ASSERT_EQ(tuttiGraphLaunch(g[0], s[0]), ncclSuccess);
  EXPECT_EQ(tuttiStreamSynchronize(s[0]), ncclTimeout);
  EXPECT_NE(std::string(ncclGetLastError(set.comm(0))).find("AllReduce"), std::string::npos)
      << ncclGetLastError(set.comm(0));
  ncclResult_t async = ncclSuccess;
  ASSERT_EQ(ncclCommGetAsyncError(set.comm(0), &async), ncclSuccess);
  EXPECT_EQ(async, ncclTimeout);
  // A second launch is not blocked by the first: it ends at once with the communicator's error.
  ASSERT_EQ(tuttiGraphLaunch(g[0], s[0]), ncclSuccess);
  EXPECT_NE(tuttiStreamSynchronize(s[0]), ncclSuccess);
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(tuttiGraphDestroy(g[r]), ncclSuccess);
    EXPECT_EQ(tuttiStreamDestroy(s[r]), ncclSuccess);
  }
  // The CommSet destroys both communicators (rank 1's never ran anything).
}

TEST(SimStreams, CaptureMisuseIsReported) {
  cudaStream_t s1 = nullptr, s2 = nullptr;
  tuttiEvent_t e = nullptr, outside = nullptr;
  ASSERT_EQ(tuttiStreamCreate(&s1), ncclSuccess);
  ASSERT_EQ(tuttiStreamCreate(&s2), ncclSuccess);
  ASSERT_EQ(tuttiEventCreate(&e), ncclSuccess);
  ASSERT_EQ(tuttiEventCreate(&outside), ncclSuccess);
  ASSERT_EQ(tuttiEventRecord(outside, s2), ncclSuccess);
  // A stream pulled into a capture and never joined back fails the capture.
  ASSERT_EQ(tuttiStreamBeginCapture(s1), ncclSuccess);
  EXPECT_EQ(tuttiStreamBeginCapture(s1), ncclInvalidUsage);
  EXPECT_EQ(tuttiStreamWaitEvent(s1, outside), ncclInvalidUsage);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("outside the capture"), std::string::npos);
  ASSERT_EQ(tuttiEventRecord(e, s1), ncclSuccess);
  ASSERT_EQ(tuttiStreamWaitEvent(s2, e), ncclSuccess);
  int capturing = 0;
  ASSERT_EQ(tuttiStreamIsCapturing(s2, &capturing), ncclSuccess);
  EXPECT_EQ(capturing, 1);
  EXPECT_EQ(tuttiStreamEndCapture(s2, nullptr), ncclInvalidArgument);
  tuttiGraph_t g = nullptr;
  EXPECT_EQ(tuttiStreamEndCapture(s2, &g), ncclInvalidUsage);  // only the stream that began it ends it
  EXPECT_EQ(tuttiStreamEndCapture(s1, &g), ncclInvalidUsage);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("not joined back"), std::string::npos);
  ASSERT_EQ(tuttiStreamIsCapturing(s2, &capturing), ncclSuccess);
  EXPECT_EQ(capturing, 0);
  // Joined back: a valid (empty of work) graph that runs.
  ASSERT_EQ(tuttiStreamBeginCapture(s1), ncclSuccess);
  ASSERT_EQ(tuttiEventRecord(e, s1), ncclSuccess);
  ASSERT_EQ(tuttiStreamWaitEvent(s2, e), ncclSuccess);
  ASSERT_EQ(tuttiEventRecord(e, s2), ncclSuccess);
  ASSERT_EQ(tuttiStreamWaitEvent(s1, e), ncclSuccess);
  ASSERT_EQ(tuttiStreamEndCapture(s1, &g), ncclSuccess);
  ASSERT_EQ(tuttiGraphLaunch(g, s2), ncclSuccess);
  EXPECT_EQ(tuttiStreamSynchronize(s2), ncclSuccess);
  EXPECT_EQ(tuttiGraphDestroy(g), ncclSuccess);
  EXPECT_EQ(tuttiGraphDestroy(g), ncclInvalidArgument);
  // The host backend's operations cannot be captured.
  {
    ScopedEnv device("TUTTI_DEVICE", "host");
    CommSet set(1, InitMode::kInitAll);
    ASSERT_TRUE(set.ok()) << set.error();
    float x = 1, y = 0;
    ASSERT_EQ(tuttiStreamBeginCapture(s1), ncclSuccess);
    EXPECT_EQ(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, set.comm(0), s1), ncclInvalidUsage);
    EXPECT_NE(std::string(ncclGetLastError(set.comm(0))).find("cannot be captured"), std::string::npos);
    ASSERT_EQ(tuttiStreamEndCapture(s1, &g), ncclSuccess);
    EXPECT_EQ(tuttiGraphDestroy(g), ncclSuccess);
  }
  EXPECT_EQ(tuttiEventDestroy(e), ncclSuccess);
  EXPECT_EQ(tuttiEventDestroy(outside), ncclSuccess);
  EXPECT_EQ(tuttiStreamDestroy(s1), ncclSuccess);
  EXPECT_EQ(tuttiStreamDestroy(s2), ncclSuccess);
}

TEST(SimStreams, EventsOrderStreamsAndQueryReportsProgress) {
  cudaStream_t s1 = nullptr, s2 = nullptr;
  tuttiEvent_t e = nullptr;
  ASSERT_EQ(tuttiStreamCreate(&s1), ncclSuccess);
  ASSERT_EQ(tuttiStreamCreate(&s2), ncclSuccess);
  ASSERT_EQ(tuttiEventCreate(&e), ncclSuccess);
  EXPECT_EQ(tuttiEventQuery(e), ncclSuccess);  // never recorded
  std::atomic<bool> gate{false};
  std::vector<float> buf(16, 0);
  GatedFill fill{&gate, &buf, 5.0f};
  Snapshot seen{&buf, {}};
  ASSERT_EQ(tuttiLaunchHostFunc(s1, GatedFill::run, &fill), ncclSuccess);
  ASSERT_EQ(tuttiEventRecord(e, s1), ncclSuccess);
  ASSERT_EQ(tuttiStreamWaitEvent(s2, e), ncclSuccess);
  ASSERT_EQ(tuttiLaunchHostFunc(s2, Snapshot::run, &seen), ncclSuccess);
  EXPECT_EQ(tuttiEventQuery(e), ncclInProgress);
  EXPECT_EQ(tuttiStreamQuery(s2), ncclInProgress);
  gate = true;
  ASSERT_EQ(tuttiEventSynchronize(e), ncclSuccess);
  ASSERT_EQ(tuttiStreamSynchronize(s2), ncclSuccess);
  ASSERT_EQ(seen.copy.size(), buf.size());
  EXPECT_EQ(seen.copy[0], 5.0f);
  EXPECT_EQ(tuttiEventDestroy(e), ncclSuccess);
  EXPECT_EQ(tuttiEventQuery(e), ncclInvalidArgument);
  EXPECT_EQ(tuttiStreamDestroy(s1), ncclSuccess);
  EXPECT_EQ(tuttiStreamDestroy(s2), ncclSuccess);
}

}  // namespace
