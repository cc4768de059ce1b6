// Device discovery of net-ib: HCAs and their active ports through the verbs table, NCCL_IB_HCA selection,
// RoCE GID choice, speed, PCI path; the per-HCA async event thread; protection domains; the address of the
// TCP side channel.
#include "netib.h"
#include "options.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <poll.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <vector>

namespace tutti::netib {

namespace {

// One opened HCA: its context and the thread reporting its async events (port down, fatal errors).
struct Hca {
  ibv_context* context = nullptr;
  std::string name;
  std::atomic<bool> stop{false};
  std::thread events;
};

const Verbs* gVerbs = nullptr;
std::vector<std::unique_ptr<Device>> gDevices;
std::vector<std::unique_ptr<Hca>> gHcas;
SockAddr gSideAddr{};

bool isErrorEvent(ibv_event_type t) {
  switch (t) {
    case IBV_EVENT_CQ_ERR:
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_PORT_ERR:
    case IBV_EVENT_DEVICE_FATAL:
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_PATH_MIG_ERR:
      return true;
    default:
      return false;
  }
}

// Waits on the context's async fd (non-blocking, 100 ms polls so finalize can stop it) and logs events:
// errors as warnings, the rest (port active, LID change, ...) as INFO.
void eventLoop(Hca* h) {
  int fd = h->context->async_fd;
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    IB_WARN("NET/IB : %s: cannot make the async event fd non-blocking; port events will not be reported",
            h->name.c_str());
    return;
  }
  while (!h->stop.load(std::memory_order_relaxed)) {
    pollfd p{fd, POLLIN, 0};
    int n = ::poll(&p, 1, 100);
    if (n <= 0) continue;
    ibv_async_event ev;
    if (gVerbs->getAsyncEvent(h->context, &ev) != 0) continue;
    const char* what = gVerbs->eventTypeStr(ev.event_type);
    if (isErrorEvent(ev.event_type)) {
      int port = ev.event_type == IBV_EVENT_PORT_ERR ? ev.element.port_num : 0;
      IB_WARN("NET/IB : %s%s%s: async event: %s", h->name.c_str(), port ? " port " : "",
              port ? std::to_string(port).c_str() : "", what ? what : "unknown");
    } else {
      IB_INFO(NCCL_NET, "NET/IB : %s: async event: %s", h->name.c_str(), what ? what : "unknown");
    }
    gVerbs->ackAsyncEvent(&ev);
  }
}

std::string readSysfs(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

std::string pciPathOf(const std::string& name) {
  std::string p = "/sys/class/infiniband/" + name + "/device";
  char* real = ::realpath(p.c_str(), nullptr);
  std::string out = real ? real : "";
  std::free(real);
  return out;
}

// GID index of a RoCE port: NCCL_IB_GID_INDEX when set (must be a non-zero entry), else chooseGidIndex.
bool pickGid(Device* d, int tableLen) {
  int want = options().gidIndex;
  if (want >= 0) {
    if (want >= tableLen || gVerbs->queryGid(d->context, d->port, want, &d->gid) != 0 || gidIsZero(d->gid.raw)) {
      IB_WARN("NET/IB : %s:%d: NCCL_IB_GID_INDEX=%d is not a valid GID of the port (table of %d)", d->name.c_str(),
              d->port, want, tableLen);
      return false;
    }
    d->gidIndex = want;
    return true;
  }
  std::vector<GidEntry> table;
  for (int i = 0; i < tableLen && i < 256; i++) {
    GidEntry e;
    ibv_gid g;
    if (gVerbs->queryGid(d->context, d->port, i, &g) == 0) std::memcpy(e.raw, g.raw, 16);
    e.type = readSysfs("/sys/class/infiniband/" + d->name + "/ports/" + std::to_string(d->port) +
                       "/gid_attrs/types/" + std::to_string(i));
    table.push_back(e);
  }
  int idx = chooseGidIndex(table);
  if (idx < 0) {
    IB_INFO(NCCL_INIT | NCCL_NET, "NET/IB : %s:%d: no usable GID, port skipped", d->name.c_str(), d->port);
    return false;
  }
  d->gidIndex = idx;
  std::memcpy(d->gid.raw, table[idx].raw, 16);
  return true;
}

// Provider support for DMA-BUF: registering fd -1 fails with EOPNOTSUPP/EPROTONOSUPPORT when unsupported and
// with another error (EBADF) when the provider would accept a real fd.
bool probeDmabuf(ibv_context* ctx) {
  if (gVerbs->regDmabufMr == nullptr) return false;
  ibv_pd* pd = gVerbs->allocPd(ctx);
  if (pd == nullptr) return false;
  errno = 0;
  ibv_mr* mr = gVerbs->regDmabufMr(pd, 0, 4096, 0, -1, IBV_ACCESS_LOCAL_WRITE);
  bool ok = mr == nullptr && errno != EOPNOTSUPP && errno != EPROTONOSUPPORT;
  if (mr) gVerbs->deregMr(mr);
  gVerbs->deallocPd(pd);
  return ok;
}

// Adds the selected active ports of one HCA; keeps the context open when at least one is used.
void addHca(ibv_device* ibdev) {
  const char* cname = gVerbs->getDeviceName(ibdev);
  std::string name = cname ? cname : "?";
  ibv_context* ctx = gVerbs->openDevice(ibdev);
  if (ctx == nullptr) {
    IB_INFO(NCCL_INIT | NCCL_NET, "NET/IB : cannot open %s (%s), skipped", name.c_str(), std::strerror(errno));
    return;
  }
  ibv_device_attr attr;
  std::memset(&attr, 0, sizeof attr);
  if (gVerbs->queryDevice(ctx, &attr) != 0) {
    IB_INFO(NCCL_INIT | NCCL_NET, "NET/IB : cannot query %s, skipped", name.c_str());
    gVerbs->closeDevice(ctx);
    return;
  }
  const Options& o = options();
  bool dmabuf = probeDmabuf(ctx);
  int used = 0;
  for (int port = 1; port <= attr.phys_port_cnt; port++) {
    ibv_port_attr pa;
    std::memset(&pa, 0, sizeof pa);
    if (gVerbs->queryPort(ctx, static_cast<uint8_t>(port), &pa) != 0) continue;
    if (pa.state != IBV_PORT_ACTIVE) continue;
    if (pa.link_layer != IBV_LINK_LAYER_INFINIBAND && pa.link_layer != IBV_LINK_LAYER_ETHERNET) continue;
    if (!o.hca.matches(name, port)) continue;
    auto d = std::make_unique<Device>();
    d->name = name;
    d->pciPath = pciPathOf(name);
    d->context = ctx;
    d->port = static_cast<uint8_t>(port);
    d->guid = attr.node_guid;
    d->lid = pa.lid;
    d->linkLayer = pa.link_layer;
    d->mtu = static_cast<uint8_t>(pa.active_mtu);
    d->portFlags = pa.flags;
    d->speedMbps = linkSpeedMbps(pa.active_speed, pa.active_width);
    d->maxQp = attr.max_qp;
    d->maxQpWr = attr.max_qp_wr;
    d->maxCqe = attr.max_cqe;
    d->dmabuf = dmabuf;
    d->adaptiveRouting = o.adaptiveRouting == -2 ? pa.link_layer == IBV_LINK_LAYER_INFINIBAND : o.adaptiveRouting == 1;
    if (d->linkLayer == IBV_LINK_LAYER_ETHERNET) {
      if (!pickGid(d.get(), pa.gid_tbl_len)) continue;
    } else if (gVerbs->queryGid(ctx, d->port, 0, &d->gid) != 0) {
      std::memset(&d->gid, 0, sizeof d->gid);  // LID routing does not need it
    }
    gDevices.push_back(std::move(d));
    used++;
  }
  if (used == 0) {
    gVerbs->closeDevice(ctx);
    return;
  }
  auto h = std::make_unique<Hca>();
  h->context = ctx;
  h->name = name;
  Hca* raw = h.get();
  h->events = std::thread([raw] { eventLoop(raw); });
  gHcas.push_back(std::move(h));
}

bool ifMatches(const std::string& spec, const std::string& name) {
  std::string s = spec;
  bool exclude = !s.empty() && s[0] == '^';
  if (exclude) s.erase(0, 1);
  bool exact = !s.empty() && s[0] == '=';
  if (exact) s.erase(0, 1);
  bool hit = false;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    std::string n = s.substr(pos, comma - pos);
    if (!n.empty() && (exact ? name == n : name.compare(0, n.size(), n) == 0)) hit = true;
    pos = comma + 1;
  }
  return exclude ? !hit : hit;
}

// The side channel listens where the bootstrap would: the first interface NCCL_SOCKET_IFNAME selects,
// else the first up interface that is not loopback or docker, else loopback.
void chooseSideChannel() {
  std::string spec = options().socketIfname;
  const char* tries[] = {spec.empty() ? "^docker,lo" : spec.c_str(), "lo"};
  std::memset(&gSideAddr, 0, sizeof gSideAddr);
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) list = nullptr;
  for (const char* t : tries) {
    for (ifaddrs* ia = list; ia != nullptr; ia = ia->ifa_next) {
      if (ia->ifa_addr == nullptr || !(ia->ifa_flags & IFF_UP)) continue;
      int fam = ia->ifa_addr->sa_family;
      if (fam != AF_INET && fam != AF_INET6) continue;
      if (fam == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<sockaddr_in6*>(ia->ifa_addr)->sin6_addr)) continue;
      if (!ifMatches(t, ia->ifa_name)) continue;
      std::memcpy(&gSideAddr, ia->ifa_addr, fam == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
      ::freeifaddrs(list);
      return;
    }
  }
  if (list) ::freeifaddrs(list);
  gSideAddr.sin.sin_family = AF_INET;
  gSideAddr.sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
}

}  // namespace

