// The multi-process collective matrix: which cases every process-based test runs. The in-host matrix
// (matrix_mp_test.cc) runs one list per communicator; the network-namespace test (tutti_mp_rank) runs
// all of them on one communicator. Both build the same lists from here, so the two cannot drift apart.
#pragma once

#include "coll_case.h"
#include "harness.h"

#include <string>
#include <vector>

namespace tutti::itest {

// Every collective the matrix covers: kAllColls without kBcast (ncclBcast is ncclBroadcast in place,
// which the Broadcast cases cover).
std::vector<Coll> matrixColls();

// The cases of one collective for `nranks` ranks: every datatype (sum) and every op (float, int32) for
// reductions, one type per element size for data movement; counts 0, 1, 7, 1023 and one spanning several
// slots, loops and channels; in place and out of place; both ends as root. Seeds depend only on the
// arguments, so every rank builds the same list.
CaseList collCases(Coll coll, int nranks);

// Grouped send/recv: ring shifts both ways, all pairs, all-to-all and self, over the same counts.
CaseList sendRecvCases(int nranks);

// A suite name as the tests and tutti_mp_rank spell it: collName(c) or "SendRecv".
inline constexpr const char* kSendRecvSuite = "SendRecv";

// The cases of the suite `name` (collName(c) of a matrix collective, or kSendRecvSuite) appended to
// `out`; false when no suite has that name.
bool appendSuiteCases(const std::string& name, int nranks, CaseList& out);

// Every suite name, in matrix order (matrixColls() then kSendRecvSuite).
std::vector<std::string> suiteNames();

}  // namespace tutti::itest
