#include "coll_case.h"

#include "dtypes.h"

#include <algorithm>
#include <cstring>

namespace tutti::itest {

const char* collName(Coll c) {
  switch (c) {
    case Coll::kAllReduce: return "AllReduce";
    case Coll::kBroadcast: return "Broadcast";
    case Coll::kBcast: return "Bcast";
    case Coll::kReduce: return "Reduce";
    case Coll::kAllGather: return "AllGather";
    case Coll::kReduceScatter: return "ReduceScatter";
    case Coll::kAlltoAll: return "AlltoAll";
    case Coll::kGather: return "Gather";
    case Coll::kScatter: return "Scatter";
  }
  return "badcoll";
}

bool isReduction(Coll c) { return c == Coll::kAllReduce || c == Coll::kReduce || c == Coll::kReduceScatter; }

bool hasRoot(Coll c) {
  return c == Coll::kBroadcast || c == Coll::kBcast || c == Coll::kReduce || c == Coll::kGather ||
         c == Coll::kScatter;
}

bool supportsInPlace(Coll) { return true; }  // AlltoAll: sendbuff == recvbuff (staged through scratch)

std::string specLabel(const CollSpec& s, int nranks) {
  std::string l = std::string(collName(s.coll)) + " " + typeName(s.type);
  if (isReduction(s.coll)) l += std::string(" ") + opName(s.op);
  l += " count=" + std::to_string(s.count) + " nranks=" + std::to_string(nranks);
  if (hasRoot(s.coll)) l += " root=" + std::to_string(s.root);
  l += s.inPlace ? " in-place" : " out-of-place";
  l += " offsets=" + std::to_string(s.sendOffset) + "/" + std::to_string(s.recvOffset);
  if (s.nullUnusedOnNonRoot) l += " null-on-non-root";
  return l;
}

CollCase::CollCase(const CollSpec& spec, int nranks) : spec_(spec), nranks_(nranks), state_(nranks) {
  if (spec_.coll == Coll::kBcast) spec_.inPlace = true;  // ncclBcast has a single buffer
  if (!supportsInPlace(spec_.coll)) spec_.inPlace = false;
  label_ = specLabel(spec_, nranks_);
}

size_t CollCase::elemSize() const { return typeSize(spec_.type); }

size_t CollCase::sendElems(int) const {
  const size_t n = spec_.count;
  switch (spec_.coll) {
    case Coll::kReduceScatter:
    case Coll::kAlltoAll:
    case Coll::kScatter: return n * nranks_;
    default: return n;
  }
}

size_t CollCase::recvElems(int) const {
  const size_t n = spec_.count;
  switch (spec_.coll) {
    case Coll::kAllGather:
    case Coll::kAlltoAll:
    case Coll::kGather: return n * nranks_;
    default: return n;
  }
}

bool CollCase::rootOnlySend() const { return spec_.coll == Coll::kBroadcast || spec_.coll == Coll::kScatter; }
bool CollCase::rootOnlyRecv() const { return spec_.coll == Coll::kReduce || spec_.coll == Coll::kGather; }

void CollCase::writeInput(int rank, size_t idx, unsigned char* dst, size_t elem) const {
  const size_t es = elemSize();
  if (isReduction(spec_.coll)) {
    storeValue(spec_.type, dst, elem, reductionInput(spec_.type, spec_.op, rank, idx, spec_.seed));
    return;
  }
  for (size_t b = 0; b < es; ++b) dst[elem * es + b] = movementByte(rank, idx * es + b, spec_.seed);
}

void CollCase::prepare(int rank, ncclComm_t comm, Report& report) {
  RankState& st = state_[rank];
  const size_t es = elemSize();
  const size_t n = spec_.count;
  const bool isRoot = rank == spec_.root;
  // Gather and Scatter define in-place only on the root; other ranks use separate buffers.
  const bool inPlaceHere =
      spec_.inPlace && (isRoot || (spec_.coll != Coll::kGather && spec_.coll != Coll::kScatter));
  st.inPlace = inPlaceHere;
  if (inPlaceHere) {
    const size_t elems = std::max(sendElems(rank), recvElems(rank));
    st.recv = GuardedBuffer(elems * es, spec_.recvOffset);
    st.recv.fillGarbage();
    unsigned char* buf = st.recv.data();
    size_t sendAt = 0;  // element offsets of send and recv inside the single buffer
    size_t recvAt = 0;
    switch (spec_.coll) {
      case Coll::kAllGather: sendAt = rank * n; break;
      case Coll::kReduceScatter: recvAt = rank * n; break;
      case Coll::kGather: sendAt = spec_.root * n; break;
      case Coll::kScatter: recvAt = spec_.root * n; break;
      default: break;
    }
    if (isReduction(spec_.coll)) {
      for (size_t i = 0; i < sendElems(rank); ++i) writeInput(rank, i, buf, sendAt + i);
    } else {
      movementBytes(rank, 0, sendElems(rank) * es, spec_.seed, buf + sendAt * es);
    }
    st.sendPtr = buf + sendAt * es;
    st.recvPtr = buf + recvAt * es;
    // A non-root Reduce must leave its (const) input alone even when it aliases recvbuff.
    if (spec_.coll == Coll::kReduce && !isRoot) st.sendCopy.assign(buf, buf + st.recv.bytes());
  } else {
    st.send = GuardedBuffer(sendElems(rank) * es, spec_.sendOffset);
    if (isReduction(spec_.coll)) {
      for (size_t i = 0; i < sendElems(rank); ++i) writeInput(rank, i, st.send.data(), i);
    } else {
      movementBytes(rank, 0, sendElems(rank) * es, spec_.seed, st.send.data());
    }
    st.sendCopy.assign(st.send.data(), st.send.data() + st.send.bytes());
    st.recv = GuardedBuffer(recvElems(rank) * es, spec_.recvOffset);
    st.recv.fillGarbage();
    st.sendPtr = st.send.data();
    st.recvPtr = st.recv.data();
    if (spec_.nullUnusedOnNonRoot && !isRoot && rootOnlySend()) st.sendPtr = nullptr;
    if (spec_.nullUnusedOnNonRoot && !isRoot && rootOnlyRecv()) st.recvPtr = nullptr;
  }

  st.userOp = false;
  st.op = ncclSum;
  if (isReduction(spec_.coll)) {
    if (isPreMul(spec_.op)) {
      storeValue(spec_.type, st.scalar, 0, kPreMulScalar);
      const ncclScalarResidence_t where =
          spec_.op == OpKind::kPreMulHost ? ncclScalarHostImmediate : ncclScalarDevice;
      st.userOp = report.ok(ncclRedOpCreatePreMulSum(&st.op, st.scalar, spec_.type, where, comm),
                            label_ + " ncclRedOpCreatePreMulSum rank " + std::to_string(rank), comm);
      if (!st.userOp) st.op = ncclSum;
    } else {
      st.op = builtinOp(spec_.op);
    }
  }
}

ncclResult_t CollCase::issue(int rank, ncclComm_t comm) {
  RankState& st = state_[rank];
  const size_t n = spec_.count;
  const ncclDataType_t t = spec_.type;
  const cudaStream_t stream{};  // no stream: the host backend returns when the operation is complete
  switch (spec_.coll) {
    case Coll::kAllReduce: return ncclAllReduce(st.sendPtr, st.recvPtr, n, t, st.op, comm, stream);
    case Coll::kBroadcast: return ncclBroadcast(st.sendPtr, st.recvPtr, n, t, spec_.root, comm, stream);
    case Coll::kBcast: return ncclBcast(st.recvPtr, n, t, spec_.root, comm, stream);
    case Coll::kReduce: return ncclReduce(st.sendPtr, st.recvPtr, n, t, st.op, spec_.root, comm, stream);
    case Coll::kAllGather: return ncclAllGather(st.sendPtr, st.recvPtr, n, t, comm, stream);
    case Coll::kReduceScatter: return ncclReduceScatter(st.sendPtr, st.recvPtr, n, t, st.op, comm, stream);
    case Coll::kAlltoAll: return ncclAlltoAll(st.sendPtr, st.recvPtr, n, t, comm, stream);
    case Coll::kGather: return ncclGather(st.sendPtr, st.recvPtr, n, t, spec_.root, comm, stream);
    case Coll::kScatter: return ncclScatter(st.sendPtr, st.recvPtr, n, t, spec_.root, comm, stream);
  }
  return ncclInternalError;
}

bool CollCase::checkMoved(int srcRank, size_t srcIdx, const unsigned char* out, size_t outIdx,
                          std::string* why) const {
  const size_t es = elemSize();
  for (size_t b = 0; b < es; ++b) {
    const unsigned char want = movementByte(srcRank, srcIdx * es + b, spec_.seed);
    if (out[outIdx * es + b] != want) {
      *why = "expected element " + std::to_string(srcIdx) + " of rank " + std::to_string(srcRank) +
             " (byte " + std::to_string(b) + " = " + std::to_string(want) + ", got " +
             std::to_string(out[outIdx * es + b]) + ")";
      return false;
    }
  }
  return true;
}

bool CollCase::movedOutputMatches(int rank, const unsigned char* out) const {
  const size_t n = spec_.count, es = elemSize();
  std::vector<unsigned char> want;
  // The output's runs: (source rank, its first element there, output element, elements).
  auto run = [&](int srcRank, size_t srcIdx, size_t outIdx, size_t elems) {
    if (elems == 0) return true;  // count 0: nothing to compare (and no buffer to hand memcmp)
    want.resize(elems * es);
    movementBytes(srcRank, srcIdx * es, elems * es, spec_.seed, want.data());
    return std::memcmp(out + outIdx * es, want.data(), elems * es) == 0;
  };
  switch (spec_.coll) {
    case Coll::kBroadcast:
    case Coll::kBcast: return run(spec_.root, 0, 0, n);
    case Coll::kScatter: return run(spec_.root, size_t(rank) * n, 0, n);
    case Coll::kAllGather:
    case Coll::kGather:
      for (int p = 0; p < nranks_; ++p)
        if (!run(p, 0, size_t(p) * n, n)) return false;
      return true;
    case Coll::kAlltoAll:
      for (int p = 0; p < nranks_; ++p)
        if (!run(p, size_t(rank) * n, size_t(p) * n, n)) return false;
      return true;
    default: return false;
  }
}

bool CollCase::checkOutput(int rank, const unsigned char* out, size_t o, std::string* why) const {
  const size_t n = spec_.count;
  auto reduced = [&](size_t srcIdx) {
    thread_local std::vector<int64_t> inputs;
    inputs.resize(nranks_);
    for (int r = 0; r < nranks_; ++r) inputs[r] = reductionInput(spec_.type, spec_.op, r, srcIdx, spec_.seed);
    return checkReduced(spec_.type, spec_.op, inputs, out, o, why);
  };
  switch (spec_.coll) {
    case Coll::kAllReduce:
    case Coll::kReduce: return reduced(o);
    case Coll::kReduceScatter: return reduced(rank * n + o);
    case Coll::kBroadcast:
    case Coll::kBcast: return checkMoved(spec_.root, o, out, o, why);
    case Coll::kAllGather:
    case Coll::kGather: return checkMoved(static_cast<int>(o / n), o % n, out, o, why);
    case Coll::kAlltoAll: return checkMoved(static_cast<int>(o / n), rank * n + o % n, out, o, why);
    case Coll::kScatter: return checkMoved(spec_.root, rank * n + o, out, o, why);
  }
  return false;
}

void CollCase::verify(int rank, ncclComm_t comm, Report& report) {
  RankState& st = state_[rank];
  const std::string where = label_ + " rank " + std::to_string(rank);
  if (st.userOp) report.ok(ncclRedOpDestroy(st.op, comm), where + " ncclRedOpDestroy", comm);

  std::string why;
  if (!st.send.guardsIntact(&why)) report.fail(where + ": send buffer: " + why);
  if (!st.recv.guardsIntact(&why)) report.fail(where + ": recv buffer: " + why);
  // Inputs are const: the send buffer (or, for a non-root in-place Reduce, the aliased buffer) must come
  // back unchanged.
  const GuardedBuffer& input = st.inPlace ? st.recv : st.send;
  if (!st.sendCopy.empty() && std::memcmp(input.data(), st.sendCopy.data(), st.sendCopy.size()) != 0) {
    report.fail(where + ": the library modified the send buffer");
  }

  const bool isRoot = rank == spec_.root;
  const bool hasOutput = !(rootOnlyRecv() && !isRoot);
  if (!hasOutput) {
    // recvbuff is unused on non-root ranks: a separate one must still hold its garbage pattern.
    if (!st.inPlace && st.recvPtr != nullptr) {
      for (size_t i = 0; i < st.recv.bytes(); ++i) {
        if (st.recv.data()[i] != 0x5a) {
          report.fail(where + ": recvbuff of a non-root rank was written (byte " + std::to_string(i) + ")");
          break;
        }
      }
    }
  } else {
    const unsigned char* out = static_cast<const unsigned char*>(st.recvPtr);
    size_t bad = 0;
    const bool allRight = !isReduction(spec_.coll) && movedOutputMatches(rank, out);
    for (size_t o = 0; o < (allRight ? 0 : recvElems(rank)); ++o) {
      if (checkOutput(rank, out, o, &why)) continue;
      if (bad < 3) report.fail(where + ": element " + std::to_string(o) + ": " + why);
      ++bad;
    }
    if (bad > 3) report.fail(where + ": " + std::to_string(bad) + " wrong elements in total");
  }
  st = RankState();  // release the buffers before the next case
}

}  // namespace tutti::itest
