// Net ABI adapters: one template over the table type, with the per-version differences spelt out by
// `if constexpr` on the version number and `requires` on the properties' fields.
#include "net_api.h"

#include "common.h"

#include <dlfcn.h>

#include <climits>
#include <type_traits>

namespace tutti::check {
namespace {

template <class P>
void copyProps(const P& s, NetProps* p) {
  p->nameNull = s.name == nullptr;
  p->name = s.name ? s.name : "";
  p->pciPath = s.pciPath ? s.pciPath : "";
  p->guid = s.guid;
  p->ptrSupport = s.ptrSupport;
  p->speed = s.speed;
  p->port = s.port;
  p->latency = s.latency;
  p->maxComms = s.maxComms;
  p->maxRecvs = s.maxRecvs;
  if constexpr (requires { s.netDeviceType; }) {
    p->hasOffload = true;
    p->netDeviceType = s.netDeviceType;
    p->netDeviceVersion = s.netDeviceVersion;
  }
  if constexpr (requires { s.regIsGlobal; }) p->regIsGlobal = s.regIsGlobal;
  if constexpr (requires { s.maxP2pBytes; }) {
    p->hasLimits = true;
    p->forceFlush = s.forceFlush;
    p->vNdevs = s.vProps.ndevs;
    p->vMaxDevs = static_cast<int>(sizeof(s.vProps.devs) / sizeof(s.vProps.devs[0]));
    for (int i = 0; i < p->vNdevs && i < p->vMaxDevs; i++) p->vDevs.push_back(s.vProps.devs[i]);
    p->maxP2pBytes = s.maxP2pBytes;
    p->maxCollBytes = s.maxCollBytes;
  }
  if constexpr (requires { s.maxMultiRequestSize; }) {
    p->hasMultiRequest = true;
    p->maxMultiRequestSize = s.maxMultiRequestSize;
  }
}

template <int V, class T, class Props>
class NetV final : public NetPlugin {
 public:
  explicit NetV(const T* t) : t_(t) {
    version = V;
    name = t->name ? t->name : "";
  }

  std::vector<std::string> missingCallbacks() const override {
    std::vector<std::string> m;
    auto need = [&](const void* f, const char* n) {
      if (!f) m.push_back(n);
    };
    need(t_->name, "name");
    need(reinterpret_cast<const void*>(t_->init), "init");
    need(reinterpret_cast<const void*>(t_->devices), "devices");
    need(reinterpret_cast<const void*>(t_->getProperties), "getProperties");
    need(reinterpret_cast<const void*>(t_->listen), "listen");
    need(reinterpret_cast<const void*>(t_->connect), "connect");
    need(reinterpret_cast<const void*>(t_->accept), "accept");
    need(reinterpret_cast<const void*>(t_->regMr), "regMr");
    need(reinterpret_cast<const void*>(t_->deregMr), "deregMr");
    need(reinterpret_cast<const void*>(t_->isend), "isend");
    need(reinterpret_cast<const void*>(t_->irecv), "irecv");
    need(reinterpret_cast<const void*>(t_->test), "test");
    need(reinterpret_cast<const void*>(t_->closeSend), "closeSend");
    need(reinterpret_cast<const void*>(t_->closeRecv), "closeRecv");
    need(reinterpret_cast<const void*>(t_->closeListen), "closeListen");
    if constexpr (V >= 11) need(reinterpret_cast<const void*>(t_->finalize), "finalize");
    return m;
  }

