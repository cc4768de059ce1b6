// Matrix rows of the entry points that are not collectives: init family, lifetime, queries, user ops,
// registration, windows and signals, memory, groups, version/errors, and tutti.h's host streams.
#include "matrix.h"

#include <tutti.h>

#include <cstdint>

namespace tutti::itest {
namespace {

using Ctx = MatrixCtx;
using CallFn = std::function<ncclResult_t(Ctx&)>;
using CommFn = std::function<ncclComm_t(Ctx&)>;

struct Builder {
  std::vector<MatrixRow>& rows;

  void add(std::string name, const char* entry, ncclResult_t code, std::vector<std::string> needles, CallFn call,
           CommFn errComm = nullptr, const char* gap = nullptr) {
    MatrixRow r;
    r.name = std::move(name);
    r.entry = entry;
    r.code = code;
    needles.insert(needles.begin(), entry);
    r.needles = std::move(needles);
    r.call = std::move(call);
    r.errComm = std::move(errComm);
    r.gap = gap;
    rows.push_back(std::move(r));
  }

  // NullComm / GarbageComm / DestroyedComm rows for an entry point; `call` receives the bad handle.
  void badComms(const std::string& base, const char* entry, std::function<ncclResult_t(Ctx&, ncclComm_t)> call,
                const char* gap = nullptr, ncclResult_t nullCode = ncclInvalidArgument) {
    const struct {
      const char* kind;
      CommFn get;
    } kinds[] = {
        {"NullComm", [](Ctx&) -> ncclComm_t { return nullptr; }},
        {"GarbageComm", [](Ctx& c) { return c.garbage; }},
        {"DestroyedComm", [](Ctx& c) { return c.destroyed; }},
    };
    for (const auto& k : kinds) {
      CommFn get = k.get;
      const bool isNull = std::string(k.kind) == "NullComm";
      add(base + "_" + k.kind, entry, isNull ? nullCode : ncclInvalidArgument,
          isNull && nullCode == ncclSuccess ? std::vector<std::string>{} : std::vector<std::string>{"comm"},
          [call, get](Ctx& c) { return call(c, get(c)); }, get, gap);
    }
  }
};

ncclUniqueId freshId() {
  ncclUniqueId id{};
  ncclGetUniqueId(&id);
  return id;
}

void addInitRows(Builder& b) {
  b.add("GetUniqueId_NullOutput", "ncclGetUniqueId", ncclInvalidArgument, {"uniqueId"},
        [](Ctx&) { return ncclGetUniqueId(nullptr); });
  b.add("CommInitRank_NullOutput", "ncclCommInitRank", ncclInvalidArgument, {"newcomm"},
        [](Ctx&) { return ncclCommInitRank(nullptr, 1, freshId(), 0); });
  b.add("CommInitRank_NranksZero", "ncclCommInitRank", ncclInvalidArgument, {"nranks"}, [](Ctx&) {
    ncclComm_t c = nullptr;
    return ncclCommInitRank(&c, 0, freshId(), 0);
  });
  b.add("CommInitRank_RankNegative", "ncclCommInitRank", ncclInvalidArgument, {"rank"}, [](Ctx&) {
    ncclComm_t c = nullptr;
    return ncclCommInitRank(&c, 2, freshId(), -1);
  });
  b.add("CommInitRank_RankIsNranks", "ncclCommInitRank", ncclInvalidArgument, {"rank"}, [](Ctx&) {
    ncclComm_t c = nullptr;
    return ncclCommInitRank(&c, 2, freshId(), 2);
  });
  b.add("CommInitRankConfig_ConfigNoMagic", "ncclCommInitRankConfig", ncclInvalidArgument, {"config"}, [](Ctx&) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.magic = 0;
    ncclComm_t c = nullptr;
    return ncclCommInitRankConfig(&c, 1, freshId(), 0, &config);
  });
  b.add("CommInitRankConfig_ConfigSizeTooSmall", "ncclCommInitRankConfig", ncclInvalidArgument, {"config"},
        [](Ctx&) {
          ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
          config.size = 4;
          ncclComm_t c = nullptr;
          return ncclCommInitRankConfig(&c, 1, freshId(), 0, &config);
        });
  b.add("CommInitRankConfig_ConfigBlockingOutOfRange", "ncclCommInitRankConfig", ncclInvalidArgument,
        {"config", "blocking"}, [](Ctx&) {
          ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
          config.blocking = 7;
          ncclComm_t c = nullptr;
          return ncclCommInitRankConfig(&c, 1, freshId(), 0, &config);
        });
  b.add("CommInitRankConfig_NullOutput", "ncclCommInitRankConfig", ncclInvalidArgument, {"newcomm"},
        [](Ctx&) { return ncclCommInitRankConfig(nullptr, 1, freshId(), 0, nullptr); });
  b.add("CommInitAll_NullOutput", "ncclCommInitAll", ncclInvalidArgument, {"comms"},
        [](Ctx&) { return ncclCommInitAll(nullptr, 2, nullptr); });
  b.add("CommInitAll_NdevZero", "ncclCommInitAll", ncclInvalidArgument, {"ndev"}, [](Ctx&) {
    ncclComm_t comms[2];
    return ncclCommInitAll(comms, 0, nullptr);
  });
  b.add("CommInitAll_DevlistNegative", "ncclCommInitAll", ncclInvalidArgument, {"devlist"}, [](Ctx&) {
    ncclComm_t comms[2];
    const int devs[2] = {0, -1};
    return ncclCommInitAll(comms, 2, devs);
  });
  b.add("CommInitRankScalable_NullIds", "ncclCommInitRankScalable", ncclInvalidArgument, {"commIds"}, [](Ctx&) {
    ncclComm_t c = nullptr;
    return ncclCommInitRankScalable(&c, 1, 0, 1, nullptr, nullptr);
  });
  b.add("CommInitRankScalable_NidZero", "ncclCommInitRankScalable", ncclInvalidArgument, {"nId"}, [](Ctx&) {
    ncclComm_t c = nullptr;
    ncclUniqueId id = freshId();
    return ncclCommInitRankScalable(&c, 1, 0, 0, &id, nullptr);
  });
  b.add("CommInitRankScalable_RankIsNranks", "ncclCommInitRankScalable", ncclInvalidArgument, {"rank"}, [](Ctx&) {
    ncclComm_t c = nullptr;
    ncclUniqueId id = freshId();
    return ncclCommInitRankScalable(&c, 1, 1, 1, &id, nullptr);
  });
}

void addLifetimeRows(Builder& b) {
  // NCCL: finalizing NULL is a no-op that succeeds.
  b.badComms("CommFinalize", "ncclCommFinalize", [](Ctx&, ncclComm_t c) { return ncclCommFinalize(c); }, nullptr,
             ncclSuccess);
  // NCCL: destroying or aborting NULL is a no-op that succeeds.
  b.badComms("CommDestroy", "ncclCommDestroy", [](Ctx&, ncclComm_t c) { return ncclCommDestroy(c); }, nullptr,
             ncclSuccess);
  b.badComms("CommAbort", "ncclCommAbort", [](Ctx&, ncclComm_t c) { return ncclCommAbort(c); }, nullptr,
             ncclSuccess);
  // NCCL: revoking NULL is a no-op that succeeds too.
  b.badComms("CommRevoke", "ncclCommRevoke", [](Ctx&, ncclComm_t c) { return ncclCommRevoke(c, 0); }, nullptr,
             ncclSuccess);
  b.badComms("CommSplit", "ncclCommSplit", [](Ctx&, ncclComm_t c) {
    ncclComm_t child = nullptr;
    return ncclCommSplit(c, 0, 0, &child, nullptr);
  });
  b.add("CommSplit_NullOutput", "ncclCommSplit", ncclInvalidArgument, {"newcomm"},
        [](Ctx& c) { return ncclCommSplit(c.comm, 0, 0, nullptr, nullptr); });
  b.add("CommSplit_ColorNegative", "ncclCommSplit", ncclInvalidArgument, {"color"}, [](Ctx& c) {
    ncclComm_t child = nullptr;
    return ncclCommSplit(c.comm, -5, 0, &child, nullptr);
  });
  b.add("CommSplit_ConfigNoMagic", "ncclCommSplit", ncclInvalidArgument, {"config"}, [](Ctx& c) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.magic = 0;
    ncclComm_t child = nullptr;
    return ncclCommSplit(c.comm, 0, 0, &child, &config);
  });
  b.badComms("CommShrink", "ncclCommShrink", [](Ctx&, ncclComm_t c) {
    ncclComm_t child = nullptr;
    int exclude = 1;
    return ncclCommShrink(c, &exclude, 1, &child, nullptr, 0);
  });
  b.badComms("CommGetUniqueId", "ncclCommGetUniqueId", [](Ctx&, ncclComm_t c) {
    ncclUniqueId id;
    return ncclCommGetUniqueId(c, &id);
  });
  b.badComms("CommGrow", "ncclCommGrow", [](Ctx&, ncclComm_t c) {
    ncclComm_t child = nullptr;
    ncclUniqueId id = freshId();
    return ncclCommGrow(c, 3, &id, -1, &child, nullptr);
  });  // NULL: a joining rank, whose id (not a grow id) and rank (-1) are refused
}

