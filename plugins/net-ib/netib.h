// net-ib internals shared by its files: logging through the core's logger, the device list, the comm
// objects behind the opaque pointers of the ABI, and the v12-shaped entry points the exported tables use.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include <tutti/net.h>

#include "ibv.h"
#include "requests.h"
#include "wire.h"

namespace tutti::netib {

// ---- logging: only through the logger handed to init; silent before the first init.
void logMsg(ncclDebugLogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));
void setLogger(ncclDebugLogger_t logger);
#define IB_WARN(...) ::tutti::netib::logMsg(NCCL_LOG_WARN, NCCL_ALL, __FILE__, __LINE__, __VA_ARGS__)
#define IB_INFO(flags, ...) ::tutti::netib::logMsg(NCCL_LOG_INFO, (flags), __FILE__, __LINE__, __VA_ARGS__)
#define IB_TRACE(flags, ...) ::tutti::netib::logMsg(NCCL_LOG_TRACE, (flags), __FILE__, __LINE__, __VA_ARGS__)

// The loaded verbs table; valid (non-NULL) whenever deviceCount() > 0.
const Verbs& verbs();

// ---- devices (devices.cc): one per selected active HCA port.
struct Device {
  std::string name;     // "mlx5_0"
  std::string pciPath;  // realpath of /sys/class/infiniband/<name>/device, "" when unknown
  ibv_context* context = nullptr;  // shared by the ports of one HCA
  uint8_t port = 1;
  uint64_t guid = 0;     // node GUID (same for every port of the HCA)
  uint16_t lid = 0;
  uint8_t linkLayer = IBV_LINK_LAYER_INFINIBAND;
  uint8_t mtu = IBV_MTU_1024;  // active MTU code
  uint8_t portFlags = 0;       // ibv_port_attr.flags (IBV_QPF_GRH_REQUIRED)
  int gidIndex = 0;
  ibv_gid gid{};
  int speedMbps = 0;
  int maxQp = 0;
  int maxQpWr = 0;
  int maxCqe = 0;
  bool adaptiveRouting = false;
  bool dmabuf = false;  // ibv_reg_dmabuf_mr is supported by the provider
  std::mutex pdMu;
  ibv_pd* pd = nullptr;  // created on first use, shared by every comm of the device (regIsGlobal)
  int pdRefs = 0;
};
int deviceCount();
Device* device(int dev);  // nullptr when dev is out of range
// Opens libibverbs and builds the device list (idempotent until releaseDevices). 0 devices is success.
ncclResult_t discoverDevices();
void releaseDevices();
// Protection domain of a device, one reference per call; released with putPd.
ncclResult_t getPd(Device* d, ibv_pd** pd);
void putPd(Device* d);
// Address of the TCP side channel (chosen at init from NCCL_SOCKET_IFNAME, like the bootstrap).
const SockAddr& sideChannelAddr();

// ---- comms. Every object begins with a magic so a wrong or freed handle is an error, not a crash.
constexpr uint32_t kSendMagic = 0x53424954;    // "TIBS"
constexpr uint32_t kRecvMagic = 0x52424954;    // "TIBR"
constexpr uint32_t kListenMagic = 0x4c424954;  // "TIBL"
constexpr uint32_t kMrMagic = 0x4d424954;      // "TIBM"
constexpr uint32_t kDeadMagic = 0xdeadbeef;

// A registration (regMr / regMrDmaBuf).
struct MemHandle {
  uint32_t magic = kMrMagic;
  Device* dev = nullptr;
  ibv_mr* mr = nullptr;
  int type = NCCL_PTR_HOST;
};

// What both directions share: device, CQ, data QPs, requests, sticky error.
struct CommBase {
  uint32_t magic = 0;
  int devIndex = 0;
  Device* dev = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  int nQps = 0;
  ibv_qp* qps[kMaxQps] = {};
  bool adaptiveRouting = false;
  uint64_t remoteAddr = 0;  // send: receiver's size FIFO; recv: sender's CTS FIFO
  uint32_t remoteRkey = 0;
  uint32_t seq = 1;         // next irecv (both sides count receives from 1)
  ncclResult_t error = ncclSuccess;  // first failure; every later call reports it
  // A grouped receive is matched by up to kMaxRecvs isends, so the sender may hold that many requests per
  // slot; receives in flight are capped at kFifoDepth in irecv.
  RequestPool<kFifoDepth * kMaxRecvs> requests;
};

struct SendComm : CommBase {
  alignas(64) CtsRecord fifo[kFifoDepth][kMaxRecvs];  // written by the receiver (RDMA), read here
  SizeRecord sizeStage[kFifoDepth];                  // local source of grouped-receive size records
  ibv_mr* fifoMr = nullptr;
  ibv_mr* sizeStageMr = nullptr;
  Request* matched[kMaxRecvs] = {};  // isends matched to the current slot's entries
  int slotEvents[kFifoDepth] = {};   // signaled completions still expected per slot
};

struct RecvComm : CommBase {
  alignas(64) SizeRecord sizeFifo[kFifoDepth];      // written by the sender (RDMA)
  CtsRecord ctsStage[kFifoDepth][kMaxRecvs];        // local source of CTS writes
  ibv_mr* sizeFifoMr = nullptr;
  ibv_mr* ctsStageMr = nullptr;
  ibv_qp* flushQp = nullptr;  // loopback QP for iflush (GPU buffers only)
  uint64_t flushScratch = 0;
  ibv_mr* flushMr = nullptr;
};

// Records the first failure of a comm (later ones are consequences) and returns it.
ncclResult_t failComm(CommBase* c, ncclResult_t code);
// Creates the CQ, QPs (INIT state) and FIFO registrations of a comm on dev. On failure frees what it made.
ncclResult_t setupComm(CommBase* c, int devIndex, int nQps, bool isSend);
// Moves every data QP to RTR then RTS against the peer's endpoint.
ncclResult_t connectQps(CommBase* c, const Endpoint& peer, uint32_t localPsn);
// Fills the parts of *e describing c's QPs and the device address.
void describeComm(const CommBase* c, uint64_t magic, uint32_t psn, Endpoint* e);
void destroyComm(CommBase* c);

// ---- v12-shaped entry points.
ncclResult_t pluginInit(ncclDebugLogger_t logger);
ncclResult_t pluginFinalize();
ncclResult_t netDevices(int* ndev);
ncclResult_t netGetProperties(int dev, ncclNetProperties_v12_t* props);
ncclResult_t netListen(int dev, void* handle, void** listenComm);
ncclResult_t netConnect(int dev, void* handle, void** sendComm);
ncclResult_t netAccept(void* listenComm, void** recvComm);
ncclResult_t netRegMr(void* comm, void* data, size_t size, int type, void** mhandle);
ncclResult_t netRegMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                            void** mhandle);
ncclResult_t netDeregMr(void* comm, void* mhandle);
ncclResult_t netIsend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request);
ncclResult_t netIrecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                      void** request);
ncclResult_t netIflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
ncclResult_t netTest(void* request, int* done, int* sizes);
ncclResult_t netCloseSend(void* sendComm);
ncclResult_t netCloseRecv(void* recvComm);
ncclResult_t netCloseListen(void* listenComm);

}  // namespace tutti::netib
