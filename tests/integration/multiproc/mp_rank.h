// The rank side of a multi-process test: one communicator in this process, a list of cases run for this
// rank only. Used by forked children (runProcesses) and by the standalone tutti_mp_rank program that the
// network-namespace test starts.
#pragma once

#include "harness.h"
#include "mp_harness.h"

#include <string>

namespace tutti::itest {

// Creates the communicator of ctx.rank, runs prepare / issue / verify of every case for that rank, then
// destroys it. A failed call stops the list (the peers would otherwise wait forever) and the
// communicator is aborted instead of destroyed. Failures go to `report` (which prints each at once);
// returns 0 when every case passed, 1 otherwise, and leaves a summary with setMessage.
int runCasesAsRank(const RankContext& ctx, CaseList& cases, Report& report);

// "<n> failure(s), first: <message>" or "" when the report is empty (consumes the report).
std::string summarise(Report& report);

}  // namespace tutti::itest
