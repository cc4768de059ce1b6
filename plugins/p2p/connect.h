// p2p transport, host flavour: both ranks live in one process, so the receiver's FIFO and control block
// are plain heap memory the sender reaches through a pointer carried in the connect info.
#pragma once

#include <tutti/transport.h>

namespace tutti::p2p {

extern ncclDebugLogger_t gLogger;

ncclResult_t recvSetup(const tuttiConnectRequest_t* req, const tuttiPeerInfo_t* self, void* info, void** res);
ncclResult_t sendSetup(const tuttiConnectRequest_t* req, const tuttiPeerInfo_t* self, void* info, void** res);
ncclResult_t recvConnect(void* res, const void* peerInfo, tuttiConnector_t* conn);
ncclResult_t sendConnect(void* res, const void* peerInfo, tuttiConnector_t* conn);
ncclResult_t freeEnd(void* res);

}  // namespace tutti::p2p
