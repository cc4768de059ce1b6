// The host reference of deterministic reductions (det_reduce.h).
#include "device/common/det_reduce.h"

#include <vector>

namespace tutti {

ncclResult_t detReduceReference(const void* const* inputs, int n, void* out, size_t count,
                                const ResolvedRedOp& r) {
  if (!dataTypeValid(r.datatype) || n < 1 || n > (1 << 30)) return ncclInvalidArgument;
  if (count == 0) return ncclSuccess;
  if (inputs == nullptr || out == nullptr) return ncclInvalidArgument;
  for (int i = 0; i < n; ++i)
    if (inputs[i] == nullptr) return ncclInvalidArgument;
  dispatchDataType(r.datatype, [&](auto tag) {
    using T = typename decltype(tag)::Type;
    const DetOp<T> op = detOpOf<T>(r);
    std::vector<const T*> in(n);
    for (int i = 0; i < n; ++i) in[i] = static_cast<const T*>(inputs[i]);
    T* o = static_cast<T*>(out);
    // Element by element, each read before it is written: out may alias an input.
    for (size_t e = 0; e < count; ++e) o[e] = detReduceElement<T>(op, n, [&](int k) { return in[k][e]; });
  });
  return ncclSuccess;
}

}  // namespace tutti
