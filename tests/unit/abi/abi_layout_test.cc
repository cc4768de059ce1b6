// Layout of every ABI struct in the SDK headers, checked against the sizes, alignments and member offsets
// NCCL's own headers give on x86_64 Linux (numbers produced once by compiling against NCCL's headers;
// regenerate them the same way when a new ABI version is added). A mismatch means an NCCL plugin would
// read or write the wrong bytes.
#include <tutti/net.h>
#include <tutti/profiler.h>
#include <tutti/profiler_v4.h>
#include <tutti/transport.h>
#include <tutti/tuner.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <initializer_list>

namespace {

// One expected size, alignment or offset; checked in a loop (598 separate EXPECT_EQs took the compiler half a
// minute, several under sanitizers).
struct Layout {
  const char* what;
  size_t actual;
  size_t expected;
};

void checkLayout(std::initializer_list<Layout> rows) {
  for (const Layout& r : rows) EXPECT_EQ(r.actual, r.expected) << r.what;
}
#define TUTTI_LAYOUT(expr, expected) Layout{#expr, expr, expected}

#if defined(__x86_64__)
TEST(AbiLayout, Net) {
  checkLayout({
      TUTTI_LAYOUT(sizeof(ncclNetProperties_v6_t), 48),
      TUTTI_LAYOUT(alignof(ncclNetProperties_v6_t), 8),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v6_t, name), 0),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v6_t, pciPath), 8),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v6_t, guid), 16),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v6_t, ptrSupport), 24),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v6_t, speed), 28),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v6_t, port), 32),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v6_t, latency), 36),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v6_t, maxComms), 40),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v6_t, maxRecvs), 44),
  });

  checkLayout({
      TUTTI_LAYOUT(sizeof(ncclNetProperties_v7_t), 56),
      TUTTI_LAYOUT(alignof(ncclNetProperties_v7_t), 8),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v7_t, name), 0),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v7_t, pciPath), 8),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v7_t, guid), 16),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v7_t, ptrSupport), 24),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v7_t, speed), 28),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v7_t, port), 32),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v7_t, latency), 36),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v7_t, maxComms), 40),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v7_t, maxRecvs), 44),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v7_t, netDeviceType), 48),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v7_t, netDeviceVersion), 52),
  });

  checkLayout({
      TUTTI_LAYOUT(sizeof(ncclNetProperties_v8_t), 64),
      TUTTI_LAYOUT(alignof(ncclNetProperties_v8_t), 8),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v8_t, name), 0),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v8_t, pciPath), 8),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v8_t, guid), 16),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v8_t, ptrSupport), 24),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v8_t, regIsGlobal), 28),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v8_t, speed), 32),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v8_t, port), 36),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v8_t, latency), 40),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v8_t, maxComms), 44),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v8_t, maxRecvs), 48),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v8_t, netDeviceType), 52),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v8_t, netDeviceVersion), 56),
  });

  checkLayout({
      TUTTI_LAYOUT(sizeof(ncclNetProperties_v9_t), 104),
      TUTTI_LAYOUT(alignof(ncclNetProperties_v9_t), 8),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v9_t, name), 0),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v9_t, pciPath), 8),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v9_t, guid), 16),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v9_t, ptrSupport), 24),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v9_t, regIsGlobal), 28),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v9_t, forceFlush), 32),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v9_t, speed), 36),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v9_t, port), 40),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v9_t, latency), 44),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v9_t, maxComms), 48),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v9_t, maxRecvs), 52),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v9_t, netDeviceType), 56),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v9_t, netDeviceVersion), 60),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v9_t, vProps), 64),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v9_t, maxP2pBytes), 88),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v9_t, maxCollBytes), 96),
  });

  checkLayout({
      TUTTI_LAYOUT(sizeof(ncclNetProperties_v10_t), 104),
      TUTTI_LAYOUT(alignof(ncclNetProperties_v10_t), 8),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v10_t, name), 0),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v10_t, pciPath), 8),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v10_t, guid), 16),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v10_t, ptrSupport), 24),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v10_t, regIsGlobal), 28),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v10_t, forceFlush), 32),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v10_t, speed), 36),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v10_t, port), 40),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v10_t, latency), 44),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v10_t, maxComms), 48),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v10_t, maxRecvs), 52),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v10_t, netDeviceType), 56),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v10_t, netDeviceVersion), 60),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v10_t, vProps), 64),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v10_t, maxP2pBytes), 88),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v10_t, maxCollBytes), 96),
  });

  checkLayout({
      TUTTI_LAYOUT(sizeof(ncclNetProperties_v11_t), 112),
      TUTTI_LAYOUT(alignof(ncclNetProperties_v11_t), 8),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v11_t, name), 0),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v11_t, pciPath), 8),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v11_t, guid), 16),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v11_t, ptrSupport), 24),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v11_t, regIsGlobal), 28),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v11_t, forceFlush), 32),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v11_t, speed), 36),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v11_t, port), 40),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v11_t, latency), 44),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v11_t, maxComms), 48),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v11_t, maxRecvs), 52),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v11_t, netDeviceType), 56),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v11_t, netDeviceVersion), 60),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v11_t, vProps), 64),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v11_t, maxP2pBytes), 88),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v11_t, maxCollBytes), 96),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v11_t, maxMultiRequestSize), 104),
  });

  checkLayout({
      TUTTI_LAYOUT(sizeof(ncclNetProperties_v12_t), 128),
      TUTTI_LAYOUT(alignof(ncclNetProperties_v12_t), 8),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v12_t, name), 0),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v12_t, pciPath), 8),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v12_t, guid), 16),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v12_t, ptrSupport), 24),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v12_t, regIsGlobal), 28),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v12_t, forceFlush), 32),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v12_t, speed), 36),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v12_t, port), 40),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v12_t, latency), 44),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v12_t, maxComms), 48),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v12_t, maxRecvs), 52),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v12_t, netDeviceType), 56),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v12_t, netDeviceVersion), 60),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v12_t, vProps), 64),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v12_t, maxP2pBytes), 104),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v12_t, maxCollBytes), 112),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v12_t, maxMultiRequestSize), 120),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v12_t, railId), 124),
      TUTTI_LAYOUT(offsetof(ncclNetProperties_v12_t, planeId), 126),
  });

  checkLayout({
      TUTTI_LAYOUT(sizeof(ncclNetVDeviceProps_v9_t), 20),
      TUTTI_LAYOUT(alignof(ncclNetVDeviceProps_v9_t), 4),
      TUTTI_LAYOUT(offsetof(ncclNetVDeviceProps_v9_t, ndevs), 0),
      TUTTI_LAYOUT(offsetof(ncclNetVDeviceProps_v9_t, devs), 4),
  });

  checkLayout({
      TUTTI_LAYOUT(sizeof(ncclNetVDeviceProps_v10_t), 20),
      TUTTI_LAYOUT(alignof(ncclNetVDeviceProps_v10_t), 4),
      TUTTI_LAYOUT(offsetof(ncclNetVDeviceProps_v10_t, ndevs), 0),
      TUTTI_LAYOUT(offsetof(ncclNetVDeviceProps_v10_t, devs), 4),
  });

  checkLayout({
      TUTTI_LAYOUT(sizeof(ncclNetVDeviceProps_v11_t), 20),
      TUTTI_LAYOUT(alignof(ncclNetVDeviceProps_v11_t), 4),
      TUTTI_LAYOUT(offsetof(ncclNetVDeviceProps_v11_t, ndevs), 0),
      TUTTI_LAYOUT(offsetof(ncclNetVDeviceProps_v11_t, devs), 4),
  });

  checkLayout({
      TUTTI_LAYOUT(sizeof(ncclNetVDeviceProps_v12_t), 36),
      TUTTI_LAYOUT(alignof(ncclNetVDeviceProps_v12_t), 4),
      TUTTI_LAYOUT(offsetof(ncclNetVDeviceProps_v12_t, ndevs), 0),
      TUTTI_LAYOUT(offsetof(ncclNetVDeviceProps_v12_t, devs), 4),
  });

  checkLayout({
      TUTTI_LAYOUT(sizeof(ncclNetCommConfig_v10_t), 4),
      TUTTI_LAYOUT(alignof(ncclNetCommConfig_v10_t), 4),
      TUTTI_LAYOUT(offsetof(ncclNetCommConfig_v10_t, trafficClass), 0),
  });

  checkLayout({
      TUTTI_LAYOUT(sizeof(ncclNetCommConfig_v11_t), 4),
      TUTTI_LAYOUT(alignof(ncclNetCommConfig_v11_t), 4),
      TUTTI_LAYOUT(offsetof(ncclNetCommConfig_v11_t, trafficClass), 0),
  });

  checkLayout({
      TUTTI_LAYOUT(sizeof(ncclNetCommConfig_v12_t), 4),
      TUTTI_LAYOUT(alignof(ncclNetCommConfig_v12_t), 4),
      TUTTI_LAYOUT(offsetof(ncclNetCommConfig_v12_t, trafficClass), 0),
  });

  checkLayout({
      TUTTI_LAYOUT(sizeof(ncclNetCommAttr_v11_t), 16),
      TUTTI_LAYOUT(alignof(ncclNetCommAttr_v11_t), 4),
      TUTTI_LAYOUT(offsetof(ncclNetCommAttr_v11_t, maxConcurrentPeers), 0),
      TUTTI_LAYOUT(offsetof(ncclNetCommAttr_v11_t, minConcurrentPeers), 4),
      TUTTI_LAYOUT(offsetof(ncclNetCommAttr_v11_t, maxFlowsPerPeer), 8),
      TUTTI_LAYOUT(offsetof(ncclNetCommAttr_v11_t, minFlowsPerPeer), 12),
  });

  checkLayout({
      TUTTI_LAYOUT(sizeof(ncclNetCommAttr_v12_t), 16),
      TUTTI_LAYOUT(alignof(ncclNetCommAttr_v12_t), 4),
      TUTTI_LAYOUT(offsetof(ncclNetCommAttr_v12_t, maxConcurrentPeers), 0),
      TUTTI_LAYOUT(offsetof(ncclNetCommAttr_v12_t, minConcurrentPeers), 4),
      TUTTI_LAYOUT(offsetof(ncclNetCommAttr_v12_t, maxFlowsPerPeer), 8),
      TUTTI_LAYOUT(offsetof(ncclNetCommAttr_v12_t, minFlowsPerPeer), 12),
  });

  checkLayout({
      TUTTI_LAYOUT(sizeof(ncclNetAttr_v11_t), 44),
      TUTTI_LAYOUT(alignof(ncclNetAttr_v11_t), 4),
      TUTTI_LAYOUT(offsetof(ncclNetAttr_v11_t, sendCommAttr), 0),
      TUTTI_LAYOUT(offsetof(ncclNetAttr_v11_t, recvCommAttr), 16),
      TUTTI_LAYOUT(offsetof(ncclNetAttr_v11_t, op), 32),
      TUTTI_LAYOUT(offsetof(ncclNetAttr_v11_t, algo), 36),
      TUTTI_LAYOUT(offsetof(ncclNetAttr_v11_t, proto), 40),
  });

  checkLayout({
      TUTTI_LAYOUT(sizeof(ncclNetAttr_v12_t), 44),
      TUTTI_LAYOUT(alignof(ncclNetAttr_v12_t), 4),
      TUTTI_LAYOUT(offsetof(ncclNetAttr_v12_t, sendCommAttr), 0),
      TUTTI_LAYOUT(offsetof(ncclNetAttr_v12_t, recvCommAttr), 16),
      TUTTI_LAYOUT(offsetof(ncclNetAttr_v12_t, op), 32),
      TUTTI_LAYOUT(offsetof(ncclNetAttr_v12_t, algo), 36),
      TUTTI_LAYOUT(offsetof(ncclNetAttr_v12_t, proto), 40),
  });

  checkLayout({
      TUTTI_LAYOUT(sizeof(ncclNetDeviceHandle_v7_t), 32),
      TUTTI_LAYOUT(alignof(ncclNetDeviceHandle_v7_t), 8),
      TUTTI_LAYOUT(offsetof(ncclNetDeviceHandle_v7_t, netDeviceType), 0),
      TUTTI_LAYOUT(offsetof(ncclNetDeviceHandle_v7_t, netDeviceVersion), 4),
      TUTTI_LAYOUT(offsetof(ncclNetDeviceHandle_v7_t, handle), 8),
      TUTTI_LAYOUT(offsetof(ncclNetDeviceHandle_v7_t, size), 16),
      TUTTI_LAYOUT(offsetof(ncclNetDeviceHandle_v7_t, needsProxyProgress), 24),
  });

  checkLayout({
      TUTTI_LAYOUT(sizeof(ncclNet_v6_t), 136),
      TUTTI_LAYOUT(alignof(ncclNet_v6_t), 8),
      TUTTI_LAYOUT(offsetof(ncclNet_v6_t, name), 0),
      TUTTI_LAYOUT(offsetof(ncclNet_v6_t, init), 8),
      TUTTI_LAYOUT(offsetof(ncclNet_v6_t, devices), 16),
      TUTTI_LAYOUT(offsetof(ncclNet_v6_t, getProperties), 24),
      TUTTI_LAYOUT(offsetof(ncclNet_v6_t, listen), 32),
      TUTTI_LAYOUT(offsetof(ncclNet_v6_t, connect), 40),
      TUTTI_LAYOUT(offsetof(ncclNet_v6_t, accept), 48),
      TUTTI_LAYOUT(offsetof(ncclNet_v6_t, regMr), 56),
      TUTTI_LAYOUT(offsetof(ncclNet_v6_t, regMrDmaBuf), 64),
      TUTTI_LAYOUT(offsetof(ncclNet_v6_t, deregMr), 72),
      TUTTI_LAYOUT(offsetof(ncclNet_v6_t, isend), 80),
      TUTTI_LAYOUT(offsetof(ncclNet_v6_t, irecv), 88),
      TUTTI_LAYOUT(offsetof(ncclNet_v6_t, iflush), 96),
      TUTTI_LAYOUT(offsetof(ncclNet_v6_t, test), 104),
      TUTTI_LAYOUT(offsetof(ncclNet_v6_t, closeSend), 112),
      TUTTI_LAYOUT(offsetof(ncclNet_v6_t, closeRecv), 120),
      TUTTI_LAYOUT(offsetof(ncclNet_v6_t, closeListen), 128),
  });

  checkLayout({
      TUTTI_LAYOUT(sizeof(ncclNet_v7_t), 152),
      TUTTI_LAYOUT(alignof(ncclNet_v7_t), 8),
      TUTTI_LAYOUT(offsetof(ncclNet_v7_t, name), 0),
      TUTTI_LAYOUT(offsetof(ncclNet_v7_t, init), 8),
      TUTTI_LAYOUT(offsetof(ncclNet_v7_t, devices), 16),
      TUTTI_LAYOUT(offsetof(ncclNet_v7_t, getProperties), 24),
      TUTTI_LAYOUT(offsetof(ncclNet_v7_t, listen), 32),
      TUTTI_LAYOUT(offsetof(ncclNet_v7_t, connect), 40),
      TUTTI_LAYOUT(offsetof(ncclNet_v7_t, accept), 48),
      TUTTI_LAYOUT(offsetof(ncclNet_v7_t, regMr), 56),
      TUTTI_LAYOUT(offsetof(ncclNet_v7_t, regMrDmaBuf), 64),
      TUTTI_LAYOUT(offsetof(ncclNet_v7_t, deregMr), 72),
      TUTTI_LAYOUT(offsetof(ncclNet_v7_t, isend), 80),
      TUTTI_LAYOUT(offsetof(ncclNet_v7_t, irecv), 88),
      TUTTI_LAYOUT(offsetof(ncclNet_v7_t, iflush), 96),
      TUTTI_LAYOUT(offsetof(ncclNet_v7_t, test), 104),
      TUTTI_LAYOUT(offsetof(ncclNet_v7_t, closeSend), 112),
      TUTTI_LAYOUT(offsetof(ncclNet_v7_t, closeRecv), 120),
      TUTTI_LAYOUT(offsetof(ncclNet_v7_t, closeListen), 128),
      TUTTI_LAYOUT(offsetof(ncclNet_v7_t, getDeviceMr), 136),
      TUTTI_LAYOUT(offsetof(ncclNet_v7_t, irecvConsumed), 144),
  });

  checkLayout({
      TUTTI_LAYOUT(sizeof(ncclNet_v8_t), 152),
      TUTTI_LAYOUT(alignof(ncclNet_v8_t), 8),
      TUTTI_LAYOUT(offsetof(ncclNet_v8_t, name), 0),
      TUTTI_LAYOUT(offsetof(ncclNet_v8_t, init), 8),
      TUTTI_LAYOUT(offsetof(ncclNet_v8_t, devices), 16),
      TUTTI_LAYOUT(offsetof(ncclNet_v8_t, getProperties), 24),
      TUTTI_LAYOUT(offsetof(ncclNet_v8_t, listen), 32),
      TUTTI_LAYOUT(offsetof(ncclNet_v8_t, connect), 40),
      TUTTI_LAYOUT(offsetof(ncclNet_v8_t, accept), 48),
      TUTTI_LAYOUT(offsetof(ncclNet_v8_t, regMr), 56),
      TUTTI_LAYOUT(offsetof(ncclNet_v8_t, regMrDmaBuf), 64),
      TUTTI_LAYOUT(offsetof(ncclNet_v8_t, deregMr), 72),
      TUTTI_LAYOUT(offsetof(ncclNet_v8_t, isend), 80),
      TUTTI_LAYOUT(offsetof(ncclNet_v8_t, irecv), 88),
      TUTTI_LAYOUT(offsetof(ncclNet_v8_t, iflush), 96),
      TUTTI_LAYOUT(offsetof(ncclNet_v8_t, test), 104),
      TUTTI_LAYOUT(offsetof(ncclNet_v8_t, closeSend), 112),
      TUTTI_LAYOUT(offsetof(ncclNet_v8_t, closeRecv), 120),
      TUTTI_LAYOUT(offsetof(ncclNet_v8_t, closeListen), 128),
      TUTTI_LAYOUT(offsetof(ncclNet_v8_t, getDeviceMr), 136),
      TUTTI_LAYOUT(offsetof(ncclNet_v8_t, irecvConsumed), 144),
  });

  checkLayout({
      TUTTI_LAYOUT(sizeof(ncclNet_v9_t), 160),
      TUTTI_LAYOUT(alignof(ncclNet_v9_t), 8),
      TUTTI_LAYOUT(offsetof(ncclNet_v9_t, name), 0),
      TUTTI_LAYOUT(offsetof(ncclNet_v9_t, init), 8),
      TUTTI_LAYOUT(offsetof(ncclNet_v9_t, devices), 16),
      TUTTI_LAYOUT(offsetof(ncclNet_v9_t, getProperties), 24),
      TUTTI_LAYOUT(offsetof(ncclNet_v9_t, listen), 32),
      TUTTI_LAYOUT(offsetof(ncclNet_v9_t, connect), 40),
      TUTTI_LAYOUT(offsetof(ncclNet_v9_t, accept), 48),
      TUTTI_LAYOUT(offsetof(ncclNet_v9_t, regMr), 56),
      TUTTI_LAYOUT(offsetof(ncclNet_v9_t, regMrDmaBuf), 64),
      TUTTI_LAYOUT(offsetof(ncclNet_v9_t, deregMr), 72),
      TUTTI_LAYOUT(offsetof(ncclNet_v9_t, isend), 80),
      TUTTI_LAYOUT(offsetof(ncclNet_v9_t, irecv), 88),
      TUTTI_LAYOUT(offsetof(ncclNet_v9_t, iflush), 96),
      TUTTI_LAYOUT(offsetof(ncclNet_v9_t, test), 104),
      TUTTI_LAYOUT(offsetof(ncclNet_v9_t, closeSend), 112),
      TUTTI_LAYOUT(offsetof(ncclNet_v9_t, closeRecv), 120),
      TUTTI_LAYOUT(offsetof(ncclNet_v9_t, closeListen), 128),
      TUTTI_LAYOUT(offsetof(ncclNet_v9_t, getDeviceMr), 136),
      TUTTI_LAYOUT(offsetof(ncclNet_v9_t, irecvConsumed), 144),
      TUTTI_LAYOUT(offsetof(ncclNet_v9_t, makeVDevice), 152),
  });

  checkLayout({
      TUTTI_LAYOUT(sizeof(ncclNet_v10_t), 160),
      TUTTI_LAYOUT(alignof(ncclNet_v10_t), 8),
      TUTTI_LAYOUT(offsetof(ncclNet_v10_t, name), 0),
      TUTTI_LAYOUT(offsetof(ncclNet_v10_t, init), 8),
      TUTTI_LAYOUT(offsetof(ncclNet_v10_t, devices), 16),
      TUTTI_LAYOUT(offsetof(ncclNet_v10_t, getProperties), 24),
      TUTTI_LAYOUT(offsetof(ncclNet_v10_t, listen), 32),
      TUTTI_LAYOUT(offsetof(ncclNet_v10_t, connect), 40),
      TUTTI_LAYOUT(offsetof(ncclNet_v10_t, accept), 48),
      TUTTI_LAYOUT(offsetof(ncclNet_v10_t, regMr), 56),
      TUTTI_LAYOUT(offsetof(ncclNet_v10_t, regMrDmaBuf), 64),
      TUTTI_LAYOUT(offsetof(ncclNet_v10_t, deregMr), 72),
      TUTTI_LAYOUT(offsetof(ncclNet_v10_t, isend), 80),
      TUTTI_LAYOUT(offsetof(ncclNet_v10_t, irecv), 88),
      TUTTI_LAYOUT(offsetof(ncclNet_v10_t, iflush), 96),
      TUTTI_LAYOUT(offsetof(ncclNet_v10_t, test), 104),
      TUTTI_LAYOUT(offsetof(ncclNet_v10_t, closeSend), 112),
      TUTTI_LAYOUT(offsetof(ncclNet_v10_t, closeRecv), 120),
      TUTTI_LAYOUT(offsetof(ncclNet_v10_t, closeListen), 128),
      TUTTI_LAYOUT(offsetof(ncclNet_v10_t, getDeviceMr), 136),
      TUTTI_LAYOUT(offsetof(ncclNet_v10_t, irecvConsumed), 144),
      TUTTI_LAYOUT(offsetof(ncclNet_v10_t, makeVDevice), 152),
  });

  checkLayout({
      TUTTI_LAYOUT(sizeof(ncclNet_v11_t), 176),
      TUTTI_LAYOUT(alignof(ncclNet_v11_t), 8),
      TUTTI_LAYOUT(offsetof(ncclNet_v11_t, name), 0),
      TUTTI_LAYOUT(offsetof(ncclNet_v11_t, init), 8),
      TUTTI_LAYOUT(offsetof(ncclNet_v11_t, devices), 16),
      TUTTI_LAYOUT(offsetof(ncclNet_v11_t, getProperties), 24),
      TUTTI_LAYOUT(offsetof(ncclNet_v11_t, listen), 32),
      TUTTI_LAYOUT(offsetof(ncclNet_v11_t, connect), 40),
      TUTTI_LAYOUT(offsetof(ncclNet_v11_t, accept), 48),
      TUTTI_LAYOUT(offsetof(ncclNet_v11_t, regMr), 56),
      TUTTI_LAYOUT(offsetof(ncclNet_v11_t, regMrDmaBuf), 64),
      TUTTI_LAYOUT(offsetof(ncclNet_v11_t, deregMr), 72),
      TUTTI_LAYOUT(offsetof(ncclNet_v11_t, isend), 80),
      TUTTI_LAYOUT(offsetof(ncclNet_v11_t, irecv), 88),
      TUTTI_LAYOUT(offsetof(ncclNet_v11_t, iflush), 96),
      TUTTI_LAYOUT(offsetof(ncclNet_v11_t, test), 104),
      TUTTI_LAYOUT(offsetof(ncclNet_v11_t, closeSend), 112),
      TUTTI_LAYOUT(offsetof(ncclNet_v11_t, closeRecv), 120),
      TUTTI_LAYOUT(offsetof(ncclNet_v11_t, closeListen), 128),
      TUTTI_LAYOUT(offsetof(ncclNet_v11_t, getDeviceMr), 136),
      TUTTI_LAYOUT(offsetof(ncclNet_v11_t, irecvConsumed), 144),
      TUTTI_LAYOUT(offsetof(ncclNet_v11_t, makeVDevice), 152),
      TUTTI_LAYOUT(offsetof(ncclNet_v11_t, finalize), 160),
      TUTTI_LAYOUT(offsetof(ncclNet_v11_t, setNetAttr), 168),
  });

  checkLayout({
      TUTTI_LAYOUT(sizeof(ncclNet_v12_t), 176),
      TUTTI_LAYOUT(alignof(ncclNet_v12_t), 8),
      TUTTI_LAYOUT(offsetof(ncclNet_v12_t, name), 0),
      TUTTI_LAYOUT(offsetof(ncclNet_v12_t, init), 8),
      TUTTI_LAYOUT(offsetof(ncclNet_v12_t, devices), 16),
      TUTTI_LAYOUT(offsetof(ncclNet_v12_t, getProperties), 24),
      TUTTI_LAYOUT(offsetof(ncclNet_v12_t, listen), 32),
      TUTTI_LAYOUT(offsetof(ncclNet_v12_t, connect), 40),
      TUTTI_LAYOUT(offsetof(ncclNet_v12_t, accept), 48),
      TUTTI_LAYOUT(offsetof(ncclNet_v12_t, regMr), 56),
      TUTTI_LAYOUT(offsetof(ncclNet_v12_t, regMrDmaBuf), 64),
      TUTTI_LAYOUT(offsetof(ncclNet_v12_t, deregMr), 72),
      TUTTI_LAYOUT(offsetof(ncclNet_v12_t, isend), 80),
      TUTTI_LAYOUT(offsetof(ncclNet_v12_t, irecv), 88),
      TUTTI_LAYOUT(offsetof(ncclNet_v12_t, iflush), 96),
      TUTTI_LAYOUT(offsetof(ncclNet_v12_t, test), 104),
      TUTTI_LAYOUT(offsetof(ncclNet_v12_t, closeSend), 112),
      TUTTI_LAYOUT(offsetof(ncclNet_v12_t, closeRecv), 120),
      TUTTI_LAYOUT(offsetof(ncclNet_v12_t, closeListen), 128),
      TUTTI_LAYOUT(offsetof(ncclNet_v12_t, getDeviceMr), 136),
      TUTTI_LAYOUT(offsetof(ncclNet_v12_t, irecvConsumed), 144),
      TUTTI_LAYOUT(offsetof(ncclNet_v12_t, makeVDevice), 152),
      TUTTI_LAYOUT(offsetof(ncclNet_v12_t, finalize), 160),
      TUTTI_LAYOUT(offsetof(ncclNet_v12_t, setNetAttr), 168),
  });
}

