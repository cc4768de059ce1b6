// Deterministic reductions (tutti.h): with the switch on, AllReduce, ReduceScatter and Reduce of every
// floating type give, for every element, exactly the bits of tuttiDeterministicReduce over the ranks' inputs
// for that element, whatever the count, the element's position, in-place or not, group fusion, streams,
// ranks as threads or processes, the transports (shm between processes, the socket network between ranks
// that call themselves different hosts) and forced protocols (ctest variants). The reference function is the
// public one, so the test also shows that a user can reproduce a reduction offline.
//
// Inputs are pseudo-random with both signs and a wide exponent range for the type, so sums cancel and round
// and any change of order changes bits (DetTable prints how many elements differ with the switch off).
#include <gtest/gtest.h>
#include <nccl.h>
#include <tutti.h>

#include "../common/forked_ranks.h"
#include "../common/harness.h"
#include "../common/log_file.h"
#include "../common/thread_ranks.h"
#include "device/common/dtypes.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

#define DET_OK(call)                                                                                      \
  do {                                                                                                    \
    ncclResult_t res_ = (call);                                                                           \
    if (res_ != ncclSuccess) return std::string(#call) + " -> " + ncclGetErrorString(res_) + ": " +     \
                                    ncclGetLastError(nullptr);                                            \
  } while (0)

using tutti::itest::wideInput;

// The ops of the suite; kPreMulSum stands for a ncclRedOpCreatePreMulSum op whose scalar differs from rank to
// rank (0.5, 0.75, 1.25: exact in every type).
constexpr int kPreMulSum = -1;
double rankScalar(int r) { return 0.5 + 0.25 * (r % 3) + (r % 3 == 2 ? 0.25 : 0.0); }
const char* opName(int op) {
  switch (op) {
    case ncclSum: return "sum";
    case ncclProd: return "prod";
    case ncclMax: return "max";
    case ncclMin: return "min";
    case ncclAvg: return "avg";
    default: return "premulsum";
  }
}

// Every rank's inputs of one case, and the reference over them.
template <typename T>
struct Inputs {
  int n;
  size_t len;
  std::vector<std::vector<T>> rank;  // rank[r][i]
  Inputs(int n_, size_t len_, int seed) : n(n_), len(len_), rank(n_, std::vector<T>(len_)) {
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < len; ++i) rank[r][i] = wideInput<T>(r, i, seed);
  }
  // The reference of elements [from, from + count).
  std::string reference(size_t from, size_t count, ncclDataType_t type, int op, std::vector<T>* out) const {
    out->assign(count, T{});
    std::vector<const void*> in(n);
    for (int r = 0; r < n; ++r) in[r] = rank[r].data() + from;
    std::vector<T> scalars(n);
    for (int r = 0; r < n; ++r) scalars[r] = tutti::fromCompute<T>(rankScalar(r));
    DET_OK(tuttiDeterministicReduce(in.data(), n, out->data(), count, type, op == kPreMulSum ? ncclSum : ncclRedOp_t(op),
                                    op == kPreMulSum ? scalars.data() : nullptr));
    return {};
  }
};

template <typename T>
std::string firstDiff(const T* got, const T* want, size_t count, const char* what) {
  for (size_t i = 0; i < count; ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) return std::string(what) + ": element " + std::to_string(i) + " differs";
  return {};
}

// One datatype and op on one rank: every call of the suite against the reference (see the file comment).
template <typename T>
std::string checkCase(ncclComm_t comm, int r, int n, ncclDataType_t type, int opIn, size_t count,
                      cudaStream_t stream) {
  ncclRedOp_t op = ncclRedOp_t(opIn);
  if (opIn == kPreMulSum) {
    T scalar = tutti::fromCompute<T>(rankScalar(r));
    DET_OK(ncclRedOpCreatePreMulSum(&op, &scalar, type, ncclScalarHostImmediate, comm));
  }
  const size_t big = 3 * count + 5, rsIn = count * size_t(n);
  const Inputs<T> in(n, std::max(big, rsIn) + 8, int(type) * 16 + opIn + 2);
  const T* mine = in.rank[r].data();
  std::vector<T> want, wantBlock;
  if (std::string e = in.reference(0, count, type, opIn, &want); !e.empty()) return e;
  if (std::string e = in.reference(size_t(r) * count, count, type, opIn, &wantBlock); !e.empty()) return e;
  auto sync = [&]() { return stream ? tuttiStreamSynchronize(stream) : ncclSuccess; };
  std::vector<T> out(count + 1), outBig(big), shifted(count + 1), inPlace(mine, mine + count + 1), block(count + 1),
      reduced(count + 1), g1(count + 1), g2(count + 1);
  std::vector<int32_t> ints(64, r), intsOut(64);
  DET_OK(ncclAllReduce(mine, out.data(), count, type, op, comm, stream));
  DET_OK(ncclAllReduce(mine, outBig.data(), big, type, op, comm, stream));
  const size_t shift = count >= 3 ? 3 : 0;
  DET_OK(ncclAllReduce(mine + shift, shifted.data(), count - shift, type, op, comm, stream));
  DET_OK(ncclAllReduce(inPlace.data(), inPlace.data(), count, type, op, comm, stream));
  // Buffers at odd byte addresses (1 and 3 bytes past an element boundary).
  std::vector<char> oddIn(count * sizeof(T) + 8), oddOut(count * sizeof(T) + 8);
  if (count) std::memcpy(oddIn.data() + 1, mine, count * sizeof(T));
  DET_OK(ncclAllReduce(oddIn.data() + 1, oddOut.data() + 3, count, type, op, comm, stream));
  DET_OK(ncclReduceScatter(mine, block.data(), count, type, op, comm, stream));
  const int root = (n - 1 + int(count)) % n;
  DET_OK(ncclReduce(mine, reduced.data(), count, type, op, root, comm, stream));
  DET_OK(ncclGroupStart());
  DET_OK(ncclAllReduce(mine, g1.data(), count, type, op, comm, stream));
  DET_OK(ncclAllReduce(ints.data(), intsOut.data(), ints.size(), ncclInt32, ncclSum, comm, stream));
  DET_OK(ncclReduceScatter(mine, g2.data(), count, type, op, comm, stream));
  DET_OK(ncclGroupEnd());
  DET_OK(sync());
  std::string e = firstDiff(out.data(), want.data(), count, "AllReduce");
  if (e.empty()) e = firstDiff(outBig.data(), want.data(), count, "AllReduce of 3N+5, first N");
  if (e.empty()) e = firstDiff(shifted.data(), want.data() + shift, count - shift, "AllReduce shifted by 3");
  if (e.empty()) e = firstDiff(inPlace.data(), want.data(), count, "in-place AllReduce");
  if (e.empty()) {
    std::vector<T> odd(count);
    if (count) std::memcpy(odd.data(), oddOut.data() + 3, count * sizeof(T));
    e = firstDiff(odd.data(), want.data(), count, "AllReduce at odd byte addresses");
  }
  if (e.empty()) e = firstDiff(block.data(), wantBlock.data(), count, "ReduceScatter");
  if (e.empty() && r == root) e = firstDiff(reduced.data(), want.data(), count, "Reduce at the root");
  if (e.empty()) e = firstDiff(g1.data(), want.data(), count, "grouped AllReduce");
  if (e.empty()) e = firstDiff(g2.data(), wantBlock.data(), count, "grouped ReduceScatter");
  if (e.empty() && intsOut[0] != n * (n - 1) / 2) e = "grouped int32 AllReduce";
  if (opIn == kPreMulSum) DET_OK(ncclRedOpDestroy(op, comm));
  if (!e.empty())
    return std::string("type ") + std::to_string(type) + " op " + opName(opIn) + " count " + std::to_string(count) +
           ": " + e;
  return {};
}

std::string checkAll(ncclComm_t comm, int r, int n, const std::vector<size_t>& counts, cudaStream_t stream,
                     bool allOps = true) {
  std::vector<int> ops = allOps ? std::vector<int>{ncclSum, ncclProd, ncclAvg, kPreMulSum, ncclMax, ncclMin}
                                : std::vector<int>{ncclSum, ncclAvg};
  for (size_t count : counts) {
    for (int op : ops) {
      std::string e = checkCase<double>(comm, r, n, ncclFloat64, op, count, stream);
      if (e.empty()) e = checkCase<float>(comm, r, n, ncclFloat32, op, count, stream);
      if (e.empty()) e = checkCase<tutti::Half>(comm, r, n, ncclFloat16, op, count, stream);
      if (e.empty()) e = checkCase<tutti::BFloat16>(comm, r, n, ncclBfloat16, op, count, stream);
      if (e.empty()) e = checkCase<tutti::Float8E4M3>(comm, r, n, ncclFloat8e4m3, op, count, stream);
      if (e.empty()) e = checkCase<tutti::Float8E5M2>(comm, r, n, ncclFloat8e5m2, op, count, stream);
      if (!e.empty()) return e;
    }
  }
  return {};
}

// Runs body(comm, rank) on n threads, each with its own communicator, deterministic (det = 1), not (0), or as
// created (-1).
std::vector<std::string> onThreads(int n, const std::function<std::string(ncclComm_t, int)>& body, int det = 1) {
  if (det < 0) return tutti::itest::onThreadRanks(n, body);
  return tutti::itest::onThreadRanks(n, body, [det](ncclComm_t comm, int) -> std::string {
    DET_OK(tuttiCommSetDeterministic(comm, det));
    return {};
  });
}

double errorMean[2];  // DetError: the last mean error measured with the switch off [0] and on [1]

class DetThreads : public ::testing::TestWithParam<int> {};

TEST_P(DetThreads, EveryTypeOpAndCountMatchesTheReference) {
  const int n = GetParam();
  const std::vector<size_t> counts = n <= 8 ? std::vector<size_t>{0, 1, 2, 7, 1001} : std::vector<size_t>{1, 257};
  for (auto& f : onThreads(n, [&](ncclComm_t comm, int r) { return checkAll(comm, r, n, counts, nullptr, n <= 8); }))
    ADD_FAILURE() << f;
}

INSTANTIATE_TEST_SUITE_P(Ranks, DetThreads, ::testing::Values(1, 2, 3, 4, 5, 8, 16));