void addQueryRows(Builder& b) {
  b.badComms("CommGetAsyncError", "ncclCommGetAsyncError", [](Ctx&, ncclComm_t c) {
    ncclResult_t r;
    return ncclCommGetAsyncError(c, &r);
  });
  b.add("CommGetAsyncError_NullOutput", "ncclCommGetAsyncError", ncclInvalidArgument, {"asyncError"},
        [](Ctx& c) { return ncclCommGetAsyncError(c.comm, nullptr); });
  b.badComms("CommCount", "ncclCommCount", [](Ctx&, ncclComm_t c) {
    int n;
    return ncclCommCount(c, &n);
  });
  b.add("CommCount_NullOutput", "ncclCommCount", ncclInvalidArgument, {"count"},
        [](Ctx& c) { return ncclCommCount(c.comm, nullptr); });
  b.badComms("CommCuDevice", "ncclCommCuDevice", [](Ctx&, ncclComm_t c) {
    int d;
    return ncclCommCuDevice(c, &d);
  });
  b.add("CommCuDevice_NullOutput", "ncclCommCuDevice", ncclInvalidArgument, {"device"},
        [](Ctx& c) { return ncclCommCuDevice(c.comm, nullptr); });
  b.badComms("CommUserRank", "ncclCommUserRank", [](Ctx&, ncclComm_t c) {
    int r;
    return ncclCommUserRank(c, &r);
  });
  b.add("CommUserRank_NullOutput", "ncclCommUserRank", ncclInvalidArgument, {"rank"},
        [](Ctx& c) { return ncclCommUserRank(c.comm, nullptr); });
  b.badComms("CommMemStats", "ncclCommMemStats", [](Ctx&, ncclComm_t c) {
    uint64_t v;
    return ncclCommMemStats(c, ncclStatGpuMemTotal, &v);
  });
  b.add("CommMemStats_NullOutput", "ncclCommMemStats", ncclInvalidArgument, {"value"},
        [](Ctx& c) { return ncclCommMemStats(c.comm, ncclStatGpuMemTotal, nullptr); });
  b.add("CommMemStats_StatOutOfRange", "ncclCommMemStats", ncclInvalidArgument, {"stat"}, [](Ctx& c) {
    uint64_t v;
    return ncclCommMemStats(c.comm, static_cast<ncclCommMemStat_t>(99), &v);
  });
  b.badComms("CommSuspend", "ncclCommSuspend", [](Ctx&, ncclComm_t c) { return ncclCommSuspend(c, 0); });
  b.badComms("CommResume", "ncclCommResume", [](Ctx&, ncclComm_t c) { return ncclCommResume(c); });
}