TEST(AbiLayout, Tuner) {
  checkLayout({
      TUTTI_LAYOUT(sizeof(ncclTuner_v2_t), 32),
      TUTTI_LAYOUT(alignof(ncclTuner_v2_t), 8),
      TUTTI_LAYOUT(offsetof(ncclTuner_v2_t, name), 0),
      TUTTI_LAYOUT(offsetof(ncclTuner_v2_t, init), 8),
      TUTTI_LAYOUT(offsetof(ncclTuner_v2_t, getCollInfo), 16),
      TUTTI_LAYOUT(offsetof(ncclTuner_v2_t, destroy), 24),
  });

  checkLayout({
      TUTTI_LAYOUT(sizeof(ncclTuner_v3_t), 32),
      TUTTI_LAYOUT(alignof(ncclTuner_v3_t), 8),
      TUTTI_LAYOUT(offsetof(ncclTuner_v3_t, name), 0),
      TUTTI_LAYOUT(offsetof(ncclTuner_v3_t, init), 8),
      TUTTI_LAYOUT(offsetof(ncclTuner_v3_t, getCollInfo), 16),
      TUTTI_LAYOUT(offsetof(ncclTuner_v3_t, destroy), 24),
  });

  checkLayout({
      TUTTI_LAYOUT(sizeof(ncclTuner_v4_t), 32),
      TUTTI_LAYOUT(alignof(ncclTuner_v4_t), 8),
      TUTTI_LAYOUT(offsetof(ncclTuner_v4_t, name), 0),
      TUTTI_LAYOUT(offsetof(ncclTuner_v4_t, init), 8),
      TUTTI_LAYOUT(offsetof(ncclTuner_v4_t, getCollInfo), 16),
      TUTTI_LAYOUT(offsetof(ncclTuner_v4_t, destroy), 24),
  });

  checkLayout({
      TUTTI_LAYOUT(sizeof(ncclTuner_v5_t), 32),
      TUTTI_LAYOUT(alignof(ncclTuner_v5_t), 8),
      TUTTI_LAYOUT(offsetof(ncclTuner_v5_t, name), 0),
      TUTTI_LAYOUT(offsetof(ncclTuner_v5_t, init), 8),
      TUTTI_LAYOUT(offsetof(ncclTuner_v5_t, getCollInfo), 16),
      TUTTI_LAYOUT(offsetof(ncclTuner_v5_t, finalize), 24),
  });

  checkLayout({
      TUTTI_LAYOUT(sizeof(ncclTuner_v6_t), 40),
      TUTTI_LAYOUT(alignof(ncclTuner_v6_t), 8),
      TUTTI_LAYOUT(offsetof(ncclTuner_v6_t, name), 0),
      TUTTI_LAYOUT(offsetof(ncclTuner_v6_t, init), 8),
      TUTTI_LAYOUT(offsetof(ncclTuner_v6_t, getCollInfo), 16),
      TUTTI_LAYOUT(offsetof(ncclTuner_v6_t, finalize), 24),
      TUTTI_LAYOUT(offsetof(ncclTuner_v6_t, getChunkSize), 32),
  });

  checkLayout({
      TUTTI_LAYOUT(sizeof(ncclNvlDomainInfo_v5_t), 12),
      TUTTI_LAYOUT(alignof(ncclNvlDomainInfo_v5_t), 4),
      TUTTI_LAYOUT(offsetof(ncclNvlDomainInfo_v5_t, nNvlDomains), 0),
      TUTTI_LAYOUT(offsetof(ncclNvlDomainInfo_v5_t, minRanksPerNvlDomain), 4),
      TUTTI_LAYOUT(offsetof(ncclNvlDomainInfo_v5_t, maxRanksPerNvlDomain), 8),
  });

  checkLayout({
      TUTTI_LAYOUT(sizeof(ncclTunerConstants_v5_t), 1152),
      TUTTI_LAYOUT(alignof(ncclTunerConstants_v5_t), 8),
      TUTTI_LAYOUT(offsetof(ncclTunerConstants_v5_t, baseLatencies), 0),
      TUTTI_LAYOUT(offsetof(ncclTunerConstants_v5_t, hwLatencies), 168),
      TUTTI_LAYOUT(offsetof(ncclTunerConstants_v5_t, llMaxBws), 672),
      TUTTI_LAYOUT(offsetof(ncclTunerConstants_v5_t, perChMaxRingLL128Bws), 768),
      TUTTI_LAYOUT(offsetof(ncclTunerConstants_v5_t, perChMaxTreeLL128Bws), 864),
      TUTTI_LAYOUT(offsetof(ncclTunerConstants_v5_t, perChMaxTreeBws), 960),
      TUTTI_LAYOUT(offsetof(ncclTunerConstants_v5_t, perChMaxNVLSTreeBws), 1056),
  });
}

