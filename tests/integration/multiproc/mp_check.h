// Parent-side (gtest) checks of a multi-process run.
#pragma once

#include "mp_harness.h"

#include <string>

namespace tutti::itest {

// Prints every child's captured output (the tail of it) to the test log, so what each rank printed is
// visible with the test's result.
void logChildren(const MpResult& r);

// Adds a gtest failure for a setup error, a watchdog kill and every child that did not exit 0, with the
// tail of its output and, when `logDir` is set, of its NCCL_DEBUG_FILE (log.<pid>).
void expectAllSucceeded(const MpResult& r, const std::string& logDir = "");

// Adds a gtest failure naming each /dev/shm/tutti-shm-* file left by a child of `r`.
void expectNoShmLeftovers(const MpResult& r);

// The last `maxBytes` bytes of `text`, cut at a line start.
std::string tail(const std::string& text, size_t maxBytes = 4096);

}  // namespace tutti::itest