void addRedOpRows(Builder& b) {
  b.badComms("RedOpCreatePreMulSum", "ncclRedOpCreatePreMulSum", [](Ctx&, ncclComm_t c) {
    ncclRedOp_t op;
    float scalar = 2.0f;
    return ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat, ncclScalarHostImmediate, c);
  });
  b.add("RedOpCreatePreMulSum_NullOutput", "ncclRedOpCreatePreMulSum", ncclInvalidArgument, {"op"}, [](Ctx& c) {
    float scalar = 2.0f;
    return ncclRedOpCreatePreMulSum(nullptr, &scalar, ncclFloat, ncclScalarHostImmediate, c.comm);
  });
  b.add("RedOpCreatePreMulSum_NullScalar", "ncclRedOpCreatePreMulSum", ncclInvalidArgument, {"scalar"},
        [](Ctx& c) {
          ncclRedOp_t op;
          return ncclRedOpCreatePreMulSum(&op, nullptr, ncclFloat, ncclScalarHostImmediate, c.comm);
        });
  b.add("RedOpCreatePreMulSum_DatatypeTooLarge", "ncclRedOpCreatePreMulSum", ncclInvalidArgument, {"datatype"},
        [](Ctx& c) {
          ncclRedOp_t op;
          float scalar = 2.0f;
          return ncclRedOpCreatePreMulSum(&op, &scalar, static_cast<ncclDataType_t>(ncclNumTypes),
                                          ncclScalarHostImmediate, c.comm);
        });
  b.add("RedOpCreatePreMulSum_ResidenceOutOfRange", "ncclRedOpCreatePreMulSum", ncclInvalidArgument,
        {"residence"}, [](Ctx& c) {
          ncclRedOp_t op;
          float scalar = 2.0f;
          return ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat, static_cast<ncclScalarResidence_t>(9), c.comm);
        });
  b.badComms("RedOpDestroy", "ncclRedOpDestroy", [](Ctx& c, ncclComm_t comm) {
    (void)c;
    return ncclRedOpDestroy(ncclSum, comm);
  });
  b.add("RedOpDestroy_BuiltinOp", "ncclRedOpDestroy", ncclInvalidArgument, {"op"},
        [](Ctx& c) { return ncclRedOpDestroy(ncclSum, c.comm); });
  b.add("RedOpDestroy_DestroyedOp", "ncclRedOpDestroy", ncclInvalidArgument, {"op"},
        [](Ctx& c) { return ncclRedOpDestroy(c.deadOp, c.comm); });
  b.add("RedOpDestroy_OpOfOtherComm", "ncclRedOpDestroy", ncclInvalidArgument, {"op"},
        [](Ctx& c) { return ncclRedOpDestroy(c.otherCommOp, c.comm); });
  b.add("RedOpDestroy_OpOfDestroyedComm", "ncclRedOpDestroy", ncclInvalidArgument, {"op"},
        [](Ctx& c) { return ncclRedOpDestroy(c.destroyedCommOp, c.comm); });
  b.add("RedOpDestroy_OpNegative", "ncclRedOpDestroy", ncclInvalidArgument, {"op"},
        [](Ctx& c) { return ncclRedOpDestroy(static_cast<ncclRedOp_t>(-1), c.comm); });
}

