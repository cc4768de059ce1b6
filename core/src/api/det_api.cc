// tutti.h: the host reference of deterministic reductions (the communicator switch is in comm_api.cc).
#include <tutti.h>

#include "api/api.h"
#include "api/argcheck.h"
#include "device/common/det_reduce.h"

#include <cstdint>

using namespace tutti;

extern "C" TUTTI_API_EXPORT ncclResult_t tuttiDeterministicReduce(const void* const* inputs, int n, void* output,
                                                                  size_t count, ncclDataType_t datatype,
                                                                  ncclRedOp_t op, const void* preMulScalars) {
  constexpr const char* kCall = "tuttiDeterministicReduce";
  return apiGuard(kCall, [&]() -> ncclResult_t {
    TUTTI_CHECK(argCheckDataType(datatype, kCall));
    if (int(op) < 0 || int(op) >= int(ncclNumOps))
      TUTTI_FAIL(ncclInvalidArgument, "{}: op {} is not a built-in operation (ncclSum, ncclProd, ncclMax, ncclMin, "
                 "ncclAvg; a PreMulSum is ncclSum with preMulScalars)", kCall, int(op));
    if (preMulScalars && op != ncclSum)
      TUTTI_FAIL(ncclInvalidArgument, "{}: preMulScalars are given with op {} (a PreMulSum is ncclSum with scalars)",
                 kCall, int(op));
    if (n < 1 || n > (1 << 30)) TUTTI_FAIL(ncclInvalidArgument, "{}: n is {} (expected 1 to 2^30 inputs)", kCall, n);
    const size_t esize = dataTypeSize(datatype);
    if (count > SIZE_MAX / esize)
      TUTTI_FAIL(ncclInvalidArgument, "{}: count {} overflows the address space for this datatype", kCall, count);
    if (count > 0) {
      TUTTI_CHECK(argCheckPtr(inputs, "inputs", kCall));
      TUTTI_CHECK(argCheckPtr(output, "output", kCall));
      const uintptr_t out = reinterpret_cast<uintptr_t>(output), bytes = count * esize;
      for (int i = 0; i < n; ++i) {
        if (!inputs[i]) TUTTI_FAIL(ncclInvalidArgument, "{}: inputs[{}] is NULL", kCall, i);
        const uintptr_t in = reinterpret_cast<uintptr_t>(inputs[i]);
        if (in != out && in < out + bytes && out < in + bytes)
          TUTTI_FAIL(ncclInvalidArgument, "{}: output {} overlaps inputs[{}] {} without being it ({} bytes each)",
                     kCall, output, i, inputs[i], bytes);
      }
    }
    ResolvedRedOp r;
    if (!resolveBuiltinRedOp(op, datatype, n, &r)) return ncclInternalError;  // checked above
    if (preMulScalars) r.kind = RedOpKind::PreMulSum;
    const ncclResult_t res = detReduceReference(inputs, n, output, count, r, preMulScalars);
    if (res != ncclSuccess) TUTTI_FAIL(res, "{}: the reduction failed", kCall);
    return ncclSuccess;
  });
}
