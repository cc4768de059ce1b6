// What one soak iteration runs, drawn from (seed, iteration) alone.
//
// Every rank calls drawIteration with the same arguments and gets the same operations, so the ranks of a
// job agree on the collective, count, datatype, op, root and layout without exchanging anything. The
// parent process draws the same way to describe an iteration (--describe) without calling the library.
// The cases are the integration suites' CollCase / P2pCase: inputs are exactly checkable and every
// output element is compared with the host reference.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "harness.h"

namespace tutti::soak {

struct DrawLimits {
  int nranks = 4;
  // Largest buffer one rank passes to one call, in bytes (AllGather's recvbuff, Scatter's sendbuff, ...).
  size_t maxBytes = size_t{4} << 20;
  // Restricts every draw to one operation (an index into operationNames()); -1 draws from all of them.
  int only = -1;
};

// The operations drawn, equally likely: "AllReduce", ..., "Scatter", "SendRecv" (ncclBcast is drawn as a
// quarter of the Broadcasts).
const std::vector<std::string>& operationNames();

// One iteration: one operation, or (about one in eight) two inside one ncclGroupStart/End.
struct IterationDraw {
  itest::CaseList cases;
  std::string label;  // the cases' labels joined with " + "
};

// `dataSeedXor` changes only the input data (never which operation runs): the self-test of the checker
// (--inject corrupt) gives one rank different data than its peers expect.
IterationDraw drawIteration(uint64_t seed, long iteration, const DrawLimits& limits,
                            uint32_t dataSeedXor = 0);

}  // namespace tutti::soak
