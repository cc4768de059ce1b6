// The host backend's one data-moving kernel: every primitive (send, recvReduceSend, recvReduceCopySend,
// recvCopySend, ...) ends up here. Dispatches on (datatype, op) once per call, then runs a loop the
// compiler vectorises; no per-element switch.
#pragma once

#include "device/common/reduce_ops.h"

#include <cstddef>

namespace tutti {

// dst[d][i] = postOp( preOp?(src[0][i]) op src[1][i] op ... ) for d < nDsts, i < count (elements).
// nSrcs 1 = copy (with optional preOp/postOp). preOpFirstSrc applies the premul scalar to src[0] only
// (a rank's own input enters the reduction); postOp applies avg's division. Buffers may be unaligned.
// dst may alias src[0] exactly (in-place); other overlaps are not allowed.
// Requires nSrcs >= 1, nDsts >= 0 and a valid op.datatype (callers validated the call).
void hostReduceCopy(const ResolvedRedOp& op, int nSrcs, const void* const* srcs, int nDsts, void* const* dsts,
                    size_t count, bool preOpFirstSrc, bool postOp);

}  // namespace tutti
