// The bad-input matrix: every entry point of nccl.h (and tutti.h's host streams) crossed with every kind
// of bad argument that applies to it. Each row is its own test (and ctest line) and asserts
//   - the exact NCCL result code,
//   - that ncclGetLastError(comm) names the call and the offending argument,
//   - that the 2-rank communicator still runs a correct AllReduce afterwards (one thread per rank).
// Rows are built in matrix_rows.cc; this file holds the fixture and the checks.
#include "matrix.h"

#include <tutti.h>

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <regex>
#include <string>
#include <thread>

namespace tutti::itest {
namespace {

class BadArgsMatrix : public testing::TestWithParam<MatrixRow> {
 protected:
  void SetUp() override {
    comms_ = std::make_unique<CommSet>(2, InitMode::kInitAll);
    ASSERT_TRUE(comms_->ok()) << comms_->error();
    ctx_.comm = comms_->comm(0);
    ctx_.peerComm = comms_->comm(1);
    ctx_.nRanks = 2;
    ctx_.a = a_.data();
    ctx_.b = b_.data();
    ctx_.elems = a_.size();

    // Garbage: a stack buffer that never was a communicator (or stream). Validation must not read it.
    std::memset(garbage_, 0xa5, sizeof garbage_);
    ctx_.garbage = reinterpret_cast<ncclComm_t>(garbage_);
    ctx_.garbageStream = reinterpret_cast<cudaStream_t>(garbage_);

    // A communicator that existed and was destroyed: its memory is freed.
    ncclUniqueId id;
    ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
    ASSERT_EQ(ncclCommInitRank(&ctx_.destroyed, 1, id, 0), ncclSuccess) << ncclGetLastError(nullptr);
    float scalar = 2.0f;
    for (int i = 0; i < 4; ++i)  // slot 3: not a slot this test's communicator has ever used
      ASSERT_EQ(ncclRedOpCreatePreMulSum(&ctx_.destroyedCommOp, &scalar, ncclFloat, ncclScalarHostImmediate,
                                         ctx_.destroyed), ncclSuccess);
    ASSERT_EQ(ncclCommDestroy(ctx_.destroyed), ncclSuccess);

    ASSERT_EQ(tuttiStreamCreate(&ctx_.deadStream), ncclSuccess);
    ASSERT_EQ(tuttiStreamDestroy(ctx_.deadStream), ncclSuccess);

    // User ops: one destroyed on this communicator, one alive on the peer's communicator only.
    ASSERT_EQ(ncclRedOpCreatePreMulSum(&ctx_.deadOp, &scalar, ncclFloat, ncclScalarHostImmediate, ctx_.comm),
              ncclSuccess);
    ASSERT_EQ(ncclRedOpDestroy(ctx_.deadOp, ctx_.comm), ncclSuccess);
    // Create a few on the peer so its handle is not also a handle of this communicator's slot 0.
    for (int i = 0; i < 3; ++i)
      ASSERT_EQ(ncclRedOpCreatePreMulSum(&peerOps_[i], &scalar, ncclFloat, ncclScalarHostImmediate, ctx_.peerComm),
                ncclSuccess);
    ctx_.otherCommOp = peerOps_[2];
  }

  void TearDown() override {
    if (!comms_ || !comms_->ok()) return;
    for (ncclRedOp_t op : peerOps_) ncclRedOpDestroy(op, ctx_.peerComm);
  }

  // The communicator survived the bad calls: both ranks, one thread each, run a correct AllReduce.
  void expectCommStillWorks() {
    int32_t in[2] = {3, 4}, out[2] = {0, 0};
    ncclResult_t res[2] = {ncclInternalError, ncclInternalError};
    std::thread peer([&] {
      res[1] = ncclAllReduce(&in[1], &out[1], 1, ncclInt32, ncclSum, comms_->comm(1), nullptr);
    });
    res[0] = ncclAllReduce(&in[0], &out[0], 1, ncclInt32, ncclSum, comms_->comm(0), nullptr);
    peer.join();
    EXPECT_EQ(res[0], ncclSuccess) << ncclGetLastError(nullptr);
    EXPECT_EQ(res[1], ncclSuccess) << ncclGetLastError(nullptr);
    EXPECT_EQ(out[0], 7);
    EXPECT_EQ(out[1], 7);
  }