// Large counts: several FIFO slots and both point-to-point protocols per call.
TEST(DetThreadsLarge, LargeCountsMatchTheReference) {
  constexpr int n = 4;
  for (auto& f : onThreads(n, [&](ncclComm_t comm, int r) {
         std::string e = checkCase<float>(comm, r, n, ncclFloat32, ncclSum, (1u << 20) + 13, nullptr);
         if (e.empty()) e = checkCase<tutti::BFloat16>(comm, r, n, ncclBfloat16, ncclAvg, 300007, nullptr);
         return e;
       }))
    ADD_FAILURE() << f;
}

// The host backend's pipelined AllReduce (TUTTI_DET_PIPELINE_BYTES): a large call runs as segments, each exchanged,
// reduced and gathered in turn. Ranks as threads kept off the one-shot and direct paths, 4 KiB segments; counts of
// several segments and a ragged last one, in and out of place, shifted, grouped, per-rank PreMulSum: the bits against
// the reference, and the log shows calls that ran in segments.
TEST(DetPipeline, SegmentedAllReducesMatchTheReference) {
  const char* dev = std::getenv("TUTTI_DEVICE");
  if (dev && std::string(dev) != "host") GTEST_SKIP() << "the host backend's pipeline";
  tutti::itest::ScopedEnv noOneShot("TUTTI_ONESHOT_MAX_BYTES", "0"), noDirect("TUTTI_DET_DIRECT_MIN_BYTES", "0");
  tutti::itest::ScopedEnv detOneShot("TUTTI_DET_ONESHOT_BYTES", "4096"), pipeline("TUTTI_DET_PIPELINE_BYTES", "4096");
  for (int n : {3, 4}) {
    tutti::itest::LogFile log("COLL");
    auto failed = onThreads(n, [n](ncclComm_t comm, int r) -> std::string {
      for (size_t count : {size_t{3001}, size_t{10007}}) {
        for (int op : {int(ncclSum), kPreMulSum}) {
          std::string e = checkCase<float>(comm, r, n, ncclFloat32, op, count, nullptr);
          if (e.empty()) e = checkCase<tutti::BFloat16>(comm, r, n, ncclBfloat16, op, count, nullptr);
          if (!e.empty()) return e;
        }
      }
      return {};
    });
    for (auto& f : failed) ADD_FAILURE() << n << " ranks: " << f;
    EXPECT_GT(log.count(", segment 3 of "), size_t{0}) << n << " ranks: no call ran in segments";
  }
}

// TUTTI_DET_PIPELINE_BYTES unset: 512 KiB segments within a node on up to 4 ranks, the call whole on more and over
// the network; set, segments over the network too. Ranks as threads over shm and net-socket, kept off the one-shot
// and tree paths, an AllReduce of 300007 floats (1.2 MB, three segments of 512 KiB): the bits against the reference,
// the INIT log names each rank's choice and the COLL log shows segments only where they were asked for.
TEST(DetPipeline, WholeOverTheNetworkUnlessSet) {
  const char* dev = std::getenv("TUTTI_DEVICE");
  if (dev && std::string(dev) != "host") GTEST_SKIP() << "the host backend's pipeline";
  if (std::getenv("TUTTI_DET_PIPELINE_BYTES")) GTEST_SKIP() << "TUTTI_DET_PIPELINE_BYTES is set";
  {
    constexpr int six = 6;
    tutti::itest::ScopedEnv noOneShot("TUTTI_ONESHOT_MAX_BYTES", "0"), detOneShot("TUTTI_DET_ONESHOT_BYTES", "0");
    tutti::itest::ScopedEnv noDirect("TUTTI_DET_DIRECT_MIN_BYTES", "0");
    tutti::itest::LogFile log("INIT,COLL");
    for (auto& f : onThreads(six, [=](ncclComm_t comm, int r) -> std::string {
           return checkCase<float>(comm, r, six, ncclFloat32, ncclSum, 300007, nullptr);
         }))
      ADD_FAILURE() << "shm, 6 ranks: " << f;
    EXPECT_EQ(log.count("an AllReduce whole"), size_t(six)) << "shm, 6 ranks";
    EXPECT_GT(log.count("deterministic exchange"), size_t{0}) << "shm, 6 ranks: no call took the exchange";
    EXPECT_EQ(log.count(", segment 2 of "), size_t{0}) << "shm, 6 ranks: a call ran in segments";
  }
  constexpr int n = 4;
  tutti::itest::ScopedEnv noOneShot("TUTTI_ONESHOT_MAX_BYTES", "0"), detOneShot("TUTTI_DET_ONESHOT_BYTES", "0");
  tutti::itest::ScopedEnv noTree("TUTTI_DET_TREE_REDUCESCATTER_MAX_BYTES", "0"),
      noDirect("TUTTI_DET_DIRECT_MIN_BYTES", "0");
  // Over the network the exchange's steps grow with the slices (TUTTI_DET_STEP_BYTES unset): from 64 KiB, doubled
  // while a peer's slice takes at least 4 of them (a ReduceScatter's: 1), up to a slot (512 KiB), so the
  // ReduceScatter's 1.2 MB slices go in 512 KiB steps, the 3N+5 AllReduce's 900 KB slices in 128 KiB steps; within a
  // node, or with the variable set, every step is 64 KiB.
  auto run = [&](const char* what, const std::string& initWant, bool segmented, bool grown) {
    tutti::itest::LogFile log("INIT,COLL");
    for (auto& f : onThreads(n, [=](ncclComm_t comm, int r) -> std::string {
           return checkCase<float>(comm, r, n, ncclFloat32, ncclSum, 300007, nullptr);
         }))
      ADD_FAILURE() << what << ": " << f;
    const size_t segments = log.count(", segment 2 of ");
    EXPECT_EQ(log.count(initWant), size_t(n)) << what;
    if (segmented) EXPECT_GT(segments, size_t{0}) << what << ": no call ran in segments";
    else EXPECT_EQ(segments, size_t{0}) << what << ": a call ran in segments";
    const size_t grownSteps = log.count("steps of 524288 bytes") + log.count("steps of 262144 bytes") +
                              log.count("steps of 131072 bytes");
    EXPECT_GT(log.count("steps of 65536 bytes"), size_t{0}) << what;
    if (grown) {
      EXPECT_GE(log.count("steps of 524288 bytes"), size_t(n)) << what << ": the ReduceScatter's steps did not grow";
      if (!segmented) {  // (512 KiB segments: 128 KiB slices, 64 KiB steps)
        EXPECT_GE(log.count("steps of 131072 bytes"), size_t(n)) << what << ": the large AllReduce's steps did not grow";
      }
    } else {
      EXPECT_EQ(grownSteps, size_t{0}) << what << ": steps grew";
    }
  };
  run("shm, unset", "AllReduce in segments of 524288 bytes", true, false);
  tutti::itest::ScopedEnv p2p("NCCL_P2P_DISABLE", "1"), shm("NCCL_SHM_DISABLE", "1"), lo("NCCL_SOCKET_IFNAME", "lo");
  run("sockets, unset", "an AllReduce whole", false, true);
  {
    tutti::itest::ScopedEnv step("TUTTI_DET_STEP_BYTES", "65536");
    run("sockets, 64 KiB steps", "steps of at most 65536 bytes", false, false);
  }
  tutti::itest::ScopedEnv pipeline("TUTTI_DET_PIPELINE_BYTES", "524288");
  run("sockets, 512 KiB", "AllReduce in segments of 524288 bytes", true, true);
}

// Over the network an AllReduce of up to a Simple slot (512 KiB) goes to rank 0 in one hop, is folded there in the
// fixed order and comes back down the binomial tree (TUTTI_DET_TREE_ALLREDUCE_MAX_BYTES unset): ranks as threads over
// net-socket, 4 and 6 of them, calls of 400 KB that cross the FIFOs in several steps each way, fp32 Sum and bf16 Avg,
// every variant of checkCase: the bits against the reference, and the COLL log shows the calls on the tree.
TEST(DetNetworkTree, LargeAllReducesFoldAtRankZero) {
  const char* dev = std::getenv("TUTTI_DEVICE");
  if (dev && std::string(dev) != "host") GTEST_SKIP() << "the host backend's tree";
  if (std::getenv("TUTTI_DET_TREE_ALLREDUCE_MAX_BYTES") || std::getenv("NCCL_ALGO") || std::getenv("NCCL_PROTO"))
    GTEST_SKIP() << "the tree's bounds or the algorithm are set";
  tutti::itest::ScopedEnv p2p("NCCL_P2P_DISABLE", "1"), shm("NCCL_SHM_DISABLE", "1"), lo("NCCL_SOCKET_IFNAME", "lo");
  for (int n : {4, 6}) {
    tutti::itest::LogFile log("COLL");
    auto failed = onThreads(n, [n](ncclComm_t comm, int r) -> std::string {
      std::string e = checkCase<float>(comm, r, n, ncclFloat32, ncclSum, 100003, nullptr);
      if (e.empty()) e = checkCase<tutti::BFloat16>(comm, r, n, ncclBfloat16, ncclAvg, 200003, nullptr);
      return e;
    });
    for (auto& f : failed) ADD_FAILURE() << n << " ranks: " << f;
    // Each rank's AllReduce of the count itself, in place and at odd addresses, at least, on the tree.
    EXPECT_GE(log.countAll({"AllReduce: opCount", "count 100003 bytes 400012 datatype ncclFloat32", "algo Tree"}),
              size_t(3 * n)) << n << " ranks";
    EXPECT_GE(log.countAll({"AllReduce: opCount", "count 200003 bytes 400006 datatype ncclBfloat16", "algo Tree"}),
              size_t(3 * n)) << n << " ranks";
  }
}

