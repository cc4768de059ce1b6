// Device communicators (ncclDevCommCreate / ncclDevCommDestroy) and the LSA barrier requirement builder.
//
// Every rank allocates one resource block (memfd memory, which the other processes of the host can map)
// holding, at offsets that are the resource handles of nccl_device/core.h: the LSA barriers, the world
// barriers, the GIN signals and counters, then every buffer of the caller's resourceRequirementsList. The
// blocks are exchanged as window buffers are; devComm.resources[r] is rank r's block as reached here (null
// outside the LSA team), an array in pinned memory kernels can read. The block is device memory of the
// communicator's runtime (sim or cuda); the host backend runs no kernels and refuses.
#include "api/api.h"
#include "api/argcheck.h"
#include "comm/comm.h"
#include "comm/group.h"
#include "rma/barrier_requirement.h"
#include "rma/window.h"

#include <nccl_device.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <vector>

namespace tutti::rma {

struct DevCommState {
  ncclComm* comm = nullptr;
  rt::Runtime* rt = nullptr;
  void* block = nullptr;            // this rank's resource block
  char** resources = nullptr;       // pinned, by rank: its block as reached here
  std::vector<uint8_t> imported;
};

void freeDevComm(DevCommState* state) {
  for (size_t r = 0; r < state->imported.size(); ++r)
    if (state->imported[r] && state->rt->closeImport(state->resources[r]) != ncclSuccess)
      TUTTI_WARN("rank {}: cannot unmap rank {}'s device communicator resources: {}", state->comm->rank, r,
                 lastErrorText());
  if (state->resources && state->rt->hostFree(state->resources) != ncclSuccess)
    TUTTI_WARN("rank {}: cannot free a device communicator's peer table: {}", state->comm->rank, lastErrorText());
  if (state->block && state->rt->free(state->block) != ncclSuccess)
    TUTTI_WARN("rank {}: cannot free device communicator resources: {}", state->comm->rank, lastErrorText());
  delete state;
}

namespace {

constexpr const char* kCreate = "ncclDevCommCreate";

// The caller's requirements as this header lays them out: fields past the caller's `size` (an older
// header) keep their initializer values.
ncclResult_t readRequirements(const ncclDevCommRequirements* in, ncclDevCommRequirements* out) {
  TUTTI_CHECK(argCheckPtr(in, "reqs", kCreate));
  if (in->magic != NCCL_API_MAGIC)
    TUTTI_FAIL(ncclInvalidArgument, "{}: reqs must start from NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER (its magic is "
               "{:#x})", kCreate, in->magic);
  constexpr size_t kOldest = offsetof(ncclDevCommRequirements, ginConnectionType);  // NCCL 2.29's fields
  if (in->size < kOldest || in->size > (size_t{1} << 20))
    TUTTI_FAIL(ncclInvalidArgument, "{}: reqs->size {} is not the size of any ncclDevCommRequirements", kCreate,
               in->size);
  *out = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  std::memcpy(out, in, std::min(in->size, sizeof *out));
  out->size = sizeof *out;
  return ncclSuccess;
}

ncclResult_t checkSupported(const ncclComm* comm, const ncclDevCommRequirements& r, int lsaSize) {
  for (int v : {r.barrierCount, r.lsaBarrierCount, r.ginSignalCount, r.ginCounterCount, r.ginContextCount})
    if (v < 0) TUTTI_FAIL(ncclInvalidArgument, "{}: rank {}: a count in reqs is negative ({})", kCreate, comm->rank, v);
  if (r.lsaMultimem)
    TUTTI_FAIL(ncclInvalidUsage, "{}: lsaMultimem needs NVLink SHARP (multimem), which Tutti does not drive "
               "(ncclCommQueryProperties says multimemSupport = false)", kCreate);
  for (const ncclTeamRequirements* t = r.teamRequirementsList; t; t = t->next)
    if (t->multimem) TUTTI_FAIL(ncclInvalidUsage, "{}: a team requirement asks for multimem, which Tutti lacks", kCreate);
  for (int v : {r.railGinBarrierCount, r.worldGinBarrierCount})
    if (v < 0) TUTTI_FAIL(ncclInvalidArgument, "{}: rank {}: a GIN barrier count in reqs is negative ({})", kCreate,
                          comm->rank, v);
  // (lsaLLA2ABlockCount / lsaLLA2ASlotCount have no handle in the device communicator, as in NCCL 2.30: LL
  // all-to-all buffers come from ncclLLA2ACreateRequirement in resourceRequirementsList.)
  if ((r.barrierCount > 0 || r.worldGinBarrierCount > 0) && lsaSize != comm->nRanks)
    TUTTI_FAIL(ncclInvalidUsage, "{}: rank {}: world barriers (barrierCount, worldGinBarrierCount) need every rank in "
               "the LSA team ({} of {} are): Tutti's GIN is load/store", kCreate, comm->rank, lsaSize, comm->nRanks);
  if (r.railGinBarrierCount > 0 && lsaSize != comm->nRanks)
    TUTTI_FAIL(ncclInvalidUsage, "{}: rank {}: rail GIN barriers (railGinBarrierCount) join ranks of other hosts, "
               "which Tutti's load/store GIN does not reach", kCreate, comm->rank);
  return ncclSuccess;
}

// Lays out this rank's resource block; fills the handles of `out` and of the caller's requirement list.
ncclResult_t layout(const ncclDevCommRequirements& r, int lsaSize, int nRanks, ncclDevComm* out, size_t* bytes) {
  size_t end = 0;
  auto place = [&end](size_t size, size_t align) {
    align = std::max<size_t>(align ? align : 1, 16);
    end = (end + align - 1) / align * align;
    const size_t at = end;
    end += size;
    return static_cast<ncclDevResourceHandle_t>(at);
  };
  out->lsaBarrier = {place(ncclLsaBarrierBytes(r.lsaBarrierCount, lsaSize), 64), r.lsaBarrierCount};
  out->worldBarrier = {place(ncclLsaBarrierBytes(r.barrierCount, nRanks), 64), r.barrierCount};
  // The rail team (one rank per LSA team) is this rank alone when every rank is in its LSA team, and
  // otherwise reaches other hosts, which a load/store barrier cannot: checkSupported allows it only then.
  out->railGinBarrier = {place(ncclLsaBarrierBytes(r.railGinBarrierCount, nRanks / lsaSize), 64),
                         r.railGinBarrierCount};
  out->worldGinBarrier = {place(ncclLsaBarrierBytes(r.worldGinBarrierCount, nRanks), 64), r.worldGinBarrierCount};
  int signals = r.ginSignalCount, counters = r.ginCounterCount;
  for (ncclDevResourceRequirements* q = r.resourceRequirementsList; q; q = q->next) {
    if (q->ginSignalCount < 0 || q->ginCounterCount < 0)
      TUTTI_FAIL(ncclInvalidArgument, "{}: a resource requirement has a negative signal or counter count", kCreate);
    if (q->outGinSignalStart) *q->outGinSignalStart = static_cast<ncclGinSignal_t>(signals);
    if (q->outGinCounterStart) *q->outGinCounterStart = static_cast<ncclGinCounter_t>(counters);
    signals += q->ginSignalCount;
    counters += q->ginCounterCount;
  }
  out->ginSignalCount = signals;
  out->ginCounterCount = counters;
  out->ginSignals = place(static_cast<size_t>(signals) * sizeof(uint64_t), 64);
  out->ginCounters = place(static_cast<size_t>(counters) * sizeof(uint64_t), 64);
  for (ncclDevResourceRequirements* q = r.resourceRequirementsList; q; q = q->next) {
    if (q->bufferAlign & (q->bufferAlign - 1))
      TUTTI_FAIL(ncclInvalidArgument, "{}: bufferAlign {} is not a power of two", kCreate, q->bufferAlign);
    const ncclDevResourceHandle_t h = place(q->bufferSize, q->bufferAlign);
    if (q->outBufferHandle) *q->outBufferHandle = h;
  }
  if (end > UINT32_MAX)
    TUTTI_FAIL(ncclInvalidArgument, "{}: the resources asked for ({} bytes) exceed the 4 GiB a handle addresses",
               kCreate, end);
  *bytes = std::max<size_t>(end, 64);
  return ncclSuccess;
}

// The collective part: allocate, exchange, map.
ncclResult_t create(ncclComm* comm, const ncclDevCommRequirements& r, ncclDevComm* out) {
  CommRma* rma = nullptr;
  TUTTI_CHECK(commRma(comm, &rma));
  int lsaFirst = 0, lsaSize = 1;
  lsaRange(comm, &lsaFirst, &lsaSize);
  ncclDevComm dc{};
  dc.rank = comm->rank;
  dc.nRanks = comm->nRanks;
  dc.lsaRank = comm->rank - lsaFirst;
  dc.lsaSize = lsaSize;
  dc.ginContextCount = std::max(1, std::min(r.ginContextCount, 4));
  size_t bytes = 0;
  TUTTI_CHECK(layout(r, lsaSize, comm->nRanks, &dc, &bytes));
  auto state = std::make_unique<DevCommState>();
  state->comm = comm;
  state->rt = rma->runtime();
  state->imported.assign(comm->nRanks, 0);
  auto made = [&]() -> ncclResult_t {
    TUTTI_CHECK(state->rt->alloc(&state->block, bytes, /*shareable=*/true));
    TUTTI_CHECK(state->rt->memset(state->block, 0, bytes));
    void* table = nullptr;
    TUTTI_CHECK(state->rt->hostAlloc(&table, comm->nRanks * sizeof(char*)));
    state->resources = static_cast<char**>(table);
    std::fill_n(state->resources, comm->nRanks, nullptr);
    return ncclSuccess;
  }();
  std::vector<BufferRecord> recs(comm->nRanks);
  if (made == ncclSuccess) recs[comm->rank] = recordOf(state->rt, state->block, bytes, 0);
  // The allGather runs even when this rank failed, so the others do not wait for it; a rank that failed
  // says so with a zero-size record.
  const ncclResult_t gathered = comm->bootstrap->allGather(recs.data(), sizeof(BufferRecord));
  if (made != ncclSuccess || gathered != ncclSuccess) {
    freeDevComm(state.release());
    return made != ncclSuccess ? made : gathered;
  }
  for (int p = 0; p < comm->nRanks; ++p)
    if (recs[p].size == 0) {
      freeDevComm(state.release());
      TUTTI_FAIL(ncclRemoteError, "{}: rank {} could not allocate its device communicator resources", kCreate, p);
    }
  for (int p = lsaFirst; p < lsaFirst + lsaSize; ++p) {
    bool imported = false;
    state->resources[p] = reach(comm, p, recs[p], &imported);
    state->imported[p] = imported;
    if (!state->resources[p]) {
      freeDevComm(state.release());
      TUTTI_FAIL(ncclSystemError, "{}: rank {} cannot map LSA rank {}'s resources", kCreate, comm->rank, p);
    }
  }
  dc.resources = state->resources;
  // Device code reads the abort flag as one byte: the low byte of the pinned abort word (raised to 1).
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the abort word's first byte is its low byte");
  dc.abortFlag = reinterpret_cast<uint8_t*>(rma->abortWord());
  dc.internal = state.get();
  rma->keepDevComm(state.release());
  *out = dc;
  return ncclSuccess;
}

}  // namespace

}  // namespace tutti::rma

