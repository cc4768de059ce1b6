// The host backend's deterministic reduction (device/common/det_reduce.h): the same bits as
// detReduceElement, computed a chunk at a time over arrays so the compiler vectorises each tree step.
#pragma once

#include "device/common/reduce_ops.h"

#include <cstddef>

namespace tutti {

// out[d][i] = the deterministic reduction of in[0][i] .. in[n-1][i] (ranks in order) for d < nOut, i < count.
// Every input is some rank's own (a PreMulSum scales each: by op's scalar, or, given rankScalars, input r by
// the value of the datatype at rankScalars + r * size). Buffers may be unaligned; an output may be an input
// (each chunk is read whole before it is written). Requires n >= 1 and a valid op.datatype. `coldRows`: the rows are
// read once from memory, not from cache (a hint for prefetch; the bits are the same).
void hostDetReduceCopy(const ResolvedRedOp& op, int n, const void* const* in, int nOut, void* const* out,
                       size_t count, const void* rankScalars = nullptr, bool coldRows = false);

// The same fold as partial results (recursive doubling and halving over a power of two of ranks, oneshot.cc): rows
// widened to the accumulator (and scaled), pairs combined lower ranks first, the root narrowed once. The bits equal
// hostDetReduceCopy's where the partial results combine as its perfect trees do.
size_t hostDetAccSize(ncclDataType_t type);  // bytes of one accumulator element
// out may be lo or hi.
void hostDetCombine(const ResolvedRedOp& op, const void* lo, const void* hi, void* out, size_t count);
void hostDetFinish(const ResolvedRedOp& op, int n, const void* acc, void* out, size_t count);
// Two ranks' raw rows folded into a partial result: out = leaf(lo) (op) leaf(hi), each widened to the accumulator (and
// scaled) as it is loaded, then combined as hostDetCombine combines. out (accumulators) shares no byte with lo or hi.
void hostDetLeafPair(const ResolvedRedOp& op, const void* lo, const void* hi, void* out, size_t count);

}  // namespace tutti
