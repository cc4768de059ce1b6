// Zero copy over the network (TUTTI_NET_ZERO_COPY_MIN_BYTES): ranks as processes over net-socket, every
// non-empty Simple step moving straight between user buffers and the wire. The cases here are the ones where a
// user buffer is in flight when the caller touches it again:
// - a buffer written right after the call returns: what the peers received must be what it held during the
//   call (sends from user buffers complete before the call returns);
// - a group that sends a buffer and receives into the same buffer (an in-place ring shift): every rank must get
//   its predecessor's old data, as through the FIFOs;
// - one-shot collectives (every message in one step, sent from the input, AllGather / AlltoAll / Broadcast
//   landing in the output), in place and out of place, with a late rank: in place, an AlltoAll block must leave
//   before the peer's block lands over it, and an AllReduce must not write its result over a message still leaving;
// - recursive doubling and halving (AllReduce, AllGather, ReduceScatter on 4 processes), which send from the input
//   and the output and land in the output as well;
// - the deterministic exchange, which sends each peer its slice from the input while, in place, the gathered
//   results land over the slices sent;
// - a ring AllReduce whose steps are shorter than the slot (TUTTI_NET_RING_STEP_BYTES): many steps per slot's
//   worth, a last one shorter, in place and out of place (and the same over shm, where the steps are shorter by
//   default too);
// - waits that sleep in the net plugin at once (tuttiNetWait_v1), with a late rank; and the same with a plugin that
//   turns every other isend and irecv away as busy (busy_net.c), zero copy and through the FIFOs.
// And, over shm, the single-copy thresholds that follow what a read from another process costs against a copy
// (TUTTI_DIRECT_READ_COST): the ranks decide alike from their median whatever each one measured.
#include "mp_check.h"
#include "mp_harness.h"

#include <gtest/gtest.h>

#include <nccl.h>
#include <tutti.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <regex>
#include <string>
#include <thread>
#include <vector>

