// Protocol line layouts shared by both backends (NCCL's geometry; DESIGN.md "Protocols").
//   LL:    8-byte lines, 4 bytes of data + a 4-byte flag, written with one 8-byte store. A reader polls the
//          flag: it equals (step + 1) of the slot's current use, so a reader never needs a fence. After the
//          n data lines, line n is a header whose 4 data bytes are the slot's byte count and whose flag is
//          llHeaderFlag(step) (never a data line's flag of the same step), stored (release) after the data
//          lines. A reader knows n from the bytes it expects and polls that line alone: it shares a cache
//          line only with the last data lines, so polling does not pull the line the writer is filling
//          back and forth (a header in front of the data did), and the size is checked with it.
//          A step takes one of the buffer's NCCL_STEPS slots; on the host, a one-shot message of a few bytes
//          takes a smaller lane instead, so more of them are in flight, and writes it there as a packet (the
//          data, then one header word), not as lines (core/src/device/host/prims.h, llLaneBytes).
//   LL128: 128-byte lines, 120 bytes of data + an 8-byte flag in the last 8 bytes, written after the data.
//          Only used on connections that guarantee the flag is never visible before the data.
#pragma once

#include "device/common/work.h"

#include <cstddef>
#include <cstdint>

namespace tutti {

inline constexpr size_t kLLLineBytes = 8;
inline constexpr size_t kLLDataPerLine = 4;
inline constexpr size_t kLL128LineBytes = 128;
inline constexpr size_t kLL128DataPerLine = 120;

// Flag value of step `step` (never 0, so a zeroed buffer reads as "not ready"; the 32-bit value wraps).
TUTTI_HOST_DEVICE inline uint32_t llFlag(uint64_t step) {
  const uint32_t f = static_cast<uint32_t>(step + 1);
  return f != 0 ? f : 1u;
}

// Flag of the header line of step `step`: half the flag space away from the data lines' flag, so neither a
// data line read where the header is expected (the sender wrote more lines) nor the other way round passes.
TUTTI_HOST_DEVICE inline uint32_t llHeaderFlag(uint64_t step) { return llFlag(step + (uint64_t{1} << 31)); }

// LL128 flag word of step `step`: the last 8 bytes of each line (never 0).
TUTTI_HOST_DEVICE inline uint64_t ll128Flag(uint64_t step) { return step + 1 + (step + 1 == 0); }

TUTTI_HOST_DEVICE inline uint64_t llLine(uint32_t data, uint32_t flag) {
  return static_cast<uint64_t>(data) | (static_cast<uint64_t>(flag) << 32);
}

// Data bytes one slot of `slotBytes` carries (LL: less its header line).
TUTTI_HOST_DEVICE inline size_t llSlotData(size_t slotBytes) {
  return slotBytes < 2 * kLLLineBytes ? 0 : (slotBytes / kLLLineBytes - 1) * kLLDataPerLine;
}
TUTTI_HOST_DEVICE inline size_t ll128SlotData(size_t slotBytes) {
  return slotBytes / kLL128LineBytes * kLL128DataPerLine;
}

// Bytes a slot carrying `bytes` of data occupies in its protocol's buffer (what a proxy sends).
// `proto` is TUTTI_PROTO_LL (0), TUTTI_PROTO_LL128 (1) or TUTTI_PROTO_SIMPLE (2).
TUTTI_HOST_DEVICE inline size_t lineWireBytes(int proto, size_t bytes) {
  if (proto == 0) return (divUp(bytes, kLLDataPerLine) + 1) * kLLLineBytes;
  if (proto == 1) return divUp(bytes, kLL128DataPerLine) * kLL128LineBytes;
  return bytes;
}

}  // namespace tutti