const Verbs& verbs() { return *gVerbs; }
int deviceCount() { return static_cast<int>(gDevices.size()); }
Device* device(int dev) { return dev >= 0 && dev < deviceCount() ? gDevices[dev].get() : nullptr; }
const SockAddr& sideChannelAddr() { return gSideAddr; }

ncclResult_t discoverDevices() {
  if (!gDevices.empty()) return ncclSuccess;  // kept open by a finalize with comms outstanding
  if (options().disable) {
    IB_INFO(NCCL_INIT | NCCL_NET, "NET/IB : disabled by NCCL_IB_DISABLE=1; no IB device");
    return ncclSuccess;
  }
  std::string why;
  gVerbs = loadVerbs(&why);
  if (gVerbs == nullptr) {
    IB_INFO(NCCL_INIT | NCCL_NET, "NET/IB : no IB device: %s", why.c_str());
    return ncclSuccess;
  }
  int n = 0;
  ibv_device** list = gVerbs->getDeviceList(&n);
  if (list == nullptr || n == 0) {
    IB_INFO(NCCL_INIT | NCCL_NET, "NET/IB : no IB device: libibverbs found no HCA");
    if (list) gVerbs->freeDeviceList(list);
    return ncclSuccess;
  }
  for (int i = 0; i < n; i++) addHca(list[i]);
  gVerbs->freeDeviceList(list);
  if (gDevices.empty()) {
    IB_INFO(NCCL_INIT | NCCL_NET, "NET/IB : no IB device: %d HCA(s) but no active port selected (NCCL_IB_HCA=\"%s\")",
            n, options().hcaSpec.c_str());
    return ncclSuccess;
  }
  chooseSideChannel();
  std::string line;
  for (size_t i = 0; i < gDevices.size(); i++) {
    const Device& d = *gDevices[i];
    line += " [" + std::to_string(i) + "]" + d.name + ":" + std::to_string(d.port) + "/" +
            (d.linkLayer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "IB");
  }
  IB_INFO(NCCL_INIT | NCCL_NET, "NET/IB : Using%s", line.c_str());
  return ncclSuccess;
}

