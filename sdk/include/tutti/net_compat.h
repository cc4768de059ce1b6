/* For net plugin authors writing C++ (17 or later): implement NCCL's net ABI v12 once and export the older
 * tables (v11 .. v6) derived from it, so cores that only know an older ABI load the same plugin.
 *
 *   constexpr ncclNet_v12_t kNet = {.name = "MyNet", .init = myInit, ...};
 *   extern "C" __attribute__((visibility("default"))) const ncclNet_v12_t ncclNetPlugin_v12 = kNet;
 *   extern "C" __attribute__((visibility("default"))) const ncclNet_v11_t ncclNetPlugin_v11 =
 *       tutti::netcompat::v11<kNet>();
 *   ... v10<kNet>(), v9<kNet>(), v8<kNet>(), v7<kNet>(), v6<kNet>()
 *
 * What the derived tables do:
 * - init: v11 is per communicator like v12 (same config layout); v10 and older have one process-wide
 *   init, never finalized: the first call runs the v12 init with commId 0 and an undefined traffic class,
 *   and that context serves every later call (later inits only succeed).
 * - getProperties: the v12 answer, field by field into the older struct (virtual-device lists are cut to
 *   the older, shorter array).
 * - v8 and older carry int sizes: a negative size is refused with ncclInvalidArgument (and a WARN through
 *   the logger given at init), never converted into a huge size_t.
 * - v9 and older have no profiler handles: NULL is passed.
 * - An optional v12 entry (regMrDmaBuf, getDeviceMr, irecvConsumed, makeVDevice) is offered by an older
 *   table only where the v12 table has it, so the core's "is it supported" test still works.
 * The wrappers cost one extra direct call; nothing is allocated except the process-wide context. */
#ifndef TUTTI_SDK_NET_COMPAT_H_
#define TUTTI_SDK_NET_COMPAT_H_

#include <tutti/net.h>

#ifdef __cplusplus

#include <cstddef>
#include <mutex>

namespace tutti::netcompat {

// Most buffers one grouped irecv may carry through an int-size table (NCCL's limit is 8 per request).
inline constexpr int kMaxGroupedRecvs = 8;

namespace detail {

static_assert(sizeof(ncclNetCommConfig_v11_t) == sizeof(ncclNetCommConfig_v12_t),
              "v11 and v12 communicator configs share one layout");

template <const ncclNet_v12_t& Net>
struct Shim {
  // The logger of the latest init, for WARNs about arguments an older ABI can express but v12 cannot.
  static inline ncclDebugLogger_t logger = nullptr;
  // v10 and older: the one process-wide context.
  static inline std::mutex mu;
  static inline bool initialized = false;
  static inline void* processContext = nullptr;

  template <typename... Args>
  static void warn(const char* fmt, Args... args) {
    if (logger) logger(NCCL_LOG_WARN, NCCL_NET, __FILE__, __LINE__, fmt, args...);
  }

  // ---- properties
  template <typename P>
  static void common(const ncclNetProperties_v12_t& v, P* p) {
    p->name = v.name;
    p->pciPath = v.pciPath;
    p->guid = v.guid;
    p->ptrSupport = v.ptrSupport;
    p->speed = v.speed;
    p->port = v.port;
    p->latency = v.latency;
    p->maxComms = v.maxComms;
    p->maxRecvs = v.maxRecvs;
  }
  template <typename P>
  static void vprops(const ncclNetVDeviceProps_v12_t& v, P* p) {
    constexpr int cap = static_cast<int>(sizeof p->devs / sizeof p->devs[0]);
    p->ndevs = v.ndevs < cap ? v.ndevs : cap;
    for (int i = 0; i < p->ndevs; ++i) p->devs[i] = v.devs[i];
  }
  template <typename P, int Version>
  static ncclResult_t props(int dev, P* p) {
    if (p == nullptr) return ncclInvalidArgument;
    ncclNetProperties_v12_t v{};
    if (ncclResult_t r = Net.getProperties(dev, &v); r != ncclSuccess) return r;
    *p = P{};
    common(v, p);
    if constexpr (Version >= 7) {
      p->netDeviceType = v.netDeviceType;
      p->netDeviceVersion = v.netDeviceVersion;
    }
    if constexpr (Version >= 8) p->regIsGlobal = v.regIsGlobal;
    if constexpr (Version >= 9) {
      p->forceFlush = v.forceFlush;
      vprops(v.vProps, &p->vProps);
      p->maxP2pBytes = v.maxP2pBytes;
      p->maxCollBytes = v.maxCollBytes;
    }
    if constexpr (Version >= 11) p->maxMultiRequestSize = v.maxMultiRequestSize;
    return ncclSuccess;
  }

