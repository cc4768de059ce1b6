#include "mp_rank.h"

namespace tutti::itest {

std::string summarise(Report& report) {
  std::vector<std::string> failures = report.take();
  if (failures.empty()) return "";
  return std::to_string(failures.size()) + " failure(s), first: " + failures.front();
}

int runCasesAsRank(const RankContext& ctx, CaseList& cases, Report& report) {
  const std::string me = "rank " + std::to_string(ctx.rank) + "/" + std::to_string(ctx.nranks);
  ncclComm_t comm = nullptr;
  if (!report.ok(ncclCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank), me + " ncclCommInitRank", nullptr)) {
    setMessage(summarise(report));
    return 1;
  }
  bool callFailed = false;
  for (auto& c : cases) {
    c->prepare(ctx.rank, comm, report);
    if (!report.ok(c->issue(ctx.rank, comm), c->label() + " " + me, comm)) {
      callFailed = true;
      break;
    }
    c->verify(ctx.rank, comm, report);
  }
  // After a failed call the peers may still be inside the operation; destroy could wait for them.
  if (callFailed)
    ncclCommAbort(comm);
  else
    report.ok(ncclCommDestroy(comm), me + " ncclCommDestroy", nullptr);
  const std::string summary = summarise(report);
  setMessage(summary.empty() ? std::to_string(cases.size()) + " cases passed" : summary);
  return summary.empty() ? 0 : 1;
}

}  // namespace tutti::itest
