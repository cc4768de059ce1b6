/* Pointers into windows, for device code: a rank's part of a window as this process reaches it. */
#ifndef NCCL_DEVICE_PTR_H_
#define NCCL_DEVICE_PTR_H_

#include "core.h"

#if defined(NCCL_DEVICE_API)
/* World rank `peer`'s buffer, `offset` bytes in; NULL when the peer is not reachable by load/store. */
NCCL_DEVICE_INLINE void* ncclGetPeerPointer(ncclWindow_t w, size_t offset, int peer) {
  char* base = w->peerBase[peer];
  return base ? base + offset : nullptr;
}
/* This rank's own buffer. */
NCCL_DEVICE_INLINE void* ncclGetLocalPointer(ncclWindow_t w, size_t offset) { return w->peerBase[w->rank] + offset; }
/* LSA rank `lsaPeer`'s buffer. */
NCCL_DEVICE_INLINE void* ncclGetLsaPointer(ncclWindow_t w, size_t offset, int lsaPeer) {
  return ncclGetPeerPointer(w, offset, w->lsaFirst + lsaPeer);
}
/* Multimem (NVLink SHARP) is not available: Tutti drives no NVSwitch. */
NCCL_DEVICE_INLINE void* ncclGetLsaMultimemPointer(ncclWindow_t, size_t, ncclDevComm const&) { return nullptr; }
#endif

#endif /* NCCL_DEVICE_PTR_H_ */
