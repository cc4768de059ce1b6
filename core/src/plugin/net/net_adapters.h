// One adapter per old net ABI version, each in its own file (net_v6.cc .. net_v11.cc): fills the native
// v12 table from the plugin's table, taking an adapter slot where the old ABI needs one.
#pragma once

#include <tutti/net.h>

#include "util/check.h"

#include <climits>

namespace tutti::net {

// Each returns ncclInternalError (logged) when no adapter slot is free; the slot is given back with the
// matching releaseVNSlot() once the plugin is unloaded.
ncclResult_t adaptV6(const ncclNet_v6_t* in, ncclNet_v12_t* out, int* slot);
ncclResult_t adaptV7(const ncclNet_v7_t* in, ncclNet_v12_t* out, int* slot);
ncclResult_t adaptV8(const ncclNet_v8_t* in, ncclNet_v12_t* out, int* slot);
ncclResult_t adaptV9(const ncclNet_v9_t* in, ncclNet_v12_t* out, int* slot);
ncclResult_t adaptV10(const ncclNet_v10_t* in, ncclNet_v12_t* out, int* slot);
ncclResult_t adaptV11(const ncclNet_v11_t* in, ncclNet_v12_t* out, int* slot);
void releaseV6Slot(int slot);
void releaseV7Slot(int slot);
void releaseV8Slot(int slot);
void releaseV9Slot(int slot);
void releaseV10Slot(int slot);
void releaseV11Slot(int slot);

// Fields every version has, copied by name; the rest get the values NCCL assumes for old plugins.
template <typename P>
void copyCommonProps(const P& in, int dev, ncclNetProperties_v12_t* out) {
  *out = ncclNetProperties_v12_t{};
  out->name = in.name;
  out->pciPath = in.pciPath;
  out->guid = in.guid;
  out->ptrSupport = in.ptrSupport;
  out->speed = in.speed;
  out->port = in.port;
  out->latency = in.latency;
  out->maxComms = in.maxComms;
  out->maxRecvs = in.maxRecvs;
  out->regIsGlobal = 0;
  out->forceFlush = 0;
  out->netDeviceType = NCCL_NET_DEVICE_HOST;
  out->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
  out->vProps.ndevs = 1;
  out->vProps.devs[0] = dev;
  out->maxP2pBytes = MAX_NET_SIZE;
  out->maxCollBytes = MAX_COLLNET_SIZE;
  out->maxMultiRequestSize = 1;
  out->railId = NCCL_NET_ID_UNDEF;
  out->planeId = NCCL_NET_ID_UNDEF;
}

// Old ABIs take int sizes: a transfer of 2 GiB or more cannot be expressed.
inline ncclResult_t narrowSize(size_t size, int* out) {
  if (size > static_cast<size_t>(INT_MAX)) {
    TUTTI_FAIL(ncclInvalidArgument, "net plugin: transfer of {} bytes exceeds this plugin ABI's int limit", size);
  }
  *out = static_cast<int>(size);
  return ncclSuccess;
}

// Converts n size_t sizes to int for irecv of v6..v8 (n <= NCCL_NET_MAX_REQUESTS).
inline ncclResult_t narrowSizes(int n, const size_t* in, int* out) {
  if (n < 0 || n > NCCL_NET_MAX_REQUESTS) {
    TUTTI_FAIL(ncclInvalidArgument, "net plugin: irecv of {} buffers (max {})", n, NCCL_NET_MAX_REQUESTS);
  }
  for (int i = 0; i < n; ++i) TUTTI_CHECK(narrowSize(in[i], &out[i]));
  return ncclSuccess;
}

}  // namespace tutti::net