TEST(AbiLayout, Profiler) {
  checkLayout({
      TUTTI_LAYOUT(sizeof(ncclProfilerEventDescr_v4_t), 104),
      TUTTI_LAYOUT(alignof(ncclProfilerEventDescr_v4_t), 8),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v4_t, type), 0),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v4_t, parentObj), 8),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v4_t, rank), 16),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v4_t, coll.seqNumber), 24),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v4_t, coll.func), 32),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v4_t, coll.sendBuff), 40),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v4_t, coll.recvBuff), 48),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v4_t, coll.count), 56),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v4_t, coll.root), 64),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v4_t, coll.datatype), 72),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v4_t, coll.nChannels), 80),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v4_t, coll.nWarps), 81),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v4_t, coll.algo), 88),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v4_t, coll.proto), 96),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v4_t, p2p.func), 24),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v4_t, p2p.buff), 32),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v4_t, p2p.datatype), 40),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v4_t, p2p.count), 48),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v4_t, p2p.peer), 56),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v4_t, p2p.nChannels), 60),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v4_t, proxyOp.pid), 24),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v4_t, proxyOp.channelId), 28),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v4_t, proxyOp.peer), 32),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v4_t, proxyOp.nSteps), 36),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v4_t, proxyOp.chunkSize), 40),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v4_t, proxyOp.isSend), 44),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v4_t, proxyStep.step), 24),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v4_t, kernelCh.channelId), 24),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v4_t, kernelCh.pTimer), 32),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v4_t, netPlugin.id), 24),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v4_t, netPlugin.data), 32),
  });

  checkLayout({
      TUTTI_LAYOUT(sizeof(ncclProfilerEventDescr_v5_t), 112),
      TUTTI_LAYOUT(alignof(ncclProfilerEventDescr_v5_t), 8),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, type), 0),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, parentObj), 8),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, rank), 16),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, groupApi.graphCaptured), 24),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, groupApi.groupDepth), 28),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, collApi.func), 24),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, collApi.count), 32),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, collApi.datatype), 40),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, collApi.root), 48),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, collApi.stream), 56),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, collApi.graphCaptured), 64),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, p2pApi.func), 24),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, p2pApi.count), 32),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, p2pApi.datatype), 40),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, p2pApi.stream), 48),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, p2pApi.graphCaptured), 56),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, kernelLaunch.stream), 24),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, coll.seqNumber), 24),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, coll.func), 32),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, coll.sendBuff), 40),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, coll.recvBuff), 48),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, coll.count), 56),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, coll.root), 64),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, coll.datatype), 72),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, coll.nChannels), 80),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, coll.nWarps), 81),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, coll.algo), 88),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, coll.proto), 96),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, coll.parentGroup), 104),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, p2p.func), 24),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, p2p.buff), 32),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, p2p.datatype), 40),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, p2p.count), 48),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, p2p.peer), 56),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, p2p.nChannels), 60),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, p2p.parentGroup), 64),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, proxyOp.pid), 24),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, proxyOp.channelId), 28),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, proxyOp.peer), 32),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, proxyOp.nSteps), 36),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, proxyOp.chunkSize), 40),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, proxyOp.isSend), 44),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, proxyStep.step), 24),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, kernelCh.channelId), 24),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, kernelCh.pTimer), 32),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, netPlugin.id), 24),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v5_t, netPlugin.data), 32),
  });

  checkLayout({
      TUTTI_LAYOUT(sizeof(ncclProfilerEventStateArgs_v4_t), 8),
      TUTTI_LAYOUT(alignof(ncclProfilerEventStateArgs_v4_t), 8),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventStateArgs_v4_t, proxyStep.transSize), 0),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventStateArgs_v4_t, proxyCtrl.appendedProxyOps), 0),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventStateArgs_v4_t, netPlugin.data), 0),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventStateArgs_v4_t, kernelCh.pTimer), 0),
  });

  checkLayout({
      TUTTI_LAYOUT(sizeof(ncclProfilerEventStateArgs_v5_t), 8),
      TUTTI_LAYOUT(alignof(ncclProfilerEventStateArgs_v5_t), 8),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventStateArgs_v5_t, proxyStep.transSize), 0),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventStateArgs_v5_t, proxyCtrl.appendedProxyOps), 0),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventStateArgs_v5_t, netPlugin.data), 0),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventStateArgs_v5_t, kernelCh.pTimer), 0),
  });

  checkLayout({
      TUTTI_LAYOUT(sizeof(ncclProfiler_v4_t), 48),
      TUTTI_LAYOUT(alignof(ncclProfiler_v4_t), 8),
      TUTTI_LAYOUT(offsetof(ncclProfiler_v4_t, name), 0),
      TUTTI_LAYOUT(offsetof(ncclProfiler_v4_t, init), 8),
      TUTTI_LAYOUT(offsetof(ncclProfiler_v4_t, startEvent), 16),
      TUTTI_LAYOUT(offsetof(ncclProfiler_v4_t, stopEvent), 24),
      TUTTI_LAYOUT(offsetof(ncclProfiler_v4_t, recordEventState), 32),
      TUTTI_LAYOUT(offsetof(ncclProfiler_v4_t, finalize), 40),
  });

  checkLayout({
      TUTTI_LAYOUT(sizeof(ncclProfiler_v5_t), 48),
      TUTTI_LAYOUT(alignof(ncclProfiler_v5_t), 8),
      TUTTI_LAYOUT(offsetof(ncclProfiler_v5_t, name), 0),
      TUTTI_LAYOUT(offsetof(ncclProfiler_v5_t, init), 8),
      TUTTI_LAYOUT(offsetof(ncclProfiler_v5_t, startEvent), 16),
      TUTTI_LAYOUT(offsetof(ncclProfiler_v5_t, stopEvent), 24),
      TUTTI_LAYOUT(offsetof(ncclProfiler_v5_t, recordEventState), 32),
      TUTTI_LAYOUT(offsetof(ncclProfiler_v5_t, finalize), 40),
  });

  checkLayout({
      TUTTI_LAYOUT(sizeof(ncclProfiler_v6_t), 48),
      TUTTI_LAYOUT(alignof(ncclProfiler_v6_t), 8),
      TUTTI_LAYOUT(offsetof(ncclProfiler_v6_t, name), 0),
      TUTTI_LAYOUT(offsetof(ncclProfiler_v6_t, init), 8),
      TUTTI_LAYOUT(offsetof(ncclProfiler_v6_t, startEvent), 16),
      TUTTI_LAYOUT(offsetof(ncclProfiler_v6_t, stopEvent), 24),
      TUTTI_LAYOUT(offsetof(ncclProfiler_v6_t, recordEventState), 32),
      TUTTI_LAYOUT(offsetof(ncclProfiler_v6_t, finalize), 40),
  });

  checkLayout({
      TUTTI_LAYOUT(sizeof(ncclProfilerEventDescr_v6_t), 112),
      TUTTI_LAYOUT(alignof(ncclProfilerEventDescr_v6_t), 8),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, type), 0),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, parentObj), 8),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, rank), 16),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, groupApi.graphCaptured), 24),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, groupApi.groupDepth), 28),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, collApi.func), 24),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, collApi.count), 32),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, collApi.datatype), 40),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, collApi.root), 48),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, collApi.stream), 56),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, collApi.graphCaptured), 64),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, p2pApi.func), 24),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, p2pApi.count), 32),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, p2pApi.datatype), 40),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, p2pApi.stream), 48),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, p2pApi.graphCaptured), 56),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, kernelLaunch.stream), 24),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, coll.seqNumber), 24),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, coll.func), 32),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, coll.sendBuff), 40),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, coll.recvBuff), 48),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, coll.count), 56),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, coll.root), 64),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, coll.datatype), 72),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, coll.nChannels), 80),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, coll.nWarps), 81),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, coll.algo), 88),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, coll.proto), 96),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, coll.parentGroup), 104),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, p2p.func), 24),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, p2p.buff), 32),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, p2p.datatype), 40),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, p2p.count), 48),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, p2p.peer), 56),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, p2p.nChannels), 60),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, p2p.parentGroup), 64),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, proxyOp.pid), 24),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, proxyOp.channelId), 28),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, proxyOp.peer), 32),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, proxyOp.nSteps), 36),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, proxyOp.chunkSize), 40),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, proxyOp.isSend), 44),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, proxyStep.step), 24),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, kernelCh.channelId), 24),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, kernelCh.pTimer), 32),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, netPlugin.id), 24),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, netPlugin.data), 32),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, ceColl.seqNumber), 24),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, ceColl.func), 32),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, ceColl.sendBuff), 40),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, ceColl.recvBuff), 48),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, ceColl.count), 56),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, ceColl.root), 64),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, ceColl.datatype), 72),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, ceColl.syncStrategy), 80),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, ceColl.intraBatchSync), 88),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, ceColl.batchSize), 92),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, ceColl.numBatches), 96),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, ceColl.ceSeqNum), 100),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, ceColl.stream), 104),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, ceCollSync.isComplete), 24),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, ceCollSync.nRanks), 28),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, ceCollBatch.numOps), 24),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, ceCollBatch.totalBytes), 32),
      TUTTI_LAYOUT(offsetof(ncclProfilerEventDescr_v6_t, ceCollBatch.useIntraSync), 40),
  });
}

