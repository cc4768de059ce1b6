// One-sided communication through the public API, written as NCCL's own examples are: every rank registers
// a window (ncclMemAlloc + ncclCommWindowRegister), puts its data into the next rank's window with a signal
// (ncclPutSignal), waits for the previous rank's signal (ncclWaitSignal) and checks every byte.
//
// Ranks run as threads of this process and, in RmaProcesses, as forked processes, where the windows of
// other processes are reached through their exported memory. The same tests run on the sim backend (ctest
// name suffix .sim).
#include <gtest/gtest.h>
#include <nccl.h>
#include <tutti.h>

#include "../common/forked_ranks.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

// Byte `i` of what `rank` sends in round `round`: differs per rank, round and position.
uint8_t pattern(int rank, int round, size_t i) {
  return static_cast<uint8_t>((rank * 131 + round * 17 + i * 7 + (i >> 8)) & 0xff);
}

// Runs body(rank) on one thread per rank and collects failures as text (threads never touch gtest).
std::vector<std::string> onThreads(int nRanks, const std::function<std::string(int)>& body) {
  std::vector<std::string> errors(nRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < nRanks; ++r) threads.emplace_back([&, r] { errors[r] = body(r); });
  for (auto& t : threads) t.join();
  std::vector<std::string> failed;
  for (int r = 0; r < nRanks; ++r)
    if (!errors[r].empty()) failed.push_back("rank " + std::to_string(r) + ": " + errors[r]);
  return failed;
}

#define RMA_OK(call)                                                                                      \
  do {                                                                                                    \
    ncclResult_t res_ = (call);                                                                           \
    if (res_ != ncclSuccess) return std::string(#call) + " -> " + ncclGetErrorString(res_) + ": " +     \
                                    ncclGetLastError(nullptr);                                            \
  } while (0)

// The ring exchange of one rank: `rounds` times, put `bytes` into the next rank's window (at an offset that
// moves every round) with a signal, wait for the previous rank's, and check what arrived. With `stream`,
// every call is queued there and the stream is synchronized before checking.
std::string ringExchange(ncclComm_t comm, int rank, int nRanks, size_t bytes, int rounds, cudaStream_t stream) {
  const size_t winBytes = bytes * 2 + 64;
  void* sendBuf = nullptr;
  void* winBuf = nullptr;
  RMA_OK(ncclMemAlloc(&sendBuf, bytes ? bytes : 1));
  RMA_OK(ncclMemAlloc(&winBuf, winBytes));
  std::memset(winBuf, 0xee, winBytes);
  ncclWindow_t win = nullptr;
  RMA_OK(ncclCommWindowRegister(comm, winBuf, winBytes, &win, NCCL_WIN_COLL_SYMMETRIC));
  void* user = nullptr;
  RMA_OK(ncclWinGetUserPtr(comm, win, &user));
  if (user != winBuf) return "ncclWinGetUserPtr does not give the registered buffer back";
  const int next = (rank + 1) % nRanks, prev = (rank + nRanks - 1) % nRanks;
  auto* out = static_cast<uint8_t*>(sendBuf);
  auto* in = static_cast<uint8_t*>(winBuf);
  for (int round = 0; round < rounds; ++round) {
    const size_t offset = (round % 3) * 16;
    for (size_t i = 0; i < bytes; ++i) out[i] = pattern(rank, round, i);
    // A barrier-free ring: the window a put lands in is read only after its signal, and the next round's
    // put goes to another offset only once the reader signalled back (ncclSignal) that it has checked.
    RMA_OK(ncclPutSignal(sendBuf, bytes, ncclUint8, next, win, offset, 0, 0, 0, comm, stream));
    ncclWaitSignalDesc_t desc{1, prev, 0, 0};
    RMA_OK(ncclWaitSignal(1, &desc, comm, stream));
    if (stream) RMA_OK(tuttiStreamSynchronize(stream));
    for (size_t i = 0; i < bytes; ++i)
      if (in[offset + i] != pattern(prev, round, i))
        return "round " + std::to_string(round) + ": byte " + std::to_string(i) + " is " +
               std::to_string(in[offset + i]) + ", expected " + std::to_string(pattern(prev, round, i));
    // Tell the previous rank its data was read, and wait for the next rank to have read ours, before
    // sendBuf and the next window slot are reused.
    RMA_OK(ncclSignal(prev, 0, 0, 0, comm, stream));
    ncclWaitSignalDesc_t ack{1, next, 0, 0};
    RMA_OK(ncclWaitSignal(1, &ack, comm, stream));
    if (stream) RMA_OK(tuttiStreamSynchronize(stream));
  }
  RMA_OK(ncclCommWindowDeregister(comm, win));
  RMA_OK(ncclMemFree(winBuf));
  RMA_OK(ncclMemFree(sendBuf));
  return {};
}

class RmaThreads : public ::testing::TestWithParam<int> {};

// One thread per rank, each with its communicator (ncclGetUniqueId + ncclCommInitRank), running body(comm, rank).
void onCommThreads(int n, const std::function<std::string(ncclComm_t, int)>& body) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  auto failed = onThreads(n, [&](int r) -> std::string {
    ncclComm_t comm = nullptr;
    RMA_OK(ncclCommInitRank(&comm, n, id, r));
    const std::string e = body(comm, r);
    RMA_OK(ncclCommDestroy(comm));
    return e;
  });
  for (auto& f : failed) ADD_FAILURE() << f;
}

