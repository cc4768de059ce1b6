// Zero copy over the network (TUTTI_NET_ZERO_COPY_MIN_BYTES): ranks as processes over net-socket, every
// non-empty Simple step moving straight between user buffers and the wire. The cases here are the ones where a
// user buffer is in flight when the caller touches it again:
// - a buffer written right after the call returns: what the peers received must be what it held during the
//   call (sends from user buffers complete before the call returns);
// - a group that sends a buffer and receives into the same buffer (an in-place ring shift): every rank must get
//   its predecessor's old data, as through the FIFOs.
#include "mp_check.h"
#include "mp_harness.h"

#include <gtest/gtest.h>

#include <nccl.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace tutti::itest {
namespace {

constexpr int kRanks = 3;

MpOptions zeroCopyOptions() {
  MpOptions opts;
  opts.nranks = kRanks;
  opts.timeoutSeconds = 60;
  opts.env = netOverLoopbackEnv();
  opts.env.push_back({"TUTTI_NET_ZERO_COPY_MIN_BYTES", "1"});
  opts.env.push_back({"TUTTI_TIMEOUT", "30"});
  opts.env.push_back({"NCCL_DEBUG", "WARN"});
  return opts;
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

}  // namespace
}  // namespace tutti::itest
