// shm transport: ranks on one host, in different processes. The receiving end creates a POSIX shared
// memory segment holding the connection's control block and FIFO buffers; the sending end maps it by name.
// The sender unlinks the name as soon as it has mapped the segment, so no file outlives the connection
// setup, whatever happens to either process afterwards.
#pragma once

#include <tutti/transport.h>

namespace tutti::shm {

extern ncclDebugLogger_t gLogger;

ncclResult_t recvSetup(const tuttiConnectRequest_t* req, const tuttiPeerInfo_t* self, void* info, void** res);
ncclResult_t sendSetup(const tuttiConnectRequest_t* req, void* info, void** res);
ncclResult_t recvConnect(void* res, const void* peerInfo, tuttiConnector_t* conn);
ncclResult_t sendConnect(void* res, const void* peerInfo, tuttiConnector_t* conn);
ncclResult_t freeEnd(void* res);

}  // namespace tutti::shm
