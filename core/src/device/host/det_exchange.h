// The host backend's fused exchange of a deterministic reduction (comm/det_coll.h, plan kAlgoDetExchange): the
// point-to-point exchange and the fixed-order reduction in one pass, with no copy of the received slices.
//
// Every rank sends each peer p the elements p reduces, as up to three segments in this order: its PreMulSum
// scalar (one element, when each rank's scalar scales its own input), its slice for p (q elements at p's slice
// offset) and the tail (the last `tail` elements, which every rank reduces). A segment moves in Simple steps of
// one slot; the sender goes step by step across its peers (step k to every peer before step k + 1), and the
// receiver waits for step k from every peer, reduces the n rows in rank order straight from the slots (its own
// row from its input) with hostDetReduceCopy, then hands the slots back. Step-major on both sides keeps every
// connection's FIFO moving (a peer-major sender would wait on a receiver that waits on another sender).
// Channel 0 of the plan receives and reduces, channel 1 sends (or channel 0 both, oneThread): two executor threads, as point-to-point sends and
// receives. With `reducedBefore`, a collective later in the same launch reads the reduced slice (the AllGather
// of an AllReduce): every channel but 0 then waits, after its own part, until channel 0 has reduced, so each
// channel's share of that collective starts after the reduction.
#pragma once

#include "device/common/reduce_ops.h"
#include "device/host/prims.h"
#include "device/host/wait.h"

#include <atomic>
#include <cstddef>
#include <cstdint>

struct ncclComm;

namespace tutti {

// The slots an exchange's Simple steps cycle through on each intra-node connection (HostPrims::useSlotRing): a rank
// writes n - 1 peers' FIFOs and reads n - 1 of its own at once, and half of NCCL_STEPS keeps that in cache. 8
// processes over shm, 2 cores, 32 KiB steps, against all 8 slots: ReduceScatter of 1 MiB 1020 and 1091 -> 656 and
// 701 us (CPU time per call 1.96 and 2.36 -> 1.23 and 1.15 ms), of 16 MiB 23.0 and 18.5 -> 15.8 and 13.1 ms.
inline constexpr uint32_t kDetSlotRing = TUTTI_STEPS / 2;

// Most steps per peer an exchange may take on one thread (DetExchange::oneThread): the slot ring, which they fill
// once the steps before them were consumed.
inline constexpr uint64_t kDetOneThreadSteps = kDetSlotRing;

// Over the network (ncclComm::DetTuning::stepGrows) a call's steps grow from 64 KiB to a slot while a peer's slice
// still takes at least this many of them: kDetNetMinSteps for AllReduce and Reduce, kDetNetMinStepsRs for
// ReduceScatter, whose slice then goes in one step where it fits a slot.
inline constexpr size_t kDetNetMinSteps = 4;
inline constexpr size_t kDetNetMinStepsRs = 1;

struct DetExchange {
  int rank = 0, nRanks = 1;
  size_t esize = 1;
  size_t stepElems = 1;  // elements per step (TUTTI_DET_STEP_BYTES; at most a slot's worth)
  ResolvedRedOp op{};
  const char* input = nullptr;  // this rank's input
  size_t q = 0;                 // slice length: peer p's slice starts at sliceAt(p)
  size_t sliceStride = 0;       // elements between consecutive slices (q for every collective)
  size_t tail = 0, tailAt = 0;  // the tail's length and offset in the input
  char* sliceOut = nullptr;     // where this rank's reduced slice goes
  char* tailOut = nullptr;      // where the reduced tail goes (null: received and dropped, a Reduce leaf)
  // Each rank's PreMulSum scalar scales its own rows: sent first, then applied by the receiver.
  bool rankScaled = false;
  const void* scalarPtr = nullptr;  // the op's scalar pointer, read when the exchange runs, or null: scalarBits
  uint64_t scalarBits = 0;
  bool reducedBefore = false;
  // Channel 0 sends everything, then receives: the exchange takes one thread (no hand-off to another). Only
  // when every peer's steps fit in its slot ring (kDetOneThreadSteps): sends then never wait on this exchange's
  // receives, only on the peers' progress through earlier operations.
  bool oneThread = false;
  // Channel 0's "reduced" signal (1 once it finished, whether or not it succeeded) and whether it failed.
  mutable uint64_t reduced = 0;
  mutable uint32_t reducedWaiters = 0, reducedSeq = 0;
  mutable std::atomic<bool> reduceFailed{false};
};

namespace host {

// Channel `channel` of the exchange: 0 receives and reduces, 1 sends, any other waits (reducedBefore).
ncclResult_t runDetExchange(ncclComm* comm, const DetExchange& x, int channel, const WaitContext& wait,
                            const OpLabel& label);

}  // namespace host
}  // namespace tutti
