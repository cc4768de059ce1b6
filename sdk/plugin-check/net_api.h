// One view of every net plugin ABI version (v6..v12): the tool's own adapters, written against the SDK
// headers, so the checks are written once. Calls keep the plugin's semantics; only argument types differ.
#pragma once

#include <tutti/net.h>
#include <tutti/net_wait.h>

#include <memory>
#include <string>
#include <vector>

namespace tutti::check {

// getProperties of any version; fields a version lacks keep the `has*` flag false.
struct NetProps {
  std::string name, pciPath;
  bool nameNull = true;
  uint64_t guid = 0;
  int ptrSupport = 0, speed = 0, port = 0, maxComms = 0, maxRecvs = 0;
  float latency = 0;
  bool hasOffload = false;  // v7+
  int regIsGlobal = 0, netDeviceType = 0, netDeviceVersion = 0;
  bool hasLimits = false;   // v9+: forceFlush, vProps, maxP2pBytes, maxCollBytes
  int forceFlush = 0, vNdevs = 0, vMaxDevs = 0;
  std::vector<int> vDevs;
  size_t maxP2pBytes = 0, maxCollBytes = 0;
  bool hasMultiRequest = false;  // v11+
  int maxMultiRequestSize = 0;
};

class NetPlugin {
 public:
  virtual ~NetPlugin() = default;
  int version = 0;
  std::string name;
  const tuttiNetWait_v1_t* wait = nullptr;  // the optional blocking wait (tutti/net_wait.h), if exported
  // Required callbacks the table leaves NULL (empty: complete).
  virtual std::vector<std::string> missingCallbacks() const = 0;
  // For v6..v10 init is per process and ctx stays NULL; v11+ return a per-communicator context.
  virtual ncclResult_t init(void** ctx, uint64_t commId) = 0;
  virtual ncclResult_t devices(int* n) = 0;
  virtual ncclResult_t getProperties(int dev, NetProps* p) = 0;
  virtual ncclResult_t listen(void* ctx, int dev, void* handle, void** listenComm) = 0;
  virtual ncclResult_t connect(void* ctx, int dev, void* handle, void** sendComm) = 0;
  virtual ncclResult_t accept(void* listenComm, void** recvComm) = 0;
  virtual ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle) = 0;
  virtual ncclResult_t deregMr(void* comm, void* mhandle) = 0;
  virtual ncclResult_t isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** req) = 0;
  virtual ncclResult_t irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                             void** req) = 0;
  virtual bool hasIflush() const = 0;
  virtual ncclResult_t iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** req) = 0;
  virtual ncclResult_t test(void* req, int* done, int* sizes) = 0;
  virtual ncclResult_t closeSend(void* c) = 0;
  virtual ncclResult_t closeRecv(void* c) = 0;
  virtual ncclResult_t closeListen(void* c) = 0;
  virtual bool hasFinalize() const = 0;
  virtual ncclResult_t finalize(void* ctx) = 0;
  // Largest message the version's int-sized arguments allow.
  size_t sizeLimit() const { return version <= 8 ? 0x7fffffffu : ~size_t(0); }
  // Requests the core may keep outstanding per comm for this version.
  int maxRequests() const { return version <= 6 ? NCCL_NET_MAX_REQUESTS_V6 : NCCL_NET_MAX_REQUESTS; }
};

// dlopen()s `path` and picks ncclNetPlugin_v<abi> (abi 0: the newest present). On failure returns null
// and sets *error to what was tried. `probed` lists every version found in the file.
std::unique_ptr<NetPlugin> loadNetPlugin(const std::string& path, int abi, std::string* error,
                                         std::vector<int>* found);

}  // namespace tutti::check
