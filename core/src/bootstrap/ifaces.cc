#include "bootstrap/ifaces.h"

#include "plugin/params.h"
#include "util/check.h"

#include <ifaddrs.h>
#include <net/if.h>

#include <cstring>

namespace tutti {

IfaceSpec parseIfaceSpec(std::string_view spec) {
  IfaceSpec s;
  if (!spec.empty() && spec.front() == '^') {
    s.exclude = true;
    spec.remove_prefix(1);
  }
  if (!spec.empty() && spec.front() == '=') {
    s.exact = true;
    spec.remove_prefix(1);
  }
  while (!spec.empty()) {
    size_t comma = spec.find(',');
    std::string_view item = spec.substr(0, comma);
    // Tolerate spaces around names ("eth0, eth1").
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (!item.empty()) s.names.emplace_back(item);
    if (comma == std::string_view::npos) break;
    spec.remove_prefix(comma + 1);
  }
  return s;
}

bool ifaceMatches(const IfaceSpec& spec, std::string_view ifname) {
  bool listed = false;
  for (const auto& n : spec.names) {
    if (spec.exact ? ifname == n : ifname.starts_with(n)) {
      listed = true;
      break;
    }
  }
  return spec.exclude ? !listed : listed;
}

namespace {

bool usable(const IfaceAddr& a, int family) {
  int f = a.addr.sa.sa_family;
  if (f != AF_INET && f != AF_INET6) return false;
  if (family != AF_UNSPEC && f != family) return false;
  if (f == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&a.addr.sin6.sin6_addr)) return false;
  return true;
}

std::vector<IfaceAddr> pick(const std::vector<IfaceAddr>& all, const IfaceSpec& spec, int family, size_t maxCount) {
  std::vector<IfaceAddr> out;
  for (const auto& a : all) {
    if (out.size() >= maxCount) break;
    if (usable(a, family) && ifaceMatches(spec, a.name)) out.push_back(a);
  }
  return out;
}

}  // namespace

std::vector<IfaceAddr> selectIfaces(const std::vector<IfaceAddr>& all, std::string_view ifnameSpec, int family,
                                    size_t maxCount) {
  if (!ifnameSpec.empty()) return pick(all, parseIfaceSpec(ifnameSpec), family, maxCount);
  // Default order: real interfaces first, then container bridges, then loopback (single-host runs).
  for (const char* spec : {"^docker,lo", "docker", "lo"}) {
    auto r = pick(all, parseIfaceSpec(spec), family, maxCount);
    if (!r.empty()) return r;
  }
  return {};
}

ncclResult_t parseSocketFamily(std::string_view text, int* family) {
  if (text.empty()) *family = AF_UNSPEC;
  else if (text == "AF_INET") *family = AF_INET;
  else if (text == "AF_INET6") *family = AF_INET6;
  else TUTTI_FAIL(ncclInvalidArgument, "NCCL_SOCKET_FAMILY='{}' is not AF_INET or AF_INET6", text);
  return ncclSuccess;
}

ncclResult_t listHostIfaces(std::vector<IfaceAddr>* out) {
  ifaddrs* list = nullptr;
  TUTTI_SYSCHECK(getifaddrs(&list), "getifaddrs()");
  std::vector<IfaceAddr> r;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || !(i->ifa_flags & IFF_UP)) continue;
    int f = i->ifa_addr->sa_family;
    if (f != AF_INET && f != AF_INET6) continue;
    IfaceAddr a;
    a.name = i->ifa_name;
    std::memset(&a.addr, 0, sizeof(a.addr));
    std::memcpy(&a.addr, i->ifa_addr, f == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
    r.push_back(std::move(a));
  }
  freeifaddrs(list);
  *out = std::move(r);
  return ncclSuccess;
}

ncclResult_t findBootstrapIfaces(std::vector<IfaceAddr>* out, size_t maxCount) {
  int family;
  std::string familyText = paramString("NCCL_SOCKET_FAMILY");
  TUTTI_CHECK(parseSocketFamily(familyText, &family));
  std::vector<IfaceAddr> all;
  TUTTI_CHECK(listHostIfaces(&all));
  std::string spec = paramString("NCCL_SOCKET_IFNAME");
  auto r = selectIfaces(all, spec, family, maxCount);
  if (r.empty()) {
    std::string names;
    for (const auto& a : all) names += (names.empty() ? "" : ", ") + a.name + " " + toString(a.addr);
    TUTTI_FAIL(ncclSystemError, "no network interface matches NCCL_SOCKET_IFNAME='{}' NCCL_SOCKET_FAMILY='{}' "
               "(this host has: {})", spec, familyText, names.empty() ? "none" : names);
  }
  for (const auto& a : r) TUTTI_INFO(NCCL_INIT | NCCL_BOOTSTRAP, "bootstrap: using interface {} {}", a.name,
                                     toString(a.addr));
  *out = std::move(r);
  return ncclSuccess;
}

}  // namespace tutti
