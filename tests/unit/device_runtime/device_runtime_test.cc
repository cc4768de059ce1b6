#include "comm/comm.h"
#include "device/host/stream.h"
#include "device/runtime.h"
#include "device/sim/kernels.h"
#include "plugin/transport_plugin.h"

#include <nccl.h>
#include <tutti.h>

#include <gtest/gtest.h>

#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using tutti::rt::Capture;
using tutti::rt::Event;
using tutti::rt::MemExport;
using tutti::rt::MemKind;
using tutti::rt::Runtime;
using tutti::rt::Stream;

TEST(SimRuntime, MemoryKindsAndRegistration) {
  Runtime* rt = tutti::rt::simRuntime();
  void* d = nullptr;
  void* h = nullptr;
  ASSERT_EQ(rt->alloc(&d, 4096, true), ncclSuccess);
  ASSERT_EQ(rt->hostAlloc(&h, 100), ncclSuccess);
  MemKind k{};
  ASSERT_EQ(rt->pointerKind(static_cast<char*>(d) + 4000, &k), ncclSuccess);
  EXPECT_EQ(k, MemKind::Device);
  ASSERT_EQ(rt->pointerKind(h, &k), ncclSuccess);
  EXPECT_EQ(k, MemKind::PinnedHost);
  std::vector<char> plain(64);
  ASSERT_EQ(rt->pointerKind(plain.data(), &k), ncclSuccess);
  EXPECT_EQ(k, MemKind::Host);
  ASSERT_EQ(rt->hostRegister(plain.data(), plain.size()), ncclSuccess);
  ASSERT_EQ(rt->pointerKind(plain.data() + 10, &k), ncclSuccess);
  EXPECT_EQ(k, MemKind::PinnedHost);
  EXPECT_EQ(rt->hostRegister(plain.data(), plain.size()), ncclInvalidArgument);
  ASSERT_EQ(rt->hostUnregister(plain.data()), ncclSuccess);
  MemExport ex;
  EXPECT_EQ(rt->exportMem(h, &ex), ncclInvalidArgument);  // only device memory is exported
  EXPECT_EQ(rt->free(h), ncclInvalidArgument);             // not device memory
  EXPECT_EQ(rt->hostFree(h), ncclSuccess);
  EXPECT_EQ(rt->free(d), ncclSuccess);
  EXPECT_EQ(rt->free(d), ncclInvalidArgument);
}