  std::unique_ptr<CommSet> comms_;
  MatrixCtx ctx_;
  ncclRedOp_t peerOps_[3] = {};
  std::vector<float> a_ = std::vector<float>(256, 1.0f);
  std::vector<float> b_ = std::vector<float>(256, 0.0f);
  alignas(64) unsigned char garbage_[512];
};

TEST_P(BadArgsMatrix, Rejected) {
  const MatrixRow& row = GetParam();
  if (row.gap) GTEST_SKIP() << "known gap: " << row.gap;
  const ncclResult_t res = row.call(ctx_);
  EXPECT_EQ(res, row.code) << row.name << " returned " << resultName(res) << " (" << ncclGetLastError(nullptr)
                           << "), expected " << resultName(row.code);
  if (row.code != ncclSuccess) {
    // As an application would ask: with the handle it passed (which may be garbage or freed).
    const char* msg = ncclGetLastError(row.errComm ? row.errComm(ctx_) : ctx_.comm);
    ASSERT_NE(msg, nullptr);
    const std::string text = msg;
    EXPECT_FALSE(text.empty()) << "ncclGetLastError gave no message";
    for (const std::string& needle : row.needles)
      EXPECT_NE(text.find(needle), std::string::npos) << "message does not mention \"" << needle << "\": " << text;
  }
  expectCommStillWorks();
}

INSTANTIATE_TEST_SUITE_P(Row, BadArgsMatrix, testing::ValuesIn(matrixRows()),
                         [](const testing::TestParamInfo<MatrixRow>& info) { return info.param.name; });

// Entry points nccl.h declares that the library does not define yet (a program using them fails to
// link, so there is nothing to call). Remove a name when it is implemented: the test below then asks for rows.
const char* const kNotExported[] = {
    "ncclParamBind", "ncclParamGetI8", "ncclParamGetI16", "ncclParamGetI32", "ncclParamGetI64", "ncclParamGetU8",
    "ncclParamGetU16", "ncclParamGetU32", "ncclParamGetU64", "ncclParamGetStr", "ncclParamGet",
    "ncclParamGetParameter", "ncclParamGetAllParameterKeys", "ncclParamDumpAll",
};

// Function names declared by nccl.h (the "nccl" ones; the "pnccl" profiling aliases share their code).
std::vector<std::string> declaredEntryPoints() {
  std::ifstream in(TUTTI_NCCL_H);
  const std::regex decl(R"(^(?:ncclResult_t|const char\*|void)\s+(nccl\w+)\s*\()");
  std::vector<std::string> names;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, decl)) names.push_back(m[1]);
  }
  return names;
}

// The matrix must cover every entry point of nccl.h (and tutti.h's streams) that the library exports.
TEST(BadArgsMatrixCoverage, EveryEntryPointHasRows) {
  const std::vector<MatrixRow> rows = matrixRows();
  const std::vector<std::string> declared = declaredEntryPoints();
  ASSERT_GT(declared.size(), 50u) << "could not read the declarations of " << TUTTI_NCCL_H;
  const std::vector<const char*> listed = matrixEntryPoints();
  std::vector<std::string> expected(listed.begin(), listed.end());
  for (const std::string& name : declared) {
    bool skip = false;
    for (const char* n : kNotExported) skip = skip || name == n;
    if (!skip) expected.push_back(name);
  }
  for (const std::string& entry : expected) {
    bool found = false;
    for (const MatrixRow& row : rows) found = found || row.entry == entry;
    EXPECT_TRUE(found) << entry << " has no row in the bad-argument matrix";
  }
  // Names are unique (each is a ctest line).
  for (size_t i = 0; i < rows.size(); ++i)
    for (size_t j = i + 1; j < rows.size(); ++j) EXPECT_NE(rows[i].name, rows[j].name);
}

}  // namespace
}  // namespace tutti::itest
