// Entry point of the shm transport: the exported tuttiTransport_v1 table.
#include "connect.h"
#include "options.h"

#include <cstdlib>
#include <cstring>

namespace tutti::shm {

bool shmDisabled() {
  const char* v = std::getenv("NCCL_SHM_DISABLE");
  return v && std::atoi(v) != 0;
}

namespace {

ncclResult_t init(ncclDebugLogger_t logger, void** ctx) {
  gLogger = logger;
  *ctx = nullptr;
  return ncclSuccess;
}

ncclResult_t canConnect(void*, const tuttiPeerInfo_t* self, const tuttiPeerInfo_t* peer, int* ret) {
  *ret = !shmDisabled() && self->backend == 0 && peer->backend == 0 && self->hostHash == peer->hostHash;
  return ncclSuccess;
}

ncclResult_t recvSetupCb(void*, const tuttiConnectRequest_t* req, const tuttiPeerInfo_t* self,
                         const tuttiPeerInfo_t*, void* info, void** res) {
  return recvSetup(req, self, info, res);
}

ncclResult_t sendSetupCb(void*, const tuttiConnectRequest_t* req, const tuttiPeerInfo_t*, const tuttiPeerInfo_t*,
                         void* info, void** res) {
  return sendSetup(req, info, res);
}

tuttiTransport_v1_t makeTable() {
  tuttiTransport_v1_t t;
  std::memset(&t, 0, sizeof t);
  t.size = sizeof(tuttiTransport_v1_t);
  t.version = TUTTI_TRANSPORT_ABI_VERSION;
  t.name = "shm";
  t.init = init;
  t.canConnect = canConnect;
  t.recvSetup = recvSetupCb;
  t.sendSetup = sendSetupCb;
  t.recvConnect = recvConnect;
  t.sendConnect = sendConnect;
  t.free = freeEnd;
  t.caps = TUTTI_TRANSPORT_CAP_LL128;  // host stores: the flag is written with release after the data
  return t;
}

}  // namespace
}  // namespace tutti::shm

extern "C" {
__attribute__((visibility("default"))) tuttiTransport_v1_t tuttiTransport_v1 = tutti::shm::makeTable();
}