// Device memory exported by one process and imported by another sees the same bytes both ways.
TEST(SimRuntime, ExportedDeviceMemoryIsSharedWithAnotherProcess) {
  int toParent[2], toChild[2];
  ASSERT_EQ(pipe(toParent), 0);
  ASSERT_EQ(pipe(toChild), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The exporter: allocates, fills, exports, and checks what the importer wrote.
    Runtime* rt = tutti::rt::simRuntime();
    void* d = nullptr;
    if (rt->alloc(&d, 1 << 20, true) != ncclSuccess) _exit(2);
    auto* bytes = static_cast<unsigned char*>(d);
    for (size_t i = 0; i < (1 << 20); ++i) bytes[i] = static_cast<unsigned char>(i * 7);
    MemExport ex;
    if (rt->exportMem(bytes + 4096, &ex) != ncclSuccess) _exit(3);
    if (write(toParent[1], &ex, sizeof ex) != sizeof ex) _exit(4);
    char go = 0;
    if (read(toChild[0], &go, 1) != 1) _exit(5);
    for (size_t i = 0; i < 4096; ++i)
      if (bytes[4096 + i] != static_cast<unsigned char>(255 - i % 256)) _exit(6);
    rt->free(d);
    _exit(0);
  }
  MemExport ex;
  ASSERT_EQ(read(toParent[0], &ex, sizeof ex), static_cast<ssize_t>(sizeof ex));
  EXPECT_EQ(ex.pid, child);
  EXPECT_EQ(ex.offset, 4096u);
  Runtime* rt = tutti::rt::simRuntime();
  void* p = nullptr;
  ASSERT_EQ(rt->importMem(ex, &p), ncclSuccess) << ncclGetLastError(nullptr);
  auto* bytes = static_cast<unsigned char*>(p);
  for (size_t i = 0; i < 4096; ++i) ASSERT_EQ(bytes[i], static_cast<unsigned char>((4096 + i) * 7)) << i;
  for (size_t i = 0; i < 4096; ++i) bytes[i] = static_cast<unsigned char>(255 - i % 256);
  MemKind k{};
  ASSERT_EQ(rt->pointerKind(bytes + 100, &k), ncclSuccess);
  EXPECT_EQ(k, MemKind::Device);
  ASSERT_EQ(write(toChild[1], "g", 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "exporter exit status " << status;
  EXPECT_EQ(rt->closeImport(bytes + 10), ncclSuccess);
  EXPECT_EQ(rt->closeImport(bytes), ncclInvalidArgument);
  // A handle of a process that is gone cannot be imported, and says why.
  EXPECT_NE(rt->importMem(ex, &p), ncclSuccess);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("cannot import"), std::string::npos);
  for (int fd : {toParent[0], toParent[1], toChild[0], toChild[1]}) close(fd);
}

struct Order {
  std::atomic<int> next{0};
  int seen[4] = {-1, -1, -1, -1};
};
struct Step {
  Order* o;
  int slot;
  static void run(void* arg) {
    auto* s = static_cast<Step*>(arg);
    s->o->seen[s->slot] = s->o->next++;
  }
};

// Streams, events and host functions through the interface, and a capture the interface sees and owns.
TEST(SimRuntime, StreamsEventsHostFunctionsAndCapture) {
  Runtime* rt = tutti::rt::simRuntime();
  Stream a = nullptr, b = nullptr;
  Event e = nullptr;
  ASSERT_EQ(rt->streamCreate(&a), ncclSuccess);
  ASSERT_EQ(rt->streamCreate(&b), ncclSuccess);
  ASSERT_EQ(rt->eventCreate(&e), ncclSuccess);
  Order o;
  Step s0{&o, 0}, s1{&o, 1};
  ASSERT_EQ(rt->launchHostFunc(a, Step::run, &s0), ncclSuccess);
  ASSERT_EQ(rt->eventRecord(e, a), ncclSuccess);
  ASSERT_EQ(rt->streamWaitEvent(b, e), ncclSuccess);
  ASSERT_EQ(rt->launchHostFunc(b, Step::run, &s1), ncclSuccess);
  ASSERT_EQ(rt->streamSynchronize(b), ncclSuccess);
  EXPECT_EQ(o.seen[0], 0);
  EXPECT_EQ(o.seen[1], 1);

  // Capture: b joins through the event; the kept object lives as long as the graph.
  auto* h = reinterpret_cast<tutti::host::HostStream*>(a);
  ASSERT_EQ(h->beginCapture(), ncclSuccess);
  Capture st{};
  uint64_t idA = 0, idB = 0;
  ASSERT_EQ(rt->captureStatus(a, &st, &idA), ncclSuccess);
  EXPECT_EQ(st, Capture::Active);
  ASSERT_EQ(rt->eventRecord(e, a), ncclSuccess);
  ASSERT_EQ(rt->streamWaitEvent(b, e), ncclSuccess);
  ASSERT_EQ(rt->captureStatus(b, &st, &idB), ncclSuccess);
  EXPECT_EQ(st, Capture::Active);
  EXPECT_EQ(idA, idB);
  static std::atomic<int> destroyed{0};
  ASSERT_EQ(rt->keepWithCapture(b, &destroyed, [](void* p) { ++*static_cast<std::atomic<int>*>(p); }), ncclSuccess);
  Order o2;
  Step c0{&o2, 0}, c1{&o2, 1};
  ASSERT_EQ(rt->launchHostFunc(b, Step::run, &c0), ncclSuccess);
  ASSERT_EQ(rt->eventRecord(e, b), ncclSuccess);
  ASSERT_EQ(rt->streamWaitEvent(a, e), ncclSuccess);
  ASSERT_EQ(rt->launchHostFunc(a, Step::run, &c1), ncclSuccess);
  tutti::host::StreamGraph* g = nullptr;
  ASSERT_EQ(h->endCapture(&g), ncclSuccess);
  EXPECT_EQ(o2.next.load(), 0);  // nothing ran at capture
  EXPECT_EQ(g->nodes(), 6u);  // a: record, wait, host fn; b: wait, host fn, record
  for (int run = 0; run < 3; ++run) {
    o2.next = 0;
    g->launch(h);
    ASSERT_EQ(rt->streamSynchronize(a), ncclSuccess);
    EXPECT_EQ(o2.seen[0], 0) << "run " << run;
    EXPECT_EQ(o2.seen[1], 1) << "run " << run;
  }
  EXPECT_EQ(destroyed.load(), 0);
  delete g;
  EXPECT_EQ(destroyed.load(), 1);
  EXPECT_EQ(rt->eventDestroy(e), ncclSuccess);
  EXPECT_EQ(rt->streamDestroy(a), ncclSuccess);
  EXPECT_EQ(rt->streamDestroy(b), ncclSuccess);
}

// External records and waits (cudaEventRecordExternal / cudaEventWaitExternal): captured as nodes acting on the
// event itself, bound when the graph is launched, so a replay waits for uncaptured work recorded before its
// launch, and uncaptured work queued after the launch waits for the replay. Ordering only: no error is carried.
TEST(SimRuntime, ExternalEventsOrderGraphReplaysWithUncapturedWork) {
  Runtime* rt = tutti::rt::simRuntime();
  Stream a = nullptr, b = nullptr, c = nullptr;
  Event e = nullptr;
  ASSERT_EQ(rt->streamCreate(&a), ncclSuccess);
  ASSERT_EQ(rt->streamCreate(&b), ncclSuccess);
  ASSERT_EQ(rt->streamCreate(&c), ncclSuccess);
  ASSERT_EQ(rt->eventCreate(&e), ncclSuccess);
  Order o;
  Step first{&o, 0}, replayed{&o, 1}, after{&o, 2};
  auto* h = reinterpret_cast<tutti::host::HostStream*>(a);
  ASSERT_EQ(h->beginCapture(), ncclSuccess);
  ASSERT_EQ(rt->streamWaitEventExternal(a, e), ncclSuccess);
  ASSERT_EQ(rt->launchHostFunc(a, Step::run, &replayed), ncclSuccess);
  ASSERT_EQ(rt->eventRecordExternal(e, a), ncclSuccess);
  Capture st{};
  uint64_t id = 0;
  ASSERT_EQ(rt->captureStatus(a, &st, &id), ncclSuccess);
  EXPECT_EQ(st, Capture::Active);
  tutti::host::StreamGraph* g = nullptr;
  ASSERT_EQ(h->endCapture(&g), ncclSuccess);
  EXPECT_EQ(g->nodes(), 3u);  // one lane: nothing joined the capture through the event
  for (int run = 0; run < 3; ++run) {
    o.next = 0;
    std::atomic<bool> gate{false};
    // b: held until the gate opens, then `first`, then the event's newest record.
    ASSERT_EQ(rt->launchHostFunc(b, [](void* g) { while (!static_cast<std::atomic<bool>*>(g)->load()) usleep(1000); },
                                 &gate), ncclSuccess);
    ASSERT_EQ(rt->launchHostFunc(b, Step::run, &first), ncclSuccess);
    ASSERT_EQ(rt->eventRecordExternal(e, b), ncclSuccess);
    g->launch(h);  // binds its wait to b's record and makes its own record the newest
    ASSERT_EQ(rt->streamWaitEventExternal(c, e), ncclSuccess);
    ASSERT_EQ(rt->launchHostFunc(c, Step::run, &after), ncclSuccess);
    usleep(20000);
    EXPECT_EQ(o.next.load(), 0) << "run " << run << ": the replay or the later work did not wait";
    gate = true;
    ASSERT_EQ(rt->streamSynchronize(c), ncclSuccess);
    EXPECT_EQ(o.seen[0], 0) << "run " << run;
    EXPECT_EQ(o.seen[1], 1) << "run " << run;
    EXPECT_EQ(o.seen[2], 2) << "run " << run;
    ASSERT_EQ(rt->streamSynchronize(a), ncclSuccess);
    ASSERT_EQ(rt->streamSynchronize(b), ncclSuccess);
  }
  // No error travels through an external wait.
  ASSERT_EQ(rt->launchHostFunc(b, [](void*) { tutti::rt::simRuntime()->failCurrentWork(ncclRemoteError); }, nullptr),
            ncclSuccess);
  ASSERT_EQ(rt->eventRecordExternal(e, b), ncclSuccess);
  ASSERT_EQ(rt->streamWaitEventExternal(c, e), ncclSuccess);
  EXPECT_EQ(rt->streamSynchronize(c), ncclSuccess);
  EXPECT_EQ(rt->streamSynchronize(b), ncclRemoteError);
  delete g;
  rt->eventDestroy(e);
  rt->streamDestroy(a);
  rt->streamDestroy(b);
  rt->streamDestroy(c);
}

// A failure reported by work on a stream reaches the streams that wait on it through events.
TEST(SimRuntime, EventsCarryAStreamsError) {
  Runtime* rt = tutti::rt::simRuntime();
  Stream a = nullptr, b = nullptr;
  Event e = nullptr;
  ASSERT_EQ(rt->streamCreate(&a), ncclSuccess);
  ASSERT_EQ(rt->streamCreate(&b), ncclSuccess);
  ASSERT_EQ(rt->eventCreate(&e), ncclSuccess);
  ASSERT_EQ(rt->launchHostFunc(a, [](void*) { tutti::rt::simRuntime()->failCurrentWork(ncclRemoteError); }, nullptr),
            ncclSuccess);
  ASSERT_EQ(rt->eventRecord(e, a), ncclSuccess);
  ASSERT_EQ(rt->streamWaitEvent(b, e), ncclSuccess);
  EXPECT_EQ(rt->streamSynchronize(b), ncclRemoteError);
  EXPECT_EQ(rt->eventQuery(e), ncclRemoteError);
  EXPECT_EQ(rt->streamSynchronize(a), ncclRemoteError);
  EXPECT_EQ(rt->streamSynchronize(a), ncclSuccess);  // cleared once reported
  rt->eventDestroy(e);
  rt->streamDestroy(a);
  rt->streamDestroy(b);
}

// A sim communicator's connections: over p2p (threads) and shm the FIFOs are the runtime's device memory
// (tuttiConnectRequest_t.devMem; shm exports and maps it), over the network they are host staging (the
// proxied landing area) registered with the runtime (cudaHostRegister on cuda) as are every control block. Buffers from ncclMemAlloc are
// the runtime's device memory, which another process can import.
class SimConnections : public ::testing::TestWithParam<const char*> {};

TEST_P(SimConnections, AreRegisteredHostMemoryAndCarryCollectivesOnMemAllocBuffers) {
  if (!tutti::sim::available()) GTEST_SKIP() << "this build has no sim backend (TUTTI_WITH_SIM=OFF)";
  const std::string transport = GetParam();
  if (transport != "p2p") setenv("NCCL_P2P_DISABLE", "1", 1);
  if (transport == "net") setenv("NCCL_SHM_DISABLE", "1", 1);
  setenv("TUTTI_DEVICE", "sim", 1);
  constexpr int kRanks = 2;
  constexpr size_t kCount = 4096;
  std::vector<ncclComm_t> comms(kRanks);
  int devs[kRanks] = {0, 0};
  ASSERT_EQ(ncclCommInitAll(comms.data(), kRanks, devs), ncclSuccess) << ncclGetLastError(nullptr);
  Runtime* rt = tutti::rt::simRuntime();
  std::vector<float*> buf(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    void* p = nullptr;
    ASSERT_EQ(ncclMemAlloc(&p, kCount * sizeof(float)), ncclSuccess);
    buf[r] = static_cast<float*>(p);
    MemKind k{};
    ASSERT_EQ(rt->pointerKind(p, &k), ncclSuccess);
    EXPECT_EQ(k, MemKind::Device);
    MemExport ex;
    EXPECT_EQ(rt->exportMem(p, &ex), ncclSuccess);
    for (size_t i = 0; i < kCount; ++i) buf[r][i] = float(r + 1) * float(i % 13);
  }
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r)
    ASSERT_EQ(ncclAllReduce(buf[r], buf[r], kCount, ncclFloat32, ncclSum, comms[r], nullptr), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r)
    for (size_t i = 0; i < kCount; ++i) ASSERT_EQ(buf[r][i], 3.0f * float(i % 13)) << "rank " << r << " i " << i;
  int checked = 0;
  for (int r = 0; r < kRanks; ++r) {
    for (auto& [key, c] : comms[r]->connections) {
      EXPECT_EQ(c->transport->name(), transport);
      EXPECT_FALSE(c->devBlocks.empty());
      const tuttiConnector_t& k = c->host.conn;
      for (int p = 0; p < TUTTI_NUM_PROTOCOLS; ++p) {
        if (!k.buffs[p] || k.buffSizes[p] == 0) continue;
        for (const char* at : {static_cast<const char*>(k.buffs[p]),
                               static_cast<const char*>(k.buffs[p]) + k.buffSizes[p] - 1}) {
          MemKind kind{};
          ASSERT_EQ(rt->pointerKind(at, &kind), ncclSuccess);
          // p2p and shm put the FIFOs in the core's device memory (shm: the sender maps the receiver's
          // export); the network transport's are host staging the proxy reads and writes.
          EXPECT_EQ(kind, transport == "net" ? MemKind::PinnedHost : MemKind::Device)
              << transport << " rank " << r << " protocol " << p;
        }
        ++checked;
      }
      MemKind kind{};
      ASSERT_EQ(rt->pointerKind(k.ctrl, &kind), ncclSuccess);
      EXPECT_EQ(kind, MemKind::PinnedHost);
      // The registered pages hold nothing of the application's (CUDA refuses a pageable copy that starts in a
      // registered page and runs past it): the control block and the Connection (whose step counter kernels
      // read) each start a page of their own.
      EXPECT_EQ(reinterpret_cast<uintptr_t>(k.ctrl) % 4096, 0u) << transport << " rank " << r;
      EXPECT_EQ(reinterpret_cast<uintptr_t>(c.get()) % 4096, 0u) << transport << " rank " << r;
      static_assert(sizeof(tutti::Connection) % 4096 == 0, "a Connection fills whole pages");
      if (transport == "net") {
        EXPECT_TRUE(k.flags & TUTTI_CONN_PROXIED);
      }
    }
  }
  EXPECT_GT(checked, 0);
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(ncclCommDestroy(comms[r]), ncclSuccess);
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(ncclMemFree(buf[r]), ncclSuccess);
  EXPECT_EQ(ncclMemFree(buf[0]), ncclInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Transports, SimConnections, ::testing::Values("p2p", "shm", "net"),
                         [](const auto& info) { return std::string(info.param); });

// Without a usable GPU (this machine in CI) the cuda runtime says why, and `device: cuda` fails init with it.
TEST(CudaRuntime, NoUsableGpuFailsInitWithTheReason) {
  std::string why;
  if (tutti::rt::cudaRuntime()->usable(&why)) GTEST_SKIP() << "a usable GPU is present: the gpu label tests run here";
  EXPECT_FALSE(why.empty());
  setenv("TUTTI_DEVICE", "cuda", 1);
  ncclComm_t comm = nullptr;
  int dev = 0;
  const ncclResult_t res = ncclCommInitAll(&comm, 1, &dev);
  unsetenv("TUTTI_DEVICE");
  EXPECT_NE(res, ncclSuccess);
  EXPECT_EQ(comm, nullptr);
  const std::string msg = ncclGetLastError(nullptr);
  EXPECT_NE(msg.find("no usable GPU"), std::string::npos) << msg;
  EXPECT_NE(msg.find(why), std::string::npos) << msg;
  std::printf("device: cuda without a GPU: %s\n", msg.c_str());
}

}  // namespace

