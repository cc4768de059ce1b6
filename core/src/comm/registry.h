// Process-wide set of live communicators, so a handle can be validated without reading the memory it
// points to (after ncclCommDestroy that memory is freed; a garbage pointer may not be mapped at all).
//
// Thread-safety: every function may be called from any thread. commRegistryContains is lock-free and
// writes no shared memory (it runs on every collective); add/remove take a mutex. add and remove are
// idempotent, so a communicator may be registered early (while it initialises) and again when complete.
// Contract: a handle found here was live at some point during the call; a concurrent ncclCommDestroy of
// the same handle is the caller's race, as in NCCL.
#pragma once

#include <cstddef>

namespace tutti {

void commRegistryAdd(const void* comm);
void commRegistryRemove(const void* comm);
bool commRegistryContains(const void* comm);
// Live communicators (for tests and diagnostics).
size_t commRegistrySize();

}  // namespace tutti
