// The host backend's deterministic reduction (device/common/det_reduce.h): the same bits as
// detReduceElement, computed a chunk at a time over arrays so the compiler vectorises each tree step.
#pragma once

#include "device/common/reduce_ops.h"

#include <cstddef>

namespace tutti {

// out[d][i] = the deterministic reduction of in[0][i] .. in[n-1][i] (ranks in order) for d < nOut, i < count.
// Every input is some rank's own (a PreMulSum scales each: by op's scalar, or, given rankScalars, input r by
// the value of the datatype at rankScalars + r * size). Buffers may be unaligned; an output may be an input
// (each chunk is read whole before it is written). Requires n >= 1 and a valid op.datatype.
void hostDetReduceCopy(const ResolvedRedOp& op, int n, const void* const* in, int nOut, void* const* out,
                       size_t count, const void* rankScalars = nullptr);

}  // namespace tutti
