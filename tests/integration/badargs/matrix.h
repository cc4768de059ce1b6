// Rows of the bad-input matrix (matrix_test.cc): one entry point x one kind of bad argument.
#pragma once

#include "harness.h"

#include <nccl.h>

#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace tutti::itest {

// What a row may use. `comm` is rank 0 of a live 2-rank communicator (its peer `peerComm` is idle on
// another thread's behalf, so a row must fail before contacting it). Buffers hold `elems` floats.
struct MatrixCtx {
  ncclComm_t comm = nullptr;
  ncclComm_t peerComm = nullptr;
  int nRanks = 0;
  ncclComm_t garbage = nullptr;    // a stack buffer full of 0xa5, never a communicator
  ncclComm_t destroyed = nullptr;  // returned by ncclCommInitRank, then destroyed
  cudaStream_t garbageStream = nullptr;
  cudaStream_t deadStream = nullptr;  // created by tuttiStreamCreate, then destroyed
  ncclRedOp_t deadOp{};               // created on `comm`, then destroyed
  ncclRedOp_t otherCommOp{};          // alive, but created on `peerComm`
  ncclRedOp_t destroyedCommOp{};      // created on `destroyed` before it was destroyed
  float* a = nullptr;
  float* b = nullptr;
  size_t elems = 0;
};

struct MatrixRow {
  std::string name;   // test name: <EntryPoint>_<Kind>
  std::string entry;  // the C function ("ncclAllReduce")
  ncclResult_t code = ncclInvalidArgument;
  std::vector<std::string> needles;  // must all appear in ncclGetLastError: the call and the argument
  std::function<ncclResult_t(MatrixCtx&)> call;
  // The handle passed to ncclGetLastError (default: ctx.comm).
  std::function<ncclComm_t(MatrixCtx&)> errComm;
  const char* gap = nullptr;  // non-null: a known gap, the row is skipped with this reason
};

std::vector<MatrixRow> matrixRows();
// gtest prints a parameter with this (the row's name instead of its bytes).
inline void PrintTo(const MatrixRow& row, std::ostream* os) { *os << row.name; }
// Every entry point the library exports from nccl.h and tutti.h, for the coverage check.
std::vector<const char*> matrixEntryPoints();

}  // namespace tutti::itest