// An AllReduce of a multiple of 8 bytes a rank within the scatter-gather bounds (TUTTI_DET_SCATTER_GATHER_MIN_BYTES,
// _MAX_BYTES) runs as a one-shot ReduceScatter, each rank folding its block of every row in the fixed order, then a
// one-shot AllGather of the blocks: ranks as threads (3, 4 and 8, the direct path off), as processes over shm (4) and
// over net-socket (4), every type and op, 6720 elements (a multiple of 8n elements for every n here, so blocks of every datatype), in place, out
// of place and at odd byte addresses: the bits against the reference, and the COLL log shows the calls on that path.
TEST(DetScatterGather, EveryTypeAndOpMatchesTheReference) {
  const char* dev = std::getenv("TUTTI_DEVICE");
  if (dev && std::string(dev) != "host") GTEST_SKIP() << "the host backend's one-shot plan";
  if (std::getenv("NCCL_ALGO") || std::getenv("NCCL_PROTO") || std::getenv("TUTTI_ONESHOT_MAX_BYTES") ||
      std::getenv("TUTTI_DET_ONESHOT_BYTES"))
    GTEST_SKIP() << "the algorithm or the one-shot bounds are set";
  tutti::itest::ScopedEnv min("TUTTI_DET_SCATTER_GATHER_MIN_BYTES", "1"), max("TUTTI_DET_SCATTER_GATHER_MAX_BYTES", "-1");
  tutti::itest::ScopedEnv noDirect("TUTTI_DET_DIRECT_MIN_BYTES", "0"), noDoubling("TUTTI_DET_DOUBLING_MAX_BYTES", "0");
  tutti::itest::ScopedEnv noOneShotFirst("TUTTI_ONESHOT_FIRST_MAX_BYTES", "0");  // 4 ranks: the one-shot up to 32 KiB
  constexpr size_t count = 6720;
  auto check = [](const char* where, int n) {
    tutti::itest::LogFile log("COLL");
    for (auto& f : onThreads(n, [n](ncclComm_t comm, int r) { return checkAll(comm, r, n, {count}, nullptr); }))
      ADD_FAILURE() << where << ", " << n << " ranks: " << f;
    // Per type and op but Min and Max (not folded in the fixed order): the out-of-place, in-place and odd-address
    // calls at least, on every rank.
    EXPECT_GE(log.countAll({"AllReduce: opCount", "count 6720 ", "algo SCATTERGATHER", "(deterministic)"}),
              size_t(3 * 6 * 4 * n)) << where << ", " << n << " ranks";
  };
  for (int n : {3, 4, 8}) check("threads", n);
  // 4 processes over shm (the bounds above reach them through the environment), Sum and Avg: the bits.
  auto body = [](ncclComm_t comm, int r) -> std::string {
    DET_OK(tuttiCommSetDeterministic(comm, 1));
    return checkAll(comm, r, 4, {count}, nullptr, false);
  };
  for (auto& f : tutti::itest::onForkedRanks(4, body)) ADD_FAILURE() << "processes, 4 ranks: " << f;
  tutti::itest::ScopedEnv p2p("NCCL_P2P_DISABLE", "1"), shm("NCCL_SHM_DISABLE", "1"), lo("NCCL_SOCKET_IFNAME", "lo");
  check("sockets", 4);
}

// Past a Simple slot a rank (TUTTI_DET_SCATTER_GATHER_ROUNDS_MAX_BYTES) the scatter-gather runs in rounds of a slot a
// rank: 4 KiB slots (NCCL_BUFFSIZE=32768) and 47040 elements, so every datatype takes two to twelve rounds, the last
// one shorter; ranks as threads (3 and 8, every op) and over net-socket (4, Sum and Avg), in place, out of place and
// at odd byte addresses: the bits against the reference, and the COLL log shows the calls on that path.
TEST(DetScatterGather, RoundsOfASlotMatchTheReference) {
  const char* dev = std::getenv("TUTTI_DEVICE");
  if (dev && std::string(dev) != "host") GTEST_SKIP() << "the host backend's one-shot plan";
  if (std::getenv("NCCL_ALGO") || std::getenv("NCCL_PROTO") || std::getenv("TUTTI_ONESHOT_MAX_BYTES") ||
      std::getenv("TUTTI_DET_ONESHOT_BYTES") || std::getenv("NCCL_BUFFSIZE"))
    GTEST_SKIP() << "the algorithm, the one-shot bounds or the buffer size are set";
  tutti::itest::ScopedEnv min("TUTTI_DET_SCATTER_GATHER_MIN_BYTES", "1"), max("TUTTI_DET_SCATTER_GATHER_MAX_BYTES", "-1");
  tutti::itest::ScopedEnv rounds("TUTTI_DET_SCATTER_GATHER_ROUNDS_MAX_BYTES", "1073741824");
  tutti::itest::ScopedEnv buff("NCCL_BUFFSIZE", "32768");
  tutti::itest::ScopedEnv noDirect("TUTTI_DET_DIRECT_MIN_BYTES", "0"), noDoubling("TUTTI_DET_DOUBLING_MAX_BYTES", "0");
  tutti::itest::ScopedEnv noOneShotFirst("TUTTI_ONESHOT_FIRST_MAX_BYTES", "0");
  constexpr size_t count = 47040;  // 2^6 * 3 * 5 * 7^2: a multiple of 8n elements for n = 3, 4 and 8
  auto check = [](const char* where, int n, bool allOps) {
    tutti::itest::LogFile log("COLL");
    for (auto& f : onThreads(n, [n, allOps](ncclComm_t comm, int r) { return checkAll(comm, r, n, {count}, nullptr, allOps); }))
      ADD_FAILURE() << where << ", " << n << " ranks: " << f;
    // Per type and op folded in the fixed order (Min and Max are not): the out-of-place, in-place and odd-address
    // calls at least, on every rank.
    EXPECT_GE(log.countAll({"AllReduce: opCount", "count 47040 ", "algo SCATTERGATHER", "(deterministic)"}),
              size_t(3 * 6 * (allOps ? 4 : 2) * n)) << where << ", " << n << " ranks";
  };
  for (int n : {3, 8}) check("threads", n, true);
  tutti::itest::ScopedEnv p2p("NCCL_P2P_DISABLE", "1"), shm("NCCL_SHM_DISABLE", "1"), lo("NCCL_SOCKET_IFNAME", "lo");
  check("sockets", 4, false);
}

// Over the network from 6 ranks (TUTTI_FIXED_ORDER_NET_MIN_RANKS unset) an AllReduce or ReduceScatter of a floating
// type takes the deterministic paths on any communicator, where they are the fastest: 6 ranks as threads over
// net-socket, the switch off, fp32 and bf16 Sum at sizes of the one-hop tree, the scatter-gather and the exchange:
// the bits are the reference's, and the COLL log marks the calls "(fixed order)"; an int32 AllReduce and a Reduce
// keep the usual paths. With TUTTI_FIXED_ORDER_NET_MIN_RANKS=0, or on 4 ranks, no call is marked.
TEST(DetFixedOrderNet, FloatReductionsTakeTheFixedOrderFromSixRanks) {
  const char* dev = std::getenv("TUTTI_DEVICE");
  if (dev && std::string(dev) != "host") GTEST_SKIP() << "the host backend's paths";
  if (std::getenv("NCCL_ALGO") || std::getenv("NCCL_PROTO") || std::getenv("TUTTI_FIXED_ORDER_NET_MIN_RANKS"))
    GTEST_SKIP() << "the algorithm or the threshold is set";
  tutti::itest::ScopedEnv p2p("NCCL_P2P_DISABLE", "1"), shm("NCCL_SHM_DISABLE", "1"), lo("NCCL_SOCKET_IFNAME", "lo");
  // 6 * 2^17 floats: 3 MiB, a block of 512 KiB a rank (scatter-gather); 100003 (the tree); 1000003 (the exchange).
  const std::vector<size_t> counts{100003, 786432, 1000003};
  auto body = [&counts](ncclComm_t comm, int r, int n) -> std::string {
    for (size_t count : counts) {
      const Inputs<float> in(n, count * n, 7);
      std::vector<float> want, wantBlock, out(count), block(count);
      in.reference(0, count, ncclFloat32, ncclSum, &want);
      in.reference(size_t(r) * count, count, ncclFloat32, ncclSum, &wantBlock);
      DET_OK(ncclAllReduce(in.rank[r].data(), out.data(), count, ncclFloat32, ncclSum, comm, nullptr));
      DET_OK(ncclReduceScatter(in.rank[r].data(), block.data(), count, ncclFloat32, ncclSum, comm, nullptr));
      if (std::string e = firstDiff(out.data(), want.data(), count, "AllReduce"); !e.empty())
        return "count " + std::to_string(count) + ": " + e;
      if (std::string e = firstDiff(block.data(), wantBlock.data(), count, "ReduceScatter"); !e.empty())
        return "count " + std::to_string(count) + ": " + e;
    }
    const Inputs<tutti::BFloat16> bf(n, 100003, 9);
    std::vector<tutti::BFloat16> want, out(100003);
    bf.reference(0, 100003, ncclBfloat16, ncclSum, &want);
    DET_OK(ncclAllReduce(bf.rank[r].data(), out.data(), 100003, ncclBfloat16, ncclSum, comm, nullptr));
    if (std::string e = firstDiff(out.data(), want.data(), 100003, "bf16 AllReduce"); !e.empty()) return e;
    std::vector<int32_t> ints(4096, r + 1), intsOut(4096);
    DET_OK(ncclAllReduce(ints.data(), intsOut.data(), ints.size(), ncclInt32, ncclSum, comm, nullptr));
    DET_OK(ncclReduce(ints.data(), intsOut.data(), ints.size(), ncclInt32, ncclSum, 0, comm, nullptr));
    if (intsOut[4095] != n * (n + 1) / 2) return "int32 AllReduce or Reduce";  // the Reduce rewrote rank 0's
    std::vector<float> f(4096, 1.0f), fOut(4096);
    DET_OK(ncclReduce(f.data(), fOut.data(), f.size(), ncclFloat32, ncclSum, 0, comm, nullptr));
    if (r == 0 && fOut[17] != float(n)) return "Reduce";
    return {};
  };
  {
    constexpr int n = 6;
    tutti::itest::LogFile log("COLL");
    for (auto& f : onThreads(n, [&](ncclComm_t comm, int r) { return body(comm, r, n); }, /*det=*/0))
      ADD_FAILURE() << n << " ranks: " << f;
    // Every float AllReduce and ReduceScatter of every rank (4 counts, 7 calls), none of the others.
    EXPECT_EQ(log.count("(fixed order)"), size_t(7 * n));
    EXPECT_EQ(log.count("(deterministic)"), size_t(0));
    EXPECT_EQ(log.countAll({"datatype ncclInt32", "(fixed order)"}), size_t(0));
    EXPECT_EQ(log.countAll({"Reduce: opCount", "count 4096 ", "(fixed order)"}), size_t(0));
    EXPECT_GE(log.countAll({"AllReduce: opCount", "count 786432 ", "algo SCATTERGATHER", "(fixed order)"}), size_t(n));
  }
  auto unmarked = [&](int n, const char* what) {
    tutti::itest::LogFile log("COLL");
    for (auto& f : onThreads(n, [&](ncclComm_t comm, int r) -> std::string {
           std::vector<float> in(100003, float(r)), out(100003);
           DET_OK(ncclAllReduce(in.data(), out.data(), in.size(), ncclFloat32, ncclSum, comm, nullptr));
           return out[5] == float(n * (n - 1) / 2) ? std::string() : std::string("AllReduce");
         }, /*det=*/0))
      ADD_FAILURE() << what << ": " << f;
    EXPECT_EQ(log.count("(fixed order)"), size_t(0)) << what;
    EXPECT_EQ(log.count("AllReduce: opCount"), size_t(n)) << what;
  };
  unmarked(4, "4 ranks");
  tutti::itest::ScopedEnv off("TUTTI_FIXED_ORDER_NET_MIN_RANKS", "0");
  unmarked(6, "6 ranks, TUTTI_FIXED_ORDER_NET_MIN_RANKS=0");
}

