// Point-to-point patterns: every rank posts its sends and receives inside one ncclGroupStart/End.
#pragma once

#include "harness.h"
#include "reference.h"

#include <string>
#include <vector>

namespace tutti::itest {

enum class P2pPattern {
  kRingShift,  // send to rank+shift, receive from rank-shift
  kAllToAll,   // every rank sends to every rank, itself included
  kAllPairs,   // every rank sends to every other rank
  kSelf,       // peer == rank
};

const char* patternName(P2pPattern p);

struct P2pSpec {
  P2pPattern pattern = P2pPattern::kRingShift;
  int shift = 1;  // kRingShift only
  ncclDataType_t type = ncclFloat32;
  size_t count = 0;  // elements per message
  uint32_t seed = 1;
};

class P2pCase : public RankCase {
 public:
  P2pCase(const P2pSpec& spec, int nranks);
  std::string label() const override { return label_; }
  void prepare(int rank, ncclComm_t comm, Report& report) override;
  ncclResult_t issue(int rank, ncclComm_t comm) override;
  void verify(int rank, ncclComm_t comm, Report& report) override;

 private:
  struct Message {
    int peer;
    GuardedBuffer buf;
  };
  struct RankState {
    std::vector<Message> sends;
    std::vector<Message> recvs;
  };
  std::vector<int> sendPeers(int rank) const;
  std::vector<int> recvPeers(int rank) const;
  // Byte `i` of the message from `from` to `to`.
  unsigned char payload(int from, int to, size_t i) const;

  P2pSpec spec_;
  int nranks_;
  std::string label_;
  std::vector<RankState> state_;
};

}  // namespace tutti::itest
