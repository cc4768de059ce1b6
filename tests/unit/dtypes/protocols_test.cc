// Line flags and slot geometry of the LL / LL128 protocols (device/common/protocols.h), shared by both
// backends and the proxy: what the readers' "is this line ready" test relies on.
#include "device/common/protocols.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace tutti {
namespace {

TEST(LLFlags, NeverZeroAndWrapAt32Bits) {
  // A zeroed buffer must read as "not ready" for every step, the 2^32 wrap of the 32-bit flag included.
  for (uint64_t step : {uint64_t{0}, uint64_t{1}, uint64_t{7}, (uint64_t{1} << 32) - 2, (uint64_t{1} << 32) - 1,
                        uint64_t{1} << 32, (uint64_t{1} << 33) - 1, ~uint64_t{0}}) {
    EXPECT_NE(llFlag(step), 0u) << "step " << step;
    EXPECT_NE(llHeaderFlag(step), 0u) << "step " << step;
    EXPECT_NE(ll128Flag(step), 0u) << "step " << step;
  }
  EXPECT_EQ(llFlag(0), 1u);
  EXPECT_EQ(llFlag(41), 42u);
  EXPECT_EQ(llFlag((uint64_t{1} << 32) + 41), 42u);  // wraps: only 32 bits travel in a line
}

TEST(LLFlags, HeaderNeverLooksLikeADataLineOfANearbyStep) {
  // A reader expecting the header where the sender put a data line (it sent more lines), or a data line
  // where a header is, must not take one for the other: no data flag of a step within 2^30 steps of the
  // header's (any slot's recent past or future) equals the header flag.
  for (uint64_t step : {uint64_t{0}, uint64_t{5}, uint64_t{1000}, (uint64_t{1} << 32) - 3}) {
    const uint32_t header = llHeaderFlag(step);
    for (uint64_t d = 0; d < 64; ++d) {
      EXPECT_NE(header, llFlag(step + d)) << step << " +" << d;
      if (step >= d) {
        EXPECT_NE(header, llFlag(step - d)) << step << " -" << d;
      }
      EXPECT_NE(header, llFlag(step + (uint64_t{1} << 30) - d)) << step;
    }
    EXPECT_NE(llHeaderFlag(step), llHeaderFlag(step + 8)) << "the same slot's next use";
  }
}

TEST(LLGeometry, SlotDataAndWireBytes) {
  // NCCL's default LL buffer: 256 KiB in 8 slots of 32 KiB; one 8-byte line of each slot is the header.
  EXPECT_EQ(llSlotData(32768), (32768 / 8 - 1) * 4);
  EXPECT_EQ(llSlotData(8), 0u);
  EXPECT_EQ(llSlotData(16), 4u);
  // LL128: 600 KiB slots of 128-byte lines with 120 data bytes.
  EXPECT_EQ(ll128SlotData(614400), 614400 / 128 * 120);
  // Wire bytes: data lines plus the header (LL), whole lines (LL128), the data itself (Simple).
  EXPECT_EQ(lineWireBytes(0, 0), 8u);
  EXPECT_EQ(lineWireBytes(0, 4), 16u);
  EXPECT_EQ(lineWireBytes(0, 5), 24u);
  EXPECT_EQ(lineWireBytes(1, 120), 128u);
  EXPECT_EQ(lineWireBytes(1, 121), 256u);
  EXPECT_EQ(lineWireBytes(2, 1000), 1000u);
  // The largest payload of a slot still leaves its header inside the slot.
  const size_t slot = 32768, n = llSlotData(slot);
  EXPECT_LE((divUp(n, kLLDataPerLine) + 1) * kLLLineBytes, slot);
}

}  // namespace
}  // namespace tutti