  // ---- init / finalize
  static ncclResult_t initV11(void** ctx, uint64_t commId, ncclNetCommConfig_v11_t* config, ncclDebugLogger_t log,
                              ncclProfilerCallback_t prof) {
    logger = log;
    return Net.init(ctx, commId, reinterpret_cast<ncclNetCommConfig_v12_t*>(config), log, prof);
  }
  static ncclResult_t initProcess(ncclDebugLogger_t log, ncclProfilerCallback_t prof) {
    std::lock_guard<std::mutex> lock(mu);
    logger = log;
    if (initialized) return ncclSuccess;
    ncclNetCommConfig_v12_t config{NCCL_NET_TRAFFIC_CLASS_UNDEF};
    if (ncclResult_t r = Net.init(&processContext, 0, &config, log, prof); r != ncclSuccess) return r;
    initialized = true;
    return ncclSuccess;
  }
  static ncclResult_t initV10(ncclDebugLogger_t log, ncclProfilerCallback_t prof) { return initProcess(log, prof); }
  static ncclResult_t initV9(ncclDebugLogger_t log) { return initProcess(log, nullptr); }

  // ---- connection setup
  static ncclResult_t listen(int dev, void* handle, void** listenComm) {
    return Net.listen(processContext, dev, handle, listenComm);
  }
  static ncclResult_t connectV10(int dev, ncclNetCommConfig_v10_t*, void* handle, void** sendComm,
                                 ncclNetDeviceHandle_v10_t** devComm) {
    return Net.connect(processContext, dev, handle, sendComm, devComm);
  }
  static ncclResult_t connectV9(int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v9_t** devComm) {
    return Net.connect(processContext, dev, handle, sendComm, devComm);
  }
  static ncclResult_t connectV6(int dev, void* handle, void** sendComm) {
    return Net.connect(processContext, dev, handle, sendComm, nullptr);
  }
  static ncclResult_t acceptV6(void* listenComm, void** recvComm) { return Net.accept(listenComm, recvComm, nullptr); }