namespace {

// ncclCommRegister on a device backend registers host memory with the device until ncclCommDeregister; device
// memory needs nothing.
TEST(SimRegister, HostBuffersAreRegisteredWithTheDeviceUntilDeregistered) {
  if (!tutti::sim::available()) GTEST_SKIP() << "this build has no sim backend (TUTTI_WITH_SIM=OFF)";
  setenv("TUTTI_DEVICE", "sim", 1);
  ncclComm_t comm = nullptr;
  int dev = 0;
  ASSERT_EQ(ncclCommInitAll(&comm, 1, &dev), ncclSuccess) << ncclGetLastError(nullptr);
  Runtime* rt = tutti::rt::simRuntime();
  std::vector<char> host(1 << 16);
  void* handle = nullptr;
  ASSERT_EQ(ncclCommRegister(comm, host.data(), host.size(), &handle), ncclSuccess);
  EXPECT_NE(handle, nullptr);
  MemKind k{};
  ASSERT_EQ(rt->pointerKind(host.data() + 100, &k), ncclSuccess);
  EXPECT_EQ(k, MemKind::PinnedHost);
  ASSERT_EQ(ncclCommDeregister(comm, handle), ncclSuccess);
  ASSERT_EQ(rt->pointerKind(host.data() + 100, &k), ncclSuccess);
  EXPECT_EQ(k, MemKind::Host);
  void* d = nullptr;
  ASSERT_EQ(ncclMemAlloc(&d, 4096), ncclSuccess);
  ASSERT_EQ(ncclCommRegister(comm, d, 4096, &handle), ncclSuccess);
  EXPECT_EQ(handle, d);  // device memory: nothing to register
  EXPECT_EQ(ncclCommDeregister(comm, handle), ncclSuccess);
  EXPECT_EQ(ncclMemFree(d), ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

}  // namespace

#ifdef TUTTI_TEST_GDR_NET
namespace {

// The network transport on a device backend whose net plugin takes device memory (GPUDirect RDMA): the FIFOs
// are the runtime's device memory, registered with the plugin directly (through the runtime's DMA-BUF fd where
// the plugin takes one, else as NCCL_PTR_CUDA), data landing there is flushed before tail lets the kernels
// read it, and the collectives are right. NCCL_NET_GDR_LEVEL=LOC keeps the host staging.
enum GdrCounter { kRegHost, kRegCuda, kRegDmabuf, kDmabufAliasBad, kFlushes };

class SimGdr : public ::testing::TestWithParam<const char*> {};

TEST_P(SimGdr, NetFifosAreDeviceMemoryRegisteredWithThePlugin) {
  if (!tutti::sim::available()) GTEST_SKIP() << "this build has no sim backend (TUTTI_WITH_SIM=OFF)";
  const std::string mode = GetParam();
  setenv("NCCL_P2P_DISABLE", "1", 1);
  setenv("NCCL_SHM_DISABLE", "1", 1);
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  setenv("TUTTI_DEVICE", "sim", 1);
  setenv("NCCL_NET_PLUGIN", TUTTI_TEST_GDR_NET, 1);
  if (mode == "cuda") setenv("GDR_TEST_NO_DMABUF", "1", 1);
  if (mode == "loc") setenv("NCCL_NET_GDR_LEVEL", "LOC", 1);
  constexpr int kRanks = 2;
  std::vector<ncclComm_t> comms(kRanks);
  int devs[kRanks] = {0, 0};
  ASSERT_EQ(ncclCommInitAll(comms.data(), kRanks, devs), ncclSuccess) << ncclGetLastError(nullptr);
  // Sizes that take LL, LL128 and Simple; every protocol's slots cross the same registered regions.
  for (size_t count : {size_t{1}, size_t{1000}, size_t{300001}}) {
    std::vector<std::vector<float>> buf(kRanks, std::vector<float>(count));
    for (int r = 0; r < kRanks; ++r)
      for (size_t i = 0; i < count; ++i) buf[r][i] = float(r + 1) * float(i % 7);
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < kRanks; ++r)
      ASSERT_EQ(ncclAllReduce(buf[r].data(), buf[r].data(), count, ncclFloat32, ncclSum, comms[r], nullptr),
                ncclSuccess);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
    for (int r = 0; r < kRanks; ++r)
      for (size_t i = 0; i < count; ++i)
        ASSERT_EQ(buf[r][i], 3.0f * float(i % 7)) << mode << " count " << count << " rank " << r << " i " << i;
  }
  Runtime* rt = tutti::rt::simRuntime();
  int fifos = 0;
  for (int r = 0; r < kRanks; ++r)
    for (auto& [key, c] : comms[r]->connections) {
      EXPECT_EQ(c->transport->name(), std::string("net"));
      const tuttiConnector_t& k = c->host.conn;
      for (int p = 0; p < TUTTI_NUM_PROTOCOLS; ++p) {
        if (!k.buffs[p] || k.buffSizes[p] == 0) continue;
        MemKind kind{};
        ASSERT_EQ(rt->pointerKind(k.buffs[p], &kind), ncclSuccess);
        EXPECT_EQ(kind, mode == "loc" ? MemKind::PinnedHost : MemKind::Device) << mode << " protocol " << p;
        ++fifos;
      }
      MemKind kind{};
      ASSERT_EQ(rt->pointerKind(k.ctrl, &kind), ncclSuccess);
      EXPECT_EQ(kind, MemKind::PinnedHost);  // the control block stays host memory the proxy writes
    }
  EXPECT_GT(fifos, 0);
  void* lib = dlopen(TUTTI_TEST_GDR_NET, RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(lib, nullptr) << "the plugin was not loaded by the communicator";
  auto countOf = reinterpret_cast<int (*)(int)>(dlsym(lib, "gdrTestCount"));
  ASSERT_NE(countOf, nullptr);
  std::printf("%s: registrations host %d, cuda %d, dmabuf %d; flushes %d\n", mode.c_str(), countOf(kRegHost),
              countOf(kRegCuda), countOf(kRegDmabuf), countOf(kFlushes));
  EXPECT_EQ(countOf(kDmabufAliasBad), 0) << "a DMA-BUF fd did not map the registered memory";
  if (mode == "dmabuf") {
    EXPECT_GT(countOf(kRegDmabuf), 0);
    EXPECT_EQ(countOf(kRegCuda) + countOf(kRegHost), 0);
  } else if (mode == "cuda") {
    EXPECT_GT(countOf(kRegCuda), 0);
    EXPECT_EQ(countOf(kRegDmabuf) + countOf(kRegHost), 0);
  } else {
    EXPECT_GT(countOf(kRegHost), 0);
    EXPECT_EQ(countOf(kRegDmabuf) + countOf(kRegCuda), 0);
  }
  if (mode == "loc") EXPECT_EQ(countOf(kFlushes), 0);
  else EXPECT_GT(countOf(kFlushes), 0);
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(ncclCommDestroy(comms[r]), ncclSuccess);
  dlclose(lib);
}

INSTANTIATE_TEST_SUITE_P(Registration, SimGdr, ::testing::Values("dmabuf", "cuda", "loc"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
#endif