void addMemoryRows(Builder& b) {
  b.badComms("CommRegister", "ncclCommRegister", [](Ctx& c, ncclComm_t comm) {
    void* handle = nullptr;
    return ncclCommRegister(comm, c.a, 64, &handle);
  });
  b.add("CommRegister_NullHandle", "ncclCommRegister", ncclInvalidArgument, {"handle"},
        [](Ctx& c) { return ncclCommRegister(c.comm, c.a, 64, nullptr); });
  b.add("CommRegister_NullBuff", "ncclCommRegister", ncclInvalidArgument, {"buff"}, [](Ctx& c) {
    void* handle = nullptr;
    return ncclCommRegister(c.comm, nullptr, 64, &handle);
  });
  b.badComms("CommDeregister", "ncclCommDeregister", [](Ctx& c, ncclComm_t comm) {
    return ncclCommDeregister(comm, c.a);
  });
  b.badComms("CommWindowRegister", "ncclCommWindowRegister", [](Ctx& c, ncclComm_t comm) {
    ncclWindow_t win;
    return ncclCommWindowRegister(comm, c.a, 64, &win, 0);
  });
  b.badComms("CommWindowDeregister", "ncclCommWindowDeregister",
             [](Ctx&, ncclComm_t comm) { return ncclCommWindowDeregister(comm, nullptr); });
  b.badComms("WinGetUserPtr", "ncclWinGetUserPtr", [](Ctx&, ncclComm_t comm) {
    void* p;
    return ncclWinGetUserPtr(comm, nullptr, &p);
  });
  b.add("MemAlloc_NullOutput", "ncclMemAlloc", ncclInvalidArgument, {"ptr"},
        [](Ctx&) { return ncclMemAlloc(nullptr, 64); });
  b.add("MemAlloc_SizeZero", "ncclMemAlloc", ncclInvalidArgument, {"size"}, [](Ctx&) {
    void* p = nullptr;
    return ncclMemAlloc(&p, 0);
  });
  b.add("MemAlloc_SizeOverflow", "ncclMemAlloc", ncclInvalidArgument, {"size"}, [](Ctx&) {
    void* p = nullptr;
    return ncclMemAlloc(&p, SIZE_MAX - 100);
  });
  b.add("MemFree_Null", "ncclMemFree", ncclSuccess, {}, [](Ctx&) { return ncclMemFree(nullptr); });
  b.add("MemFree_NotFromMemAlloc", "ncclMemFree", ncclInvalidArgument, {"ptr"},
        [](Ctx& c) { return ncclMemFree(c.garbage); });
}

