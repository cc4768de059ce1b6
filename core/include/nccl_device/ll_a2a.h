/* LL all-to-all sessions of NCCL's device API (ncclLLA2ASession): small all-to-all exchanges inside the LSA
 * team with no barrier, each value carried with its epoch as a flag (the LL protocol).
 *
 * ncclLLA2ACreateRequirement(nBlocks, nSlots) asks every rank's resource block for nBlocks regions of
 * (1 + 2 * nSlots) 16-byte lines: one header line (the epoch the block reached, kept between sessions), then
 * two banks of nSlots slot lines used by alternate epochs. A line carries 8 bytes of payload in its x and z
 * words with the epoch in y and w, so a reader that sees both flags sees the data (port.h storeLine). A value
 * of T takes ceil(sizeof(T) / 8) lines, maxElts apart. send() stores into the peer's bank of this epoch;
 * recv() polls this rank's own until the flags show this epoch; endEpoch() moves every member of the team to
 * the other bank (a sender can run at most one epoch ahead: it must first receive from everyone, as the
 * epoch rule below says). Epochs start at 2, so zeroed memory never matches, and skip 0 and 1 on wrapping;
 * before a wrap the bank is cleared. */
#ifndef NCCL_DEVICE_LL_A2A_H_
#define NCCL_DEVICE_LL_A2A_H_

#include "coop.h"
#include "core.h"

/* Slots a session needs for messages of up to maxElts elements of maxEltSize bytes (8-byte payload lines). */
NCCL_EXTERN_C int ncclLLA2ACalcSlots(int maxElts, int maxEltSize);
/* Fills *outReq with nBlocks regions of nSlots slots; ncclDevCommCreate writes the handle's bufHandle. */
NCCL_EXTERN_C ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle_t* outHandle,
                                                      ncclDevResourceRequirements_t* outReq);

#if defined(NCCL_DEVICE_API)
namespace nccl_detail {
template <typename T>
T&& declval() noexcept;
/* 16-byte lines a value of T takes (8 bytes of payload each). */
template <typename T>
constexpr int kLlLines = (int)((sizeof(T) + 7) / 8);
}  // namespace nccl_detail

template <typename Coop>
struct ncclLLA2ASession {
  /* Block `block` of the handle's regions, for values of at most maxElts slots (the pitch between the lines
   * of one value). Multimem is not available (a trap). */
  NCCL_DEVICE_INLINE ncclLLA2ASession(Coop coop, ncclDevComm const& comm, ncclTeam team, ncclLLA2AHandle handle,
                                      uint32_t block, int maxElts, bool multimem = false,
                                      ncclMultimemHandle mmHandle = {})
      : coop_(coop), comm_(comm), team_(team), handle_(handle), block_((int)block), pitch_(maxElts) {
    (void)mmHandle;
    if (multimem) nccl_port::trap();
    epoch_ = nccl_port::load(header(), cuda::memory_order_relaxed) + 2;
    bank_ = bankOffset();
  }
  NCCL_DEVICE_INLINE ~ncclLLA2ASession() {
    if (coop_.thread_rank() == 0) nccl_port::store(header(), epoch_ - 2, cuda::memory_order_relaxed);
    coop_.sync();
  }
  ncclLLA2ASession(ncclLLA2ASession const&) = delete;

