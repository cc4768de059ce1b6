// The libibverbs entry points net-ib uses, resolved at init with dlopen("libibverbs.so.1") + dlvsym so the
// plugin loads (and reports "no IB device") on machines without rdma-core. Only verbs.h types are used;
// the fast-path calls (ibv_post_send, ibv_post_recv, ibv_poll_cq) are inline in verbs.h and go through the
// provider's ops table, so they need no symbol here.
#pragma once

#include <infiniband/verbs.h>

#include <string>

namespace tutti::netib {

struct Verbs {
  ibv_device** (*getDeviceList)(int* num) = nullptr;
  void (*freeDeviceList)(ibv_device** list) = nullptr;
  const char* (*getDeviceName)(ibv_device* device) = nullptr;
  ibv_context* (*openDevice)(ibv_device* device) = nullptr;
  int (*closeDevice)(ibv_context* context) = nullptr;
  int (*queryDevice)(ibv_context* context, ibv_device_attr* attr) = nullptr;
  // The exported symbol takes the compat (prefix) layout of ibv_port_attr; every field net-ib reads
  // (state, lid, link_layer, active_mtu, active_speed, active_width, gid_tbl_len, flags) is in that prefix.
  int (*queryPort)(ibv_context* context, uint8_t port, ibv_port_attr* attr) = nullptr;
  int (*queryGid)(ibv_context* context, uint8_t port, int index, ibv_gid* gid) = nullptr;
  ibv_pd* (*allocPd)(ibv_context* context) = nullptr;
  int (*deallocPd)(ibv_pd* pd) = nullptr;
  ibv_mr* (*regMr)(ibv_pd* pd, void* addr, size_t length, int access) = nullptr;
  // NULL when the installed rdma-core predates DMA-BUF support (IBVERBS_1.12).
  ibv_mr* (*regDmabufMr)(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access) = nullptr;
  int (*deregMr)(ibv_mr* mr) = nullptr;
  ibv_cq* (*createCq)(ibv_context* context, int cqe, void* cqContext, ibv_comp_channel* channel,
                      int compVector) = nullptr;
  int (*destroyCq)(ibv_cq* cq) = nullptr;
  ibv_qp* (*createQp)(ibv_pd* pd, ibv_qp_init_attr* attr) = nullptr;
  int (*modifyQp)(ibv_qp* qp, ibv_qp_attr* attr, int mask) = nullptr;
  int (*destroyQp)(ibv_qp* qp) = nullptr;
  int (*getAsyncEvent)(ibv_context* context, ibv_async_event* event) = nullptr;
  void (*ackAsyncEvent)(ibv_async_event* event) = nullptr;
  const char* (*eventTypeStr)(ibv_event_type type) = nullptr;
  int (*forkInit)() = nullptr;
};

// Loads libibverbs once per process (later calls return the first outcome). On failure *why says what
// is missing and the result is nullptr; the library stays loaded for the life of the process.
const Verbs* loadVerbs(std::string* why);

}  // namespace tutti::netib