TEST_P(RmaThreads, PutSignalRingDeliversEveryByte) {
  const int n = GetParam();
  onCommThreads(n, [n](ncclComm_t comm, int r) -> std::string {
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{4093}, size_t{1} << 20}) {
      std::string e = ringExchange(comm, r, n, bytes, 4, nullptr);
      if (!e.empty()) return "bytes " + std::to_string(bytes) + ": " + e;
    }
    return std::string();
  });
}

TEST_P(RmaThreads, PutSignalRingOnHostStreams) {
  const int n = GetParam();
  onCommThreads(n, [n](ncclComm_t comm, int r) -> std::string {
    cudaStream_t s = nullptr;
    RMA_OK(tuttiStreamCreate(&s));
    std::string e = ringExchange(comm, r, n, 65536 + 3, 5, s);
    RMA_OK(tuttiStreamDestroy(s));
    return e;
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, RmaThreads, ::testing::Values(1, 2, 3, 5));

// One thread drives every rank, as with ncclCommInitAll: registrations and operations go in groups, which
// run every put and signal before any wait.
TEST(RmaGroup, OneThreadDrivesEveryRank) {
  constexpr int n = 4;
  constexpr size_t kBytes = 10000;
  std::vector<ncclComm_t> comms(n);
  ASSERT_EQ(ncclCommInitAll(comms.data(), n, nullptr), ncclSuccess);
  std::vector<void*> send(n), win(n);
  std::vector<ncclWindow_t> wins(n);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(ncclMemAlloc(&send[r], kBytes), ncclSuccess);
    ASSERT_EQ(ncclMemAlloc(&win[r], kBytes * n), ncclSuccess);
    for (size_t i = 0; i < kBytes; ++i) static_cast<uint8_t*>(send[r])[i] = pattern(r, 0, i);
    ASSERT_EQ(ncclCommWindowRegister(comms[r], win[r], kBytes * n, &wins[r], NCCL_WIN_COLL_SYMMETRIC), ncclSuccess);
    EXPECT_EQ(wins[r], nullptr) << "the window is made at the group end";
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  // An all-to-all of puts: rank r writes its block at offset r of every rank's window, then waits for all.
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  std::vector<ncclWaitSignalDesc_t> descs(n);
  for (int r = 0; r < n; ++r) {
    ASSERT_NE(wins[r], nullptr);
    for (int p = 0; p < n; ++p) descs[p] = ncclWaitSignalDesc_t{1, p, 0, 0};
    ASSERT_EQ(ncclWaitSignal(n, descs.data(), comms[r], nullptr), ncclSuccess);  // issued after the puts
    for (int p = 0; p < n; ++p)
      ASSERT_EQ(ncclPutSignal(send[r], kBytes, ncclUint8, p, wins[r], r * kBytes, 0, 0, 0, comms[r], nullptr),
                ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  for (int r = 0; r < n; ++r)
    for (int p = 0; p < n; ++p)
      for (size_t i = 0; i < kBytes; ++i)
        ASSERT_EQ(static_cast<uint8_t*>(win[r])[p * kBytes + i], pattern(p, 0, i)) << "rank " << r << " from " << p;
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(ncclCommWindowDeregister(comms[r], wins[r]), ncclSuccess);
    EXPECT_EQ(ncclMemFree(win[r]), ncclSuccess);
    EXPECT_EQ(ncclMemFree(send[r]), ncclSuccess);
    EXPECT_EQ(ncclCommDestroy(comms[r]), ncclSuccess);
  }
}

// Misuse fails with a message and loses nothing: the window stays usable afterwards.
TEST(RmaErrors, MisuseIsRefusedWithAMessage) {
  constexpr int n = 2;
  std::vector<ncclComm_t> comms(n);
  ASSERT_EQ(ncclCommInitAll(comms.data(), n, nullptr), ncclSuccess);
  uint8_t local[64] = {};
  // Before any window.
  EXPECT_EQ(ncclPutSignal(local, 4, ncclUint8, 1, nullptr, 0, 0, 0, 0, comms[0], nullptr), ncclInvalidUsage);
  EXPECT_NE(std::string(ncclGetLastError(comms[0])).find("no window"), std::string::npos) << ncclGetLastError(comms[0]);
  std::vector<std::vector<uint8_t>> bufs(n, std::vector<uint8_t>(256));
  std::vector<ncclWindow_t> wins(n);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; ++r) ASSERT_EQ(ncclCommWindowRegister(comms[r], bufs[r].data(), 256, &wins[r], 0), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  // Past the window's end, and an offset past it.
  EXPECT_EQ(ncclPutSignal(local, 64, ncclUint8, 1, wins[0], 200, 0, 0, 0, comms[0], nullptr), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(comms[0])).find("do not fit"), std::string::npos);
  EXPECT_EQ(ncclPutSignal(local, 1, ncclUint8, 1, wins[0], SIZE_MAX, 0, 0, 0, comms[0], nullptr), ncclInvalidArgument);
  // Another communicator's window, a stale pointer, signal index / context / flags NCCL reserves.
  EXPECT_EQ(ncclPutSignal(local, 4, ncclUint8, 0, wins[0], 0, 0, 0, 0, comms[1], nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclPutSignal(local, 4, ncclUint8, 1, wins[0], 0, 1, 0, 0, comms[0], nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclSignal(1, 0, 1, 0, comms[0], nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclSignal(1, 0, 0, 4, comms[0], nullptr), ncclInvalidArgument);
  ncclWaitSignalDesc_t bad{-1, 1, 0, 0};
  EXPECT_EQ(ncclWaitSignal(1, &bad, comms[0], nullptr), ncclInvalidArgument);
  void* p = nullptr;
  EXPECT_EQ(ncclWinGetUserPtr(comms[0], wins[1], &p), ncclInvalidArgument);
  EXPECT_EQ(ncclCommWindowRegister(comms[0], local, 64, &wins[0], 0x80), ncclInvalidArgument);
  // Nothing was lost: a put with signal still lands.
  for (int i = 0; i < 64; ++i) local[i] = static_cast<uint8_t>(i + 1);
  ASSERT_EQ(ncclPutSignal(local, 64, ncclUint8, 1, wins[0], 192, 0, 0, 0, comms[0], nullptr), ncclSuccess);
  ncclWaitSignalDesc_t d{1, 0, 0, 0};
  ASSERT_EQ(ncclWaitSignal(1, &d, comms[1], nullptr), ncclSuccess);
  EXPECT_EQ(std::memcmp(bufs[1].data() + 192, local, 64), 0);
  // Deregistering twice.
  EXPECT_EQ(ncclCommWindowDeregister(comms[0], wins[0]), ncclSuccess);
  EXPECT_EQ(ncclCommWindowDeregister(comms[0], wins[0]), ncclInvalidArgument);
  EXPECT_EQ(ncclCommWindowDeregister(comms[1], wins[1]), ncclSuccess);
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

// A wait whose signal never comes ends with an error naming the rank, the call and the peer (TUTTI_TIMEOUT).
TEST(RmaErrors, AWaitThatCannotFinishTimesOut) {
  ASSERT_EQ(setenv("TUTTI_TIMEOUT", "1", 1), 0);
  constexpr int n = 2;
  std::vector<ncclComm_t> comms(n);
  ASSERT_EQ(ncclCommInitAll(comms.data(), n, nullptr), ncclSuccess);
  unsetenv("TUTTI_TIMEOUT");
  std::vector<uint8_t> buf(n * 64);
  std::vector<ncclWindow_t> wins(n);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; ++r) ASSERT_EQ(ncclCommWindowRegister(comms[r], buf.data() + r * 64, 64, &wins[r], 0), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  ASSERT_EQ(ncclSignal(0, 0, 0, 0, comms[1], nullptr), ncclSuccess);
  ncclWaitSignalDesc_t d{2, 1, 0, 0};  // one signal came, two are awaited
  EXPECT_EQ(ncclWaitSignal(1, &d, comms[0], nullptr), ncclTimeout);
  const std::string msg = ncclGetLastError(comms[0]);
  EXPECT_NE(msg.find("rank 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ncclWaitSignal"), std::string::npos) << msg;
  EXPECT_NE(msg.find("from rank 1"), std::string::npos) << msg;
  for (int r = 0; r < n; ++r) EXPECT_EQ(ncclCommWindowDeregister(comms[r], wins[r]), ncclSuccess);
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

// Ranks as processes: windows of ncclMemAlloc memory are mapped across processes; a window of ordinary
// memory of another process cannot be written, and the put says so.
TEST(RmaProcesses, PutSignalRingAcrossProcesses) {
  constexpr int n = 3;
  auto body = [](ncclComm_t comm, int r) -> std::string {
    std::string e = ringExchange(comm, r, n, (1 << 16) + 5, 4, nullptr);
    if (!e.empty()) return e;
    // Plain heap memory: reachable only from this process.
    std::vector<uint8_t> heap(128);
    ncclWindow_t w = nullptr;
    if (ncclCommWindowRegister(comm, heap.data(), heap.size(), &w, 0) != ncclSuccess)
      return std::string("register heap: ") + ncclGetLastError(comm);
    uint8_t x[8] = {};
    if (ncclPutSignal(x, 8, ncclUint8, (r + 1) % n, w, 0, 0, 0, 0, comm, nullptr) != ncclInvalidUsage)
      e = "a put into another process's heap window was not refused";
    else if (std::string(ncclGetLastError(comm)).find("ncclMemAlloc") == std::string::npos)
      e = std::string("unhelpful message: ") + ncclGetLastError(comm);
    ncclCommWindowDeregister(comm, w);
    return e;
  };
  for (auto& f : tutti::itest::onForkedRanks(n, body)) ADD_FAILURE() << f;
}

// Ranks on three hosts (TUTTI_HOSTNAME; ranks 0 and 1 share one): puts and signals to a rank of another host
// travel over the network transport (on sim through pinned staging, as on a GPU), to one of this host by
// load/store, and the ring checks every byte either way. Windows of plain heap memory are reachable over the
// network too.
TEST(RmaHosts, PutSignalRingAcrossHosts) {
  constexpr int n = 4;
  auto body = [](ncclComm_t comm, int r) -> std::string {
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{4096 + 3}, size_t{(1 << 20) + 7}}) {
      std::string e = ringExchange(comm, r, n, bytes, 3, nullptr);
      if (!e.empty()) return std::to_string(bytes) + " bytes: " + e;
    }
    // On a host stream, and into a window of heap memory.
    cudaStream_t s = nullptr;
    RMA_OK(tuttiStreamCreate(&s));
    std::string e = ringExchange(comm, r, n, 777, 2, s);
    RMA_OK(tuttiStreamDestroy(s));
    if (!e.empty()) return "on a stream: " + e;
    std::vector<uint8_t> heap(256, 0), mine(64);
    ncclWindow_t w = nullptr;
    RMA_OK(ncclCommWindowRegister(comm, heap.data(), heap.size(), &w, 0));
    for (size_t i = 0; i < mine.size(); ++i) mine[i] = pattern(r, 9, i);
    const int next = (r + 2) % n, prev = (r + n - 2) % n;  // 0 <-> 2, 1 <-> 3: always another host
    RMA_OK(ncclPutSignal(mine.data(), mine.size(), ncclUint8, next, w, 64, 0, 0, 0, comm, nullptr));
    ncclWaitSignalDesc_t d{1, prev, 0, 0};
    RMA_OK(ncclWaitSignal(1, &d, comm, nullptr));
    for (size_t i = 0; i < mine.size(); ++i)
      if (heap[64 + i] != pattern(prev, 9, i)) return "heap window: byte " + std::to_string(i) + " is wrong";
    // Everyone has checked before the window goes.
    for (int p = 0; p < n; ++p) RMA_OK(ncclSignal(p, 0, 0, 0, comm, nullptr));
    for (int p = 0; p < n; ++p) {
      ncclWaitSignalDesc_t all{1, p, 0, 0};
      RMA_OK(ncclWaitSignal(1, &all, comm, nullptr));
    }
    RMA_OK(ncclCommWindowDeregister(comm, w));
    return {};
  };
  auto hosts = [](int r) {
    const std::string name = "rmahost" + std::to_string(r < 2 ? 0 : r - 1);
    setenv("TUTTI_HOSTNAME", name.c_str(), 1);
  };
  for (auto& f : tutti::itest::onForkedRanks(n, body, hosts)) ADD_FAILURE() << f;
}

}  // namespace
