// Pure device-selection logic of net-ib, free of verbs calls so it is unit-tested without an HCA:
// the NCCL_IB_HCA parser and matcher, link speed from the port's speed/width codes, and the RoCE GID
// index choice.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tutti::netib {

// NCCL_IB_HCA, NCCL's syntax: a comma list of "name[:port]". A leading '^' excludes the listed
// devices instead of selecting them; a following '=' (or a leading '=') makes names match exactly
// instead of as prefixes. "mlx5_0:1,mlx5_1" selects port 1 of every device whose name starts with
// mlx5_0, and every port of devices starting with mlx5_1.
struct HcaEntry {
  std::string name;
  int port = -1;  // -1: every port
};

struct HcaFilter {
  bool exclude = false;
  bool exact = false;
  std::vector<HcaEntry> entries;  // empty: everything matches (unless exclude, then everything does too)

  // True when the device port is selected.
  bool matches(const std::string& devName, int port) const;
};

constexpr size_t kMaxHcaEntries = 64;

// Parses spec into *out. Returns false with *error set (naming the offending entry) for a port that is
// not an integer in [1, 255], an entry with an empty name, or more than kMaxHcaEntries entries.
// Empty entries ("a,,b", trailing comma) are ignored. An empty spec gives a filter that selects all.
bool parseHcaFilter(const std::string& spec, HcaFilter* out, std::string* error);

// Link speed in Mb/s from ibv_port_attr active_speed (bit code: SDR 1, DDR 2, QDR 4, FDR10 8, FDR 16,
// EDR 32, HDR 64, NDR 128, XDR 256) and active_width (1x 1, 4x 2, 8x 4, 12x 8, 2x 16). Unknown codes count
// as the slowest value so a new encoding never reports an inflated speed.
int linkSpeedMbps(int activeSpeed, int activeWidth);

// One GID table entry as the RoCE GID choice sees it.
struct GidEntry {
  uint8_t raw[16] = {};
  std::string type;  // /sys/.../gid_attrs/types/<i>: "IB/RoCE v1", "RoCE v2", or "" when unknown
};

// Picks the GID index for a RoCE port when NCCL_IB_GID_INDEX is not set: the first RoCE v2 IPv4-mapped
// GID, else the first RoCE v2 GID that is not link-local, else the first non-zero GID. Returns -1 when
// every entry is zero.
int chooseGidIndex(const std::vector<GidEntry>& table);

// True for an all-zero GID (an unused table slot).
bool gidIsZero(const uint8_t raw[16]);

}  // namespace tutti::netib