#endif  // __x86_64__

// Tutti's transport ABI grows by appending: earlier fields keep their offsets.
TEST(AbiLayout, TransportStructsGrowByAppending) {
  checkLayout({
      TUTTI_LAYOUT(offsetof(tuttiDeviceMem_t, alloc), 0),
      TUTTI_LAYOUT(offsetof(tuttiDeviceMem_t, closeImport), 32),
      TUTTI_LAYOUT(offsetof(tuttiDeviceMem_t, dmabufFd), 40),
      TUTTI_LAYOUT(sizeof(tuttiDeviceMem_t), 48),
      TUTTI_LAYOUT(offsetof(tuttiPeerInfo_t, backend), 36),
      TUTTI_LAYOUT(offsetof(tuttiPeerInfo_t, pidNs), 40),
  });
  EXPECT_EQ(offsetof(tuttiConnectRequest_t, shared), offsetof(tuttiConnectRequest_t, buffSizes) + 3 * sizeof(size_t));
  EXPECT_GT(offsetof(tuttiConnectRequest_t, devMem), offsetof(tuttiConnectRequest_t, shared));
}

TEST(AbiConstants, MatchNccl) {
  EXPECT_EQ(NCCL_PTR_HOST, 0x1);
  EXPECT_EQ(NCCL_PTR_CUDA, 0x2);
  EXPECT_EQ(NCCL_PTR_DMABUF, 0x4);
  EXPECT_EQ(NCCL_NET_HANDLE_MAXSIZE, 128);
  EXPECT_EQ(NCCL_NET_MAX_REQUESTS, 32);
  EXPECT_EQ(NCCL_NET_MAX_REQUESTS_V6, 8);
  EXPECT_EQ(NCCL_NET_MAX_DEVS_PER_NIC_V12, 8);
  EXPECT_EQ(NCCL_NET_MAX_DEVS_PER_NIC_V11, 4);
  EXPECT_EQ(NCCL_NET_DEVICE_UNPACK, 1);
  EXPECT_EQ(NCCL_NET_DEVICE_UNPACK_VERSION, 0x7);
  EXPECT_EQ(MAX_NET_SIZE, 1024L * 1024 * 1024);
  EXPECT_EQ(MAX_COLLNET_SIZE, 512L * 1024 * 1024);
  EXPECT_EQ(NCCL_NUM_ALGORITHMS, 7);
  EXPECT_EQ(NCCL_NUM_PROTOCOLS, 3);
  EXPECT_EQ(NCCL_ALGO_TREE, 0);
  EXPECT_EQ(NCCL_ALGO_RING, 1);
  EXPECT_EQ(NCCL_ALGO_COLLNET_DIRECT, 2);
  EXPECT_EQ(NCCL_ALGO_COLLNET_CHAIN, 3);
  EXPECT_EQ(NCCL_ALGO_NVLS, 4);
  EXPECT_EQ(NCCL_ALGO_NVLS_TREE, 5);
  EXPECT_EQ(NCCL_ALGO_PAT, 6);
  EXPECT_EQ(NCCL_PROTO_LL, 0);
  EXPECT_EQ(NCCL_PROTO_LL128, 1);
  EXPECT_EQ(NCCL_PROTO_SIMPLE, 2);
  EXPECT_EQ(NCCL_ALGO_PROTO_IGNORE, -1.0);
  EXPECT_EQ(ncclProfileGroup, 1 << 0);
  EXPECT_EQ(ncclProfileNetPlugin, 1 << 7);
  EXPECT_EQ(ncclProfileKernelLaunch, 1 << 11);
  EXPECT_EQ(ncclProfileCeBatch, 1 << 14);
  EXPECT_EQ(ncclProfilerProxyOpInProgress_v4, 19);
  EXPECT_EQ(ncclProfilerKernelChStop, 22);
  EXPECT_EQ(ncclProfilerCeBatchComplete, 30);
  EXPECT_EQ(NCCL_PROFILER_NET_TYPE_SOCK, 2u << 16);
}

// The tuner cost table is one contiguous float block indexed with a row length of NCCL_NUM_PROTOCOLS.
TEST(AbiConstants, CostTableIsContiguous) {
  float table[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS] = {};
  float* flat = reinterpret_cast<float*>(reinterpret_cast<float**>(table));
  flat[NCCL_ALGO_RING * NCCL_NUM_PROTOCOLS + NCCL_PROTO_SIMPLE] = 5.0f;
  EXPECT_EQ(table[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE], 5.0f);
  EXPECT_EQ(sizeof(table), sizeof(float) * 21);
}

}  // namespace