// On 8 ranks over the network a float AllReduce past the deterministic tree (512 KiB) that the usual paths run by
// halving then doubling (up to 1 MiB) keeps that path: 1 MiB unmarked, by DOUBLING; 512 KiB (the tree) and 2 MiB
// (past the halving) in the fixed order; with TUTTI_FIXED_ORDER_NET_HALVING_DOUBLING=0, 1 MiB in the fixed order too.
// The sums are exact either way (small integers in fp32).
TEST(DetFixedOrderNet, HalvingDoublingKeptPastTheTreeOnEightRanks) {
  const char* dev = std::getenv("TUTTI_DEVICE");
  if (dev && std::string(dev) != "host") GTEST_SKIP() << "the host backend's paths";
  if (std::getenv("NCCL_ALGO") || std::getenv("NCCL_PROTO") || std::getenv("TUTTI_FIXED_ORDER_NET_MIN_RANKS") ||
      std::getenv("TUTTI_FIXED_ORDER_NET_HALVING_DOUBLING") || std::getenv("TUTTI_HALVING_DOUBLING_MAX_BYTES") ||
      std::getenv("TUTTI_DET_TREE_ALLREDUCE_MAX_BYTES"))
    GTEST_SKIP() << "the algorithm or a threshold is set";
  tutti::itest::ScopedEnv p2p("NCCL_P2P_DISABLE", "1"), shm("NCCL_SHM_DISABLE", "1"), lo("NCCL_SOCKET_IFNAME", "lo");
  constexpr int n = 8;
  const std::vector<size_t> counts{size_t{1} << 17, size_t{1} << 18, size_t{1} << 19};  // 512 KiB, 1 MiB, 2 MiB
  auto run = [&](const char* what) {
    for (auto& f : onThreads(n, [&](ncclComm_t comm, int r) -> std::string {
           for (size_t count : counts) {
             std::vector<float> in(count), out(count);
             for (size_t i = 0; i < count; ++i) in[i] = float((i * 7 + size_t(r) * 13) % 64);
             DET_OK(ncclAllReduce(in.data(), out.data(), count, ncclFloat32, ncclSum, comm, nullptr));
             for (size_t i = 0; i < count; ++i) {
               float want = 0;
               for (int p = 0; p < n; ++p) want += float((i * 7 + size_t(p) * 13) % 64);
               if (out[i] != want) return "count " + std::to_string(count) + " element " + std::to_string(i);
             }
           }
           return {};
         }, /*det=*/0))
      ADD_FAILURE() << what << ": " << f;
  };
  {
    tutti::itest::LogFile log("COLL");
    run("default");
    EXPECT_EQ(log.countAll({"AllReduce: opCount", "count 131072 ", "(fixed order)"}), size_t(n));
    EXPECT_EQ(log.countAll({"AllReduce: opCount", "count 262144 ", "(fixed order)"}), size_t(0));
    EXPECT_EQ(log.countAll({"AllReduce: opCount", "count 262144 ", "algo DOUBLING"}), size_t(n));
    EXPECT_EQ(log.countAll({"AllReduce: opCount", "count 524288 ", "(fixed order)"}), size_t(n));
  }
  tutti::itest::ScopedEnv off("TUTTI_FIXED_ORDER_NET_HALVING_DOUBLING", "0");
  tutti::itest::LogFile log("COLL");
  run("TUTTI_FIXED_ORDER_NET_HALVING_DOUBLING=0");
  EXPECT_EQ(log.countAll({"AllReduce: opCount", "count 262144 ", "(fixed order)"}), size_t(n));
}

// The fused exchange's steps shrink with the rank count where no rank talks over the network (TUTTI_DET_STEP_BYTES
// unset): 64 KiB on 4 and 8 ranks, 32 KiB on 10. Ranks as threads kept off the one-shot and direct paths, whole calls (no
// pipeline segments), counts of several steps per peer and a ragged last one: the bits against the reference, and the
// INIT log names each rank's step.
TEST(DetExchangeSteps, StepsFollowTheRankCount) {
  const char* dev = std::getenv("TUTTI_DEVICE");
  if (dev && std::string(dev) != "host") GTEST_SKIP() << "the host backend's exchange";
  if (std::getenv("TUTTI_DET_STEP_BYTES")) GTEST_SKIP() << "TUTTI_DET_STEP_BYTES is set";
  tutti::itest::ScopedEnv noOneShot("TUTTI_ONESHOT_MAX_BYTES", "0"), noDirect("TUTTI_DET_DIRECT_MIN_BYTES", "0");
  tutti::itest::ScopedEnv detOneShot("TUTTI_DET_ONESHOT_BYTES", "0"), whole("TUTTI_DET_PIPELINE_BYTES", "0");
  for (int n : {4, 8, 10}) {
    tutti::itest::LogFile log("INIT");
    auto failed = onThreads(n, [n](ncclComm_t comm, int r) -> std::string {
      // 300007 floats: a slice of 75001 (4 ranks, 5 steps of 64 KiB), 37500 (8 ranks, 3 steps of 64 KiB) or 30000
      // (10 ranks, 4 steps of 32 KiB) per peer.
      std::string e = checkCase<float>(comm, r, n, ncclFloat32, ncclSum, 300007, nullptr);
      if (e.empty()) e = checkCase<tutti::BFloat16>(comm, r, n, ncclBfloat16, ncclAvg, 300007, nullptr);
      return e;
    });
    for (auto& f : failed) ADD_FAILURE() << n << " ranks: " << f;
    const std::string want = n <= 9 ? "65536" : "32768";
    EXPECT_EQ(log.count("deterministic exchange steps of at most " + want + " bytes"), size_t(n)) << n << " ranks";
  }
}

// Host streams: every call returns at once and its phases run in stream order.
TEST(DetStreams, CallsOnStreams) {
  constexpr int n = 3;
  for (auto& f : onThreads(n, [&](ncclComm_t comm, int r) -> std::string {
         cudaStream_t s = nullptr;
         DET_OK(tuttiStreamCreate(&s));
         std::string e = checkAll(comm, r, n, {1, 1001}, s, false);
         DET_OK(tuttiStreamDestroy(s));
         return e;
       }))
    ADD_FAILURE() << f;
}

