#include "selection.h"

#include <cerrno>
#include <cstdlib>

namespace tutti::netib {

bool HcaFilter::matches(const std::string& devName, int port) const {
  if (entries.empty()) return true;
  bool hit = false;
  for (const HcaEntry& e : entries) {
    bool nameOk = exact ? devName == e.name : devName.compare(0, e.name.size(), e.name) == 0;
    if (nameOk && (e.port < 0 || e.port == port)) {
      hit = true;
      break;
    }
  }
  return exclude ? !hit : hit;
}

bool parseHcaFilter(const std::string& spec, HcaFilter* out, std::string* error) {
  HcaFilter f;
  size_t pos = 0;
  if (pos < spec.size() && spec[pos] == '^') {
    f.exclude = true;
    pos++;
  }
  if (pos < spec.size() && spec[pos] == '=') {
    f.exact = true;
    pos++;
  }
  while (pos < spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    std::string item = spec.substr(pos, comma - pos);
    pos = comma + 1;
    if (item.empty()) continue;
    HcaEntry e;
    size_t colon = item.find(':');
    e.name = item.substr(0, colon);
    if (e.name.empty()) {
      *error = "entry \"" + item + "\" has no device name";
      return false;
    }
    if (colon != std::string::npos) {
      std::string p = item.substr(colon + 1);
      errno = 0;
      char* end = nullptr;
      long v = p.empty() ? 0 : std::strtol(p.c_str(), &end, 10);
      if (p.empty() || errno != 0 || *end != '\0' || v < 1 || v > 255) {
        *error = "entry \"" + item + "\": port must be an integer in [1, 255]";
        return false;
      }
      e.port = static_cast<int>(v);
    }
    if (f.entries.size() == kMaxHcaEntries) {
      *error = "more than " + std::to_string(kMaxHcaEntries) + " entries";
      return false;
    }
    f.entries.push_back(std::move(e));
  }
  *out = std::move(f);
  return true;
}

namespace {
int lowestBit(int v, int count) {
  for (int i = 0; i < count; i++)
    if (v & (1 << i)) return i;
  return 0;
}
}  // namespace

int linkSpeedMbps(int activeSpeed, int activeWidth) {
  // Per-lane signalling rates (Mb/s) by bit of active_speed; FDR10 counts like QDR.
  static constexpr int kLane[] = {2500, 5000, 10000, 10000, 14000, 25000, 50000, 100000, 200000};
  static constexpr int kLanes[] = {1, 4, 8, 12, 2};
  constexpr int nLane = sizeof kLane / sizeof kLane[0];
  constexpr int nLanes = sizeof kLanes / sizeof kLanes[0];
  return kLane[lowestBit(activeSpeed, nLane)] * kLanes[lowestBit(activeWidth, nLanes)];
}

bool gidIsZero(const uint8_t raw[16]) {
  for (int i = 0; i < 16; i++)
    if (raw[i] != 0) return false;
  return true;
}

namespace {
bool isV4Mapped(const uint8_t r[16]) {
  for (int i = 0; i < 10; i++)
    if (r[i] != 0) return false;
  return r[10] == 0xff && r[11] == 0xff;
}
bool isLinkLocal(const uint8_t r[16]) { return r[0] == 0xfe && (r[1] & 0xc0) == 0x80; }
bool isV2(const GidEntry& e) { return e.type.find("v2") != std::string::npos; }
}  // namespace

int chooseGidIndex(const std::vector<GidEntry>& table) {
  int n = static_cast<int>(table.size());
  for (int i = 0; i < n; i++)
    if (isV2(table[i]) && !gidIsZero(table[i].raw) && isV4Mapped(table[i].raw)) return i;
  for (int i = 0; i < n; i++)
    if (isV2(table[i]) && !gidIsZero(table[i].raw) && !isLinkLocal(table[i].raw)) return i;
  for (int i = 0; i < n; i++)
    if (!gidIsZero(table[i].raw)) return i;
  return -1;
}

}  // namespace tutti::netib