void addSignalRows(Builder& b) {
  b.badComms("PutSignal", "ncclPutSignal", [](Ctx& c, ncclComm_t comm) {
    return ncclPutSignal(c.a, 4, ncclFloat, 1, nullptr, 0, 0, 0, 0, comm, nullptr);
  });
  b.badComms("Signal", "ncclSignal", [](Ctx&, ncclComm_t comm) { return ncclSignal(1, 0, 0, 0, comm, nullptr); });
  b.badComms("WaitSignal", "ncclWaitSignal", [](Ctx&, ncclComm_t comm) {
    ncclWaitSignalDesc_t d{1, 1, 0, 0};
    return ncclWaitSignal(1, &d, comm, nullptr);
  });
  b.add("PutSignal_PeerIsNranks", "ncclPutSignal", ncclInvalidArgument, {"peer"}, [](Ctx& c) {
    return ncclPutSignal(c.a, 4, ncclFloat, c.nRanks, nullptr, 0, 0, 0, 0, c.comm, nullptr);
  });
  b.add("PutSignal_DatatypeTooLarge", "ncclPutSignal", ncclInvalidArgument, {"datatype"}, [](Ctx& c) {
    return ncclPutSignal(c.a, 4, static_cast<ncclDataType_t>(ncclNumTypes), 1, nullptr, 0, 0, 0, 0, c.comm,
                         nullptr);
  });
  b.add("PutSignal_NullLocalbuff", "ncclPutSignal", ncclInvalidArgument, {"localbuff"}, [](Ctx& c) {
    return ncclPutSignal(nullptr, 4, ncclFloat, 1, nullptr, 0, 0, 0, 0, c.comm, nullptr);
  });
  b.add("Signal_PeerNegative", "ncclSignal", ncclInvalidArgument, {"peer"},
        [](Ctx& c) { return ncclSignal(-1, 0, 0, 0, c.comm, nullptr); });
  b.add("WaitSignal_NullDescs", "ncclWaitSignal", ncclInvalidArgument, {"signalDescs"},
        [](Ctx& c) { return ncclWaitSignal(1, nullptr, c.comm, nullptr); });
  b.add("WaitSignal_NdescNegative", "ncclWaitSignal", ncclInvalidArgument, {"nDesc"}, [](Ctx& c) {
    ncclWaitSignalDesc_t d{1, 1, 0, 0};
    return ncclWaitSignal(-1, &d, c.comm, nullptr);
  });
  b.add("WaitSignal_DescPeerIsNranks", "ncclWaitSignal", ncclInvalidArgument, {"peer"}, [](Ctx& c) {
    ncclWaitSignalDesc_t d{1, c.nRanks, 0, 0};
    return ncclWaitSignal(1, &d, c.comm, nullptr);
  });
}

void addGroupAndMiscRows(Builder& b) {
  b.add("GroupEnd_WithoutStart", "ncclGroupEnd", ncclInvalidUsage, {"ncclGroupStart"},
        [](Ctx&) { return ncclGroupEnd(); });
  // ncclGroupStart cannot fail; its row checks that a bad call inside a group fails at once.
  b.add("GroupStart_BadCallInside", "ncclGroupStart", ncclInvalidArgument, {"datatype"},
        [](Ctx& c) {
          if (ncclGroupStart() != ncclSuccess) return ncclInternalError;
          const ncclResult_t bad =
              ncclAllReduce(c.a, c.b, 4, static_cast<ncclDataType_t>(-1), ncclSum, c.comm, nullptr);
          // Nothing was queued by the bad call, so the group is empty and ends cleanly.
          const ncclResult_t end = ncclGroupEnd();
          return end != ncclSuccess ? end : bad;
        });
  b.rows.back().needles = {"ncclAllReduce", "datatype"};  // the failing call is the AllReduce
  b.add("GroupSimulateEnd_WithoutStart", "ncclGroupSimulateEnd", ncclInvalidUsage, {"ncclGroupStart"}, [](Ctx&) {
    ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
    return ncclGroupSimulateEnd(&info);
  });
  b.add("GroupSimulateEnd_NullSimInfo", "ncclGroupSimulateEnd", ncclInvalidArgument, {"simInfo"}, [](Ctx&) {
    if (ncclGroupStart() != ncclSuccess) return ncclInternalError;
    return ncclGroupSimulateEnd(nullptr);  // closes the group even though it fails
  });
  b.add("GetVersion_NullOutput", "ncclGetVersion", ncclInvalidArgument, {"version"},
        [](Ctx&) { return ncclGetVersion(nullptr); });
  // Not result-returning: an unknown code gives a non-empty string; a bad handle is never read.
  b.add("GetErrorString_UnknownCode", "ncclGetErrorString", ncclSuccess, {}, [](Ctx&) {
    const char* s = ncclGetErrorString(static_cast<ncclResult_t>(12345));
    return s != nullptr && s[0] != '\0' ? ncclSuccess : ncclInternalError;
  });
  b.add("GetLastError_GarbageComm", "ncclGetLastError", ncclSuccess, {}, [](Ctx& c) {
    return ncclGetLastError(c.garbage) != nullptr && ncclGetLastError(c.destroyed) != nullptr ? ncclSuccess
                                                                                              : ncclInternalError;
  });
}