// One thread drives every rank in one group: the deterministic calls of all communicators run together.
TEST(DetGroup, OneThreadDrivesEveryRank) {
  constexpr int n = 4;
  constexpr size_t count = 4099;
  std::vector<ncclComm_t> comms(n);
  ASSERT_EQ(ncclCommInitAll(comms.data(), n, nullptr), ncclSuccess);
  for (ncclComm_t c : comms) ASSERT_EQ(tuttiCommSetDeterministic(c, 1), ncclSuccess);
  const Inputs<float> in(n, count, 5);
  std::vector<float> want;
  ASSERT_EQ(in.reference(0, count, ncclFloat32, ncclSum, &want), "");
  std::vector<std::vector<float>> a(n, std::vector<float>(count)), b(n, std::vector<float>(count));
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(ncclAllReduce(in.rank[r].data(), a[r].data(), count, ncclFloat32, ncclSum, comms[r], nullptr), ncclSuccess);
    ASSERT_EQ(ncclAllReduce(in.rank[r].data(), b[r].data(), count, ncclFloat32, ncclSum, comms[r], nullptr), ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(firstDiff(a[r].data(), want.data(), count, "first AllReduce"), "") << "rank " << r;
    EXPECT_EQ(firstDiff(b[r].data(), want.data(), count, "second AllReduce"), "") << "rank " << r;
  }
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

// The switch between calls that repeat one another: a lone call on the one-shot path reuses the path of the call
// before it only where the setting is the same too, so every call made with it on gives the reference's bits.
TEST(DetSwitch, RepeatedCallsFollowTheSwitch) {
  constexpr int n = 4;
  for (size_t count : {size_t{7}, size_t{300}}) {
    const Inputs<float> in(n, count, 11);
    std::vector<float> want;
    ASSERT_EQ(in.reference(0, count, ncclFloat32, ncclSum, &want), "");
    for (auto& f : onThreads(n, [&](ncclComm_t comm, int r) -> std::string {
           std::vector<float> out(count);
           for (int round = 0; round < 4; ++round) {
             for (int det : {0, 0, 1, 1}) {  // each call repeats the one before it
               DET_OK(tuttiCommSetDeterministic(comm, det));
               DET_OK(ncclAllReduce(in.rank[r].data(), out.data(), count, ncclFloat32, ncclSum, comm, nullptr));
               if (!det) continue;
               std::string e = firstDiff(out.data(), want.data(), count, "AllReduce after the switch");
               if (!e.empty()) return "count " + std::to_string(count) + ", round " + std::to_string(round) + ": " + e;
             }
           }
           return {};
         }, /*det=*/-1))
      ADD_FAILURE() << f;
  }
}

// Ranks as processes: shm between them, and, with a host name of their own each, the socket network.
TEST(DetProcesses, SharedMemory) {
  constexpr int n = 3;
  auto body = [](ncclComm_t comm, int r) -> std::string {
    DET_OK(tuttiCommSetDeterministic(comm, 1));
    return checkAll(comm, r, n, {1, 1001, 70001}, nullptr, false);
  };
  for (auto& f : tutti::itest::onForkedRanks(n, body)) ADD_FAILURE() << f;
}

TEST(DetProcesses, SocketNetworkBetweenHosts) {
  constexpr int n = 3;
  auto body = [](ncclComm_t comm, int r) -> std::string {
    DET_OK(tuttiCommSetDeterministic(comm, 1));
    return checkAll(comm, r, n, {1, 1001, 70001}, nullptr, false);
  };
  auto ownHost = [](int r) { setenv("TUTTI_HOSTNAME", ("det-host-" + std::to_string(r)).c_str(), 1); };
  for (auto& f : tutti::itest::onForkedRanks(n, body, ownHost)) ADD_FAILURE() << f;
}

// For onForkedRanks: each forked rank r logs its COLL lines to base + r.
std::function<void(int)> collLogPerRank(const std::string& base) {
  return [base](int r) {
    setenv("NCCL_DEBUG", "INFO", 1);
    setenv("NCCL_DEBUG_SUBSYS", "COLL", 1);
    setenv("NCCL_DEBUG_FILE", (base + std::to_string(r)).c_str(), 1);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    ncclResetDebugInit();  // the parent may have read the settings before the fork
#pragma GCC diagnostic pop
  };
}

// Two processes over shm, Sum and Avg (detPairPath): from 256 KiB a deterministic AllReduce takes the default's
// ring, not the direct path, and gives the reference's bits; where TUTTI_DET_DIRECT_MIN_BYTES is set (the `direct`
// variant), the direct path. Each rank logs its calls to a file of its own.
TEST(DetProcesses, TwoRanksTakeTheDefaultPaths) {
  const char* dev = std::getenv("TUTTI_DEVICE");
  if (dev && std::string(dev) != "host") GTEST_SKIP() << "the host backend's two-rank path";
  constexpr int n = 2;
  const std::string base = "/tmp/tutti-det-pair-" + std::to_string(getpid()) + ".";
  auto body = [](ncclComm_t comm, int r) -> std::string {
    DET_OK(tuttiCommSetDeterministic(comm, 1));
    return checkAll(comm, r, n, {1001, 70001}, nullptr, false);
  };
  const auto logTo = collLogPerRank(base);
  const char* directMin = std::getenv("TUTTI_DET_DIRECT_MIN_BYTES");
  const bool directSet = directMin && std::strtoll(directMin, nullptr, 10) > 0;
  for (auto& f : tutti::itest::onForkedRanks(n, body, logTo)) ADD_FAILURE() << f;
  for (int r = 0; r < n; ++r) {
    const std::string path = base + std::to_string(r);
    std::ifstream in(path);
    std::string line;
    size_t ring = 0, direct = 0;
    while (std::getline(in, line)) {
      if (line.find("(deterministic)") == std::string::npos || line.find("AllReduce:") == std::string::npos) continue;
      ring += line.find("algo Ring") != std::string::npos;
      direct += line.find("algo DIRECT") != std::string::npos;
    }
    if (directSet) {
      EXPECT_GT(direct, size_t{0}) << "rank " << r << ": TUTTI_DET_DIRECT_MIN_BYTES set, no direct call in " << path;
    } else {
      EXPECT_GT(ring, size_t{0}) << "rank " << r << ": no deterministic AllReduce on the ring in " << path;
      EXPECT_EQ(direct, size_t{0}) << "rank " << r << ": a deterministic AllReduce of 2 processes took the direct path";
    }
    std::remove(path.c_str());
  }
}

// Within a node, 4 to 8 ranks each in its own process (TUTTI_FIXED_ORDER_SHM_MIN_BYTES unset: 128 KiB), the switch
// off: a float AllReduce or ReduceScatter of 128 KiB of input or more takes the fixed-order paths (the COLL log marks
// it "(fixed order)") and gives the reference's bits; a smaller one, an int32 one and a Reduce do not. Ranks as
// threads read one another's inputs in place on either path: none of their calls is marked. With the threshold 0 the
// processes' calls are not marked either. Each process logs its calls to a file of its own.
TEST(DetFixedOrderShm, ProcessesTakeTheFixedOrderFrom128KiB) {
  const char* dev = std::getenv("TUTTI_DEVICE");
  if (dev && std::string(dev) != "host") GTEST_SKIP() << "the host backend's paths";
  for (const char* v : {"NCCL_ALGO", "NCCL_PROTO", "TUTTI_FIXED_ORDER_SHM_MIN_BYTES", "NCCL_SHM_DISABLE",
                        "TUTTI_DETERMINISTIC"})
    if (std::getenv(v)) GTEST_SKIP() << v << " is set";
  // On n ranks: AllReduce of 32768 floats (128 KiB: marked), 100003 (marked) and 32767 (not); ReduceScatter of
  // 32768 / n floats a rank (128 KiB of input: marked) and one fewer (not). Where the calls are marked (`fixed`), the
  // marked ones' bits against the reference.
  auto body = [](ncclComm_t comm, int r, int n, bool fixed) -> std::string {
    const size_t rsCount = 32768 / size_t(n);
    for (size_t count : {size_t{32768}, size_t{100003}, size_t{32767}}) {
      const Inputs<float> in(n, count, 11);
      std::vector<float> want, out(count);
      in.reference(0, count, ncclFloat32, ncclSum, &want);
      DET_OK(ncclAllReduce(in.rank[r].data(), out.data(), count, ncclFloat32, ncclSum, comm, nullptr));
      if (!fixed || count == 32767) continue;
      if (std::string e = firstDiff(out.data(), want.data(), count, "AllReduce"); !e.empty())
        return "count " + std::to_string(count) + ": " + e;
    }
    for (size_t count : {rsCount, rsCount - 1}) {
      const Inputs<float> in(n, count * n, 13);
      std::vector<float> want, block(count);
      in.reference(size_t(r) * count, count, ncclFloat32, ncclSum, &want);
      DET_OK(ncclReduceScatter(in.rank[r].data(), block.data(), count, ncclFloat32, ncclSum, comm, nullptr));
      if (!fixed || count != rsCount) continue;
      if (std::string e = firstDiff(block.data(), want.data(), count, "ReduceScatter"); !e.empty())
        return "count " + std::to_string(count) + ": " + e;
    }
    std::vector<int32_t> ints(65536, r + 1), intsOut(65536);
    DET_OK(ncclAllReduce(ints.data(), intsOut.data(), ints.size(), ncclInt32, ncclSum, comm, nullptr));
    if (intsOut[65535] != n * (n + 1) / 2) return "int32 AllReduce";
    std::vector<float> f(65536, 1.0f), fOut(65536);
    DET_OK(ncclReduce(f.data(), fOut.data(), f.size(), ncclFloat32, ncclSum, 0, comm, nullptr));
    if (r == 0 && fOut[17] != float(n)) return "Reduce";
    return {};
  };
  const std::string base = "/tmp/tutti-det-fixed-shm-" + std::to_string(getpid()) + ".";
  const auto logTo = collLogPerRank(base);
  // Lines of rank r's log that contain every one of `parts`.
  auto countIn = [&base](int r, std::initializer_list<std::string> parts) {
    std::ifstream in(base + std::to_string(r));
    std::string line;
    size_t k = 0;
    while (std::getline(in, line))
      k += std::all_of(parts.begin(), parts.end(), [&](const std::string& p) { return line.find(p) != std::string::npos; });
    return k;
  };
  for (int n : {4, 8}) {
    for (auto& f : tutti::itest::onForkedRanks(n, [&](ncclComm_t comm, int r) { return body(comm, r, n, true); }, logTo))
      ADD_FAILURE() << n << " processes: " << f;
    const std::string rsMarked = "count " + std::to_string(32768 / n) + " ";
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(countIn(r, {"AllReduce: opCount"}), size_t(4)) << n << " processes, rank " << r;
      EXPECT_EQ(countIn(r, {"(fixed order)"}), size_t(3)) << n << " processes, rank " << r;
      EXPECT_EQ(countIn(r, {"AllReduce: opCount", "count 32768 ", "(fixed order)"}), size_t(1)) << n << ", " << r;
      EXPECT_EQ(countIn(r, {"AllReduce: opCount", "count 100003 ", "(fixed order)"}), size_t(1)) << n << ", " << r;
      EXPECT_EQ(countIn(r, {"ReduceScatter: opCount", rsMarked, "(fixed order)"}), size_t(1)) << n << ", " << r;
      EXPECT_EQ(countIn(r, {"(deterministic)"}), size_t(0)) << n << " processes, rank " << r;
      std::remove((base + std::to_string(r)).c_str());
    }
  }
  {
    tutti::itest::ScopedEnv off("TUTTI_FIXED_ORDER_SHM_MIN_BYTES", "0");
    constexpr int n = 4;
    for (auto& f : tutti::itest::onForkedRanks(n, [&](ncclComm_t comm, int r) { return body(comm, r, n, false); }, logTo))
      ADD_FAILURE() << "TUTTI_FIXED_ORDER_SHM_MIN_BYTES=0: " << f;
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(countIn(r, {"AllReduce: opCount"}), size_t(4)) << "threshold 0, rank " << r;
      EXPECT_EQ(countIn(r, {"(fixed order)"}), size_t(0)) << "threshold 0, rank " << r;
      std::remove((base + std::to_string(r)).c_str());
    }
  }
  constexpr int n = 4;
  tutti::itest::LogFile log("COLL");
  for (auto& f : onThreads(n, [&](ncclComm_t comm, int r) { return body(comm, r, n, false); }, /*det=*/0))
    ADD_FAILURE() << n << " threads: " << f;
  EXPECT_EQ(log.count("AllReduce: opCount"), size_t(4 * n));
  EXPECT_EQ(log.count("(fixed order)"), size_t(0));
}