  // ---- data path
  static ncclResult_t isendV9(void* comm, void* data, size_t size, int tag, void* mh, void** request) {
    return Net.isend(comm, data, size, tag, mh, nullptr, request);
  }
  static ncclResult_t irecvV9(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhs, void** request) {
    return Net.irecv(comm, n, data, sizes, tags, mhs, nullptr, request);
  }
  static ncclResult_t isendInt(void* comm, void* data, int size, int tag, void* mh, void** request) {
    if (size < 0) {
      warn("%s: isend of negative size %d refused", Net.name, size);
      return ncclInvalidArgument;
    }
    return Net.isend(comm, data, static_cast<size_t>(size), tag, mh, nullptr, request);
  }
  static ncclResult_t irecvInt(void* comm, int n, void** data, int* sizes, int* tags, void** mhs, void** request) {
    if (n < 1 || n > kMaxGroupedRecvs || sizes == nullptr) {
      warn("%s: irecv of %d buffers refused (1..%d, sizes non-NULL)", Net.name, n, kMaxGroupedRecvs);
      return ncclInvalidArgument;
    }
    size_t s[kMaxGroupedRecvs];
    for (int i = 0; i < n; ++i) {
      if (sizes[i] < 0) {
        warn("%s: irecv of negative size %d refused", Net.name, sizes[i]);
        return ncclInvalidArgument;
      }
      s[i] = static_cast<size_t>(sizes[i]);
    }
    return Net.irecv(comm, n, data, s, tags, mhs, nullptr, request);
  }
  static ncclResult_t regMrInt(void* comm, void* data, int size, int type, void** mhandle) {
    if (size < 0) {
      warn("%s: regMr of negative size %d refused", Net.name, size);
      return ncclInvalidArgument;
    }
    return Net.regMr(comm, data, static_cast<size_t>(size), type, mhandle);
  }
  static ncclResult_t setNetAttrV11(void* ctx, ncclNetAttr_v11_t* a) {
    static_assert(sizeof(ncclNetAttr_v11_t) == sizeof(ncclNetAttr_v12_t), "v11 and v12 hints share one layout");
    if (a == nullptr) return ncclInvalidArgument;
    ncclNetAttr_v12_t v;
    static_assert(sizeof v.sendCommAttr == sizeof a->sendCommAttr);
    __builtin_memcpy(&v, a, sizeof v);
    return Net.setNetAttr(ctx, &v);
  }
  template <typename VProps>
  static ncclResult_t makeVDevice(int* d, VProps* props) {
    if (props == nullptr) return ncclInvalidArgument;
    ncclNetVDeviceProps_v12_t v{};
    v.ndevs = props->ndevs;
    constexpr int cap = static_cast<int>(sizeof props->devs / sizeof props->devs[0]);
    if (v.ndevs < 0 || v.ndevs > cap) return ncclInvalidArgument;
    for (int i = 0; i < v.ndevs; ++i) v.devs[i] = props->devs[i];
    return Net.makeVDevice(d, &v);
  }
};

// The fields every table from v7 on shares, copied from v12 where the signatures agree.
template <const ncclNet_v12_t& Net, typename T>
constexpr void fillShared(T* t) {
  t->name = Net.name;
  t->devices = Net.devices;
  t->deregMr = Net.deregMr;
  t->iflush = Net.iflush;
  t->test = Net.test;
  t->closeSend = Net.closeSend;
  t->closeRecv = Net.closeRecv;
  t->closeListen = Net.closeListen;
  t->regMrDmaBuf = Net.regMrDmaBuf;
}

}  // namespace detail

template <const ncclNet_v12_t& Net>
constexpr ncclNet_v11_t v11() {
  using S = detail::Shim<Net>;
  ncclNet_v11_t t{};
  detail::fillShared<Net>(&t);
  t.init = S::initV11;
  t.getProperties = S::template props<ncclNetProperties_v11_t, 11>;
  t.listen = Net.listen;
  t.connect = Net.connect;
  t.accept = Net.accept;
  t.regMr = Net.regMr;
  t.isend = Net.isend;
  t.irecv = Net.irecv;
  t.getDeviceMr = Net.getDeviceMr;
  t.irecvConsumed = Net.irecvConsumed;
  t.makeVDevice = Net.makeVDevice ? S::template makeVDevice<ncclNetVDeviceProps_v11_t> : nullptr;
  t.finalize = Net.finalize;
  t.setNetAttr = Net.setNetAttr ? S::setNetAttrV11 : nullptr;
  return t;
}

template <const ncclNet_v12_t& Net>
constexpr ncclNet_v10_t v10() {
  using S = detail::Shim<Net>;
  ncclNet_v10_t t{};
  detail::fillShared<Net>(&t);
  t.init = S::initV10;
  t.getProperties = S::template props<ncclNetProperties_v10_t, 10>;
  t.listen = S::listen;
  t.connect = S::connectV10;
  t.accept = Net.accept;
  t.regMr = Net.regMr;
  t.isend = Net.isend;
  t.irecv = Net.irecv;
  t.getDeviceMr = Net.getDeviceMr;
  t.irecvConsumed = Net.irecvConsumed;
  t.makeVDevice = Net.makeVDevice ? S::template makeVDevice<ncclNetVDeviceProps_v10_t> : nullptr;
  return t;
}

template <const ncclNet_v12_t& Net>
constexpr ncclNet_v9_t v9() {
  using S = detail::Shim<Net>;
  ncclNet_v9_t t{};
  detail::fillShared<Net>(&t);
  t.init = S::initV9;
  t.getProperties = S::template props<ncclNetProperties_v9_t, 9>;
  t.listen = S::listen;
  t.connect = S::connectV9;
  t.accept = Net.accept;
  t.regMr = Net.regMr;
  t.isend = S::isendV9;
  t.irecv = S::irecvV9;
  t.getDeviceMr = Net.getDeviceMr;
  t.irecvConsumed = Net.irecvConsumed;
  t.makeVDevice = Net.makeVDevice ? S::template makeVDevice<ncclNetVDeviceProps_v9_t> : nullptr;
  return t;
}

template <const ncclNet_v12_t& Net>
constexpr ncclNet_v8_t v8() {
  using S = detail::Shim<Net>;
  ncclNet_v8_t t{};
  detail::fillShared<Net>(&t);
  t.init = S::initV9;
  t.getProperties = S::template props<ncclNetProperties_v8_t, 8>;
  t.listen = S::listen;
  t.connect = S::connectV9;
  t.accept = Net.accept;
  t.regMr = Net.regMr;
  t.isend = S::isendInt;
  t.irecv = S::irecvInt;
  t.getDeviceMr = Net.getDeviceMr;
  t.irecvConsumed = Net.irecvConsumed;
  return t;
}

template <const ncclNet_v12_t& Net>
constexpr ncclNet_v7_t v7() {
  using S = detail::Shim<Net>;
  ncclNet_v7_t t{};
  detail::fillShared<Net>(&t);
  t.init = S::initV9;
  t.getProperties = S::template props<ncclNetProperties_v7_t, 7>;
  t.listen = S::listen;
  t.connect = S::connectV9;
  t.accept = Net.accept;
  t.regMr = S::regMrInt;
  t.isend = S::isendInt;
  t.irecv = S::irecvInt;
  t.getDeviceMr = Net.getDeviceMr;
  t.irecvConsumed = Net.irecvConsumed;
  return t;
}

template <const ncclNet_v12_t& Net>
constexpr ncclNet_v6_t v6() {
  using S = detail::Shim<Net>;
  ncclNet_v6_t t{};
  detail::fillShared<Net>(&t);
  t.init = S::initV9;
  t.getProperties = S::template props<ncclNetProperties_v6_t, 6>;
  t.listen = S::listen;
  t.connect = S::connectV6;
  t.accept = S::acceptV6;
  t.regMr = S::regMrInt;
  t.isend = S::isendInt;
  t.irecv = S::irecvInt;
  return t;
}

}  // namespace tutti::netcompat

#endif  // __cplusplus
#endif  // TUTTI_SDK_NET_COMPAT_H_
