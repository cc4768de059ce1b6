/* Failure cases. TEST_BAD_NOSYMBOL: a library exporting no plugin symbol. TEST_BAD_INITFAIL: a v12 net
 * plugin whose init fails. */
#include <tutti/net.h>

#ifdef TEST_BAD_NOSYMBOL
__attribute__((visibility("default"))) int testNotAPlugin = 1;
#endif

#ifdef TEST_BAD_INITFAIL
static ncclResult_t initFail(void** ctx, uint64_t id, ncclNetCommConfig_v12_t* c, ncclDebugLogger_t l,
                             ncclProfilerCallback_t p) {
  (void)ctx; (void)id; (void)c; (void)p;
  l(NCCL_LOG_WARN, NCCL_NET, __FILE__, __LINE__, "test-net-initfail: refusing to initialise (%d)", 7);
  return ncclSystemError;
}
static ncclResult_t fail() { return ncclInternalError; }
__attribute__((visibility("default"))) const ncclNet_v12_t ncclNetPlugin_v12 = {
  .name = "test-net-initfail", .init = initFail, .devices = (void*)fail, .getProperties = (void*)fail,
  .listen = (void*)fail, .connect = (void*)fail, .accept = (void*)fail, .regMr = (void*)fail,
  .deregMr = (void*)fail, .isend = (void*)fail, .irecv = (void*)fail, .test = (void*)fail,
  .closeSend = (void*)fail, .closeRecv = (void*)fail, .closeListen = (void*)fail,
};
#endif