// The issue's table, 4 ranks, 1M elements: elements that differ between calls that must agree, with the switch
// on (asserted 0) and off (printed: what the default path gives).
template <typename T>
std::vector<size_t> tableRows(ncclComm_t comm, int r, ncclDataType_t type, std::string* err) {
  constexpr size_t N = 1 << 20;
  const int n = 4;
  const Inputs<T> in(n, 3 * N + 5, 9);
  const T* mine = in.rank[r].data();
  std::vector<T> a(N), big(3 * N + 5), sh(N), rs(N / n), slice(N / n);
  auto count = [](const T* x, const T* y, size_t len) {
    size_t d = 0;
    for (size_t i = 0; i < len; ++i) d += std::memcmp(&x[i], &y[i], sizeof(T)) != 0;
    return d;
  };
  std::vector<size_t> rows;
  auto run = [&](ncclResult_t res) {
    if (res != ncclSuccess && err->empty()) *err = ncclGetLastError(nullptr);
  };
  run(ncclAllReduce(mine, a.data(), N, type, ncclSum, comm, nullptr));
  run(ncclAllReduce(mine, big.data(), 3 * N + 5, type, ncclSum, comm, nullptr));
  rows.push_back(count(a.data(), big.data(), N));
  run(ncclAllReduce(mine + 3, sh.data(), N - 3, type, ncclSum, comm, nullptr));
  rows.push_back(count(a.data() + 3, sh.data(), N - 3));
  // ReduceScatter of the first N elements vs the same slice of AllReduce.
  run(ncclReduceScatter(mine, rs.data(), N / n, type, ncclSum, comm, nullptr));
  rows.push_back(count(rs.data(), a.data() + size_t(r) * (N / n), N / n));
  return rows;
}

TEST(DetTable, IssueRowsAreZeroWithTheSwitchOn) {
  constexpr int n = 4;
  for (int det : {0, 1}) {
    std::vector<std::vector<size_t>> f32(n), b16(n);
    auto failed = onThreads(
        n,
        [&](ncclComm_t comm, int r) -> std::string {
          std::string e;
          f32[r] = tableRows<float>(comm, r, ncclFloat32, &e);
          if (e.empty()) b16[r] = tableRows<tutti::BFloat16>(comm, r, ncclBfloat16, &e);
          return e;
        },
        det);
    for (auto& f : failed) ADD_FAILURE() << f;
    if (!failed.empty()) return;
    const char* names[] = {"count N vs first N of 3N+5", "shifted by 3 elements", "ReduceScatter vs AllReduce slice"};
    for (size_t row = 0; row < 3; ++row) {
      size_t df = 0, db = 0;
      for (int r = 0; r < n; ++r) {
        df += f32[r][row];
        db += b16[r][row];
      }
      std::printf("deterministic %d  %-34s float32 %8zu  bfloat16 %8zu elements differ (all ranks)\n", det, names[row],
                  df, db);
      if (det) {
        EXPECT_EQ(df, 0u) << names[row];
        EXPECT_EQ(db, 0u) << names[row];
      }
    }
  }
}

// NaN results: whichever NaNs meet (payloads, signs, signaling or quiet, Inf - Inf), the result is the one
// quiet NaN of the type, as the reference gives it. CPUs pass on one operand's payload (which one depends on
// the order) and GPUs give a NaN of their own, so a NaN result would otherwise differ by position and device.
// Element i of rank r: pattern i % 4 — 0: finite; 1: a NaN of another payload and sign on every rank; 2: +Inf
// on rank 0, -Inf on the others (no Inf in e4m3: its NaNs instead); 3: a NaN on the last rank only.
template <typename Bits>
std::string checkNans(ncclComm_t comm, int r, int n, ncclDataType_t type, Bits nan, Bits payloadMask, Bits inf,
                      Bits one, Bits canonical, ncclRedOp_t op) {
  constexpr size_t kCount = 67;
  const Bits sign = Bits(Bits(1) << (8 * sizeof(Bits) - 1));
  auto input = [&](int rank, size_t i) -> Bits {
    switch (i % 4) {
      case 1: return Bits(nan | Bits((rank * 5 + i) & payloadMask) | (rank % 2 ? sign : Bits(0)));
      case 2: return inf ? Bits(inf | (rank == 0 ? Bits(0) : sign)) : Bits(nan | Bits(rank & payloadMask));
      case 3: return rank == n - 1 ? Bits(nan | Bits(i & payloadMask)) : one;
      default: return Bits(one + Bits(i % 3));
    }
  };
  std::vector<std::vector<Bits>> all(n, std::vector<Bits>(kCount));
  std::vector<const void*> ins(n);
  for (int k = 0; k < n; ++k) {
    for (size_t i = 0; i < kCount; ++i) all[k][i] = input(k, i);
    ins[k] = all[k].data();
  }
  std::vector<Bits> want(kCount), got(kCount, Bits(0x5a));
  DET_OK(tuttiDeterministicReduce(ins.data(), n, want.data(), kCount, type, op, nullptr));
  DET_OK(ncclAllReduce(all[r].data(), got.data(), kCount, type, op, comm, nullptr));
  for (size_t i = 0; i < kCount; ++i) {
    const bool nanWanted = i % 4 == 1 || i % 4 == 3 || (i % 4 == 2 && op != ncclProd);  // Inf * -Inf is -Inf
    if (nanWanted && want[i] != canonical)
      return "reference element " + std::to_string(i) + " is not the canonical NaN";
    if (got[i] != want[i]) return "element " + std::to_string(i) + " differs from the reference";
  }
  return {};
}

TEST(DetNan, EveryNaNResultIsTheOneQuietNaN) {
  // 6 and 8 ranks send their rows to rank 0 in one hop (host backend, these sizes; the suite's doubling variant takes
  // 8 by recursive doubling), narrowing the root's accumulator row at once.
  for (int n : {2, 3, 5, 6, 8}) {
    for (auto& f : onThreads(n, [n](ncclComm_t comm, int r) {
           std::string e;
           for (ncclRedOp_t op : {ncclSum, ncclProd, ncclAvg}) {
             if (e.empty())
               e = checkNans<uint64_t>(comm, r, n, ncclFloat64, 0x7ff0000000000001ull, 0xffffull, 0x7ff0000000000000ull,
                                       0x3ff0000000000000ull, 0x7ff8000000000000ull, op);
             if (e.empty())
               e = checkNans<uint32_t>(comm, r, n, ncclFloat32, 0x7f800001u, 0x3fffffu, 0x7f800000u, 0x3f800000u,
                                       0x7fc00000u, op);
             if (e.empty())
               e = checkNans<uint16_t>(comm, r, n, ncclBfloat16, 0x7f81, 0x3f, 0x7f80, 0x3f80, 0x7fc0, op);
             if (e.empty())
               e = checkNans<uint16_t>(comm, r, n, ncclFloat16, 0x7c01, 0x1ff, 0x7c00, 0x3c00, 0x7e00, op);
             if (e.empty())
               e = checkNans<uint8_t>(comm, r, n, ncclFloat8e4m3, 0x7f, 0x0, 0x0, 0x38, 0x7f, op);
             if (e.empty())
               e = checkNans<uint8_t>(comm, r, n, ncclFloat8e5m2, 0x7d, 0x1, 0x7c, 0x3c, 0x7e, op);
             if (!e.empty()) return std::string(opName(op)) + ": " + e;
           }
           return e;
         }))
      ADD_FAILURE() << n << " ranks: " << f;
  }
}

// A PreMulSum scalar in device memory (ncclScalarDevice), another on each rank, is read when the call runs:
// changed between two calls on a stream, each call has its own scalars' bits. On the sim backend (.sim) the
// kernel stores it where the exchange sends it from.
TEST(DetSim, PerRankDeviceScalarsAreReadWhenTheCallRuns) {
  constexpr int n = 3;
  constexpr size_t count = 70001;  // the exchange (a PreMulSum with per-rank scalars never runs one-shot)
  const Inputs<float> in(n, count, 5);
  auto failed = onThreads(n, [&](ncclComm_t comm, int r) -> std::string {
    cudaStream_t stream = nullptr;
    DET_OK(tuttiStreamCreate(&stream));
    void* dev = nullptr;
    DET_OK(ncclMemAlloc(&dev, 2 * sizeof(float)));
    float* scalar = static_cast<float*>(dev);
    scalar[0] = 0.25f + float(r);
    ncclRedOp_t op;
    DET_OK(ncclRedOpCreatePreMulSum(&op, scalar, ncclFloat32, ncclScalarDevice, comm));
    std::vector<float> out1(count), out2(count);
    // The second call's scalar is written in stream order between the calls.
    DET_OK(ncclAllReduce(in.rank[r].data(), out1.data(), count, ncclFloat32, op, comm, stream));
    scalar[1] = 3.0f - float(r);
    DET_OK(tuttiLaunchHostFunc(stream, [](void* p) { static_cast<float*>(p)[0] = static_cast<float*>(p)[1]; }, scalar));
    DET_OK(ncclAllReduce(in.rank[r].data(), out2.data(), count, ncclFloat32, op, comm, stream));
    DET_OK(tuttiStreamSynchronize(stream));
    std::string e;
    for (int call = 0; call < 2 && e.empty(); ++call) {
      std::vector<float> scalars(n), want(count);
      for (int s = 0; s < n; ++s) scalars[s] = call == 0 ? 0.25f + float(s) : 3.0f - float(s);
      std::vector<const void*> ins(n);
      for (int s = 0; s < n; ++s) ins[s] = in.rank[s].data();
      DET_OK(tuttiDeterministicReduce(ins.data(), n, want.data(), count, ncclFloat32, ncclSum, scalars.data()));
      e = firstDiff((call == 0 ? out1 : out2).data(), want.data(), count, call == 0 ? "first call" : "second call");
    }
    DET_OK(ncclRedOpDestroy(op, comm));
    DET_OK(ncclMemFree(dev));
    DET_OK(tuttiStreamDestroy(stream));
    return e;
  });
  for (auto& f : failed) ADD_FAILURE() << f;
}