namespace tutti::itest {
namespace {

constexpr int kRanks = 3;

// kRanks processes over net-socket on loopback, a wait that cannot finish failing after 30 s.
MpOptions netOptions(int timeoutSeconds) {
  MpOptions opts;
  opts.nranks = kRanks;
  opts.timeoutSeconds = timeoutSeconds;
  opts.env = netOverLoopbackEnv();
  opts.env.push_back({"TUTTI_TIMEOUT", "30"});
  return opts;
}

MpOptions zeroCopyOptions() {
  MpOptions opts = netOptions(60);
  opts.env.push_back({"TUTTI_NET_ZERO_COPY_MIN_BYTES", "1"});
  opts.env.push_back({"NCCL_DEBUG", "WARN"});
  return opts;
}

// Records `what` as this rank's failure, destroys its communicator and returns rc (the process's exit code).
int failRank(ncclComm_t comm, const std::string& what, int rc) {
  setMessage(what);
  ncclCommDestroy(comm);
  return rc;
}

float valueOf(int rank, int iter, size_t i) {
  return static_cast<float>(rank * 1000 + iter) + static_cast<float>(i % 977);
}

int initComm(const RankContext& ctx, ncclComm_t* comm) {
  if (ncclCommInitRank(comm, ctx.nranks, ctx.id, ctx.rank) != ncclSuccess) {
    setMessage(std::string("ncclCommInitRank failed: ") + ncclGetLastError(nullptr));
    return 10;
  }
  return 0;
}

TEST(NetZeroCopy, BuffersOverwrittenRightAfterTheCallDoNotReachThePeers) {
  MpResult r = runProcesses(zeroCopyOptions(), [](const RankContext& ctx) {
    ncclComm_t comm = nullptr;
    if (int rc = initComm(ctx, &comm)) return rc;
    // Several Simple slots per rank's block: most steps are still leaving when the last one is posted.
    constexpr size_t kCount = 3 * 256 * 1024 + 7;
    constexpr size_t kP2pCount = 8 * 1024 * 1024 + 5;
    std::vector<float> in(kCount), out(kCount * kRanks), sent(kP2pCount), got(kP2pCount);
    const int next = (ctx.rank + 1) % ctx.nranks, prev = (ctx.rank + ctx.nranks - 1) % ctx.nranks;
    for (int iter = 0; iter < 4; ++iter) {
      for (size_t i = 0; i < kCount; ++i) in[i] = valueOf(ctx.rank, iter, i);
      for (size_t i = 0; i < kP2pCount; ++i) sent[i] = valueOf(ctx.rank, iter, i);
      if (ncclAllGather(in.data(), out.data(), kCount, ncclFloat32, comm, nullptr) != ncclSuccess) {
        setMessage(std::string("ncclAllGather: ") + ncclGetLastError(comm));
        return 11;
      }
      std::memset(in.data(), 0xff, kCount * sizeof(float));  // the call returned: the buffer is ours again
      // Rank 1 comes late: rank 0's send to it cannot have left when rank 0's receive (from rank 2) completes,
      // and more than the sockets' buffers hold is on its way.
      if (ctx.rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      ncclGroupStart();
      ncclSend(sent.data(), kP2pCount, ncclFloat32, next, comm, nullptr);
      ncclRecv(got.data(), kP2pCount, ncclFloat32, prev, comm, nullptr);
      if (ncclGroupEnd() != ncclSuccess) {
        setMessage(std::string("send/recv: ") + ncclGetLastError(comm));
        return 12;
      }
      std::memset(sent.data(), 0xff, kP2pCount * sizeof(float));
      for (int peer = 0; peer < ctx.nranks; ++peer)
        for (size_t i = 0; i < kCount; ++i)
          if (out[peer * kCount + i] != valueOf(peer, iter, i)) {
            setMessage("AllGather iteration " + std::to_string(iter) + ": block of rank " + std::to_string(peer) +
                       " differs at element " + std::to_string(i));
            return 13;
          }
      for (size_t i = 0; i < kP2pCount; ++i)
        if (got[i] != valueOf(prev, iter, i)) {
          setMessage("Recv iteration " + std::to_string(iter) + " differs at element " + std::to_string(i));
          return 14;
        }
    }
    ncclCommDestroy(comm);
    return 0;
  });
  expectAllSucceeded(r, "");
}

TEST(NetZeroCopy, InPlaceRingShiftInOneGroupGetsThePredecessorsOldData) {
  MpResult r = runProcesses(zeroCopyOptions(), [](const RankContext& ctx) {
    ncclComm_t comm = nullptr;
    if (int rc = initComm(ctx, &comm)) return rc;
    const int next = (ctx.rank + 1) % ctx.nranks, prev = (ctx.rank + ctx.nranks - 1) % ctx.nranks;
    // One slot, and several slots that still fit the connection's FIFO (sends then receives on one thread).
    for (size_t count : {size_t{1001}, size_t{5 * 128 * 1024 + 3}}) {
      std::vector<float> buf(count);
      for (int iter = 0; iter < 4; ++iter) {
        for (size_t i = 0; i < count; ++i) buf[i] = valueOf(ctx.rank, iter, i);
        ncclGroupStart();
        ncclSend(buf.data(), count, ncclFloat32, next, comm, nullptr);
        ncclRecv(buf.data(), count, ncclFloat32, prev, comm, nullptr);
        if (ncclGroupEnd() != ncclSuccess) {
          setMessage(std::string("send/recv: ") + ncclGetLastError(comm));
          return 11;
        }
        for (size_t i = 0; i < count; ++i)
          if (buf[i] != valueOf(prev, iter, i)) {
            setMessage("count " + std::to_string(count) + " iteration " + std::to_string(iter) +
                       " differs at element " + std::to_string(i));
            return 12;
          }
      }
    }
    ncclCommDestroy(comm);
    return 0;
  });
  expectAllSucceeded(r, "");
}

// Point-to-point over the network: a connection's Simple slots are 1 MiB (TUTTI_NET_P2P_BUFFSIZE's default), and a
// message longer than 8 of the communicator's 512 KiB slots but at most 8 of the connection's moves in 8 equal steps;
// every other one in 512 KiB steps (p2pStepBytes). At both edges, with a short last step, zero copy and through the
// FIFOs (TUTTI_NET_ZERO_COPY_MIN_BYTES=0), and with the large slots off (TUTTI_NET_P2P_BUFFSIZE=0): a ring shift and
// an AlltoAll arrive whole, and every rank logs the steps each send and receive was cut into.
TEST(NetP2pSteps, MessagesAroundEightLargeSlotsArriveWhole) {
  constexpr size_t kMiB = size_t{1} << 20;
  struct Setting {
    const char* var;
    const char* value;
    bool largeSlots;
  };
  for (const Setting& s : {Setting{"", "", true}, Setting{"TUTTI_NET_ZERO_COPY_MIN_BYTES", "0", true},
                           Setting{"TUTTI_NET_P2P_BUFFSIZE", "0", false}}) {
    SCOPED_TRACE(std::string(s.var) + "=" + s.value);
    MpOptions opts = netOptions(90);
    opts.env.push_back({"NCCL_DEBUG", "INFO"});
    opts.env.push_back({"NCCL_DEBUG_SUBSYS", "P2P"});
    if (*s.var) opts.env.push_back({s.var, s.value});
    // Bytes per message and their steps with the large slots: exactly 8 slots of 1 MiB; 4 bytes more (17 steps of
    // 512 KiB); 6 MiB + 4 (8 steps of 786496 bytes, the last shorter); 4 MiB (8 steps of 512 KiB); 3 MiB + 4 (7 steps
    // of 512 KiB, the last of 4 bytes).
    const std::vector<size_t> sizes = {8 * kMiB, 8 * kMiB + 4, 6 * kMiB + 4, 4 * kMiB, 3 * kMiB + 4};
    const std::vector<size_t> steps = {kMiB, kMiB / 2, 786496, kMiB / 2, kMiB / 2};
    MpResult r = runProcesses(opts, [&sizes](const RankContext& ctx) {
      ncclComm_t comm = nullptr;
      if (int rc = initComm(ctx, &comm)) return rc;
      auto fail = [&](const std::string& what, int rc) { return failRank(comm, what, rc); };
      const int n = ctx.nranks, next = (ctx.rank + 1) % n, prev = (ctx.rank + n - 1) % n;
      for (size_t bytes : sizes) {
        const size_t count = bytes / sizeof(float);
        const std::string at = " of " + std::to_string(bytes) + " bytes";
        std::vector<float> sent(count), got(count, -1.0f);
        for (size_t i = 0; i < count; ++i) sent[i] = valueOf(ctx.rank, 0, i);
        ncclGroupStart();
        ncclSend(sent.data(), count, ncclFloat32, next, comm, nullptr);
        ncclRecv(got.data(), count, ncclFloat32, prev, comm, nullptr);
        if (ncclGroupEnd() != ncclSuccess) return fail("send/recv" + at + ": " + ncclGetLastError(comm), 11);
        for (size_t i = 0; i < count; ++i)
          if (got[i] != valueOf(prev, 0, i))
            return fail("Recv" + at + " differs at element " + std::to_string(i), 12);
        // AlltoAll: block p of rank r's input goes to rank p, which keeps it as block r.
        std::vector<float> in(count * n), out(count * n, -1.0f);
        for (int p = 0; p < n; ++p)
          for (size_t i = 0; i < count; ++i) in[p * count + i] = valueOf(ctx.rank * n + p, 1, i);
        if (ncclAlltoAll(in.data(), out.data(), count, ncclFloat32, comm, nullptr) != ncclSuccess)
          return fail("ncclAlltoAll" + at + ": " + ncclGetLastError(comm), 13);
        for (int p = 0; p < n; ++p)
          for (size_t i = 0; i < count; ++i)
            if (out[p * count + i] != valueOf(p * n + ctx.rank, 1, i))
              return fail("AlltoAll" + at + ": block of rank " + std::to_string(p) + " differs at element " +
                              std::to_string(i), 14);
      }
      ncclCommDestroy(comm);
      return 0;
    });
    expectAllSucceeded(r, "");
    for (const ChildResult& c : r.children) {
      for (size_t k = 0; k < sizes.size(); ++k) {
        const size_t bytes = sizes[k], step = s.largeSlots ? steps[k] : kMiB / 2;
        for (const char* dir : {"Send ", "Recv "}) {
          const std::string line =
              dir + std::to_string(bytes) + " bytes " + (dir[0] == 'S' ? "to" : "from") + " rank ";
          const std::string tail = " proto Simple steps of " + std::to_string(step) + " bytes";
          bool found = false;
          for (size_t at = c.output.find(line); at != std::string::npos && !found; at = c.output.find(line, at + 1))
            found = c.output.compare(c.output.find(" proto", at), tail.size(), tail) == 0;
          EXPECT_TRUE(found) << dir << bytes << " bytes: no line \"..." << tail << "\"\n" << c.describe();
        }
      }
    }
  }
}

TEST(NetZeroCopy, OneShotCollectivesInPlaceAndOutOfPlace) {
  MpOptions opts = zeroCopyOptions();
  opts.env.push_back({"TUTTI_ONESHOT_MAX_BYTES", "524288"});  // every call below takes the one-shot path
  opts.env.push_back({"TUTTI_BRUCK_MAX_BYTES", "0"});
  opts.env.push_back({"TUTTI_BINOMIAL_BCAST_MAX_BYTES", "0"});
  opts.env.push_back({"TUTTI_TREE_ALLREDUCE_MAX_BYTES", "0"});
  opts.env.push_back({"TUTTI_TREE_REDUCESCATTER_MAX_BYTES", "0"});
  MpResult r = runProcesses(opts, [](const RankContext& ctx) {
    ncclComm_t comm = nullptr;
    if (int rc = initComm(ctx, &comm)) return rc;
    const int n = ctx.nranks;
    auto fail = [&](const std::string& what, int rc) {
      setMessage(what);
      return rc;
    };
    // AllGather, AlltoAll and Broadcast take blocks of `count`; AllReduce the whole buffer (n blocks: more than the
    // sockets' buffers take at once, so in place a late peer keeps the message leaving while the result is ready).
    // 524288 bytes in all at most (the one-shot limit set above, one slot).
    for (size_t count : {size_t{1}, size_t{1001}, size_t{40000}}) {
      for (bool inPlace : {false, true}) {
        for (int iter = 0; iter < 3; ++iter) {
          const std::string at = " count " + std::to_string(count) + (inPlace ? " in place" : " out of place") +
                                 " iteration " + std::to_string(iter);
          std::vector<float> in(count * n), out(count * n);
          auto late = [&] {
            if (ctx.rank == (iter % n)) std::this_thread::sleep_for(std::chrono::milliseconds(20));
          };
          // AllGather: the input is block `rank` of the output in place.
          for (size_t i = 0; i < count; ++i) (inPlace ? out[ctx.rank * count + i] : in[i]) = valueOf(ctx.rank, iter, i);
          late();
          const float* agIn = inPlace ? out.data() + ctx.rank * count : in.data();
          if (ncclAllGather(agIn, out.data(), count, ncclFloat32, comm, nullptr) != ncclSuccess)
            return fail("ncclAllGather" + at + ": " + ncclGetLastError(comm), 11);
          if (!inPlace) std::memset(in.data(), 0xff, count * sizeof(float));
          for (int p = 0; p < n; ++p)
            for (size_t i = 0; i < count; ++i)
              if (out[p * count + i] != valueOf(p, iter, i))
                return fail("AllGather" + at + ": block of rank " + std::to_string(p) + " differs at " +
                                std::to_string(i), 12);
          // AlltoAll: block p of rank r's input goes to rank p, which keeps it as block r.
          float* a2aIn = inPlace ? out.data() : in.data();
          for (int p = 0; p < n; ++p)
            for (size_t i = 0; i < count; ++i) a2aIn[p * count + i] = valueOf(ctx.rank * n + p, iter, i);
          late();
          if (ncclAlltoAll(a2aIn, out.data(), count, ncclFloat32, comm, nullptr) != ncclSuccess)
            return fail("ncclAlltoAll" + at + ": " + ncclGetLastError(comm), 13);
          if (!inPlace) std::memset(in.data(), 0xff, count * n * sizeof(float));
          for (int p = 0; p < n; ++p)
            for (size_t i = 0; i < count; ++i)
              if (out[p * count + i] != valueOf(p * n + ctx.rank, iter, i))
                return fail("AlltoAll" + at + ": block from rank " + std::to_string(p) + " differs at " +
                                std::to_string(i), 14);
          // Broadcast from rank 1.
          const int root = 1;
          float* bIn = inPlace ? out.data() : in.data();
          for (size_t i = 0; i < count; ++i) bIn[i] = ctx.rank == root ? valueOf(root, iter, i) : -1.0f;
          late();
          if (ncclBroadcast(bIn, out.data(), count, ncclFloat32, root, comm, nullptr) != ncclSuccess)
            return fail("ncclBroadcast" + at + ": " + ncclGetLastError(comm), 15);
          if (!inPlace) std::memset(in.data(), 0xff, count * sizeof(float));
          for (size_t i = 0; i < count; ++i)
            if (out[i] != valueOf(root, iter, i)) return fail("Broadcast" + at + " differs at " + std::to_string(i), 16);
          // AllReduce (small integers in floats: every order gives the same sum).
          float* rIn = inPlace ? out.data() : in.data();
          for (size_t i = 0; i < count * n; ++i) rIn[i] = static_cast<float>((ctx.rank + 1) * (i % 5 + iter));
          late();
          if (ncclAllReduce(rIn, out.data(), count * n, ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess)
            return fail("ncclAllReduce" + at + ": " + ncclGetLastError(comm), 17);
          if (!inPlace) std::memset(in.data(), 0xff, count * n * sizeof(float));
          const float ranksSum = static_cast<float>(n * (n + 1) / 2);
          for (size_t i = 0; i < count * n; ++i)
            if (out[i] != ranksSum * static_cast<float>(i % 5 + iter))
              return fail("AllReduce" + at + " differs at " + std::to_string(i), 18);
        }
      }
    }
    ncclCommDestroy(comm);
    return 0;
  });
  expectAllSucceeded(r, "");
}

// Recursive doubling and halving over sockets (4 processes, the default thresholds, zero copy from the first byte): an
// AllReduce by doubling (1001 elements) and by halving then doubling (131072), AllGathers by doubling (blocks of 1001
// and 40000) and ReduceScatters by halving (blocks of 1001 and 4000), in place and out of place, a late rank each
// time, the input overwritten as soon as the call returns.
TEST(NetDoubling, RecursivePathsInPlaceAndOutOfPlace) {
  MpOptions opts = zeroCopyOptions();
  opts.nranks = 4;
  MpResult r = runProcesses(opts, [](const RankContext& ctx) {
    ncclComm_t comm = nullptr;
    if (int rc = initComm(ctx, &comm)) return rc;
    const int n = ctx.nranks;
    auto fail = [&](const std::string& what, int rc) { return failRank(comm, what, rc); };
    auto late = [&](int iter) {
      if (ctx.rank == iter % n) std::this_thread::sleep_for(std::chrono::milliseconds(3));
    };
    for (int iter = 0; iter < 2; ++iter) {
      for (bool inPlace : {false, true}) {
        const std::string how = inPlace ? " in place" : " out of place";
        for (size_t count : {size_t{1001}, size_t{131072}}) {
          std::vector<float> in(count), out(count);
          float* src = inPlace ? out.data() : in.data();
          for (size_t i = 0; i < count; ++i) src[i] = static_cast<float>((ctx.rank + 1) * (i % 7 + iter));
          late(iter);
          if (ncclAllReduce(src, out.data(), count, ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess)
            return fail("ncclAllReduce: " + std::string(ncclGetLastError(comm)), 11);
          if (!inPlace) std::memset(in.data(), 0xff, count * sizeof(float));
          for (size_t i = 0; i < count; ++i)
            if (out[i] != static_cast<float>(n * (n + 1) / 2) * static_cast<float>(i % 7 + iter))
              return fail("AllReduce of " + std::to_string(count) + how + " differs at " + std::to_string(i), 12);
        }
        for (size_t count : {size_t{1001}, size_t{40000}}) {
          std::vector<float> in(count), out(count * n);
          float* src = inPlace ? out.data() + ctx.rank * count : in.data();
          for (size_t i = 0; i < count; ++i) src[i] = valueOf(ctx.rank, iter, i);
          late(iter + 1);
          if (ncclAllGather(src, out.data(), count, ncclFloat32, comm, nullptr) != ncclSuccess)
            return fail("ncclAllGather: " + std::string(ncclGetLastError(comm)), 13);
          if (!inPlace) std::memset(in.data(), 0xff, count * sizeof(float));
          for (int p = 0; p < n; ++p)
            for (size_t i = 0; i < count; ++i)
              if (out[p * count + i] != valueOf(p, iter, i))
                return fail("AllGather of " + std::to_string(count) + how + ": block " + std::to_string(p) +
                                " differs at " + std::to_string(i), 14);
        }
        for (size_t count : {size_t{1001}, size_t{4000}}) {
          std::vector<float> in(count * n), out(count * n);
          float* src = inPlace ? out.data() : in.data();
          for (size_t i = 0; i < count * n; ++i) src[i] = static_cast<float>((ctx.rank + 1) * (i % 11 + iter));
          late(iter + 2);
          float* dst = inPlace ? out.data() + ctx.rank * count : out.data();
          if (ncclReduceScatter(src, dst, count, ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess)
            return fail("ncclReduceScatter: " + std::string(ncclGetLastError(comm)), 15);
          if (!inPlace) std::memset(in.data(), 0xff, count * n * sizeof(float));
          for (size_t i = 0; i < count; ++i) {
            const size_t e = ctx.rank * count + i;
            if (dst[i] != static_cast<float>(n * (n + 1) / 2) * static_cast<float>(e % 11 + iter))
              return fail("ReduceScatter of " + std::to_string(count) + how + " differs at " + std::to_string(i), 16);
          }
        }
        // Broadcast down a binomial tree (up to 512 KiB over the network by default): rank 0's message, once
        // forwarded by rank 1 to rank 3, and rank 2's, forwarded by rank 3 to rank 1.
        for (size_t count : {size_t{5}, size_t{20000}}) {
          for (int root : {0, 2}) {
            std::vector<float> in(count), out(count, -1.0f);
            float* src = inPlace ? out.data() : in.data();
            if (ctx.rank == root)
              for (size_t i = 0; i < count; ++i) src[i] = valueOf(root, iter, i);
            late(iter + 4);
            if (ncclBroadcast(src, out.data(), count, ncclFloat32, root, comm, nullptr) != ncclSuccess)
              return fail("ncclBroadcast: " + std::string(ncclGetLastError(comm)), 19);
            for (size_t i = 0; i < count; ++i)
              if (out[i] != valueOf(root, iter, i))
                return fail("Broadcast of " + std::to_string(count) + how + " from rank " + std::to_string(root) +
                                " differs at " + std::to_string(i), 20);
          }
        }
        // AlltoAll by Bruck's algorithm (up to 8 KiB per rank over the network by default).
        for (size_t count : {size_t{3}, size_t{1001}}) {
          std::vector<float> in(count * n), out(count * n);
          float* src = inPlace ? out.data() : in.data();
          for (int p = 0; p < n; ++p)
            for (size_t i = 0; i < count; ++i) src[p * count + i] = valueOf(ctx.rank * n + p, iter, i);
          late(iter + 3);
          if (ncclAlltoAll(src, out.data(), count, ncclFloat32, comm, nullptr) != ncclSuccess)
            return fail("ncclAlltoAll: " + std::string(ncclGetLastError(comm)), 17);
          if (!inPlace) std::memset(in.data(), 0xff, count * n * sizeof(float));
          for (int p = 0; p < n; ++p)
            for (size_t i = 0; i < count; ++i)
              if (out[p * count + i] != valueOf(p * n + ctx.rank, iter, i))
                return fail("AlltoAll of " + std::to_string(count) + how + ": block " + std::to_string(p) +
                                " differs at " + std::to_string(i), 18);
        }
      }
    }
    ncclCommDestroy(comm);
    return 0;
  });
  expectAllSucceeded(r, "");
}

// The deterministic exchange over sockets (3 processes, zero copy from the first byte): AllReduce of 100003 elements
// (one exchange) and 300007 (pipelined segments), ReduceScatter of blocks of 33335, in place and out of place, a late
// rank each time, the input overwritten as soon as the call returns. Inputs of mixed signs and exponents, so another
// order gives other bits: every rank's result must be tuttiDeterministicReduce's of the three inputs.
TEST(NetZeroCopy, DeterministicExchangeInPlaceAndOutOfPlace) {
  MpOptions opts = zeroCopyOptions();
  opts.env.push_back({"TUTTI_DETERMINISTIC", "1"});
  MpResult r = runProcesses(opts, [](const RankContext& ctx) {
    ncclComm_t comm = nullptr;
    if (int rc = initComm(ctx, &comm)) return rc;
    const int n = ctx.nranks;
    auto fail = [&](const std::string& what, int rc) { return failRank(comm, what, rc); };
    auto input = [](int rank, int iter, size_t i) {
      const int m = static_cast<int>((i * 2654435761u + static_cast<size_t>(rank) * 40503u + iter * 977u) % 2001u) - 1000;
      return std::ldexp(static_cast<float>(m) + 0.375f, static_cast<int>(i % 41) - 20);
    };
    // Every rank's input of `count` elements, and their deterministic sum.
    auto expected = [&](size_t count, int iter, std::vector<std::vector<float>>* rows, std::vector<float>* want) {
      rows->assign(n, std::vector<float>(count));
      std::vector<const void*> ptrs(n);
      for (int p = 0; p < n; ++p) {
        for (size_t i = 0; i < count; ++i) (*rows)[p][i] = input(p, iter, i);
        ptrs[p] = (*rows)[p].data();
      }
      want->resize(count);
      return tuttiDeterministicReduce(ptrs.data(), n, want->data(), count, ncclFloat32, ncclSum, nullptr);
    };
    auto late = [&](int iter) {
      if (ctx.rank == iter % n) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    };
    std::vector<std::vector<float>> rows;
    std::vector<float> want;
    for (int iter = 0; iter < 2; ++iter) {
      for (bool inPlace : {false, true}) {
        const std::string how = (inPlace ? " in place" : " out of place") + std::string(", iteration ") +
                                std::to_string(iter);
        for (size_t count : {size_t{100003}, size_t{300007}}) {
          if (expected(count, iter, &rows, &want) != ncclSuccess) return fail("tuttiDeterministicReduce failed", 10);
          std::vector<float> in(rows[ctx.rank]), out(count);
          float* src = in.data();
          if (inPlace) {
            out = in;
            src = out.data();
          }
          late(iter);
          if (ncclAllReduce(src, out.data(), count, ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess)
            return fail("ncclAllReduce: " + std::string(ncclGetLastError(comm)), 11);
          if (!inPlace) std::memset(in.data(), 0xff, count * sizeof(float));
          if (std::memcmp(out.data(), want.data(), count * sizeof(float)) != 0)
            return fail("deterministic AllReduce of " + std::to_string(count) + how + " differs from the reference", 12);
        }
        const size_t block = 33335;
        if (expected(block * n, iter, &rows, &want) != ncclSuccess) return fail("tuttiDeterministicReduce failed", 13);
        std::vector<float> in(rows[ctx.rank]), out(block);
        const float* src = in.data();
        float* dst = inPlace ? in.data() + ctx.rank * block : out.data();
        late(iter + 1);
        if (ncclReduceScatter(src, dst, block, ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess)
          return fail("ncclReduceScatter: " + std::string(ncclGetLastError(comm)), 14);
        if (std::memcmp(dst, want.data() + ctx.rank * block, block * sizeof(float)) != 0)
          return fail("deterministic ReduceScatter" + how + " differs from the reference", 15);
      }
    }
    ncclCommDestroy(comm);
    return 0;
  });
  expectAllSucceeded(r, "");
}


// Ring AllReduces, ReduceScatters, AllGathers and Broadcasts (forced: NCCL_ALGO=Ring, NCCL_PROTO=Simple) of small
// integers, whose sums are exact whatever the step, in place and out of place, with counts that leave a short last step, under
// TUTTI_NET_RING_STEP_BYTES=step (unset where empty); then whether every rank logged that the ring `colls` take steps
// of at most `want` bytes ("0": no such line).
void checkRingSteps(MpOptions opts, const char* step, const std::string& want, const std::string& colls) {
  SCOPED_TRACE(std::string("TUTTI_NET_RING_STEP_BYTES=") + step);
  opts.env.push_back({"NCCL_ALGO", "Ring"});
  opts.env.push_back({"NCCL_PROTO", "Simple"});
  opts.env.push_back({"NCCL_DEBUG", "INFO"});
  opts.env.push_back({"NCCL_DEBUG_SUBSYS", "INIT"});
  if (*step) opts.env.push_back({"TUTTI_NET_RING_STEP_BYTES", step});
  MpResult r = runProcesses(opts, [](const RankContext& ctx) {
    ncclComm_t comm = nullptr;
    if (int rc = initComm(ctx, &comm)) return rc;
    auto fail = [&](const std::string& what, int rc) { return failRank(comm, what, rc); };
    auto value = [](int rank, size_t i) {
      return static_cast<float>(static_cast<int>((i * 7 + static_cast<size_t>(rank) * 3) % 1001) - 500);
    };
    for (bool inPlace : {false, true}) {
      const std::string how = inPlace ? " in place" : " out of place";
      for (size_t count : {size_t{1}, size_t{4099}, size_t{300007}}) {
        std::vector<float> in(count), out(count);
        for (size_t i = 0; i < count; ++i) in[i] = value(ctx.rank, i);
        if (inPlace) out = in;
        const float* src = inPlace ? out.data() : in.data();
        if (ncclAllReduce(src, out.data(), count, ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess)
          return fail("ncclAllReduce: " + std::string(ncclGetLastError(comm)), 11);
        for (size_t i = 0; i < count; ++i) {
          float sum = 0;
          for (int p = 0; p < ctx.nranks; ++p) sum += value(p, i);
          if (out[i] != sum)
            return fail("AllReduce of " + std::to_string(count) + how + " differs at element " + std::to_string(i),
                        12);
        }
        // ReduceScatter: `count` elements per rank, this rank's block of n * count; in place, the output is that
        // block of the input.
        const size_t n = static_cast<size_t>(ctx.nranks), me = static_cast<size_t>(ctx.rank);
        std::vector<float> all(n * count), block(count);
        for (size_t i = 0; i < n * count; ++i) all[i] = value(ctx.rank, i);
        float* recv = inPlace ? all.data() + me * count : block.data();
        if (ncclReduceScatter(all.data(), recv, count, ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess)
          return fail("ncclReduceScatter: " + std::string(ncclGetLastError(comm)), 13);
        for (size_t i = 0; i < count; ++i) {
          float sum = 0;
          for (int p = 0; p < ctx.nranks; ++p) sum += value(p, me * count + i);
          if (recv[i] != sum)
            return fail("ReduceScatter of " + std::to_string(count) + how + " differs at element " +
                            std::to_string(i),
                        14);
        }
        // AllGather: block p of the output from rank p (in place: this rank's block of the output is its input);
        // Broadcast from the last rank.
        std::vector<float> gathered(n * count);
        std::copy(in.begin(), in.end(), gathered.begin() + me * count);
        const float* gsrc = inPlace ? gathered.data() + me * count : in.data();
        if (ncclAllGather(gsrc, gathered.data(), count, ncclFloat32, comm, nullptr) != ncclSuccess)
          return fail("ncclAllGather: " + std::string(ncclGetLastError(comm)), 15);
        for (size_t i = 0; i < n * count; ++i)
          if (gathered[i] != value(static_cast<int>(i / count), i % count))
            return fail("AllGather of " + std::to_string(count) + how + " differs at element " + std::to_string(i),
                        16);
        const int root = ctx.nranks - 1;
        std::vector<float> bcast(count, -1.0f);
        if (ctx.rank == root || inPlace) bcast = in;
        if (ncclBroadcast(inPlace ? bcast.data() : in.data(), bcast.data(), count, ncclFloat32, root, comm, nullptr) !=
            ncclSuccess)
          return fail("ncclBroadcast: " + std::string(ncclGetLastError(comm)), 17);
        for (size_t i = 0; i < count; ++i)
          if (bcast[i] != value(root, i))
            return fail("Broadcast of " + std::to_string(count) + how + " differs at element " + std::to_string(i),
                        18);
      }
    }
    ncclCommDestroy(comm);
    return 0;
  });
  expectAllSucceeded(r, "");
  for (const ChildResult& c : r.children) {
    const bool logged = c.output.find("ring " + colls + " steps of at most " + want + " bytes") != std::string::npos;
    EXPECT_EQ(logged, want != "0") << c.describe() << "\n" << c.output;
  }
}

// 2 processes over sockets take 256 KiB steps in a ring AllReduce unless told otherwise (a ReduceScatter keeps the
// whole slot); 100 bytes round down to 64, 4160 stays, 0 keeps the whole slot.
TEST(NetRingSteps, ShorterStepsThanTheSlotGiveTheSameSums) {
  for (const char* step : {"", "100", "4160", "0"}) {
    MpOptions opts = zeroCopyOptions();
    opts.nranks = 2;
    checkRingSteps(opts, step, *step == '\0' ? "262144" : std::string(step) == "100" ? "64" : step, "AllReduce");
  }
}

// Within a node (3 processes over shm, no network) the steps of all four are 128 KiB unless told otherwise.
TEST(NodeRingSteps, ShorterStepsThanTheSlotGiveTheSameSums) {
  for (const char* step : {"", "4160", "0"}) {
    MpOptions opts;
    opts.nranks = 3;
    opts.timeoutSeconds = 60;
    opts.env.push_back({"TUTTI_TIMEOUT", "30"});
    checkRingSteps(opts, step, *step == '\0' ? "131072" : step, "AllReduce, ReduceScatter, AllGather and Broadcast");
  }
}

// Within a node a point-to-point message past 8 steps of comm->p2pStepMaxBytes moves in steps of that many
// (TUTTI_P2P_STEP_BYTES; unset: 64 KiB for messages of at least 16 MiB / n, 4 MiB here). 4 processes over shm, an
// AlltoAll of grouped sends and receives whose messages take from one to hundreds of those steps (the last one short),
// twice in a row: every byte lands where it belongs, and every rank logs the step it took ("0": none).
TEST(NodeP2pSteps, BoundedStepsDeliverEveryByte) {
  for (const char* step : {"", "4160", "0"}) {
    SCOPED_TRACE(std::string("TUTTI_P2P_STEP_BYTES=") + step);
    const std::string want = *step == '\0' ? "65536" : step;
    MpOptions opts;
    opts.nranks = 4;
    opts.timeoutSeconds = 60;
    opts.env.push_back({"TUTTI_TIMEOUT", "30"});
    opts.env.push_back({"NCCL_DEBUG", "INFO"});
    opts.env.push_back({"NCCL_DEBUG_SUBSYS", "INIT"});
    if (*step) opts.env.push_back({"TUTTI_P2P_STEP_BYTES", step});
    MpResult r = runProcesses(opts, [](const RankContext& ctx) {
      ncclComm_t comm = nullptr;
      if (int rc = initComm(ctx, &comm)) return rc;
      auto fail = [&](const std::string& what, int rc) { return failRank(comm, what, rc); };
      const size_t n = static_cast<size_t>(ctx.nranks);
      // Element i of the message from rank s to rank d.
      auto value = [](size_t s, size_t d, size_t i) { return static_cast<uint32_t>(i * 2654435761u + s * 977 + d); };
      for (size_t count : {size_t{1000}, size_t{262145}, size_t{700001}, size_t{1100003}}) {
        for (int round = 0; round < 2; ++round) {
          std::vector<uint32_t> in(n * count), out(n * count, 0);
          for (size_t d = 0; d < n; ++d)
            for (size_t i = 0; i < count; ++i) in[d * count + i] = value(static_cast<size_t>(ctx.rank), d, i);
          ncclGroupStart();
          for (size_t p = 0; p < n; ++p) {
            ncclSend(in.data() + p * count, count, ncclUint32, static_cast<int>(p), comm, nullptr);
            ncclRecv(out.data() + p * count, count, ncclUint32, static_cast<int>(p), comm, nullptr);
          }
          if (ncclGroupEnd() != ncclSuccess) return fail("ncclGroupEnd: " + std::string(ncclGetLastError(comm)), 11);
          for (size_t s = 0; s < n; ++s)
            for (size_t i = 0; i < count; ++i)
              if (out[s * count + i] != value(s, static_cast<size_t>(ctx.rank), i))
                return fail("message of " + std::to_string(count) + " from rank " + std::to_string(s) +
                                " differs at element " + std::to_string(i),
                            12);
        }
      }
      ncclCommDestroy(comm);
      return 0;
    });
    expectAllSucceeded(r, "");
    for (const ChildResult& c : r.children) {
      const bool logged = c.output.find("take steps of at most " + want + " bytes") != std::string::npos;
      EXPECT_EQ(logged, want != "0") << c.describe() << "\n" << c.output;
    }
  }
}

// Broadcasts from each root down the binomial tree, AllReduces (one-shot, tree and ring sizes), AllGathers and
// AlltoAlls, 8 iterations with a late rank each time; the process's exit code says what went wrong.
int lateRankCollectives(const RankContext& ctx) {
  ncclComm_t comm = nullptr;
  if (int rc = initComm(ctx, &comm)) return rc;
  auto fail = [&](const std::string& what, int rc) { return failRank(comm, what, rc); };
  const int n = ctx.nranks;
  for (int iter = 0; iter < 8; ++iter) {
    auto late = [&] {
      if (ctx.rank == iter % n) std::this_thread::sleep_for(std::chrono::milliseconds(15));
    };
    const std::string at = " iteration " + std::to_string(iter);
    for (size_t count : {size_t{3}, size_t{50000}, size_t{300000}}) {
      std::vector<float> buf(count * n);
      const int root = iter % n;
      for (size_t i = 0; i < count; ++i) buf[i] = ctx.rank == root ? valueOf(root, iter, i) : -1.0f;
      late();
      if (ncclBroadcast(buf.data(), buf.data(), count, ncclFloat32, root, comm, nullptr) != ncclSuccess)
        return fail("ncclBroadcast of " + std::to_string(count) + at + ": " + ncclGetLastError(comm), 11);
      for (size_t i = 0; i < count; ++i)
        if (buf[i] != valueOf(root, iter, i))
          return fail("Broadcast of " + std::to_string(count) + at + " differs at " + std::to_string(i), 12);
      for (size_t i = 0; i < count; ++i) buf[i] = static_cast<float>((ctx.rank + 1) * (i % 7 + iter));
      late();
      if (ncclAllReduce(buf.data(), buf.data(), count, ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess)
        return fail("ncclAllReduce of " + std::to_string(count) + at + ": " + ncclGetLastError(comm), 13);
      const float ranksSum = static_cast<float>(n * (n + 1) / 2);
      for (size_t i = 0; i < count; ++i)
        if (buf[i] != ranksSum * static_cast<float>(i % 7 + iter))
          return fail("AllReduce of " + std::to_string(count) + at + " differs at " + std::to_string(i), 14);
      std::vector<float> mine(count);
      for (size_t i = 0; i < count; ++i) mine[i] = valueOf(ctx.rank, iter, i);
      late();
      if (ncclAllGather(mine.data(), buf.data(), count, ncclFloat32, comm, nullptr) != ncclSuccess)
        return fail("ncclAllGather of " + std::to_string(count) + at + ": " + ncclGetLastError(comm), 15);
      for (int p = 0; p < n; ++p)
        for (size_t i = 0; i < count; ++i)
          if (buf[p * count + i] != valueOf(p, iter, i))
            return fail("AllGather of " + std::to_string(count) + at + ": block of rank " + std::to_string(p) +
                            " differs at " + std::to_string(i), 16);
      // AlltoAll: block p of this rank's input goes to rank p (grouped sends and receives from 4 KiB a block).
      const size_t block = count / n;
      std::vector<float> in(block * n), out(block * n, -1.0f);
      for (int p = 0; p < n; ++p)
        for (size_t i = 0; i < block; ++i) in[p * block + i] = valueOf(ctx.rank * n + p, iter, i);
      late();
      if (block > 0 && ncclAlltoAll(in.data(), out.data(), block, ncclFloat32, comm, nullptr) != ncclSuccess)
        return fail("ncclAlltoAll of " + std::to_string(block) + at + ": " + ncclGetLastError(comm), 17);
      for (int p = 0; p < n; ++p)
        for (size_t i = 0; i < block; ++i)
          if (out[p * block + i] != valueOf(p * n + ctx.rank, iter, i))
            return fail("AlltoAll of " + std::to_string(block) + at + ": block from rank " + std::to_string(p) +
                            " differs at " + std::to_string(i), 18);
    }
  }
  ncclCommDestroy(comm);
  return 0;
}

// Waits in the net plugin (tuttiNetWait_v1, TUTTI_NET_PLUGIN_WAIT): 4 processes over sockets, no polls before a
// wait sleeps, so every wait on the network sleeps at once, in the plugin where it can: the collectives of
// lateRankCollectives give the right results; the INIT log says whether waits sleep in the plugin; and the same run
// with the proxy thread's futex hand-over instead agrees.
TEST(NetPluginWait, LateRanksWakeTheirPeersThroughTheirSockets) {
  for (const char* pluginWait : {"1", "0"}) {
    SCOPED_TRACE(std::string("TUTTI_NET_PLUGIN_WAIT=") + pluginWait);
    MpOptions opts = zeroCopyOptions();
    opts.nranks = 4;
    opts.env.push_back({"TUTTI_NET_PLUGIN_WAIT", pluginWait});
    opts.env.push_back({"TUTTI_NET_SPIN_COUNT", "0"});
    opts.env.push_back({"TUTTI_NET_BCAST_SPIN_COUNT", "0"});
    opts.env.push_back({"NCCL_DEBUG", "INFO"});
    opts.env.push_back({"NCCL_DEBUG_SUBSYS", "INIT"});
    MpResult r = runProcesses(opts, lateRankCollectives);
    expectAllSucceeded(r, "");
    const bool wanted = std::string(pluginWait) == "1";
    for (const ChildResult& c : r.children) {
      const bool logged = c.output.find("waits sleep in the plugin (tuttiNetWait_v1)") != std::string::npos;
      EXPECT_EQ(logged, wanted) << c.describe() << "\n" << c.output;
    }
  }
}

// A plugin that turns every other isend and irecv away as busy (a null request: post again later) and has a blocking
// wait (busy_net.c, net-socket underneath): a step the plugin turned away is not in flight, and a rank that sleeps in
// the plugin's wait must still post it, or the peer waiting for it never wakes. The same collectives, zero copy and
// through the FIFOs, with every wait sleeping at once; TUTTI_TIMEOUT turns a lost step into a failure.
TEST(NetPluginWait, StepsThePluginTurnsAwayStillLeaveWhileRanksSleepInIt) {
  for (const char* zeroCopy : {"1", "0"}) {
    SCOPED_TRACE(std::string("TUTTI_NET_ZERO_COPY_MIN_BYTES=") + zeroCopy);
    MpOptions opts = zeroCopyOptions();
    opts.nranks = 4;
    opts.env.push_back({"NCCL_NET_PLUGIN", TUTTI_TEST_BUSY_NET});
    opts.env.push_back({"TUTTI_NET_ZERO_COPY_MIN_BYTES", zeroCopy});
    opts.env.push_back({"TUTTI_NET_PLUGIN_WAIT", "1"});
    opts.env.push_back({"TUTTI_NET_SPIN_COUNT", "0"});
    opts.env.push_back({"TUTTI_NET_BCAST_SPIN_COUNT", "0"});
    opts.env.push_back({"NCCL_DEBUG", "INFO"});
    opts.env.push_back({"NCCL_DEBUG_SUBSYS", "INIT,NET"});
    MpResult r = runProcesses(opts, lateRankCollectives);
    expectAllSucceeded(r, "");
    for (const ChildResult& c : r.children) {
      EXPECT_NE(c.output.find("busy-socket"), std::string::npos) << c.describe() << "\n" << c.output;
      EXPECT_NE(c.output.find("waits sleep in the plugin (tuttiNetWait_v1)"), std::string::npos)
          << c.describe() << "\n" << c.output;
    }
  }
}

// Each rank is given its own read cost (as if each had measured another); every rank must settle on the median and
// the AllGather, AllReduce and deterministic AllReduce thresholds that follow from it, log them alike, its
// AllGathers, AlltoAlls and AllReduces on either side of the thresholds must give every block and sum, and its
// deterministic AllReduce the reference's bits.
TEST(DirectReadCost, RanksSettleOnTheMedianCost) {
  struct Case {
    std::vector<int> costs;  // per rank, percent
    const char* median;      // as logged
    size_t gatherMin;        // 0: never (the reads are costly)
    size_t gatherMax;        // 0: no bound
    size_t alltoallMin;  // 0: not checked (on 3 ranks it depends on the host's cores, not on the cost)
    size_t alltoallMax;  // 0: no bound
    size_t detMin;       // deterministic AllReduce (0: never, the exchange)
    size_t reduceMin;    // AllReduce (0: never, the ring)
    const char* logged;  // more of the init line, or null: the AlltoAll threshold of costly reads
    size_t bcastMin;     // 2 ranks with a core each: the Broadcast threshold (0: not checked)
  };
  const Case cases[] = {
      {{400, 100, 300}, "3.00", 0, 0, 0, 0, 0, 0, "AlltoAll from 0 bytes,", 0},
      {{100, 400, 200}, "2.00", size_t{256} << 10, 0, 0, 0, size_t{256} << 10, size_t{256} << 10, nullptr, 0},
      // Costly on 2 ranks: AllGather copies and AlltoAll sends and receives at every size, Broadcast reads from 512 KiB,
      // AllReduce the ring.
      {{260, 90}, "2.60", 0, 0, 0, 0, 0, 0, "AlltoAll from 0 bytes,", size_t{512} << 10},
      {{120, 240}, "2.40", size_t{128} << 10, 0, size_t{128} << 10, 0, size_t{256} << 10, 0, nullptr,
       size_t{128} << 10},
      // 8 ranks: AlltoAll reads from 128 MiB (not called here: the log says it).
      {{300, 300, 300, 300, 300, 300, 300, 300}, "3.00", 0, 0, 0, 0, 0, 0, "AlltoAll from 134217728 bytes,", 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE("costs " + std::to_string(c.costs[0]) + "," + std::to_string(c.costs[1]));
    MpOptions opts;
    opts.nranks = static_cast<int>(c.costs.size());
    opts.env = {{"NCCL_DEBUG", "INFO"}, {"NCCL_DEBUG_SUBSYS", "INIT,COLL"}, {"TUTTI_TIMEOUT", "30"}};
    opts.rankEnv = [&c](int rank) { return EnvList{{"TUTTI_DIRECT_READ_COST", std::to_string(c.costs[rank])}}; };
    // Output bytes just below and at each threshold (whole elements per rank), and a small call.
    const size_t n = c.costs.size(), unit = 4 * n;
    auto atLeast = [unit](size_t bytes) { return (bytes + unit - 1) / unit * unit; };
    // Where no AllGather reads: 1 and 2 MiB, where the reads once began at this cost.
    std::vector<size_t> sizes{size_t{4096} * n};
    if (c.gatherMin) sizes.insert(sizes.end(), {atLeast(c.gatherMin) - unit, atLeast(c.gatherMin)});
    else sizes.insert(sizes.end(), {atLeast(size_t{1} << 20), atLeast(size_t{2} << 20)});
    if (c.gatherMax) sizes.insert(sizes.end(), {atLeast(c.gatherMax) - unit, atLeast(c.gatherMax)});
    if (c.alltoallMin) sizes.insert(sizes.end(), {atLeast(c.alltoallMin) - unit, atLeast(c.alltoallMin)});
    if (c.alltoallMax) sizes.insert(sizes.end(), {atLeast(c.alltoallMax) - unit, atLeast(c.alltoallMax)});
    // AllReduce: 256 KiB, where reads that cost less than 2.5 copies take 3 or 4 ranks' calls, and just below.
    const size_t reduceAt = atLeast(size_t{256} << 10);
    sizes.insert(sizes.end(), {reduceAt - unit, reduceAt});
    MpResult r = runProcesses(opts, [&c, &sizes](const RankContext& ctx) {
      ncclComm_t comm = nullptr;
      if (int rc = initComm(ctx, &comm)) return rc;
      auto fail = [&](const std::string& what, int rc) { return failRank(comm, what, rc); };
      const size_t n = static_cast<size_t>(ctx.nranks);
      for (size_t outBytes : sizes) {
        const size_t block = outBytes / n / sizeof(float);
        std::vector<float> in(block * n), out(block * n, -1.0f);
        for (size_t i = 0; i < in.size(); ++i) in[i] = valueOf(ctx.rank, 0, i);
        if (ncclAllGather(in.data(), out.data(), block, ncclFloat32, comm, nullptr) != ncclSuccess)
          return fail("ncclAllGather: " + std::string(ncclGetLastError(comm)), 11);
        for (size_t p = 0; p < n; ++p)
          for (size_t i = 0; i < block; ++i)
            if (out[p * block + i] != valueOf(static_cast<int>(p), 0, i))
              return fail("AllGather of " + std::to_string(outBytes) + " bytes: block " + std::to_string(p) +
                          " differs at " + std::to_string(i), 12);
        if (ncclAlltoAll(in.data(), out.data(), block, ncclFloat32, comm, nullptr) != ncclSuccess)
          return fail("ncclAlltoAll: " + std::string(ncclGetLastError(comm)), 13);
        for (size_t p = 0; p < n; ++p)
          for (size_t i = 0; i < block; ++i)
            if (out[p * block + i] != valueOf(static_cast<int>(p), 0, static_cast<size_t>(ctx.rank) * block + i))
              return fail("AlltoAll of " + std::to_string(outBytes) + " bytes: block " + std::to_string(p) +
                          " differs at " + std::to_string(i), 14);
        // An AllReduce of the same bytes (integers in float: every order gives the same sum).
        std::vector<float> sum(block * n, -1.0f);
        if (ncclAllReduce(in.data(), sum.data(), block * n, ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess)
          return fail("ncclAllReduce: " + std::string(ncclGetLastError(comm)), 19);
        for (size_t i = 0; i < block * n; ++i) {
          float want = 0;
          for (size_t p = 0; p < n; ++p) want += valueOf(static_cast<int>(p), 0, i);
          if (sum[i] != want)
            return fail("AllReduce of " + std::to_string(outBytes) + " bytes differs at " + std::to_string(i), 20);
        }
      }
      // A deterministic AllReduce at the direct path's threshold (read or exchanged, as the cost decided): the
      // reference's bits.
      if (tuttiCommSetDeterministic(comm, 1) != ncclSuccess) return fail("tuttiCommSetDeterministic", 15);
      const size_t count = (size_t{256} << 10) / sizeof(float);
      std::vector<std::vector<float>> rows(n, std::vector<float>(count));
      std::vector<const void*> ptrs(n);
      for (size_t p = 0; p < n; ++p) {
        for (size_t i = 0; i < count; ++i)
          rows[p][i] = std::ldexp(valueOf(static_cast<int>(p), 1, i) - 0.5f, static_cast<int>(i % 29) - 14);
        ptrs[p] = rows[p].data();
      }
      std::vector<float> want(count), got(count);
      if (tuttiDeterministicReduce(ptrs.data(), ctx.nranks, want.data(), count, ncclFloat32, ncclSum, nullptr) !=
          ncclSuccess)
        return fail("tuttiDeterministicReduce", 16);
      if (ncclAllReduce(rows[ctx.rank].data(), got.data(), count, ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess)
        return fail("ncclAllReduce: " + std::string(ncclGetLastError(comm)), 17);
      if (std::memcmp(got.data(), want.data(), count * sizeof(float)) != 0)
        return fail("deterministic AllReduce of 256 KiB differs from the reference", 18);
      ncclCommDestroy(comm);
      return 0;
    });
    expectAllSucceeded(r, "");
    const std::string want = "single-copy AllGather from " + std::to_string(c.gatherMin) + " bytes" +
                             (c.gatherMax ? " below " + std::to_string(c.gatherMax) + " bytes," : ",");
    const std::string wantA2a = "AlltoAll from " + std::to_string(c.alltoallMin) + " bytes" +
                                (c.alltoallMax ? " below " + std::to_string(c.alltoallMax) + " bytes," : ",");
    const std::string wantCost = std::string("a read costing ") + c.median + " copies";
    const std::string wantDet = "(deterministic: " + std::to_string(c.detMin) + " and ";
    const std::string wantReduce = "AllReduce from " + std::to_string(c.reduceMin) + " bytes,";
    for (const ChildResult& child : r.children) {
      EXPECT_NE(child.output.find(want), std::string::npos) << child.describe() << "\n" << child.output;
      if (c.alltoallMin) {
        EXPECT_NE(child.output.find(wantA2a), std::string::npos) << child.describe() << "\n" << child.output;
      }
      EXPECT_NE(child.output.find(wantCost), std::string::npos) << child.describe() << "\n" << child.output;
      if (c.logged) {
        EXPECT_NE(child.output.find(c.logged), std::string::npos) << child.describe() << "\n" << child.output;
      }
      if (c.bcastMin && std::thread::hardware_concurrency() >= 2) {
        const std::string wantBcast = "Broadcast from " + std::to_string(c.bcastMin) + " bytes,";
        EXPECT_NE(child.output.find(wantBcast), std::string::npos) << child.describe() << "\n" << child.output;
      }
      EXPECT_NE(child.output.find(wantDet), std::string::npos) << child.describe() << "\n" << child.output;
      EXPECT_NE(child.output.find(wantReduce), std::string::npos) << child.describe() << "\n" << child.output;
      // The algorithm of the first call of `func` over `bytes` in the call lines of NCCL_DEBUG_SUBSYS=COLL ("" where
      // there is none).
      auto algoOf = [&](const char* func, size_t bytes) {
        const std::regex line(std::string(func) + ": opCount [0-9]+ count [0-9]+ bytes " + std::to_string(bytes) +
                              " .* algo ([A-Za-z]+) ");
        std::smatch m;
        return std::regex_search(child.output, m, line) ? m[1].str() : std::string();
      };
      for (size_t bytes : {reduceAt - unit, reduceAt}) {
        const bool direct = c.reduceMin > 0 && bytes >= c.reduceMin;
        const std::string algo = algoOf("AllReduce", bytes);
        ASSERT_FALSE(algo.empty()) << bytes << "\n" << child.output;
        EXPECT_EQ(algo == "DIRECT", direct) << "AllReduce of " << bytes << " bytes took " << algo << "\n"
                                            << child.describe();
      }
      // Each AllGather of the sweep reads the peers' buffers exactly where the thresholds say, the ring or one-shot
      // elsewhere.
      for (size_t bytes : sizes) {
        const bool direct = c.gatherMin > 0 && bytes >= c.gatherMin && (c.gatherMax == 0 || bytes < c.gatherMax);
        const std::string algo = algoOf("AllGather", bytes);
        ASSERT_FALSE(algo.empty()) << bytes << "\n" << child.output;
        EXPECT_EQ(algo == "DIRECT", direct) << "AllGather of " << bytes << " bytes took " << algo << "\n"
                                            << child.describe();
        if (!c.alltoallMin) continue;
        const bool directA2a = bytes >= c.alltoallMin && (c.alltoallMax == 0 || bytes < c.alltoallMax);
        // (Sends and receives log as point-to-point operations, not as an AlltoAll.)
        const std::regex a2a("AlltoAll: opCount [0-9]+ count [0-9]+ bytes " + std::to_string(bytes) +
                             " .* algo DIRECT ");
        EXPECT_EQ(std::regex_search(child.output, a2a), directA2a)
            << "AlltoAll of " << bytes << " bytes, single copy expected: " << directA2a << "\n" << child.describe();
      }
    }
  }
}

// Ranks of one host given different lane bounds (TUTTI_LL_LANE_REGION_BYTES: none, 1 KiB, 4 KiB): the two ends of
// each connection must agree on where step s lies, or a receiver polls a lane its sender never wrote. Thousands of
// small calls of the one-shot and binomial paths (lanes of 64 B to 4 KiB, each wrapping many times), every result
// checked.
TEST(LaneRegion, RanksWithDifferentBoundsAgreePerConnection) {
  MpOptions opts;
  opts.nranks = 3;
  opts.timeoutSeconds = 60;
  opts.env = {{"TUTTI_TIMEOUT", "30"}, {"NCCL_DEBUG", "WARN"}};
  const char* regions[] = {"0", "1024", "4096"};
  opts.rankEnv = [&regions](int rank) { return EnvList{{"TUTTI_LL_LANE_REGION_BYTES", regions[rank]}}; };
  MpResult r = runProcesses(opts, [](const RankContext& ctx) {
    ncclComm_t comm = nullptr;
    if (int rc = initComm(ctx, &comm)) return rc;
    auto fail = [&](const std::string& what, int rc) { return failRank(comm, what, rc); };
    const size_t n = static_cast<size_t>(ctx.nranks);
    const size_t counts[] = {2, 25, 250, 700};  // floats per rank: 8 B to 2800 B
    for (int iter = 0; iter < 400; ++iter) {
      const size_t count = counts[iter % 4];
      const std::string at = " of " + std::to_string(count) + " floats, call " + std::to_string(iter);
      std::vector<float> in(count * n), out(count * n, -1.0f);
      for (size_t i = 0; i < in.size(); ++i) in[i] = valueOf(ctx.rank, iter, i);
      if (ncclAllReduce(in.data(), out.data(), count, ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess)
        return fail("ncclAllReduce" + at + ": " + ncclGetLastError(comm), 11);
      for (size_t i = 0; i < count; ++i) {
        float want = 0;
        for (size_t p = 0; p < n; ++p) want += valueOf(static_cast<int>(p), iter, i);
        if (out[i] != want) return fail("AllReduce" + at + " differs at " + std::to_string(i), 12);
      }
      if (ncclAlltoAll(in.data(), out.data(), count, ncclFloat32, comm, nullptr) != ncclSuccess)
        return fail("ncclAlltoAll" + at + ": " + ncclGetLastError(comm), 13);
      for (size_t p = 0; p < n; ++p)
        for (size_t i = 0; i < count; ++i)
          if (out[p * count + i] != valueOf(static_cast<int>(p), iter, static_cast<size_t>(ctx.rank) * count + i))
            return fail("AlltoAll" + at + ": block " + std::to_string(p) + " differs at " + std::to_string(i), 14);
      if (ncclAllGather(in.data(), out.data(), count, ncclFloat32, comm, nullptr) != ncclSuccess)
        return fail("ncclAllGather" + at + ": " + ncclGetLastError(comm), 15);
      for (size_t p = 0; p < n; ++p)
        for (size_t i = 0; i < count; ++i)
          if (out[p * count + i] != valueOf(static_cast<int>(p), iter, i))
            return fail("AllGather" + at + ": block " + std::to_string(p) + " differs at " + std::to_string(i), 16);
      const int root = iter % ctx.nranks;
      if (ncclBroadcast(in.data(), out.data(), count, ncclFloat32, root, comm, nullptr) != ncclSuccess)
        return fail("ncclBroadcast" + at + ": " + ncclGetLastError(comm), 17);
      for (size_t i = 0; i < count; ++i)
        if (out[i] != valueOf(root, iter, i)) return fail("Broadcast" + at + " differs at " + std::to_string(i), 18);
    }
    ncclCommDestroy(comm);
    return 0;
  });
  expectAllSucceeded(r, "");
}

}  // namespace

}  // namespace tutti::itest
