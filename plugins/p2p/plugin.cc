// Entry point of the p2p transport: the exported tuttiTransport_v1 table.
#include "connect.h"
#include "options.h"

#include <cstdlib>
#include <cstring>

namespace tutti::p2p {

bool p2pDisabled() {
  const char* v = std::getenv("NCCL_P2P_DISABLE");
  return v && std::atoi(v) != 0;
}

namespace {

ncclResult_t init(ncclDebugLogger_t logger, void** ctx) {
  gLogger = logger;
  *ctx = nullptr;
  return ncclSuccess;
}

ncclResult_t canConnect(void*, const tuttiPeerInfo_t* self, const tuttiPeerInfo_t* peer, int* ret) {
  // Host flavour: the peer must be in this very process (same host and same pid).
  *ret = !p2pDisabled() && self->backend == 0 && peer->backend == 0 && self->pidHash == peer->pidHash &&
         self->hostHash == peer->hostHash;
  return ncclSuccess;
}

ncclResult_t recvSetupCb(void*, const tuttiConnectRequest_t* req, const tuttiPeerInfo_t* self,
                         const tuttiPeerInfo_t*, void* info, void** res) {
  return recvSetup(req, self, info, res);
}

ncclResult_t sendSetupCb(void*, const tuttiConnectRequest_t* req, const tuttiPeerInfo_t* self,
                         const tuttiPeerInfo_t*, void* info, void** res) {
  return sendSetup(req, self, info, res);
}

tuttiTransport_v1_t makeTable() {
  tuttiTransport_v1_t t;
  std::memset(&t, 0, sizeof t);
  t.size = sizeof(tuttiTransport_v1_t);
  t.version = TUTTI_TRANSPORT_ABI_VERSION;
  t.name = "p2p";
  t.init = init;
  t.canConnect = canConnect;
  t.recvSetup = recvSetupCb;
  t.sendSetup = sendSetupCb;
  t.recvConnect = recvConnect;
  t.sendConnect = sendConnect;
  t.free = freeEnd;
  t.caps = TUTTI_TRANSPORT_CAP_LL128;  // host stores: the flag is written with release after the data
  t.proxyProgress = nullptr;
  t.finalize = nullptr;
  return t;
}

}  // namespace
}  // namespace tutti::p2p

extern "C" {
__attribute__((visibility("default"))) tuttiTransport_v1_t tuttiTransport_v1 = tutti::p2p::makeTable();
}
