// One collective call on every rank, with its buffers and its check against the host reference.
#pragma once

#include "harness.h"
#include "reference.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tutti::itest {

enum class Coll {
  kAllReduce,
  kBroadcast,
  kBcast,
  kReduce,
  kAllGather,
  kReduceScatter,
  kAlltoAll,
  kGather,
  kScatter
};

inline constexpr Coll kAllColls[] = {Coll::kAllReduce, Coll::kBroadcast, Coll::kBcast,
                                     Coll::kReduce,    Coll::kAllGather, Coll::kReduceScatter,
                                     Coll::kAlltoAll,  Coll::kGather,    Coll::kScatter};

const char* collName(Coll c);
bool isReduction(Coll c);  // takes a reduction op
bool hasRoot(Coll c);
bool supportsInPlace(Coll c);  // NCCL defines an in-place form

struct CollSpec {
  Coll coll = Coll::kAllReduce;
  ncclDataType_t type = ncclFloat32;
  OpKind op = OpKind::kSum;  // ignored by non-reductions
  size_t count = 0;          // NCCL's count argument (per-rank count for AllGather / ReduceScatter / ...)
  int root = 0;
  bool inPlace = false;   // NCCL's in-place layout for this collective
  size_t sendOffset = 0;  // bytes past a 64-byte boundary
  size_t recvOffset = 0;
  // Non-root ranks pass NULL for the buffer NCCL says they do not use (Reduce/Gather recvbuff,
  // Broadcast/Scatter sendbuff), as applications commonly do.
  bool nullUnusedOnNonRoot = false;
  uint32_t seed = 1;
};

std::string specLabel(const CollSpec& s, int nranks);

class CollCase : public RankCase {
 public:
  CollCase(const CollSpec& spec, int nranks);
  std::string label() const override { return label_; }
  void prepare(int rank, ncclComm_t comm, Report& report) override;
  ncclResult_t issue(int rank, ncclComm_t comm) override;
  void verify(int rank, ncclComm_t comm, Report& report) override;

 private:
  struct RankState {
    GuardedBuffer send;                   // unused when in place
    GuardedBuffer recv;                   // the single buffer when in place
    std::vector<unsigned char> sendCopy;  // input as written, to check the library left it alone
    const void* sendPtr = nullptr;
    void* recvPtr = nullptr;
    ncclRedOp_t op = ncclSum;
    bool userOp = false;
    bool inPlace = false;  // send and recv share st.recv on this rank
    alignas(8) unsigned char scalar[8] = {};
  };

  size_t elemSize() const;
  size_t sendElems(int rank) const;  // elements of the send argument (0 when unused on this rank)
  size_t recvElems(int rank) const;
  bool rootOnlySend() const;
  bool rootOnlyRecv() const;
  // Writes rank `rank`'s input element `idx` (send-layout index) at `dst[elem]`.
  void writeInput(int rank, size_t idx, unsigned char* dst, size_t elem) const;
  // Checks output element `outIdx` of rank `rank`; returns false and fills `why` on mismatch.
  bool checkOutput(int rank, const unsigned char* out, size_t outIdx, std::string* why) const;
  bool checkMoved(int srcRank, size_t srcIdx, const unsigned char* out, size_t outIdx,
                  std::string* why) const;
  // Data movement only: whether rank `rank`'s whole output is right, compared in runs of one source rank (the
  // element checks above then only name what is wrong).
  bool movedOutputMatches(int rank, const unsigned char* out) const;

  CollSpec spec_;
  int nranks_;
  std::string label_;
  std::vector<RankState> state_;
};

}  // namespace tutti::itest