  /* Stores `data` into team rank `peer`'s slot `slot` (and the next lines of a value over 8 bytes). */
  template <typename T>
  NCCL_DEVICE_INLINE void send(int peer, int slot, T data) {
    put(peerLines(peer) + 4 * lineIndex(slot), data);
  }
  /* send() to every member of the team, this rank included. */
  template <typename T>
  NCCL_DEVICE_INLINE void bcast(int slot, T data) {
    for (int i = 0; i < team_.nRanks; ++i) send((team_.rank + i) % team_.nRanks, slot, data);
  }
  /* Waits for slot `slot` of this epoch and returns its value. */
  template <typename T>
  NCCL_DEVICE_INLINE T recv(int slot) {
    T v[1];
    recvUnrolled<1, 1>(slot, 1, 0, v);
    return v[0];
  }
  /* Receives eltCount values (MinEltCount <= eltCount <= MaxEltCount) from slots eltStart, eltStart +
   * eltStride, ... into vals, polling them together. */
  template <int MinEltCount, int MaxEltCount, typename T>
  NCCL_DEVICE_INLINE void recvUnrolled(int eltStart, int eltCount, int eltStride, T (&vals)[MaxEltCount]) {
    constexpr int L = nccl_detail::kLlLines<T>;
    const uint32_t* mine = peerLines(team_.rank);
    uint32_t got[MaxEltCount][L][4];
    auto arrived = [&] {
      bool all = true;
      for (int u = 0; u < MaxEltCount; ++u) {
        if (u >= MinEltCount && u >= eltCount) break;
        const uint32_t* line = mine + 4 * (lineIndex(eltStart + u * eltStride));
        for (int v = 0; v < L; ++v) {
          nccl_port::loadLine(line + 4 * (size_t)v * pitch_, got[u][v]);
          all = all && got[u][v][1] == epoch_ && got[u][v][3] == epoch_;
        }
      }
      return all;
    };
    (void)nccl_port::waitUntil(arrived, comm_.abortFlag, 0);  /* an abort leaves what was there */
    for (int u = 0; u < MaxEltCount; ++u) {
      if (u >= MinEltCount && u >= eltCount) break;
      union {
        uint32_t words[L][2];
        T val;
      } out;
      for (int v = 0; v < L; ++v) {
        out.words[v][0] = got[u][v][0];
        out.words[v][1] = got[u][v][2];
      }
      vals[u] = out.val;
    }
  }
  /* Receives eltCount values and folds them: reduce(..., eltToAcc(value)) in slot order, Unroll at a time. */
  template <int Unroll, typename Elt, typename EltToAcc, typename Reduce>
  NCCL_DEVICE_INLINE auto recvReduce(int eltStart, int eltCount, int eltStride, EltToAcc eltToAcc, Reduce reduce)
      -> decltype(eltToAcc(nccl_detail::declval<Elt>())) {
    using Acc = decltype(eltToAcc(nccl_detail::declval<Elt>()));
    Acc acc{};
    for (int i = 0; i < eltCount; i += Unroll) {
      Elt got[Unroll];
      const int n = eltCount - i < Unroll ? eltCount - i : Unroll;
      recvUnrolled<1, Unroll>(eltStart + i * eltStride, n, eltStride, got);
      for (int j = 0; j < n; ++j) acc = i + j == 0 ? eltToAcc(got[0]) : reduce(acc, eltToAcc(got[j]));
    }
    return acc;
  }
  /* Ends an epoch. Before it, every thread group must have sent at least one value to every team member and
   * received at least one from each (so no member can be more than one epoch ahead of another). */
  NCCL_DEVICE_INLINE void endEpoch(Coop) {
    if (epoch_ >= 0xfffffffeu) {  /* the next epochs wrap: clear this bank so no old flag matches */
      coop_.sync();
      uint32_t* bank = peerLines(team_.rank);
      for (int i = coop_.thread_rank(); i < (int)handle_.nSlots; i += coop_.size())
        nccl_port::storeLine(bank + 4 * (size_t)i, 0, 0, 0, 0);
    }
    coop_.sync();
    epoch_ += epoch_ == 0xffffffffu ? 3 : 1;
    bank_ = bankOffset();
  }

 private:
  NCCL_DEVICE_INLINE uint32_t* region(int world) const {
    char* block = comm_.resources[world];
    if (!block) nccl_port::trap();  /* not reachable by load/store */
    return (uint32_t*)(block + handle_.bufHandle) + 4 * (size_t)block_ * (1 + 2 * (size_t)handle_.nSlots);
  }
  NCCL_DEVICE_INLINE uint32_t* header() const { return region(comm_.rank); }
  NCCL_DEVICE_INLINE size_t bankOffset() const { return 1 + (size_t)(epoch_ & 1) * handle_.nSlots; }
  /* Line 0 of this epoch's bank in team rank `peer`'s region, as 32-bit words. */
  NCCL_DEVICE_INLINE uint32_t* peerLines(int peer) const {
    return region(ncclTeamRankToWorld(comm_, team_, peer)) + 4 * bank_;
  }
  NCCL_DEVICE_INLINE size_t lineIndex(int slot) const {
    if (slot < 0 || slot >= (int)handle_.nSlots) nccl_port::trap();
    return (size_t)slot;
  }
  template <typename T>
  NCCL_DEVICE_INLINE void put(uint32_t* line, T data) {
    constexpr int L = nccl_detail::kLlLines<T>;
    union {
      uint32_t words[L][2];  /* first, so {} zeroes the bytes past a value shorter than its lines */
      T val;
    } in{};
    in.val = data;
    for (int v = 0; v < L; ++v)
      nccl_port::storeLine(line + 4 * (size_t)v * pitch_, in.words[v][0], epoch_, in.words[v][1], epoch_);
  }

  Coop coop_;
  ncclDevComm const& comm_;
  ncclTeam team_;
  ncclLLA2AHandle handle_;
  int block_;
  int pitch_;
  uint32_t epoch_ = 0;
  size_t bank_ = 0;
};
#endif

#endif /* NCCL_DEVICE_LL_A2A_H_ */