// A captured call with per-rank host scalars replays with them (sim: the scalar is stored by a kernel step, not
// copied from host memory the graph would outlive). The host backend captures nothing.
TEST(DetSim, CapturedPerRankScalarsReplay) {
  const char* dev = std::getenv("TUTTI_DEVICE");
  if (!dev || std::string(dev) != "sim") GTEST_SKIP() << "capture runs on the sim backend (ctest suffix .sim)";
  constexpr int n = 2;
  constexpr size_t count = 40000;
  const Inputs<float> in(n, count, 9);
  auto failed = onThreads(n, [&](ncclComm_t comm, int r) -> std::string {
    cudaStream_t stream = nullptr;
    DET_OK(tuttiStreamCreate(&stream));
    ncclRedOp_t op;
    {
      float scalar = 1.5f + float(r);  // gone before the replays: the op keeps its bits
      DET_OK(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarHostImmediate, comm));
    }
    std::vector<float> out(count), want(count);
    tuttiGraph_t graph = nullptr;
    DET_OK(tuttiStreamBeginCapture(stream));
    DET_OK(ncclAllReduce(in.rank[r].data(), out.data(), count, ncclFloat32, op, comm, stream));
    DET_OK(tuttiStreamEndCapture(stream, &graph));
    const float scalars[n] = {1.5f, 2.5f};
    const void* ins[n] = {in.rank[0].data(), in.rank[1].data()};
    DET_OK(tuttiDeterministicReduce(ins, n, want.data(), count, ncclFloat32, ncclSum, scalars));
    std::string e;
    for (int replay = 0; replay < 2 && e.empty(); ++replay) {
      std::fill(out.begin(), out.end(), 0.0f);
      DET_OK(tuttiGraphLaunch(graph, stream));
      DET_OK(tuttiStreamSynchronize(stream));
      e = firstDiff(out.data(), want.data(), count, replay == 0 ? "first replay" : "second replay");
    }
    DET_OK(tuttiGraphDestroy(graph));
    DET_OK(ncclRedOpDestroy(op, comm));
    DET_OK(tuttiStreamDestroy(stream));
    return e;
  });
  for (auto& f : failed) ADD_FAILURE() << f;
}

// On a device backend an exchange larger than TUTTI_DET_SEGMENT_BYTES of rows runs as segments, all through the
// scratch made when the communicator was created: a call allocates nothing (a cudaMalloc there may wait for
// peers' kernels that spin for this rank, and is not allowed under capture). 3 ranks, 16 KiB segments; AllReduce,
// ReduceScatter (its segments take every block's same part) and Reduce, in and out of place, per-rank PreMulSum,
// counts of several segments and a ragged last one (one-shot calls only up to 4 KiB, so the scratch made at init
// is about a segment); the bits against the reference, and the log shows one scratch allocation per rank: the one
// at init.
TEST(DetSim, LargeCallsRunInSegmentsThroughTheScratchMadeAtInit) {
  const char* dev = std::getenv("TUTTI_DEVICE");
  if (!dev || std::string(dev) != "sim") GTEST_SKIP() << "segments are for device backends (ctest suffix .sim)";
  constexpr int n = 3;
  tutti::itest::ScopedEnv segment("TUTTI_DET_SEGMENT_BYTES", "16384"), oneShot("TUTTI_DET_ONESHOT_BYTES", "4096");
  std::vector<std::string> failed;
  {
    tutti::itest::LogFile log("ALLOC,COLL");
    failed = onThreads(n, [&](ncclComm_t comm, int r) -> std::string {
      for (size_t count : {size_t{12289}, size_t{4096 * 3 + 7}, size_t{30001}}) {
        for (int opIn : {int(ncclSum), kPreMulSum}) {
          std::string e = checkCase<float>(comm, r, n, ncclFloat32, opIn, count, nullptr);
          if (e.empty()) e = checkCase<tutti::BFloat16>(comm, r, n, ncclBfloat16, opIn, count, nullptr);
          if (!e.empty()) return e;
        }
      }
      return {};
    });
    EXPECT_EQ(log.count("scratch memory of"), size_t{n}) << "a call allocated scratch memory";
    EXPECT_GT(log.count(", segment 3 of "), size_t{0}) << "no call ran in segments";
  }
  for (auto& f : failed) ADD_FAILURE() << f;
}

// NCCL_RUNTIME_CONNECT=0 (the default on a GPU that two ranks of one process share, where a connection opened in
// a call would register host memory with CUDA while the other rank's kernels spin for this one): init opens every
// connection, and no call opens another. 4 ranks: deterministic one-shot, exchanged and segmented calls, the
// usual collectives at three sizes, sends and receives with every peer; the log's connection lines are counted
// after init and after the calls.
TEST(DetSim, ConnectionsOpenedAtInitServeEveryCall) {
  const char* dev = std::getenv("TUTTI_DEVICE");
  if (!dev || std::string(dev) != "sim") GTEST_SKIP() << "NCCL_RUNTIME_CONNECT is for device backends (ctest suffix .sim)";
  constexpr int n = 4;
  tutti::itest::ScopedEnv connect("NCCL_RUNTIME_CONNECT", "0"), segment("TUTTI_DET_SEGMENT_BYTES", "16384");
  std::atomic<int> arrived{0};
  std::atomic<size_t> atInit{0};
  std::vector<std::string> failed;
  tutti::itest::LogFile log("INIT");
  failed = tutti::itest::onThreadRanks(n, [&](ncclComm_t comm, int r) -> std::string {
    // Every rank is past init before the lines are counted.
    arrived.fetch_add(1);
    while (arrived.load() < n) std::this_thread::yield();
    if (r == 0) atInit.store(log.count(" via "));
    arrived.fetch_add(1);
    while (arrived.load() < 2 * n) std::this_thread::yield();
    std::string e;
    for (int det : {1, 0}) {
      DET_OK(tuttiCommSetDeterministic(comm, det));
      for (size_t count : {size_t{1}, size_t{1001}, size_t{20011}}) {
        if (e.empty()) e = checkCase<float>(comm, r, n, ncclFloat32, ncclSum, count, nullptr);
        if (det == 0) e.clear();  // the usual order: only the connections count here
      }
    }
    if (!e.empty()) return e;
    // Whatever the tuner picks at these sizes, on every channel it gives them.
    std::vector<float> a(size_t{1} << 18, float(r)), b(a.size() * n);
    for (size_t count : {size_t{16}, size_t{4096}, a.size()}) {
      DET_OK(ncclAllReduce(a.data(), b.data(), count, ncclFloat32, ncclSum, comm, nullptr));
      DET_OK(ncclAllGather(a.data(), b.data(), count, ncclFloat32, comm, nullptr));
      DET_OK(ncclReduceScatter(b.data(), a.data(), count, ncclFloat32, ncclSum, comm, nullptr));
      DET_OK(ncclBroadcast(a.data(), b.data(), count, ncclFloat32, 1, comm, nullptr));
    }
    DET_OK(ncclGroupStart());
    for (int peer = 0; peer < n; ++peer) {
      DET_OK(ncclSend(a.data(), 64, ncclFloat32, peer, comm, nullptr));
      DET_OK(ncclRecv(b.data() + 64 * peer, 64, ncclFloat32, peer, comm, nullptr));
    }
    DET_OK(ncclGroupEnd());
    return {};
  });
  for (auto& f : failed) ADD_FAILURE() << f;
  EXPECT_GT(atInit.load(), size_t{0}) << "init opened no connection";
  EXPECT_EQ(log.count(" via "), atInit.load()) << "a call opened a connection";
}

// Numerical error against the exactly rounded sum (each element's inputs summed in double with compensation,
// then rounded once to the type), with the switch off and on: how many elements differ from it and the mean
// absolute error in units of the type's last place. The fixed order (a tree, half types accumulated in float and
// rounded once) must not be worse than the default path's. Deterministic data, so the figures are too.
template <typename T>
void errorOf(int det, int n, ncclDataType_t type, const char* name) {
  constexpr size_t N = 1 << 18;
  const Inputs<T> in(n, N, 11);
  std::vector<std::vector<T>> out(n, std::vector<T>(N));
  auto failed = onThreads(
      n,
      [&](ncclComm_t comm, int r) -> std::string {
        DET_OK(ncclAllReduce(in.rank[r].data(), out[r].data(), N, type, ncclSum, comm, nullptr));
        return {};
      },
      det);
  for (auto& f : failed) ADD_FAILURE() << f;
  size_t inexact = 0;
  double ulps = 0;
  for (size_t i = 0; i < N; ++i) {
    double sum = 0, comp = 0;  // Neumaier
    for (int r = 0; r < n; ++r) {
      const double x = double(tutti::toCompute(in.rank[r][i]));
      const double t = sum + x;
      comp += std::abs(sum) >= std::abs(x) ? (sum - t) + x : (x - t) + sum;
      sum = t;
    }
    const double exact = sum + comp;
    const T rounded = tutti::fromCompute<T>(exact);
    const double got = double(tutti::toCompute(out[0][i]));
    if (std::memcmp(&rounded, &out[0][i], sizeof(T)) != 0) ++inexact;
    // One unit in the last place of the correctly rounded result (float: 2^-23 relative; bfloat16: 2^-7).
    const int mant = std::is_same_v<T, float> ? 23 : 7;
    int e = 0;
    std::frexp(double(tutti::toCompute(rounded)), &e);
    ulps += std::abs(got - exact) / std::ldexp(1.0, e - 1 - mant);
  }
  std::printf("error n=%d %-8s deterministic %d: %7zu of %zu elements not the exactly rounded sum, mean %.4f ulp\n", n,
              name, det, inexact, N, ulps / N);
  ::testing::Test::RecordProperty(std::string("ulp_") + name + "_n" + std::to_string(n) + "_det" + std::to_string(det),
                                  std::to_string(ulps / N));
  errorMean[det] = ulps / N;
}