using namespace tutti;

NCCL_API(ncclResult_t, ncclDevCommCreate, ncclComm_t comm, const ncclDevCommRequirements* reqs, ncclDevComm* out) {
  return apiGuard(rma::kCreate, [&]() -> ncclResult_t {
    TUTTI_CHECK(argCheckComm(comm, rma::kCreate));
    TUTTI_CHECK(commCheckUsable(comm, rma::kCreate));
    TUTTI_CHECK(argCheckPtr(out, "outDevComm", rma::kCreate));
    ncclDevCommRequirements r;
    TUTTI_CHECK(rma::readRequirements(reqs, &r));
    if (comm->backend == Backend::Host)
      TUTTI_FAIL(ncclInvalidUsage, "{}: rank {}: the host backend runs no kernels; device communicators need the sim "
                 "or cuda backend (TUTTI_DEVICE=sim|cuda)", rma::kCreate, comm->rank);
    int lsaFirst = 0, lsaSize = 1;
    rma::lsaRange(comm, &lsaFirst, &lsaSize);
    TUTTI_CHECK(rma::checkSupported(comm, r, lsaSize));
    // Collective: inside a group it runs at the group end, with the other ranks' (as NCCL).
    return groupAddInitJob([comm, r, out]() -> ncclResult_t {
      CommOpsGuard busy(comm);
      return rma::create(comm, r, out);
    });
  });
}

