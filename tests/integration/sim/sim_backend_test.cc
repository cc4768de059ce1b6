// The sim backend next to the host backend in one process. The backend is chosen when a communicator is
// created (TUTTI_DEVICE is read then), so each test sets it around its inits.
#include <nccl.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kRanks = 3;

// Sets an environment variable for the lifetime of the object, restoring the old value after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_, old_.c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

// A set of kRanks communicators, destroyed with the set (movable, not copyable).
struct Comms {
  std::vector<ncclComm_t> c = std::vector<ncclComm_t>(kRanks, nullptr);
  Comms() = default;
  Comms(Comms&& o) noexcept : c(std::move(o.c)) { o.c.clear(); }
  Comms(const Comms&) = delete;
  Comms& operator=(const Comms&) = delete;
  ~Comms() {
    for (ncclComm_t x : c)
      if (x) ncclCommDestroy(x);
  }
};

size_t typeSize(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
  }
}

// One collective call on every rank of a set, run as one group from one thread.
struct Call {
  const char* name;
  ncclDataType_t type;
  ncclRedOp_t op;
  size_t count;
};

// Input bytes of rank r: random, but finite and moderate for floating types so sums stay meaningful.
std::vector<uint8_t> input(const Call& call, int r, size_t elems) {
  std::mt19937 gen(static_cast<uint32_t>(r * 7919 + elems));
  std::vector<uint8_t> v(elems * typeSize(call.type));
  for (size_t i = 0; i < elems; ++i) {
    const float x = static_cast<float>(static_cast<int>(gen() % 200) - 100) / 8.0f;
    uint8_t* p = &v[i * typeSize(call.type)];
    switch (call.type) {
      case ncclFloat32: std::memcpy(p, &x, 4); break;
      case ncclBfloat16: {
        uint32_t b;
        std::memcpy(&b, &x, 4);
        const uint16_t h = static_cast<uint16_t>(b >> 16);
        std::memcpy(p, &h, 2);
        break;
      }
      default:
        for (size_t k = 0; k < typeSize(call.type); ++k) p[k] = static_cast<uint8_t>(gen());
        if (call.type == ncclFloat8e4m3) p[0] &= 0x77;  // keep the exponent away from NaN's encoding
        if (call.type == ncclFloat8e5m2) p[0] &= 0x7b;  // and from infinities / NaN
    }
  }
  return v;
}

// Runs `call` on a set of communicators; returns every rank's output bytes.
std::vector<std::vector<uint8_t>> run(const Comms& set, const Call& call) {
  const std::string name = call.name;
  const bool gather = name == "AllGather", scatter = name == "ReduceScatter";
  const size_t inElems = scatter ? call.count * kRanks : call.count;
  const size_t outElems = gather ? call.count * kRanks : call.count;
  std::vector<std::vector<uint8_t>> in(kRanks), out(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    in[r] = input(call, r, inElems);
    out[r].assign(outElems * typeSize(call.type), 0xEE);
  }
  EXPECT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r) {
    ncclResult_t res;
    if (name == "AllReduce")
      res = ncclAllReduce(in[r].data(), out[r].data(), call.count, call.type, call.op, set.c[r], nullptr);
    else if (name == "Reduce")
      res = ncclReduce(in[r].data(), out[r].data(), call.count, call.type, call.op, 1, set.c[r], nullptr);
    else if (name == "ReduceScatter")
      res = ncclReduceScatter(in[r].data(), out[r].data(), call.count, call.type, call.op, set.c[r], nullptr);
    else if (name == "AllGather")
      res = ncclAllGather(in[r].data(), out[r].data(), call.count, call.type, set.c[r], nullptr);
    else
      res = ncclBroadcast(in[r].data(), out[r].data(), call.count, call.type, 2, set.c[r], nullptr);
    EXPECT_EQ(res, ncclSuccess) << call.name << " rank " << r << ": " << ncclGetLastError(set.c[r]);
  }
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  if (name == "Reduce")
    for (int r = 0; r < kRanks; ++r)
      if (r != 1) out[r].clear();  // only the root's output is defined
  return out;
}

