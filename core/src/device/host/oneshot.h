// One-shot AllReduce of small buffers on the host backend (plan kAlgoOneShot): every rank sends its whole input to
// every peer over the point-to-point connections (Simple, one slot each, its own PreMulSum scalar applied as it
// is copied in), then reduces the n rows in rank order, 0 to n-1, straight from the slots. One step on the critical
// path where the ring takes 2(n-1) and the tree two per level, for n - 1 times the ring's bytes: worth it only for
// a few KiB (TUTTI_ONESHOT_MAX_BYTES). Every rank folds the same rows in the same order, so every rank gets the
// same bits.
#pragma once

#include "device/common/reduce_ops.h"
#include "device/host/prims.h"
#include "device/host/wait.h"

#include <cstddef>

struct ncclComm;

namespace tutti {

struct OneShot {
  const char* input = nullptr;
  char* output = nullptr;
  size_t count = 0;  // elements
  size_t esize = 1;
  ResolvedRedOp op{};
};

// Whether an AllReduce of `bytes` takes the one-shot path: host backend, the default tuner alone in the chain
// (comm->corePaths), 2 to kOneShotMaxRanks ranks, 1 byte to comm->oneShotMaxBytes, and within one Simple slot.
bool oneShotWanted(const ncclComm* comm, size_t bytes);

inline constexpr int kOneShotMaxRanks = 8;

namespace host {

ncclResult_t runOneShot(ncclComm* comm, const OneShot& s, const WaitContext& wait, const OpLabel& label);

}  // namespace host
}  // namespace tutti
