// Shared by the net-socket tests: loads libtutti-net-socket.so with dlopen and drives it through the
// exported ncclNet tables, as a core would.
#pragma once

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <tutti/net.h>

#include "wire.h"

namespace nstest {

using Clock = std::chrono::steady_clock;

inline std::mutex gLogMu;
inline std::vector<std::string> gWarnings;

// Logger handed to init: keeps the warnings so tests can check that a failure was explained.
inline void testLogger(ncclDebugLogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
  if (level != NCCL_LOG_WARN) return;
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lock(gLogMu);
  gWarnings.emplace_back(buf);
}

inline bool warned(const std::string& needle) {
  std::lock_guard<std::mutex> lock(gLogMu);
  for (const std::string& w : gWarnings)
    if (w.find(needle) != std::string::npos) return true;
  return false;
}

inline void clearWarnings() {
  std::lock_guard<std::mutex> lock(gLogMu);
  gWarnings.clear();
}

// Defaults for every test process; values already set (by a child of EXPECT_EXIT) are kept. One helper
// thread with two data sockets, so that messages above 64 KiB take the chunked path (the plugin's own
// default on lo has no helper threads; the options tests check that default in a clean child).
inline void setTestEnv() {
  setenv("NCCL_SOCKET_IFNAME", "lo", 0);
  setenv("TUTTI_NET_SOCKET_TIMEOUT_MS", "3000", 0);
  setenv("NCCL_SOCKET_NTHREADS", "1", 0);
  setenv("NCCL_NSOCKS_PERTHREAD", "2", 0);
}

inline void* pluginLib() {
  static void* lib = [] {
    setTestEnv();
    std::string path = std::string(TUTTI_TEST_LIB_DIR) + "/libtutti-net-socket.so";
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) ADD_FAILURE() << "dlopen " << path << ": " << dlerror();
    return h;
  }();
  return lib;
}

template <typename T>
const T* symbol(const char* name) {
  void* lib = pluginLib();
  return lib ? static_cast<const T*>(dlsym(lib, name)) : nullptr;
}

inline const ncclNet_v12_t* net() { return symbol<ncclNet_v12_t>("ncclNetPlugin_v12"); }

// Runs connect and accept alternately until both ends exist (they are non-blocking).
template <typename ConnectFn, typename AcceptFn>
bool establish(ConnectFn connect, AcceptFn accept, void** sendComm, void** recvComm) {
  *sendComm = nullptr;
  *recvComm = nullptr;
  auto deadline = Clock::now() + std::chrono::seconds(10);
  while ((*sendComm == nullptr || *recvComm == nullptr) && Clock::now() < deadline) {
    if (*sendComm == nullptr && connect(sendComm) != ncclSuccess) return false;
    if (*recvComm == nullptr && accept(recvComm) != ncclSuccess) return false;
  }
  return *sendComm != nullptr && *recvComm != nullptr;
}

// Polls a request until done or error; returns the result, *size gets the reported size.
inline ncclResult_t waitRequest(ncclResult_t (*test)(void*, int*, int*), void* req, int* size = nullptr,
                                int seconds = 20) {
  auto deadline = Clock::now() + std::chrono::seconds(seconds);
  int done = 0;
  int sz = -1;
  while (!done) {
    ncclResult_t r = test(req, &done, &sz);
    if (r != ncclSuccess) return r;
    if (Clock::now() > deadline) return ncclInProgress;
  }
  if (size) *size = sz;
  return ncclSuccess;
}

// Polls a send and a receive together, as a core would (without helper threads the sender only moves
// data when its request is tested). Returns the first failure, or ncclInProgress on timeout.
inline ncclResult_t waitBoth(ncclResult_t (*test)(void*, int*, int*), void* sreq, void* rreq, int* recvSize,
                             int seconds = 20) {
  auto deadline = Clock::now() + std::chrono::seconds(seconds);
  int sdone = 0, rdone = 0;
  while (!(sdone && rdone)) {
    if (!sdone) {
      if (ncclResult_t r = test(sreq, &sdone, nullptr); r != ncclSuccess) return r;
    }
    if (!rdone) {
      if (ncclResult_t r = test(rreq, &rdone, recvSize); r != ncclSuccess) return r;
    }
    if (Clock::now() > deadline) return ncclInProgress;
  }
  return ncclSuccess;
}

inline void fillPattern(std::vector<char>& v, unsigned seed) {
  for (size_t i = 0; i < v.size(); i++) v[i] = static_cast<char>((i * 131 + seed * 7 + (i >> 12)) & 0xff);
}

// A v12 test fixture: init on loopback, plus a connected send/recv pair on demand.
class NetSocket : public ::testing::Test {
 protected:
  void SetUp() override {
    n = net();
    ASSERT_NE(n, nullptr);
    ASSERT_EQ(n->init(&ctx, 42, nullptr, testLogger, nullptr), ncclSuccess);
    clearWarnings();
  }
  void TearDown() override {
    if (n == nullptr) return;
    closeAll();
    EXPECT_EQ(n->finalize(ctx), ncclSuccess);
  }
  // Tests that leave requests outstanding call this before their buffers go out of scope: the plugin may
  // touch a buffer until its comm is closed.
  void closeAll() {
    EXPECT_EQ(n->closeSend(sendComm), ncclSuccess);  // NULL comms are accepted and ignored
    EXPECT_EQ(n->closeRecv(recvComm), ncclSuccess);
    EXPECT_EQ(n->closeListen(listenComm), ncclSuccess);
    sendComm = recvComm = listenComm = nullptr;
  }
  void listen() {
    std::memset(handle, 0, sizeof handle);
    ASSERT_EQ(n->listen(ctx, 0, handle, &listenComm), ncclSuccess);
    ASSERT_NE(listenComm, nullptr);
  }
  void connectPair() {
    listen();
    bool ok = establish([&](void** s) { return n->connect(ctx, 0, handle, s, nullptr); },
                        [&](void** r) { return n->accept(listenComm, r, nullptr); }, &sendComm, &recvComm);
    ASSERT_TRUE(ok);
  }
  // One message: posts both ends, polls both; returns the receive's result.
  ncclResult_t transfer(const void* src, size_t sendSize, void* dst, size_t recvSize, int* gotSize) {
    void* sreq = nullptr;
    void* rreq = nullptr;
    if (n->isend(sendComm, const_cast<void*>(src), sendSize, 0, nullptr, nullptr, &sreq) != ncclSuccess)
      return ncclInternalError;
    int tag = 0;
    if (n->irecv(recvComm, 1, &dst, &recvSize, &tag, nullptr, nullptr, &rreq) != ncclSuccess)
      return ncclInternalError;
    return waitBoth(n->test, sreq, rreq, gotSize);
  }

  const ncclNet_v12_t* n = nullptr;
  void* ctx = nullptr;
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* listenComm = nullptr;
  void* sendComm = nullptr;
  void* recvComm = nullptr;
};

}  // namespace nstest
