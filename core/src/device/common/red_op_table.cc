// RedOpTable: the user-created reduction operators of one communicator (declared in reduce_ops.h).
#include "device/common/reduce_ops.h"

#include "util/check.h"

namespace tutti {

ncclResult_t RedOpTable::createPreMulSum(ncclRedOp_t* op, const void* scalar, ncclDataType_t datatype,
                                         ncclScalarResidence_t residence) {
  constexpr const char* call = "ncclRedOpCreatePreMulSum";
  if (op == nullptr) TUTTI_FAIL(ncclInvalidArgument, "{}: op argument is NULL", call);
  if (scalar == nullptr) TUTTI_FAIL(ncclInvalidArgument, "{}: scalar argument is NULL", call);
  if (!dataTypeValid(datatype))
    TUTTI_FAIL(ncclInvalidArgument, "{}: invalid datatype {} (valid: 0..{})", call, int(datatype),
               int(ncclNumTypes) - 1);
  if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate)
    TUTTI_FAIL(ncclInvalidArgument, "{}: invalid residence {} (ncclScalarDevice or ncclScalarHostImmediate)", call,
               int(residence));

  ResolvedRedOp r;
  r.kind = RedOpKind::PreMulSum;
  r.datatype = datatype;
  r.nRanks = nRanks_;
  if (residence == ncclScalarHostImmediate) {
    std::memcpy(&r.scalarBits, scalar, dataTypeSize(datatype));  // read now: the caller may reuse it
  } else {
    r.scalarIsPtr = true;
    r.scalarPtr = scalar;  // host backend: "device" memory is host memory, read at execution time
  }

  std::lock_guard<std::mutex> lock(mutex_);
  int slot;
  if (!freeSlots_.empty()) {
    slot = freeSlots_.back();
    freeSlots_.pop_back();
  } else {
    if (slots_.size() >= size_t(kMaxSlots))
      TUTTI_FAIL(ncclInternalError, "{}: {} user reduction operators are alive on this communicator (the limit); "
                 "destroy some with ncclRedOpDestroy", call, kMaxSlots);
    slot = int(slots_.size());
    slots_.emplace_back();
  }
  Slot& s = slots_[size_t(slot)];
  const int handle = int(ncclNumOps) + int((s.generation << 16) | uint32_t(slot));
  r.op = ncclRedOp_t(handle);
  s.live = true;
  s.op = r;
  *op = r.op;
  return ncclSuccess;
}

ncclResult_t RedOpTable::destroy(ncclRedOp_t op) {
  constexpr const char* call = "ncclRedOpDestroy";
  if (int(op) >= 0 && int(op) < int(ncclNumOps))
    TUTTI_FAIL(ncclInvalidArgument, "{}: op {} is a built-in operator and cannot be destroyed", call, int(op));
  std::lock_guard<std::mutex> lock(mutex_);
  const int64_t index = int64_t(op) - int64_t(ncclNumOps);
  const uint32_t slot = uint32_t(index) & 0xffffu, generation = uint32_t(index >> 16);
  if (index < 0 || slot >= slots_.size() || !slots_[slot].live || slots_[slot].generation != generation)
    TUTTI_FAIL(ncclInvalidArgument, "{}: op {} is not a live operator of this communicator (already destroyed, "
               "or created with another communicator)", call, int64_t(op));
  Slot& s = slots_[slot];
  s.live = false;
  s.generation = (s.generation + 1) & kGenerationMask;
  freeSlots_.push_back(int(slot));
  return ncclSuccess;
}

ncclResult_t RedOpTable::resolve(ncclRedOp_t op, ncclDataType_t datatype, ResolvedRedOp* out,
                                 const char* call) const {
  if (!dataTypeValid(datatype))
    TUTTI_FAIL(ncclInvalidArgument, "{}: invalid datatype {} (valid: 0..{})", call, int(datatype),
               int(ncclNumTypes) - 1);
  if (static_cast<int>(op) < 0)  // every non-negative int is <= ncclMaxRedOp
    TUTTI_FAIL(ncclInvalidArgument, "{}: invalid reduction operation {}", call, static_cast<int>(op));
  if (int(op) < int(ncclNumOps)) {
    resolveBuiltinRedOp(op, datatype, nRanks_, out);
    return ncclSuccess;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  const int64_t index = int64_t(op) - int64_t(ncclNumOps);
  const uint32_t slot = uint32_t(index) & 0xffffu, generation = uint32_t(index >> 16);
  if (slot >= slots_.size() || !slots_[slot].live || slots_[slot].generation != generation)
    TUTTI_FAIL(ncclInvalidArgument, "{}: reduction operation {} is unknown to this communicator (destroyed, or "
               "created with another communicator)", call, int64_t(op));
  const ResolvedRedOp& r = slots_[slot].op;
  if (r.datatype != datatype)
    TUTTI_FAIL(ncclInvalidArgument, "{}: reduction operation {} was created for {} but the call uses {}", call,
               int64_t(op), dataTypeName(r.datatype), dataTypeName(datatype));
  *out = r;
  return ncclSuccess;
}

int RedOpTable::liveCount() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return int(slots_.size() - freeSlots_.size());
}

}  // namespace tutti
