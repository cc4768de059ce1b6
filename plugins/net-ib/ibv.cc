// Resolves the Verbs table. Symbols are looked up with their rdma-core version tag: an unversioned dlsym
// could return an IBVERBS_1.0 compat entry point whose structs differ.
#include "ibv.h"

#include <dlfcn.h>

#include <mutex>

namespace tutti::netib {

namespace {

template <typename Fn>
bool resolve(void* lib, const char* name, const char* version, Fn* out, std::string* missing) {
  void* sym = dlvsym(lib, name, version);
  if (sym == nullptr) {
    if (missing) *missing += std::string(missing->empty() ? "" : ", ") + name + "@" + version;
    return false;
  }
  *out = reinterpret_cast<Fn>(sym);
  return true;
}

Verbs gVerbs;
std::string gWhy;
bool gLoaded = false;

void load() {
  const char* names[] = {"libibverbs.so.1", "libibverbs.so"};
  void* lib = nullptr;
  for (const char* n : names) {
    lib = dlopen(n, RTLD_NOW | RTLD_LOCAL);
    if (lib) break;
  }
  if (lib == nullptr) {
    const char* err = dlerror();
    gWhy = std::string("cannot load libibverbs.so.1 (") + (err ? err : "unknown error") + ")";
    return;
  }
  constexpr const char* v11 = "IBVERBS_1.1";
  std::string missing;
  Verbs v;
  bool ok = true;
  ok &= resolve(lib, "ibv_get_device_list", v11, &v.getDeviceList, &missing);
  ok &= resolve(lib, "ibv_free_device_list", v11, &v.freeDeviceList, &missing);
  ok &= resolve(lib, "ibv_get_device_name", v11, &v.getDeviceName, &missing);
  ok &= resolve(lib, "ibv_open_device", v11, &v.openDevice, &missing);
  ok &= resolve(lib, "ibv_close_device", v11, &v.closeDevice, &missing);
  ok &= resolve(lib, "ibv_query_device", v11, &v.queryDevice, &missing);
  ok &= resolve(lib, "ibv_query_port", v11, &v.queryPort, &missing);
  ok &= resolve(lib, "ibv_query_gid", v11, &v.queryGid, &missing);
  ok &= resolve(lib, "ibv_alloc_pd", v11, &v.allocPd, &missing);
  ok &= resolve(lib, "ibv_dealloc_pd", v11, &v.deallocPd, &missing);
  ok &= resolve(lib, "ibv_reg_mr", v11, &v.regMr, &missing);
  ok &= resolve(lib, "ibv_dereg_mr", v11, &v.deregMr, &missing);
  ok &= resolve(lib, "ibv_create_cq", v11, &v.createCq, &missing);
  ok &= resolve(lib, "ibv_destroy_cq", v11, &v.destroyCq, &missing);
  ok &= resolve(lib, "ibv_create_qp", v11, &v.createQp, &missing);
  ok &= resolve(lib, "ibv_modify_qp", v11, &v.modifyQp, &missing);
  ok &= resolve(lib, "ibv_destroy_qp", v11, &v.destroyQp, &missing);
  ok &= resolve(lib, "ibv_get_async_event", v11, &v.getAsyncEvent, &missing);
  ok &= resolve(lib, "ibv_ack_async_event", v11, &v.ackAsyncEvent, &missing);
  ok &= resolve(lib, "ibv_event_type_str", v11, &v.eventTypeStr, &missing);
  ok &= resolve(lib, "ibv_fork_init", v11, &v.forkInit, &missing);
  // Optional: DMA-BUF registration appeared in rdma-core 34.
  resolve(lib, "ibv_reg_dmabuf_mr", "IBVERBS_1.12", &v.regDmabufMr, nullptr);
  if (!ok) {
    gWhy = "libibverbs.so.1 lacks " + missing;
    return;
  }
  gVerbs = v;
  gLoaded = true;
}

}  // namespace

const Verbs* loadVerbs(std::string* why) {
  static std::once_flag once;
  std::call_once(once, load);
  if (!gLoaded && why) *why = gWhy;
  return gLoaded ? &gVerbs : nullptr;
}

}  // namespace tutti::netib
