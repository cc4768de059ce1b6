#include "api/argcheck.h"

#include "device/common/dtypes.h"
#include "util/check.h"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>

namespace tutti {

namespace {

std::atomic<CommValidator> gCommValidator{nullptr};

const char* funcName(ncclFunc_t f) {
  switch (f) {
    case ncclFuncBroadcast: return "Broadcast";
    case ncclFuncReduce: return "Reduce";
    case ncclFuncAllGather: return "AllGather";
    case ncclFuncReduceScatter: return "ReduceScatter";
    case ncclFuncAllReduce: return "AllReduce";
    case ncclFuncSend: return "Send";
    case ncclFuncRecv: return "Recv";
    case ncclFuncAlltoAll: return "AlltoAll";
    case ncclFuncScatter: return "Scatter";
    case ncclFuncGather: return "Gather";
    default: return "unknown";
  }
}

bool isReduction(ncclFunc_t f) {
  return f == ncclFuncReduce || f == ncclFuncAllReduce || f == ncclFuncReduceScatter;
}
bool hasRoot(ncclFunc_t f) {
  return f == ncclFuncBroadcast || f == ncclFuncReduce || f == ncclFuncGather || f == ncclFuncScatter;
}

// count * size * multiplier without overflow, also bounded by PTRDIFF_MAX so pointer arithmetic on the
// buffer stays defined.
bool mulNoOverflow(size_t a, size_t b, size_t* out) {
  size_t r;
  if (__builtin_mul_overflow(a, b, &r) || r > size_t(std::numeric_limits<ptrdiff_t>::max())) return false;
  *out = r;
  return true;
}

}  // namespace

void argSetCommValidator(CommValidator validator) { gCommValidator.store(validator, std::memory_order_release); }

bool commLooksValid(const void* comm) {
  if (comm == nullptr) return false;
  CommValidator v = gCommValidator.load(std::memory_order_acquire);
  return v == nullptr || v(comm);
}

ncclResult_t argCheckComm(const void* comm, const char* call) {
  if (comm == nullptr) TUTTI_FAIL(ncclInvalidArgument, "{}: comm argument is NULL", call);
  if (!commLooksValid(comm))
    TUTTI_FAIL(ncclInvalidArgument,
               "{}: comm {} is not a live communicator (destroyed, corrupted, or not returned by ncclCommInit*)",
               call, comm);
  return ncclSuccess;
}

ncclResult_t argCheckPtr(const void* ptr, const char* argName, const char* call) {
  if (ptr == nullptr) TUTTI_FAIL(ncclInvalidArgument, "{}: {} argument is NULL", call, argName);
  return ncclSuccess;
}

ncclResult_t argCheckDataType(ncclDataType_t datatype, const char* call) {
  if (!dataTypeValid(datatype))
    TUTTI_FAIL(ncclInvalidArgument, "{}: invalid datatype {} (valid: 0..{}, ncclInt8..ncclFloat8e5m2)", call,
               int(datatype), int(ncclNumTypes) - 1);
  return ncclSuccess;
}

ncclResult_t argCheckRedOp(ncclRedOp_t op, const char* call) {
  if (static_cast<int>(op) < 0)  // every non-negative int is <= ncclMaxRedOp
    TUTTI_FAIL(ncclInvalidArgument, "{}: invalid op {} (built-in reduction ops are 0..{}, user ops come "
               "from ncclRedOpCreatePreMulSum)", call, static_cast<int>(op), int(ncclNumOps) - 1);
  return ncclSuccess;
}

ncclResult_t argCheckRoot(int root, int nRanks, const char* call) {
  if (root < 0 || root >= nRanks)
    TUTTI_FAIL(ncclInvalidArgument, "{}: invalid root {} (root must be in 0..{})", call, root, nRanks - 1);
  return ncclSuccess;
}

ncclResult_t argCheckPeer(int peer, int nRanks, const char* call) {
  if (peer < 0 || peer >= nRanks)
    TUTTI_FAIL(ncclInvalidArgument, "{}: invalid peer {} (peer must be in 0..{})", call, peer, nRanks - 1);
  return ncclSuccess;
}

ncclResult_t argCheckBytes(size_t count, ncclDataType_t datatype, size_t multiplier, const char* call,
                           size_t* bytes) {
  size_t elems = 0, b = 0;
  if (!mulNoOverflow(count, multiplier, &elems) || !mulNoOverflow(elems, dataTypeSize(datatype), &b))
    TUTTI_FAIL(ncclInvalidArgument, "{}: count {} x {} elements of {} ({} bytes each) overflows the address space",
               call, count, multiplier, dataTypeName(datatype), dataTypeSize(datatype));
  *bytes = b;
  return ncclSuccess;
}

ncclResult_t argCheckCollective(const CollArgs& a) {
  const char* call = a.call ? a.call : funcName(a.func);
  if (a.nRanks < 1 || a.rank < 0 || a.rank >= a.nRanks)
    TUTTI_FAIL(ncclInternalError, "{}: communicator reports rank {} of {} ranks", call, a.rank, a.nRanks);
  TUTTI_CHECK(argCheckDataType(a.datatype, call));
  if (isReduction(a.func)) TUTTI_CHECK(argCheckRedOp(a.op, call));
  if (hasRoot(a.func)) TUTTI_CHECK(argCheckRoot(a.root, a.nRanks, call));
  if (a.func == ncclFuncSend || a.func == ncclFuncRecv) TUTTI_CHECK(argCheckPeer(a.root, a.nRanks, call));

  // Element counts of each buffer on this rank (0: the buffer is not used here).
  const size_t n = size_t(a.nRanks);
  const bool isRoot = a.rank == a.root;
  size_t sendMul = 1, recvMul = 1;
  bool sendUsed = true, recvUsed = true;
  switch (a.func) {
    case ncclFuncBroadcast: sendUsed = isRoot; break;
    case ncclFuncReduce: recvUsed = isRoot; break;
    case ncclFuncAllGather: recvMul = n; break;
    case ncclFuncReduceScatter: sendMul = n; break;
    case ncclFuncAlltoAll: sendMul = recvMul = n; break;
    case ncclFuncGather: recvMul = n; recvUsed = isRoot; break;
    case ncclFuncScatter: sendMul = n; sendUsed = isRoot; break;
    case ncclFuncSend: recvUsed = false; break;
    case ncclFuncRecv: sendUsed = false; break;
    case ncclFuncAllReduce: break;
    default: TUTTI_FAIL(ncclInternalError, "{}: argCheckCollective does not handle function {}", call, int(a.func));
  }
  size_t sendBytes = 0, recvBytes = 0;
  if (sendUsed) TUTTI_CHECK(argCheckBytes(a.count, a.datatype, sendMul, call, &sendBytes));
  if (recvUsed) TUTTI_CHECK(argCheckBytes(a.count, a.datatype, recvMul, call, &recvBytes));
  if (a.count == 0) return ncclSuccess;  // nothing is read or written: buffers may be anything

  if (sendUsed && a.sendbuff == nullptr)
    TUTTI_FAIL(ncclInvalidArgument, "{}: sendbuff argument is NULL with count {}{}", call, a.count,
               hasRoot(a.func) ? fmt::format(" on rank {} (root {})", a.rank, a.root) : std::string());
  if (recvUsed && a.recvbuff == nullptr)
    TUTTI_FAIL(ncclInvalidArgument, "{}: recvbuff argument is NULL with count {}{}", call, a.count,
               hasRoot(a.func) ? fmt::format(" on rank {} (root {})", a.rank, a.root) : std::string());
  if (!sendUsed || !recvUsed) return ncclSuccess;

  // In-place rules: either disjoint ranges, or exactly the documented in-place position.
  const uintptr_t s = uintptr_t(a.sendbuff), r = uintptr_t(a.recvbuff);
  const bool overlap = s < r + recvBytes && r < s + sendBytes;
  if (!overlap) return ncclSuccess;
  const size_t blockBytes = a.count * dataTypeSize(a.datatype);  // cannot overflow: checked above
  bool inPlace = false;
  const char* rule = "";
  switch (a.func) {
    case ncclFuncAllReduce: case ncclFuncBroadcast: case ncclFuncReduce:
      inPlace = s == r;
      rule = "recvbuff == sendbuff";
      break;
    case ncclFuncAllGather:
      inPlace = s == r + size_t(a.rank) * blockBytes;
      rule = "sendbuff == recvbuff + rank*sendcount elements";
      break;
    case ncclFuncReduceScatter:
      inPlace = r == s + size_t(a.rank) * blockBytes;
      rule = "recvbuff == sendbuff + rank*recvcount elements";
      break;
    case ncclFuncGather:
      inPlace = s == r + size_t(a.root) * blockBytes;
      rule = "sendbuff == recvbuff + root*count elements";
      break;
    case ncclFuncScatter:
      inPlace = r == s + size_t(a.root) * blockBytes;
      rule = "recvbuff == sendbuff + root*count elements";
      break;
    case ncclFuncAlltoAll:  // staged through a scratch copy (ncclAlltoAll)
      inPlace = s == r;
      rule = "recvbuff == sendbuff";
      break;
    default:
      rule = "sendbuff and recvbuff must not overlap";
      break;
  }
  if (!inPlace)
    TUTTI_FAIL(ncclInvalidUsage,
               "{}: sendbuff [{}, +{} B) and recvbuff [{}, +{} B) overlap on rank {} but are not in place "
               "(in place means {})",
               call, a.sendbuff, sendBytes, a.recvbuff, recvBytes, a.rank, rule);
  return ncclSuccess;
}

// ---- ncclConfig_t ------------------------------------------------------------------------------------

namespace {

// An int field that must be unset or satisfy `ok`.
struct IntRule {
  const char* name;
  int ncclConfig_t::*field;
  bool (*ok)(int);
  const char* expected;
};

bool zeroOrOne(int v) { return v == 0 || v == 1; }
bool nonNegative(int v) { return v >= 0; }
bool positive(int v) { return v > 0; }
bool channelCount(int v) { return v > 0 && v <= kMaxChannelsConfig; }
bool ctaPolicy(int v) {
  return v >= 0 && v <= (NCCL_CTA_POLICY_DEFAULT | NCCL_CTA_POLICY_EFFICIENCY | NCCL_CTA_POLICY_ZERO);
}
bool graphUsageMode(int v) { return v >= 0 && v <= 2; }

constexpr IntRule kIntRules[] = {
    {"blocking", &ncclConfig_t::blocking, zeroOrOne, "0 or 1"},
    {"cgaClusterSize", &ncclConfig_t::cgaClusterSize, nonNegative, ">= 0"},
    {"minCTAs", &ncclConfig_t::minCTAs, positive, "> 0"},
    {"maxCTAs", &ncclConfig_t::maxCTAs, positive, "> 0"},
    {"splitShare", &ncclConfig_t::splitShare, zeroOrOne, "0 or 1"},
    {"collnetEnable", &ncclConfig_t::collnetEnable, zeroOrOne, "0 or 1"},
    {"CTAPolicy", &ncclConfig_t::CTAPolicy, ctaPolicy, "a combination of NCCL_CTA_POLICY_* flags"},
    {"shrinkShare", &ncclConfig_t::shrinkShare, zeroOrOne, "0 or 1"},
    {"nvlsCTAs", &ncclConfig_t::nvlsCTAs, positive, "> 0"},
    {"nChannelsPerNetPeer", &ncclConfig_t::nChannelsPerNetPeer, channelCount, "in 1..64"},
    {"nvlinkCentricSched", &ncclConfig_t::nvlinkCentricSched, zeroOrOne, "0 or 1"},
    {"graphUsageMode", &ncclConfig_t::graphUsageMode, graphUsageMode, "0, 1 or 2"},
    {"numRmaCtx", &ncclConfig_t::numRmaCtx, nonNegative, ">= 0"},
    {"maxP2pPeers", &ncclConfig_t::maxP2pPeers, positive, "> 0"},
    {"graphStreamOrdering", &ncclConfig_t::graphStreamOrdering, zeroOrOne, "0 or 1"},
};

// Fields a caller built against an older NCCL did not have: reset to "unset" (they hold whatever
// followed the caller's smaller struct). Each entry: first version that has the fields.
void resetFieldsNewerThan(ncclConfig_t* c, unsigned int version) {
  const ncclConfig_t undef = NCCL_CONFIG_INITIALIZER;
  if (version < unsigned(NCCL_VERSION(2, 14, 0))) c->blocking = undef.blocking;
  if (version < unsigned(NCCL_VERSION(2, 17, 0))) {
    c->cgaClusterSize = undef.cgaClusterSize;
    c->minCTAs = undef.minCTAs;
    c->maxCTAs = undef.maxCTAs;
    c->netName = undef.netName;
  }
  if (version < unsigned(NCCL_VERSION(2, 25, 0))) c->trafficClass = undef.trafficClass;
  if (version < unsigned(NCCL_VERSION(2, 27, 0))) {
    c->collnetEnable = undef.collnetEnable;
    c->CTAPolicy = undef.CTAPolicy;
    c->shrinkShare = undef.shrinkShare;
    c->nvlsCTAs = undef.nvlsCTAs;
  }
  if (version < unsigned(NCCL_VERSION(2, 28, 0))) {
    c->nChannelsPerNetPeer = undef.nChannelsPerNetPeer;
    c->nvlinkCentricSched = undef.nvlinkCentricSched;
  }
  if (version < unsigned(NCCL_VERSION(2, 29, 0))) {
    c->graphUsageMode = undef.graphUsageMode;
    c->numRmaCtx = undef.numRmaCtx;
  }
  if (version < unsigned(NCCL_VERSION(2, 30, 0))) c->maxP2pPeers = undef.maxP2pPeers;
  if (version < unsigned(NCCL_VERSION(2, 30, 5))) c->graphStreamOrdering = undef.graphStreamOrdering;
}

}  // namespace

ncclResult_t argCheckConfig(const ncclConfig_t* config, ncclConfig_t* out, const char* call) {
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  if (config != nullptr) {
    size_t size = 0;
    std::memcpy(&size, config, sizeof size);
    // magic and version must be present; a larger struct (newer caller) is read up to our layout.
    constexpr size_t kMinSize = offsetof(ncclConfig_t, version) + sizeof(unsigned int);
    if (size < kMinSize)
      TUTTI_FAIL(ncclInvalidArgument, "{}: config->size is {}; initialise ncclConfig_t with NCCL_CONFIG_INITIALIZER",
                 call, size);
    ncclConfig_t user = NCCL_CONFIG_INITIALIZER;
    std::memcpy(&user, config, size < sizeof(ncclConfig_t) ? size : sizeof(ncclConfig_t));
    if (user.magic != NCCL_API_MAGIC)
      TUTTI_FAIL(ncclInvalidArgument, "{}: config->magic is {:#x}, not NCCL_API_MAGIC; initialise ncclConfig_t "
                 "with NCCL_CONFIG_INITIALIZER", call, user.magic);
    if (user.version < unsigned(NCCL_VERSION(2, 14, 0)))
      TUTTI_FAIL(ncclInvalidArgument, "{}: config->version {} is older than the first NCCL with ncclConfig_t "
                 "(21400)", call, user.version);
    resetFieldsNewerThan(&user, user.version);
    // A struct smaller than the caller's version implies would leave later fields as defaults: fine.
    c = user;
  }
  for (const IntRule& rule : kIntRules) {
    const int v = c.*rule.field;
    if (v != NCCL_CONFIG_UNDEF_INT && !rule.ok(v))
      TUTTI_FAIL(ncclInvalidArgument, "{}: invalid config->{} {} (expected {})", call, rule.name, v, rule.expected);
  }
  if (c.minCTAs != NCCL_CONFIG_UNDEF_INT && c.maxCTAs != NCCL_CONFIG_UNDEF_INT && c.minCTAs > c.maxCTAs)
    TUTTI_FAIL(ncclInvalidArgument, "{}: config->minCTAs {} is larger than config->maxCTAs {}", call, c.minCTAs,
               c.maxCTAs);
  *out = c;
  return ncclSuccess;
}

}  // namespace tutti
