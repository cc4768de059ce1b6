#include "p2p_case.h"

#include "dtypes.h"

namespace tutti::itest {

const char* patternName(P2pPattern p) {
  switch (p) {
    case P2pPattern::kRingShift: return "RingShift";
    case P2pPattern::kAllToAll: return "AllToAll";
    case P2pPattern::kAllPairs: return "AllPairs";
    case P2pPattern::kSelf: return "Self";
  }
  return "badpattern";
}

P2pCase::P2pCase(const P2pSpec& spec, int nranks) : spec_(spec), nranks_(nranks), state_(nranks) {
  label_ = std::string("SendRecv ") + patternName(spec.pattern);
  if (spec.pattern == P2pPattern::kRingShift) label_ += " shift=" + std::to_string(spec.shift);
  label_ += std::string(" ") + typeName(spec.type) + " count=" + std::to_string(spec.count) +
            " nranks=" + std::to_string(nranks);
}

std::vector<int> P2pCase::sendPeers(int rank) const {
  std::vector<int> peers;
  switch (spec_.pattern) {
    case P2pPattern::kRingShift: peers.push_back(((rank + spec_.shift) % nranks_ + nranks_) % nranks_); break;
    case P2pPattern::kSelf: peers.push_back(rank); break;
    case P2pPattern::kAllToAll:
    case P2pPattern::kAllPairs:
      // Start at a different peer on every rank, as applications do to spread load; order within a
      // group must not matter.
      for (int i = 0; i < nranks_; ++i) {
        const int peer = (rank + i) % nranks_;
        if (peer != rank || spec_.pattern == P2pPattern::kAllToAll) peers.push_back(peer);
      }
      break;
  }
  return peers;
}

std::vector<int> P2pCase::recvPeers(int rank) const {
  std::vector<int> peers;
  switch (spec_.pattern) {
    case P2pPattern::kRingShift: peers.push_back(((rank - spec_.shift) % nranks_ + nranks_) % nranks_); break;
    case P2pPattern::kSelf: peers.push_back(rank); break;
    case P2pPattern::kAllToAll:
    case P2pPattern::kAllPairs:
      for (int i = nranks_ - 1; i >= 0; --i) {  // reverse order on purpose
        const int peer = (rank + i) % nranks_;
        if (peer != rank || spec_.pattern == P2pPattern::kAllToAll) peers.push_back(peer);
      }
      break;
  }
  return peers;
}

unsigned char P2pCase::payload(int from, int to, size_t i) const {
  return movementByte(from * 4096 + to, i, spec_.seed);
}

void P2pCase::prepare(int rank, ncclComm_t, Report&) {
  RankState& st = state_[rank];
  const size_t bytes = spec_.count * typeSize(spec_.type);
  size_t offset = rank;  // distinct misalignment per message
  for (int peer : sendPeers(rank)) {
    Message m{peer, GuardedBuffer(bytes, offset++ % 8)};
    for (size_t i = 0; i < bytes; ++i) m.buf.data()[i] = payload(rank, peer, i);
    st.sends.push_back(std::move(m));
  }
  for (int peer : recvPeers(rank)) {
    Message m{peer, GuardedBuffer(bytes, offset++ % 8)};
    m.buf.fillGarbage();
    st.recvs.push_back(std::move(m));
  }
}

ncclResult_t P2pCase::issue(int rank, ncclComm_t comm) {
  RankState& st = state_[rank];
  const cudaStream_t stream{};
  // Sends and receives of one rank must be in one group: without it a blocking send to a peer that is
  // itself sending first would deadlock.
  ncclResult_t r = ncclGroupStart();
  if (r != ncclSuccess) return r;
  for (Message& m : st.sends) {
    r = ncclSend(m.buf.data(), spec_.count, spec_.type, m.peer, comm, stream);
    if (r != ncclSuccess) break;
  }
  for (size_t i = 0; r == ncclSuccess && i < st.recvs.size(); ++i) {
    Message& m = st.recvs[i];
    r = ncclRecv(m.buf.data(), spec_.count, spec_.type, m.peer, comm, stream);
  }
  const ncclResult_t end = ncclGroupEnd();
  return r != ncclSuccess ? r : end;
}

void P2pCase::verify(int rank, ncclComm_t, Report& report) {
  RankState& st = state_[rank];
  const std::string where = label_ + " rank " + std::to_string(rank);
  std::string why;
  for (Message& m : st.sends) {
    if (!m.buf.guardsIntact(&why))
      report.fail(where + ": send buffer to " + std::to_string(m.peer) + ": " + why);
    for (size_t i = 0; i < m.buf.bytes(); ++i) {
      if (m.buf.data()[i] != payload(rank, m.peer, i)) {
        report.fail(where + ": the library modified the send buffer to peer " + std::to_string(m.peer));
        break;
      }
    }
  }
  for (Message& m : st.recvs) {
    if (!m.buf.guardsIntact(&why))
      report.fail(where + ": recv buffer from " + std::to_string(m.peer) + ": " + why);
    for (size_t i = 0; i < m.buf.bytes(); ++i) {
      if (m.buf.data()[i] != payload(m.peer, rank, i)) {
        report.fail(where + ": message from peer " + std::to_string(m.peer) + " wrong at byte " +
                    std::to_string(i) + " of " + std::to_string(m.buf.bytes()));
        break;
      }
    }
  }
  st = RankState();
}

}  // namespace tutti::itest