void releaseDevices() {
  for (auto& d : gDevices) {
    std::lock_guard<std::mutex> lock(d->pdMu);
    if (d->pdRefs > 0) {
      // Closing the HCA under live QPs or registrations would pull memory from under them: keep it all.
      IB_WARN("NET/IB : finalize while %s holds %d comm(s) or registration(s); keeping the devices open",
              d->name.c_str(), d->pdRefs);
      return;
    }
  }
  for (auto& h : gHcas) {
    h->stop.store(true);
    if (h->events.joinable()) h->events.join();
  }
  gDevices.clear();
  for (auto& h : gHcas) gVerbs->closeDevice(h->context);
  gHcas.clear();
}

ncclResult_t getPd(Device* d, ibv_pd** pd) {
  std::lock_guard<std::mutex> lock(d->pdMu);
  if (d->pd == nullptr) {
    d->pd = gVerbs->allocPd(d->context);
    if (d->pd == nullptr) {
      IB_WARN("NET/IB : %s: ibv_alloc_pd failed: %s", d->name.c_str(), std::strerror(errno));
      return ncclSystemError;
    }
  }
  d->pdRefs++;
  *pd = d->pd;
  return ncclSuccess;
}

void putPd(Device* d) {
  std::lock_guard<std::mutex> lock(d->pdMu);
  if (d->pdRefs > 0 && --d->pdRefs == 0) {
    gVerbs->deallocPd(d->pd);
    d->pd = nullptr;
  }
}

}  // namespace tutti::netib