Comms makeComms(const char* device) {
  ScopedEnv env("TUTTI_DEVICE", device);
  Comms set;
  EXPECT_EQ(ncclCommInitAll(set.c.data(), kRanks, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  return set;
}

const Call kCalls[] = {
    {"AllReduce", ncclFloat32, ncclSum, 100003},  {"AllReduce", ncclBfloat16, ncclMax, 4099},
    {"AllReduce", ncclFloat8e4m3, ncclSum, 5000}, {"AllReduce", ncclFloat32, ncclAvg, 777},
    {"ReduceScatter", ncclInt32, ncclProd, 3001}, {"ReduceScatter", ncclFloat8e5m2, ncclMin, 1025},
    {"Reduce", ncclFloat32, ncclSum, 65537},      {"AllGather", ncclUint8, ncclSum, 70001},
    {"Broadcast", ncclInt64, ncclSum, 12345},
};

// Host and sim communicators live side by side in one process and run at the same time; for the same
// inputs every rank's output is the same bits on both (floating-point sums included: one algorithm, one
// reduction order).
TEST(SimBackend, CoexistsWithHostAndMatchesItBitForBit) {
  for (const char* proto : {"Simple", "LL", "LL128"}) {
    SCOPED_TRACE(proto);
    ScopedEnv forced("NCCL_PROTO", proto);
    ScopedEnv ring("NCCL_ALGO", "ring");
    Comms host = makeComms("host");
    Comms sim = makeComms("sim");
    for (const Call& call : kCalls) {
      SCOPED_TRACE(testing::Message() << call.name << " type " << call.type << " op " << call.op << " count "
                                      << call.count);
      std::vector<std::vector<uint8_t>> fromHost, fromSim;
      std::thread t([&] { fromSim = run(sim, call); });  // both backends at once
      fromHost = run(host, call);
      t.join();
      for (int r = 0; r < kRanks; ++r) EXPECT_TRUE(fromHost[r] == fromSim[r]) << "rank " << r << " differs";
    }
  }
}

// The emulated GPU can report sm_80: fp8 reductions are then refused at the call (as on an A100), while
// fp8 data movement and other types still run.
TEST(SimBackend, Fp8ReductionsNeedSm90) {
  ScopedEnv arch("TUTTI_SIM_ARCH", "80");
  Comms sim = makeComms("sim");
  std::vector<uint8_t> buf(64, 0x30);
  for (ncclDataType_t t : {ncclFloat8e4m3, ncclFloat8e5m2}) {
    EXPECT_EQ(ncclAllReduce(buf.data(), buf.data(), 64, t, ncclSum, sim.c[0], nullptr), ncclInvalidArgument);
    const std::string err = ncclGetLastError(sim.c[0]);
    EXPECT_NE(err.find("need compute capability 9.0 (sm_90)"), std::string::npos) << err;
    EXPECT_NE(err.find("sm_80"), std::string::npos) << err;
  }
  // Every rank: AllGather of fp8 (bytes) and an fp32 AllReduce.
  const Call gather{"AllGather", ncclFloat8e4m3, ncclSum, 33};
  const Call reduce{"AllReduce", ncclFloat32, ncclSum, 33};
  for (const auto& out : run(sim, gather)) EXPECT_EQ(out.size(), 33u * kRanks);
  for (const auto& out : run(sim, reduce)) EXPECT_EQ(out.size(), 33u * 4);
}

TEST(SimBackend, Fp8ReductionsRunOnSm90) {
  ScopedEnv arch("TUTTI_SIM_ARCH", "90");
  // The ring on both (one algorithm, one reduction order): unforced, the host backend would take its one-shot
  // path for 1000 bytes, which folds in another order.
  ScopedEnv ring("NCCL_ALGO", "ring");
  Comms sim = makeComms("sim");
  Comms host = makeComms("host");
  const Call call{"AllReduce", ncclFloat8e4m3, ncclProd, 1000};
  EXPECT_EQ(run(sim, call), run(host, call));
}

// The kernels with NCCL's threads per block (512 for Simple and LL, 640 for LL128 on sm_90) give the
// results they give with the emulator's default of 64.
TEST(SimBackend, NcclThreadCountsPerBlock) {
  const Call call{"AllReduce", ncclFloat32, ncclSum, 200001};
  Comms host = makeComms("host");
  for (const char* proto : {"Simple", "LL", "LL128"}) {
    ScopedEnv forced("NCCL_PROTO", proto);
    const std::vector<std::vector<uint8_t>> want = run(host, call);
    ScopedEnv threads("TUTTI_SIM_NTHREADS", std::string(proto) == "LL128" ? "640" : "512");
    Comms sim = makeComms("sim");
    EXPECT_EQ(run(sim, call), want) << proto;
  }
}

TEST(SimBackend, BadSimParametersFailInit) {
  for (const auto& [name, value] : {std::pair{"TUTTI_SIM_NTHREADS", "100"}, std::pair{"TUTTI_SIM_NTHREADS", "2048"},
                                    std::pair{"TUTTI_SIM_ARCH", "75"}}) {
    ScopedEnv bad(name, value);
    ScopedEnv device("TUTTI_DEVICE", "sim");
    std::vector<ncclComm_t> c(2, nullptr);
    EXPECT_EQ(ncclCommInitAll(c.data(), 2, nullptr), ncclInvalidArgument) << name << "=" << value;
    const std::string err = ncclGetLastError(nullptr);
    EXPECT_NE(err.find(name), std::string::npos) << err;
  }
  ScopedEnv device("TUTTI_DEVICE", "gpu");
  std::vector<ncclComm_t> c(2, nullptr);
  EXPECT_NE(ncclCommInitAll(c.data(), 2, nullptr), ncclSuccess);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("unknown backend"), std::string::npos);
}

}  // namespace
