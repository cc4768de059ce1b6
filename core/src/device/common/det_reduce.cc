// The host reference of deterministic reductions (det_reduce.h).
#include "device/common/det_reduce.h"

#include <cstring>
#include <vector>

namespace tutti {

ncclResult_t detReduceReference(const void* const* inputs, int n, void* out, size_t count,
                                const ResolvedRedOp& r, const void* rankScalars) {
  if (!dataTypeValid(r.datatype) || n < 1 || n > (1 << 30)) return ncclInvalidArgument;
  if (count == 0) return ncclSuccess;
  if (inputs == nullptr || out == nullptr) return ncclInvalidArgument;
  for (int i = 0; i < n; ++i)
    if (inputs[i] == nullptr) return ncclInvalidArgument;
  dispatchDataType(r.datatype, [&](auto tag) {
    using T = typename decltype(tag)::Type;
    const DetOp<T> op = detOpOf<T>(r);
    // Element by element, each read before it is written (out may alias an input), through memcpy: the
    // arrays may be unaligned for T.
    std::vector<DetAcc<T>> scalars(rankScalars ? n : 0);
    for (int k = 0; k < static_cast<int>(scalars.size()); ++k) scalars[k] = detRowScalar<T>(op, rankScalars, k);
    for (size_t e = 0; e < count; ++e) {
      const T v = detReduceElementScaled<T>(
          op, n,
          [&](int k) {
            T x;
            std::memcpy(&x, static_cast<const char*>(inputs[k]) + e * sizeof(T), sizeof(T));
            return x;
          },
          [&](int k) { return rankScalars ? scalars[k] : op.scalar; });
      std::memcpy(static_cast<char*>(out) + e * sizeof(T), &v, sizeof(T));
    }
  });
  return ncclSuccess;
}

}  // namespace tutti
