/* Example net plugin: the exported tables (ncclNetPlugin_v12, and ncclNetPlugin_v11 for older cores),
 * init/finalize and the one device's properties. The connection and data path live in loopback.c. */
#include "loopback.h"

#include <stdlib.h>

#define EXPORT __attribute__((visibility("default")))

ncclDebugLogger_t exampleNetLog = NULL;

/* Per-communicator context returned by init. The loopback network needs no per-communicator state; it
 * keeps the id only to show where such state would live (and to name the communicator in traces). */
struct exampleNetContext {
  uint64_t commId;
  int trafficClass;
};

static ncclResult_t exampleInit(void** ctx, uint64_t commId, ncclNetCommConfig_v12_t* config,
                                ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction) {
  (void)profFunction; /* this plugin reports no events of its own */
  /* Every communicator passes the same core logger; keeping the latest is enough. */
  exampleNetLog = logFunction;
  struct exampleNetContext* c = malloc(sizeof *c);
  if (!c) return ncclSystemError;
  c->commId = commId;
  c->trafficClass = config ? config->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF;
  EXAMPLE_NET_LOG(NCCL_LOG_TRACE, "loopback: init for comm %llx", (unsigned long long)commId);
  *ctx = c;
  return ncclSuccess;
}

static ncclResult_t exampleFinalize(void* ctx) {
  free(ctx);
  return ncclSuccess;
}

static ncclResult_t exampleDevices(int* ndev) {
  *ndev = 1;
  return ncclSuccess;
}

static ncclResult_t exampleGetProperties(int dev, ncclNetProperties_v12_t* props) {
  if (dev != 0) {
    EXAMPLE_NET_LOG(NCCL_LOG_WARN, "loopback: no device %d (there is one device, 0)", dev);
    return ncclInvalidArgument;
  }
  props->name = "loopback0";
  props->pciPath = NULL;            /* not a PCI device: the core places it nowhere in particular */
  props->guid = 0x6c6f6f70ULL;      /* one "NIC chip" */
  props->ptrSupport = NCCL_PTR_HOST;
  props->regIsGlobal = 0;
  props->forceFlush = 0;
  props->speed = 100000;            /* Mbps; nominal, a memcpy */
  props->port = 0;
  props->latency = 0;               /* 0: let the core use its default */
  props->maxComms = 1024 * 1024;
  props->maxRecvs = 1;              /* irecv takes one buffer at a time */
  props->netDeviceType = NCCL_NET_DEVICE_HOST;
  props->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
  props->vProps.ndevs = 1;
  props->vProps.devs[0] = 0;
  props->maxP2pBytes = MAX_NET_SIZE; /* test() reports sizes as int: stay below 2 GiB */
  props->maxCollBytes = MAX_NET_SIZE;
  props->maxMultiRequestSize = 1;
  props->railId = NCCL_NET_ID_UNDEF;
  props->planeId = NCCL_NET_ID_UNDEF;
  return ncclSuccess;
}

/* Hints only: log them so a user can see what the core announces, and succeed. */
static ncclResult_t exampleSetNetAttr(void* ctx, ncclNetAttr_v12_t* attr) {
  struct exampleNetContext* c = ctx;
  EXAMPLE_NET_LOG(NCCL_LOG_TRACE, "loopback: comm %llx: next op %d algo %d proto %d",
                  (unsigned long long)(c ? c->commId : 0), (int)attr->op, (int)attr->algo, (int)attr->proto);
  return ncclSuccess;
}

EXPORT const ncclNet_v12_t ncclNetPlugin_v12 = {
  .name = "loopback",
  .init = exampleInit,
  .devices = exampleDevices,
  .getProperties = exampleGetProperties,
  .listen = loopbackListen,
  .connect = loopbackConnect,
  .accept = loopbackAccept,
  .regMr = loopbackRegMr,
  .regMrDmaBuf = NULL, /* NCCL_PTR_DMABUF not in ptrSupport */
  .deregMr = loopbackDeregMr,
  .isend = loopbackIsend,
  .irecv = loopbackIrecv,
  .iflush = NULL,      /* host memory only: nothing to flush */
  .test = loopbackTest,
  .closeSend = loopbackCloseSend,
  .closeRecv = loopbackCloseRecv,
  .closeListen = loopbackCloseListen,
  .getDeviceMr = NULL, /* no device offload */
  .irecvConsumed = NULL,
  .makeVDevice = NULL, /* no virtual NICs */
  .finalize = exampleFinalize,
  .setNetAttr = exampleSetNetAttr,
};

/* ---- v11: the same plugin for cores that only know v11 (e.g. older NCCL releases). Only the calls
 * whose argument types changed between v11 and v12 need a shim; everything else is shared. ---- */

static ncclResult_t exampleInitV11(void** ctx, uint64_t commId, ncclNetCommConfig_v11_t* config,
                                   ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction) {
  ncclNetCommConfig_v12_t c12 = {config ? config->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF};
  return exampleInit(ctx, commId, &c12, logFunction, profFunction);
}

static ncclResult_t exampleGetPropertiesV11(int dev, ncclNetProperties_v11_t* props) {
  ncclNetProperties_v12_t p;
  ncclResult_t res = exampleGetProperties(dev, &p);
  if (res != ncclSuccess) return res;
  props->name = p.name;
  props->pciPath = p.pciPath;
  props->guid = p.guid;
  props->ptrSupport = p.ptrSupport;
  props->regIsGlobal = p.regIsGlobal;
  props->forceFlush = p.forceFlush;
  props->speed = p.speed;
  props->port = p.port;
  props->latency = p.latency;
  props->maxComms = p.maxComms;
  props->maxRecvs = p.maxRecvs;
  props->netDeviceType = p.netDeviceType;
  props->netDeviceVersion = p.netDeviceVersion;
  props->vProps.ndevs = p.vProps.ndevs;
  props->vProps.devs[0] = p.vProps.devs[0];
  props->maxP2pBytes = p.maxP2pBytes;
  props->maxCollBytes = p.maxCollBytes;
  props->maxMultiRequestSize = p.maxMultiRequestSize;
  return ncclSuccess;
}

EXPORT const ncclNet_v11_t ncclNetPlugin_v11 = {
  .name = "loopback",
  .init = exampleInitV11,
  .devices = exampleDevices,
  .getProperties = exampleGetPropertiesV11,
  .listen = loopbackListen,
  .connect = loopbackConnect,
  .accept = loopbackAccept,
  .regMr = loopbackRegMr,
  .regMrDmaBuf = NULL,
  .deregMr = loopbackDeregMr,
  .isend = loopbackIsend,
  .irecv = loopbackIrecv,
  .iflush = NULL,
  .test = loopbackTest,
  .closeSend = loopbackCloseSend,
  .closeRecv = loopbackCloseRecv,
  .closeListen = loopbackCloseListen,
  .getDeviceMr = NULL,
  .irecvConsumed = NULL,
  .makeVDevice = NULL,
  .finalize = exampleFinalize,
  .setNetAttr = NULL, /* optional; the v11 attribute struct differs, so this example simply omits it */
};