void addStreamRows(Builder& b) {
  b.add("StreamCreate_NullOutput", "tuttiStreamCreate", ncclInvalidArgument, {"stream"},
        [](Ctx&) { return tuttiStreamCreate(nullptr); });
  const struct {
    const char* kind;
    std::function<cudaStream_t(Ctx&)> get;
  } bad[] = {
      {"NullStream", [](Ctx&) -> cudaStream_t { return nullptr; }},
      {"GarbageStream", [](Ctx& c) { return c.garbageStream; }},
      {"DestroyedStream", [](Ctx& c) { return c.deadStream; }},
  };
  for (const auto& k : bad) {
    auto get = k.get;
    b.add(std::string("StreamSynchronize_") + k.kind, "tuttiStreamSynchronize", ncclInvalidArgument, {"stream"},
          [get](Ctx& c) { return tuttiStreamSynchronize(get(c)); });
    b.add(std::string("StreamQuery_") + k.kind, "tuttiStreamQuery", ncclInvalidArgument, {"stream"},
          [get](Ctx& c) { return tuttiStreamQuery(get(c)); });
    b.add(std::string("StreamDestroy_") + k.kind, "tuttiStreamDestroy", ncclInvalidArgument, {"stream"},
          [get](Ctx& c) { return tuttiStreamDestroy(get(c)); });
  }
}

}  // namespace

void addApiRows(std::vector<MatrixRow>& rows) {
  Builder b{rows};
  addInitRows(b);
  addLifetimeRows(b);
  addQueryRows(b);
  addRedOpRows(b);
  addMemoryRows(b);
  addSignalRows(b);
  addGroupAndMiscRows(b);
  addStreamRows(b);
}

std::vector<const char*> matrixEntryPoints() {
  return {"ncclMemAlloc", "ncclMemFree", "ncclGetVersion", "ncclGetUniqueId", "ncclCommInitRankConfig",
          "ncclCommInitRank", "ncclCommInitAll", "ncclCommInitRankScalable", "ncclCommFinalize", "ncclCommDestroy",
          "ncclCommAbort", "ncclCommRevoke", "ncclCommSplit", "ncclCommShrink", "ncclCommGetUniqueId",
          "ncclCommGrow", "ncclGetErrorString", "ncclGetLastError", "ncclCommGetAsyncError", "ncclCommCount",
          "ncclCommCuDevice", "ncclCommUserRank", "ncclCommRegister", "ncclCommDeregister", "ncclCommSuspend",
          "ncclCommResume", "ncclCommMemStats", "ncclCommWindowRegister", "ncclCommWindowDeregister",
          "ncclWinGetUserPtr", "ncclRedOpCreatePreMulSum", "ncclRedOpDestroy", "ncclReduce", "ncclBcast",
          "ncclBroadcast", "ncclAllReduce", "ncclReduceScatter", "ncclAllGather", "ncclAlltoAll", "ncclGather",
          "ncclScatter", "ncclSend", "ncclRecv", "ncclPutSignal", "ncclSignal", "ncclWaitSignal", "ncclGroupStart",
          "ncclGroupEnd", "ncclGroupSimulateEnd", "tuttiStreamCreate", "tuttiStreamSynchronize", "tuttiStreamQuery",
          "tuttiStreamDestroy"};
}

}  // namespace tutti::itest