TEST(DetError, NoWorseThanTheDefaultPath) {
  for (int n : {4, 8}) {
    errorOf<float>(0, n, ncclFloat32, "float32");
    errorOf<float>(1, n, ncclFloat32, "float32");
    EXPECT_LE(errorMean[1], errorMean[0]) << "float32, " << n << " ranks";
    errorOf<tutti::BFloat16>(0, n, ncclBfloat16, "bfloat16");
    errorOf<tutti::BFloat16>(1, n, ncclBfloat16, "bfloat16");
    EXPECT_LE(errorMean[1], errorMean[0]) << "bfloat16, " << n << " ranks";
  }
}

// A forced algorithm that cannot follow the fixed order is an error, not silently different bits; integer
// reductions (exact in any order) still take it.
TEST(DetForced, TreeForAllReduceIsAClearError) {
  tutti::itest::ScopedEnv algo("NCCL_ALGO", "Tree");
  // Three ranks: on two the tree reduces each element once from both inputs, and is allowed (DetPair).
  auto failed = onThreads(3, [](ncclComm_t comm, int) -> std::string {
    float in[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[8];
    const ncclResult_t res = ncclAllReduce(in, out, 8, ncclFloat32, ncclSum, comm, nullptr);
    const std::string msg = ncclGetLastError(comm);
    if (res != ncclInvalidUsage) return std::string("float AllReduce under NCCL_ALGO=Tree: ") + ncclGetErrorString(res);
    if (msg.find("fixed reduction order") == std::string::npos) return "unclear message: " + msg;
    int32_t a[8] = {1, 2, 3, 4, 5, 6, 7, 8}, b[8];
    DET_OK(ncclAllReduce(a, b, 8, ncclInt32, ncclSum, comm, nullptr));
    return b[7] == 24 ? std::string() : "int32 AllReduce gave " + std::to_string(b[7]);
  });
  for (auto& f : failed) ADD_FAILURE() << f;
}

// Two ranks on the host backend: a deterministic Sum, Prod or Avg runs as any collective (every algorithm reduces
// each element once, from both ranks' raw inputs, and the fold of two does not depend on which comes first), so
// the tuner's choice and a forced algorithm and protocol stand. Ranks as threads, kept off the one-shot and direct
// paths; every forced ring and tree protocol: the bits against the reference, and the log shows the forced
// algorithm ran for deterministic calls.
TEST(DetPair, TwoRanksTakeAnyAlgorithmWithTheFixedOrderBits) {
  const char* dev = std::getenv("TUTTI_DEVICE");
  if (dev && std::string(dev) != "host") GTEST_SKIP() << "the host backend's two-rank path";
  tutti::itest::ScopedEnv noOneShot("TUTTI_ONESHOT_MAX_BYTES", "0");
  tutti::itest::ScopedEnv noDirect("TUTTI_DET_DIRECT_MIN_BYTES", "0");
  for (const char* algo : {"Ring", "Tree"}) {
    for (const char* proto : {"LL", "LL128", "Simple"}) {
      // The tree is AllReduce's alone: ReduceScatter and Reduce take the ring.
      const std::string algos = std::string(algo) == "Tree" ? "allreduce:tree;reducescatter:ring;reduce:ring" : algo;
      tutti::itest::ScopedEnv a("NCCL_ALGO", algos), p("NCCL_PROTO", proto);
      tutti::itest::LogFile log("COLL");
      auto failed = onThreads(2, [](ncclComm_t comm, int r) -> std::string {
        for (size_t count : {size_t{1}, size_t{1001}, size_t{70001}}) {
          for (int op : {int(ncclSum), int(ncclProd), int(ncclAvg)}) {
            std::string e = checkCase<float>(comm, r, 2, ncclFloat32, op, count, nullptr);
            if (e.empty()) e = checkCase<double>(comm, r, 2, ncclFloat64, op, count, nullptr);
            if (e.empty()) e = checkCase<tutti::BFloat16>(comm, r, 2, ncclBfloat16, op, count, nullptr);
            if (e.empty()) e = checkCase<tutti::Float8E4M3>(comm, r, 2, ncclFloat8e4m3, op, count, nullptr);
            if (!e.empty()) return e;
          }
        }
        return {};
      });
      for (auto& f : failed) ADD_FAILURE() << algo << "/" << proto << ": " << f;
      EXPECT_GT(log.count(std::string("algo ") + (std::string(algo) == "Tree" ? "Tree" : "Ring") + " proto " +
                          proto), size_t{0}) << algo << "/" << proto;
      EXPECT_GT(log.count("(deterministic)"), size_t{0});
      EXPECT_EQ(log.count("tuner deterministic"), size_t{0}) << algo << "/" << proto << ": an exchange ran";
    }
  }
}

// ---- The switch ------------------------------------------------------------------------------------------

int deterministicOfNewComm(std::string* err) {
  int on = -1;
  auto failed = onThreads(
      2,
      [&](ncclComm_t comm, int r) -> std::string {
        int v = -1;
        DET_OK(tuttiCommGetDeterministic(comm, &v));
        if (r == 0) on = v;
        return {};
      },
      -1);
  for (auto& f : failed) *err += f;
  return on;
}

TEST(DetSwitch, OffByDefault) {
  std::string err;
  EXPECT_EQ(deterministicOfNewComm(&err), 0);
  EXPECT_EQ(err, "");
}

TEST(DetSwitch, EnvironmentTurnsItOn) {
  tutti::itest::ScopedEnv env("TUTTI_DETERMINISTIC", "1");
  std::string err;
  EXPECT_EQ(deterministicOfNewComm(&err), 1);
  EXPECT_EQ(err, "");
}

// A config file for one test, removed when it ends.
struct TempConfig {
  std::string path;
  explicit TempConfig(const std::string& text)
      : path(testing::TempDir() + "det_switch_" + std::to_string(getpid()) + ".yaml") {
    std::ofstream(path) << text;
  }
  ~TempConfig() { std::remove(path.c_str()); }
};

TEST(DetSwitch, ConfigTurnsItOnAndTheEnvironmentOverrides) {
  const TempConfig file("deterministic: true\n");
  tutti::itest::ScopedEnv cfg("TUTTI_CONFIG", file.path);
  std::string err;
  EXPECT_EQ(deterministicOfNewComm(&err), 1);
  {
    tutti::itest::ScopedEnv env("TUTTI_DETERMINISTIC", "0");
    EXPECT_EQ(deterministicOfNewComm(&err), 0);
  }
  EXPECT_EQ(err, "");
}

TEST(DetSwitch, BadConfigValueIsAnErrorWithItsPlace) {
  const TempConfig file("version: 1\ndeterministic: maybe\n");
  tutti::itest::ScopedEnv cfg("TUTTI_CONFIG", file.path);
  ncclUniqueId id;
  ncclComm_t comm = nullptr;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  EXPECT_NE(ncclCommInitRank(&comm, 1, id, 0), ncclSuccess);
  const std::string msg = ncclGetLastError(nullptr);
  EXPECT_NE(msg.find(".yaml:2:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("deterministic"), std::string::npos) << msg;
}

TEST(DetSwitch, BadEnvironmentValueIsAnError) {
  ncclUniqueId id;
  ncclComm_t comm = nullptr;
  tutti::itest::ScopedEnv env("TUTTI_DETERMINISTIC", "2");
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  EXPECT_NE(ncclCommInitRank(&comm, 1, id, 0), ncclSuccess);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("TUTTI_DETERMINISTIC=2"), std::string::npos);
}

TEST(DetSwitch, PerCommunicatorSwitch) {
  auto failed = onThreads(2, [](ncclComm_t comm, int) -> std::string {
    int v = -1;
    DET_OK(tuttiCommGetDeterministic(comm, &v));
    if (v != 1) return "not on after tuttiCommSetDeterministic(comm, 1)";
    DET_OK(tuttiCommSetDeterministic(comm, 0));
    DET_OK(tuttiCommGetDeterministic(comm, &v));
    if (v != 0) return "not off after tuttiCommSetDeterministic(comm, 0)";
    if (tuttiCommSetDeterministic(comm, 7) != ncclInvalidArgument) return "enable = 7 accepted";
    if (tuttiCommGetDeterministic(comm, nullptr) != ncclInvalidArgument) return "NULL accepted";
    return {};
  });
  for (auto& f : failed) ADD_FAILURE() << f;
  EXPECT_EQ(tuttiCommSetDeterministic(nullptr, 1), ncclInvalidArgument);
}

// ---- The reference function's own checks -------------------------------------------------------------------

TEST(DetReference, BadArguments) {
  float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, out[4];
  const void* in[2] = {a, b};
  EXPECT_EQ(tuttiDeterministicReduce(in, 2, out, 4, ncclFloat32, ncclSum, nullptr), ncclSuccess);
  EXPECT_EQ(out[3], 12.0f);
  EXPECT_EQ(tuttiDeterministicReduce(in, 0, out, 4, ncclFloat32, ncclSum, nullptr), ncclInvalidArgument);
  EXPECT_EQ(tuttiDeterministicReduce(nullptr, 2, out, 4, ncclFloat32, ncclSum, nullptr), ncclInvalidArgument);
  EXPECT_EQ(tuttiDeterministicReduce(in, 2, nullptr, 4, ncclFloat32, ncclSum, nullptr), ncclInvalidArgument);
  EXPECT_EQ(tuttiDeterministicReduce(in, 2, out, 4, ncclDataType_t(99), ncclSum, nullptr), ncclInvalidArgument);
  EXPECT_EQ(tuttiDeterministicReduce(in, 2, out, 4, ncclFloat32, ncclRedOp_t(7), nullptr), ncclInvalidArgument);
  const float s[2] = {2, 3};
  EXPECT_EQ(tuttiDeterministicReduce(in, 2, out, 4, ncclFloat32, ncclProd, s), ncclInvalidArgument);
  EXPECT_EQ(tuttiDeterministicReduce(in, 2, a + 1, 3, ncclFloat32, ncclSum, nullptr), ncclInvalidArgument);  // overlap
  EXPECT_EQ(tuttiDeterministicReduce(in, 2, a, 4, ncclFloat32, ncclSum, s), ncclSuccess);  // output = input 0
  EXPECT_EQ(a[0], 17.0f);  // 1*2 + 5*3
  EXPECT_EQ(tuttiDeterministicReduce(in, 2, nullptr, 0, ncclFloat32, ncclSum, nullptr), ncclSuccess);
}

}  // namespace
