// Network interface selection with NCCL_SOCKET_IFNAME / NCCL_SOCKET_FAMILY semantics. The parsing and
// matching are pure functions over a list of (name, address), so tests drive them with fake interfaces
// and the net-socket plugin reuses them.
#pragma once

#include "bootstrap/socket.h"

#include <string>
#include <string_view>
#include <vector>

namespace tutti {

// NCCL_SOCKET_IFNAME: a comma list of name prefixes ("eth,ib"); a leading '^' turns it into an
// exclusion list ("^docker,lo"); a leading '=' (after any '^') makes the names exact ("=eth0").
struct IfaceSpec {
  bool exclude = false;
  bool exact = false;
  std::vector<std::string> names;  // empty names are dropped
};
IfaceSpec parseIfaceSpec(std::string_view spec);
// True if `ifname` is selected by `spec` (an empty include list selects nothing).
bool ifaceMatches(const IfaceSpec& spec, std::string_view ifname);

struct IfaceAddr {
  std::string name;
  SocketAddress addr;  // port 0
};

// Picks up to `maxCount` entries of `all` (in order) that match `ifnameSpec` and `family` (AF_INET,
// AF_INET6 or AF_UNSPEC). IPv6 link-local addresses are skipped (they need a scope id to be reached).
// An empty spec means NCCL's default: interfaces other than lo and docker*, else docker*, else lo.
std::vector<IfaceAddr> selectIfaces(const std::vector<IfaceAddr>& all, std::string_view ifnameSpec, int family,
                                    size_t maxCount);

// Parses NCCL_SOCKET_FAMILY ("AF_INET", "AF_INET6", empty = AF_UNSPEC). Unknown text: ncclInvalidArgument.
ncclResult_t parseSocketFamily(std::string_view text, int* family);

// Lists this host's up interfaces with an IPv4/IPv6 address (getifaddrs order).
ncclResult_t listHostIfaces(std::vector<IfaceAddr>* out);

// The interfaces the bootstrap uses, from the host list, NCCL_SOCKET_IFNAME and NCCL_SOCKET_FAMILY.
// Fails with ncclSystemError (naming the spec and what exists) when nothing matches.
ncclResult_t findBootstrapIfaces(std::vector<IfaceAddr>* out, size_t maxCount);

}  // namespace tutti
