// Collectives on symmetric windows: every rank allocates one buffer (ncclMemAlloc), registers it with
// NCCL_WIN_COLL_SYMMETRIC, and runs AllReduce, AllGather and ReduceScatter whose send and receive buffers lie
// in it at the same offsets on every rank. Such calls read and write the peers' buffers directly (no
// transport); the test checks every element against a reference computed here, and the collective log
// (NCCL_DEBUG_SUBSYS=COLL) shows that they took that path ("algo SYM") while calls on other memory did not.
//
// Ranks run as threads and as forked processes; the same tests run on the sim backend (ctest suffix .sim),
// where the kernels do the work.
#include <gtest/gtest.h>
#include <nccl.h>
#include <tutti.h>

#include "../common/forked_ranks.h"
#include "../common/log_file.h"
#include "../common/thread_ranks.h"
#include "device/common/det_reduce.h"

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

#define SYM_OK(call)                                                                                      \
  do {                                                                                                    \
    ncclResult_t res_ = (call);                                                                           \
    if (res_ != ncclSuccess) return std::string(#call) + " -> " + ncclGetErrorString(res_) + ": " +     \
                                    ncclGetLastError(nullptr);                                            \
  } while (0)

size_t typeSize(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
  }
}

// Element i of a typed buffer (any alignment) as a double, and back.
double getElem(const void* b, ncclDataType_t t, size_t i) {
  const char* p = static_cast<const char*>(b) + i * typeSize(t);
  switch (t) {
    case ncclUint8: { uint8_t v; std::memcpy(&v, p, 1); return v; }
    case ncclInt32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case ncclFloat32: { float v; std::memcpy(&v, p, 4); return v; }
    case ncclInt64: { int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    default: { double v; std::memcpy(&v, p, 8); return v; }
  }
}
void putElem(void* b, ncclDataType_t t, size_t i, double x) {
  char* p = static_cast<char*>(b) + i * typeSize(t);
  switch (t) {
    case ncclUint8: { uint8_t v = static_cast<uint8_t>(x); std::memcpy(p, &v, 1); break; }
    case ncclInt32: { int32_t v = static_cast<int32_t>(x); std::memcpy(p, &v, 4); break; }
    case ncclFloat32: { float v = static_cast<float>(x); std::memcpy(p, &v, 4); break; }
    case ncclInt64: { int64_t v = static_cast<int64_t>(x); std::memcpy(p, &v, 8); break; }
    default: std::memcpy(p, &x, 8);
  }
}

// Input element i of `rank` in round `round`: small integers, so sums and products are exact in every type.
double input(int rank, int round, size_t i, ncclRedOp_t op) {
  if (op == ncclProd) return static_cast<double>(1 + (rank + i + round) % 3);
  return static_cast<double>(1 + (rank * 7 + i * 3 + round * 5) % 50);
}

double reduceRef(ncclRedOp_t op, ncclDataType_t t, int n, int round, size_t i) {
  double acc = input(0, round, i, op);
  for (int r = 1; r < n; ++r) {
    const double v = input(r, round, i, op);
    if (op == ncclSum || op == ncclAvg) acc += v;
    else if (op == ncclProd) acc *= v;
    else if (op == ncclMax) acc = std::max(acc, v);
    else acc = std::min(acc, v);
  }
  if (op == ncclAvg) acc = (t == ncclFloat32 || t == ncclFloat64) ? acc / n : std::trunc(acc / n);
  if (t == ncclUint8) acc = std::fmod(acc, 256.0);  // integers wrap
  return acc;
}

bool close(double got, double want, ncclRedOp_t op) {
  if (op != ncclAvg) return got == want;
  return std::fabs(got - want) <= 1e-5 * std::fabs(want) + 1e-6;
}

enum class Func { AllReduce, AllGather, ReduceScatter };

struct Case {
  Func func;
  ncclDataType_t type;
  ncclRedOp_t op;
  size_t count;    // AllReduce: all; AllGather / ReduceScatter: per rank
  bool inPlace;
  size_t misalign;  // bytes added to both offsets
};

std::vector<Case> cases() {
  std::vector<Case> v;
  const std::pair<ncclDataType_t, ncclRedOp_t> red[] = {
      {ncclFloat32, ncclSum}, {ncclInt32, ncclMax}, {ncclFloat64, ncclAvg}, {ncclInt64, ncclProd},
      {ncclUint8, ncclSum},   {ncclInt32, ncclAvg}, {ncclFloat32, ncclMin}};
  for (size_t count : {size_t{1}, size_t{7}, size_t{1031}, size_t{70001}}) {
    for (bool inPlace : {false, true}) {
      for (const auto& [t, op] : red) {
        v.push_back({Func::AllReduce, t, op, count, inPlace, 0});
        v.push_back({Func::ReduceScatter, t, op, count, inPlace, 0});
      }
      v.push_back({Func::AllGather, ncclInt32, ncclSum, count, inPlace, 0});
      v.push_back({Func::AllGather, ncclUint8, ncclSum, count, inPlace, 0});
    }
  }
  // Buffers misaligned for their datatype.
  v.push_back({Func::AllReduce, ncclInt32, ncclSum, 999, false, 3});
  v.push_back({Func::ReduceScatter, ncclFloat32, ncclSum, 333, false, 1});
  v.push_back({Func::AllGather, ncclFloat64, ncclSum, 77, false, 5});
  return v;
}

// The window's size for cases(): the largest input and output with their offsets.
size_t windowBytes(int n) { return 2 * (70001 * 8 * static_cast<size_t>(n) + 256); }

// Runs one case on `win` (this rank's window buffer, registered by every rank) and checks the output.
std::string runCase(ncclComm_t comm, int rank, int n, char* win, const Case& c, int round, cudaStream_t stream) {
  const size_t ts = typeSize(c.type);
  const size_t k = static_cast<size_t>(n);
  const size_t sendCount = c.func == Func::ReduceScatter ? c.count * k : c.count;
  const size_t recvCount = c.func == Func::AllGather ? c.count * k : c.count;
  const size_t half = windowBytes(n) / 2;
  char* recv = win + half + 64 + c.misalign;
  char* send = win + 64 + c.misalign;
  if (c.inPlace) {
    if (c.func == Func::AllGather) send = recv + rank * c.count * ts;
    else if (c.func == Func::ReduceScatter) recv = send + rank * c.count * ts;
    else send = recv;
  }
  std::memset(c.inPlace ? win : recv, 0xcd, c.inPlace ? 2 * half : recvCount * ts);
  for (size_t i = 0; i < sendCount; ++i) putElem(send, c.type, i, input(rank, round, i, c.op));
  if (c.func == Func::AllReduce) SYM_OK(ncclAllReduce(send, recv, c.count, c.type, c.op, comm, stream));
  else if (c.func == Func::AllGather) SYM_OK(ncclAllGather(send, recv, c.count, c.type, comm, stream));
  else SYM_OK(ncclReduceScatter(send, recv, c.count, c.type, c.op, comm, stream));
  if (stream) SYM_OK(tuttiStreamSynchronize(stream));
  for (size_t i = 0; i < recvCount; ++i) {
    double want;
    if (c.func == Func::AllGather) want = input(static_cast<int>(i / c.count), round, i % c.count, c.op);
    else if (c.func == Func::ReduceScatter) want = reduceRef(c.op, c.type, n, round, rank * c.count + i);
    else want = reduceRef(c.op, c.type, n, round, i);
    const double got = getElem(recv, c.type, i);
    if (!close(got, want, c.op)) {
      std::ostringstream s;
      s << "func " << static_cast<int>(c.func) << " type " << c.type << " op " << c.op << " count " << c.count << " inPlace "
        << c.inPlace << " misalign " << c.misalign << ": element " << i << " is " << got << ", expected " << want;
      return s.str();
    }
  }
  return {};
}

// Every case on a symmetric window, then one AllReduce on memory outside any window (the usual path).
std::string allCases(ncclComm_t comm, int rank, int n, cudaStream_t stream) {
  void* buf = nullptr;
  SYM_OK(ncclMemAlloc(&buf, windowBytes(n)));
  ncclWindow_t win = nullptr;
  SYM_OK(ncclCommWindowRegister(comm, buf, windowBytes(n), &win, NCCL_WIN_COLL_SYMMETRIC));
  int round = 0;
  for (const Case& c : cases()) {
    std::string e = runCase(comm, rank, n, static_cast<char*>(buf), c, round++, stream);
    if (!e.empty()) return e;
  }
  std::vector<float> a(4099, static_cast<float>(rank + 1)), b(4099, 0);
  SYM_OK(ncclAllReduce(a.data(), b.data(), a.size(), ncclFloat32, ncclSum, comm, stream));
  if (stream) SYM_OK(tuttiStreamSynchronize(stream));
  for (float x : b)
    if (x != static_cast<float>(n * (n + 1) / 2)) return "AllReduce outside the window: " + std::to_string(x);
  SYM_OK(ncclCommWindowDeregister(comm, win));
  SYM_OK(ncclMemFree(buf));
  return {};
}

std::vector<std::string> onThreads(int n, const std::function<std::string(ncclComm_t, int)>& body) {
  return tutti::itest::onThreadRanks(n, body);
}

class SymThreads : public ::testing::TestWithParam<int> {};

TEST_P(SymThreads, EveryCaseMatchesTheReferenceAndRunsSymmetric) {
  const int n = GetParam();
  tutti::itest::LogFile log("COLL");  // collective log lines, read back after the ranks ran
  for (auto& f : onThreads(n, [n](ncclComm_t comm, int r) { return allCases(comm, r, n, nullptr); }))
    ADD_FAILURE() << f;
  // Every rank logged every case as symmetric, and the call outside the window as something else.
  EXPECT_EQ(log.count("algo SYM "), cases().size() * n);
  EXPECT_GE(log.count("algo "), (cases().size() + 1) * n);
}

INSTANTIATE_TEST_SUITE_P(Ranks, SymThreads, ::testing::Values(2, 3, 5, 8));

// ---- Bits: the reductions follow the deterministic order (device/common/det_reduce.h) ------------------

using tutti::itest::wideInput;

// AllReduce and ReduceScatter of wide-range data on a symmetric window: every element's bits equal the
// deterministic reduction of the ranks' inputs, an AllReduce that starts 3 elements later gives the same bits
// for the same elements, and ReduceScatter gives AllReduce's bits for its block.
template <typename T>
std::string checkBits(ncclComm_t comm, int rank, int n, ncclDataType_t type, ncclRedOp_t op) {
  constexpr size_t count = 3001;
  const size_t bytes = (count * (n + 3)) * sizeof(T) + 256;
  void* buf = nullptr;
  SYM_OK(ncclMemAlloc(&buf, bytes));
  ncclWindow_t win = nullptr;
  SYM_OK(ncclCommWindowRegister(comm, buf, bytes, &win, NCCL_WIN_COLL_SYMMETRIC));
  T* in = static_cast<T*>(buf);                  // count * n elements (ReduceScatter's input)
  T* all = in + count * n;                       // AllReduce's output
  T* shifted = all + count;                      // AllReduce from element 3 on
  T* block = shifted + count;                    // ReduceScatter's output
  for (size_t i = 0; i < count * n; ++i) in[i] = wideInput<T>(rank, i);
  SYM_OK(ncclAllReduce(in, all, count, type, op, comm, nullptr));
  SYM_OK(ncclAllReduce(in + 3, shifted, count - 3, type, op, comm, nullptr));
  SYM_OK(ncclReduceScatter(in, block, count, type, op, comm, nullptr));
  tutti::ResolvedRedOp resolved;
  if (!tutti::resolveBuiltinRedOp(op, type, n, &resolved)) return "op not resolved";
  const tutti::DetOp<T> det = tutti::detOpOf<T>(resolved);
  std::string err;
  for (size_t i = 0; i < count && err.empty(); ++i) {
    const T want = tutti::detReduceElement<T>(det, n, [&](int r) { return wideInput<T>(r, i); });
    if (std::memcmp(&all[i], &want, sizeof(T)) != 0) err = "AllReduce element " + std::to_string(i);
    else if (i >= 3 && std::memcmp(&shifted[i - 3], &all[i], sizeof(T)) != 0)
      err = "shifted AllReduce element " + std::to_string(i);
    const size_t j = static_cast<size_t>(rank) * count + i;
    const T wantBlock = tutti::detReduceElement<T>(det, n, [&](int r) { return wideInput<T>(r, j); });
    if (err.empty() && std::memcmp(&block[i], &wantBlock, sizeof(T)) != 0)
      err = "ReduceScatter element " + std::to_string(i);
  }
  SYM_OK(ncclCommWindowDeregister(comm, win));
  SYM_OK(ncclMemFree(buf));
  return err.empty() ? err : "datatype " + std::to_string(type) + " op " + std::to_string(op) + ": " + err;
}

class SymBits : public ::testing::TestWithParam<int> {};

TEST_P(SymBits, ReductionsFollowTheDeterministicOrder) {
  const int n = GetParam();
  auto failed = onThreads(n, [n](ncclComm_t comm, int r) -> std::string {
    for (ncclRedOp_t op : {ncclSum, ncclAvg, ncclProd, ncclMax}) {
      std::string e = checkBits<float>(comm, r, n, ncclFloat32, op);
      if (e.empty()) e = checkBits<double>(comm, r, n, ncclFloat64, op);
      if (e.empty()) e = checkBits<tutti::Half>(comm, r, n, ncclFloat16, op);
      if (e.empty()) e = checkBits<tutti::BFloat16>(comm, r, n, ncclBfloat16, op);
      if (e.empty()) e = checkBits<tutti::Float8E4M3>(comm, r, n, ncclFloat8e4m3, op);
      if (!e.empty()) return e;
    }
    return {};
  });
  for (auto& f : failed) ADD_FAILURE() << f;
}

INSTANTIATE_TEST_SUITE_P(Ranks, SymBits, ::testing::Values(3, 7));

// Queued on streams: the calls return at once and the stream runs them.
TEST(SymStreams, CasesOnStreams) {
  constexpr int n = 3;
  auto failed = onThreads(n, [](ncclComm_t comm, int r) -> std::string {
    cudaStream_t s = nullptr;
    SYM_OK(tuttiStreamCreate(&s));
    std::string e = allCases(comm, r, n, s);
    SYM_OK(tuttiStreamDestroy(s));
    return e;
  });
  for (auto& f : failed) ADD_FAILURE() << f;
}

// A group mixing a symmetric AllReduce and one on ordinary memory, both checked.
TEST(SymGroup, OneThreadDrivesEveryRank) {
  constexpr int n = 4;
  constexpr size_t count = 5000;
  std::vector<ncclComm_t> comms(n);
  ASSERT_EQ(ncclCommInitAll(comms.data(), n, nullptr), ncclSuccess);
  std::vector<void*> bufs(n);
  std::vector<ncclWindow_t> wins(n);
  std::vector<std::vector<int32_t>> heapIn(n, std::vector<int32_t>(count)), heapOut(n, std::vector<int32_t>(count));
  for (int r = 0; r < n; ++r) ASSERT_EQ(ncclMemAlloc(&bufs[r], 2 * count * 4), ncclSuccess);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(ncclCommWindowRegister(comms[r], bufs[r], 2 * count * 4, &wins[r], NCCL_WIN_COLL_SYMMETRIC), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  for (int r = 0; r < n; ++r) {
    auto* in = static_cast<int32_t*>(bufs[r]);
    for (size_t i = 0; i < count; ++i) {
      in[i] = static_cast<int32_t>(r * 1000 + i);
      heapIn[r][i] = static_cast<int32_t>(i % 17 + r);
    }
  }
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; ++r) {
    auto* in = static_cast<int32_t*>(bufs[r]);
    ASSERT_EQ(ncclAllReduce(in, in + count, count, ncclInt32, ncclSum, comms[r], nullptr), ncclSuccess);
    ASSERT_EQ(ncclAllReduce(heapIn[r].data(), heapOut[r].data(), count, ncclInt32, ncclMax, comms[r], nullptr),
              ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  for (int r = 0; r < n; ++r) {
    const auto* out = static_cast<const int32_t*>(bufs[r]) + count;
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(out[i], static_cast<int32_t>(6000 + 4 * i)) << "rank " << r << " element " << i;
      ASSERT_EQ(heapOut[r][i], static_cast<int32_t>(i % 17 + n - 1)) << "rank " << r << " element " << i;
    }
  }
  for (int r = 0; r < n; ++r) EXPECT_EQ(ncclCommWindowDeregister(comms[r], wins[r]), ncclSuccess);
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
  for (void* b : bufs) EXPECT_EQ(ncclMemFree(b), ncclSuccess);
}

// Ranks as processes: the windows are ncclMemAlloc memory each process maps from the others.
TEST(SymProcesses, EveryCaseAcrossProcesses) {
  constexpr int n = 3;
  auto body = [](ncclComm_t comm, int r) { return allCases(comm, r, n, nullptr); };
  for (auto& f : tutti::itest::onForkedRanks(n, body)) ADD_FAILURE() << f;
}

// A process that ran collectives (its host executor has threads) and then forks ranks: the children, which
// inherit none of those threads, still run theirs.
TEST(SymProcesses, ForkAfterCollectivesInTheParent) {
  {
    constexpr int n = 3;
    std::vector<ncclComm_t> comms(n);
    ASSERT_EQ(ncclCommInitAll(comms.data(), n, nullptr), ncclSuccess);
    std::vector<std::vector<float>> v(n, std::vector<float>(1 << 18, 1.0f));
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < n; ++r)
      ASSERT_EQ(ncclAllReduce(v[r].data(), v[r].data(), v[r].size(), ncclFloat32, ncclSum, comms[r], nullptr),
                ncclSuccess);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
    for (int r = 0; r < n; ++r) ASSERT_EQ(v[r][12345], 3.0f);
    for (ncclComm_t c : comms) ASSERT_EQ(ncclCommDestroy(c), ncclSuccess);
  }
  constexpr int n = 2;
  auto body = [](ncclComm_t comm, int r) { return allCases(comm, r, n, nullptr); };
  for (auto& f : tutti::itest::onForkedRanks(n, body)) ADD_FAILURE() << f;
}

// A rank that never joins: the others' barrier ends with an error naming the rank and the call.
TEST(SymErrors, AMissingRankTimesOut) {
  ASSERT_EQ(setenv("TUTTI_TIMEOUT", "1", 1), 0);
  constexpr int n = 2;
  std::vector<ncclComm_t> comms(n);
  ASSERT_EQ(ncclCommInitAll(comms.data(), n, nullptr), ncclSuccess);
  unsetenv("TUTTI_TIMEOUT");
  std::vector<float> buf(n * 256, 1.0f);
  std::vector<ncclWindow_t> wins(n);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(ncclCommWindowRegister(comms[r], buf.data() + r * 256, 256 * sizeof(float), &wins[r],
                                     NCCL_WIN_COLL_SYMMETRIC), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  float* mine = buf.data();
  EXPECT_EQ(ncclAllReduce(mine, mine + 128, 128, ncclFloat32, ncclSum, comms[0], nullptr), ncclTimeout);
  const std::string msg = ncclGetLastError(comms[0]);
  EXPECT_NE(msg.find("rank 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("AllReduce"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank 1"), std::string::npos) << msg;
  for (int r = 0; r < n; ++r) EXPECT_EQ(ncclCommWindowDeregister(comms[r], wins[r]), ncclSuccess);
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommAbort(c), ncclSuccess);
}

}  // namespace