NCCL_API(ncclResult_t, ncclDevCommDestroy, ncclComm_t comm, const ncclDevComm* devComm) {
  return apiGuard("ncclDevCommDestroy", [&]() -> ncclResult_t {
    TUTTI_CHECK(argCheckComm(comm, "ncclDevCommDestroy"));
    TUTTI_CHECK(argCheckPtr(devComm, "devComm", "ncclDevCommDestroy"));
    rma::CommRma* rma = nullptr;
    {
      std::lock_guard<std::mutex> lock(comm->rmaMutex);
      rma = comm->rma.get();
    }
    auto* state = static_cast<rma::DevCommState*>(devComm->internal);
    if (!rma || !rma->dropDevComm(state))
      TUTTI_FAIL(ncclInvalidArgument, "ncclDevCommDestroy: rank {}: not a live device communicator of this "
                 "communicator (destroyed already?)", comm->rank);
    rma::freeDevComm(state);
    return ncclSuccess;
  });
}

NCCL_API(ncclResult_t, ncclLsaBarrierCreateRequirement, ncclTeam_t team, int nBarriers, ncclLsaBarrierHandle_t* outHandle,
         ncclDevResourceRequirements_t* outReq) {
  return apiGuard("ncclLsaBarrierCreateRequirement", [&]() -> ncclResult_t {
    constexpr const char* kCall = "ncclLsaBarrierCreateRequirement";
    TUTTI_CHECK(argCheckPtr(outHandle, "outHandle", kCall));
    TUTTI_CHECK(argCheckPtr(outReq, "outReq", kCall));
    if (nBarriers < 0 || team.nRanks < 1)
      TUTTI_FAIL(ncclInvalidArgument, "{}: {} barriers of a team of {} ranks", kCall, nBarriers, team.nRanks);
    tutti::rma::fillBarrierRequirement(nBarriers, team.nRanks, outHandle, outReq);
    return ncclSuccess;
  });
}
