// Argument checks the C entry points run before doing anything. Each returns ncclSuccess, or
// ncclInvalidArgument (bad pointer, count, type, op, root, peer, config) / ncclInvalidUsage (misuse:
// overlapping buffers that are not the documented in-place layout) after a message naming the call and
// the argument has been logged and recorded for ncclGetLastError (TUTTI_FAIL). Never crashes on bad
// input; pointers are compared, never dereferenced (except the config struct, which must be readable).
#pragma once

#include <nccl.h>
#include <tutti/common.h>

#include <cstddef>

namespace tutti {

// ---- Communicator handles ------------------------------------------------------------------------
// The engine owns ncclComm; it installs a predicate that tells a live communicator from garbage (a magic
// field, a registry). Until one is installed every non-null pointer is accepted.
using CommValidator = bool (*)(const void* comm);
void argSetCommValidator(CommValidator validator);
bool commLooksValid(const void* comm);

// comm must be non-null and look live. `call` is the entry point's name ("ncclAllReduce").
ncclResult_t argCheckComm(const void* comm, const char* call);

// ---- Single arguments ----------------------------------------------------------------------------
// ptr must be non-null. `argName` as the user wrote it ("sendbuff", "op", "version").
ncclResult_t argCheckPtr(const void* ptr, const char* argName, const char* call);
ncclResult_t argCheckDataType(ncclDataType_t datatype, const char* call);
// Range only (0..ncclMaxRedOp). Whether a user op >= ncclNumOps is alive and matches the datatype is
// decided by the communicator's RedOpTable::resolve.
ncclResult_t argCheckRedOp(ncclRedOp_t op, const char* call);
ncclResult_t argCheckRoot(int root, int nRanks, const char* call);
ncclResult_t argCheckPeer(int peer, int nRanks, const char* call);
// *bytes = count * size(datatype) * multiplier, failing if it does not fit in size_t (or ptrdiff_t,
// so byte offsets into the buffer stay representable). datatype must already be valid.
ncclResult_t argCheckBytes(size_t count, ncclDataType_t datatype, size_t multiplier, const char* call,
                           size_t* bytes);

// ---- Whole collective / point-to-point call ------------------------------------------------------
struct CollArgs {
  const char* call = "";       // entry point name, for messages
  ncclFunc_t func = ncclFuncAllReduce;
  const void* sendbuff = nullptr;
  const void* recvbuff = nullptr;  // ncclRecv: its buffer; ncclSend: unused
  size_t count = 0;            // as passed by the user (per-rank block for AllGather/ReduceScatter/...)
  ncclDataType_t datatype = ncclFloat32;
  ncclRedOp_t op = ncclSum;    // reductions only
  int root = 0;                // Broadcast/Reduce/Gather/Scatter root; Send/Recv peer
  int rank = 0;
  int nRanks = 1;
};

// Everything that can be checked locally: datatype, op range (reductions), root/peer range, pointers
// needed on this rank when count > 0 (sendbuff except on non-root Broadcast/Scatter ranks, recvbuff
// except on non-root Reduce/Gather ranks), byte-size overflow of both buffers, and the in-place rules:
// the two buffers may either not overlap at all or be exactly the documented in-place layout
//   AllReduce/Broadcast/Reduce/AlltoAll*: recvbuff == sendbuff   (*AlltoAll: no in-place; any overlap fails)
//   AllGather:     sendbuff == recvbuff + rank*count*size
//   ReduceScatter: recvbuff == sendbuff + rank*count*size
//   Gather (root): sendbuff == recvbuff + root*count*size;  Scatter (root): recvbuff == sendbuff + root*...
ncclResult_t argCheckCollective(const CollArgs& args);

// ---- ncclConfig_t --------------------------------------------------------------------------------
// Reads the user's config (NULL: all fields unset), honouring its size and version: fields the caller's
// NCCL version did not have are reset to "unset". Checks magic and every field's range. On success
// *out holds the normalised config (unset fields still NCCL_CONFIG_UNDEF_*; the engine applies
// defaults); on failure *out is untouched.
ncclResult_t argCheckConfig(const ncclConfig_t* config, ncclConfig_t* out, const char* call);

// The largest channel count a config may ask for (nChannelsPerNetPeer, CTAs).
constexpr int kMaxChannelsConfig = 64;

}  // namespace tutti