  ncclResult_t init(void** ctx, uint64_t commId) override {
    *ctx = nullptr;
    if constexpr (V >= 11) {
      std::conditional_t<V == 12, ncclNetCommConfig_v12_t, ncclNetCommConfig_v11_t> cfg{NCCL_NET_TRAFFIC_CLASS_UNDEF};
      return t_->init(ctx, commId, &cfg, pluginLogger, nullptr);
    } else if constexpr (V == 10) {
      (void)commId;
      return t_->init(pluginLogger, nullptr);
    } else {
      (void)commId;
      return t_->init(pluginLogger);
    }
  }
  ncclResult_t devices(int* n) override { return t_->devices(n); }
  ncclResult_t getProperties(int dev, NetProps* p) override {
    Props s{};
    ncclResult_t r = t_->getProperties(dev, &s);
    if (r == ncclSuccess) copyProps(s, p);
    return r;
  }
  ncclResult_t listen(void* ctx, int dev, void* handle, void** lc) override {
    if constexpr (V >= 11) return t_->listen(ctx, dev, handle, lc);
    else return t_->listen(dev, handle, lc);
  }
  ncclResult_t connect(void* ctx, int dev, void* handle, void** sc) override {
    // A NULL *devComm asks for no device offload.
    if constexpr (V >= 11) {
      ncclNetDeviceHandle_v12_t* dh = nullptr;
      return t_->connect(ctx, dev, handle, sc, &dh);
    } else if constexpr (V == 10) {
      ncclNetCommConfig_v10_t cfg{NCCL_NET_TRAFFIC_CLASS_UNDEF};
      ncclNetDeviceHandle_v10_t* dh = nullptr;
      return t_->connect(dev, &cfg, handle, sc, &dh);
    } else if constexpr (V >= 7) {
      ncclNetDeviceHandle_v7_t* dh = nullptr;
      return t_->connect(dev, handle, sc, &dh);
    } else {
      return t_->connect(dev, handle, sc);
    }
  }
  ncclResult_t accept(void* lc, void** rc) override {
    if constexpr (V >= 7) {
      ncclNetDeviceHandle_v7_t* dh = nullptr;
      return t_->accept(lc, rc, &dh);
    } else {
      return t_->accept(lc, rc);
    }
  }
  ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mh) override {
    if constexpr (V <= 7) {
      if (size > INT_MAX) return ncclInvalidArgument;
      return t_->regMr(comm, data, static_cast<int>(size), type, mh);
    } else {
      return t_->regMr(comm, data, size, type, mh);
    }
  }
  ncclResult_t deregMr(void* comm, void* mh) override { return t_->deregMr(comm, mh); }
  ncclResult_t isend(void* sc, void* data, size_t size, int tag, void* mh, void** req) override {
    if constexpr (V >= 10) return t_->isend(sc, data, size, tag, mh, nullptr, req);
    else if constexpr (V == 9) return t_->isend(sc, data, size, tag, mh, req);
    else return t_->isend(sc, data, static_cast<int>(size), tag, mh, req);
  }
  ncclResult_t irecv(void* rc, int n, void** data, size_t* sizes, int* tags, void** mhs, void** req) override {
    if constexpr (V >= 10) {
      void* ph[64] = {};
      return t_->irecv(rc, n, data, sizes, tags, mhs, ph, req);
    } else if constexpr (V == 9) {
      return t_->irecv(rc, n, data, sizes, tags, mhs, req);
    } else {
      int isz[64];
      for (int i = 0; i < n && i < 64; i++) isz[i] = static_cast<int>(sizes[i]);
      return t_->irecv(rc, n, data, isz, tags, mhs, req);
    }
  }
  bool hasIflush() const override { return t_->iflush != nullptr; }
  ncclResult_t iflush(void* rc, int n, void** data, int* sizes, void** mhs, void** req) override {
    return t_->iflush(rc, n, data, sizes, mhs, req);
  }
  ncclResult_t test(void* req, int* done, int* sizes) override { return t_->test(req, done, sizes); }
  ncclResult_t closeSend(void* c) override { return t_->closeSend(c); }
  ncclResult_t closeRecv(void* c) override { return t_->closeRecv(c); }
  ncclResult_t closeListen(void* c) override { return t_->closeListen(c); }
  bool hasFinalize() const override {
    if constexpr (V >= 11) return true;
    else return false;
  }
  ncclResult_t finalize(void* ctx) override {
    if constexpr (V >= 11) return t_->finalize(ctx);
    else {
      (void)ctx;
      return ncclSuccess;
    }
  }

 private:
  const T* t_;
};

template <int V, class T, class Props>
std::unique_ptr<NetPlugin> make(void* sym) {
  return std::make_unique<NetV<V, T, Props>>(static_cast<const T*>(sym));
}

}  // namespace

std::unique_ptr<NetPlugin> loadNetPlugin(const std::string& path, int abi, std::string* error,
                                         std::vector<int>* found) {
  // RTLD_NOW: an unresolved dependency is reported here rather than as a crash in the middle of a check.
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    *error = std::string("dlopen failed: ") + dlerror();
    return nullptr;
  }
  void* syms[13] = {};
  for (int v = 12; v >= 6; v--) {
    syms[v] = dlsym(lib, ("ncclNetPlugin_v" + std::to_string(v)).c_str());
    if (syms[v]) found->push_back(v);
  }
  int pick = abi;
  if (!pick)
    for (int v = 12; v >= 6 && !pick; v--)
      if (syms[v]) pick = v;
  if (!pick || !syms[pick]) {
    *error = abi ? "no symbol ncclNetPlugin_v" + std::to_string(abi)
                 : std::string("no symbol ncclNetPlugin_v12 .. ncclNetPlugin_v6");
    dlclose(lib);
    return nullptr;
  }
  // The library stays loaded for the life of the process: plugin strings and threads depend on it.
  void* s = syms[pick];
  std::unique_ptr<NetPlugin> p;
  switch (pick) {
    case 12: p = make<12, ncclNet_v12_t, ncclNetProperties_v12_t>(s); break;
    case 11: p = make<11, ncclNet_v11_t, ncclNetProperties_v11_t>(s); break;
    case 10: p = make<10, ncclNet_v10_t, ncclNetProperties_v10_t>(s); break;
    case 9: p = make<9, ncclNet_v9_t, ncclNetProperties_v9_t>(s); break;
    case 8: p = make<8, ncclNet_v8_t, ncclNetProperties_v8_t>(s); break;
    case 7: p = make<7, ncclNet_v7_t, ncclNetProperties_v7_t>(s); break;
    default: p = make<6, ncclNet_v6_t, ncclNetProperties_v6_t>(s); break;
  }
  if (p) p->wait = static_cast<const tuttiNetWait_v1_t*>(dlsym(lib, TUTTI_NET_WAIT_SYMBOL));
  return p;
}

}  // namespace tutti::check
