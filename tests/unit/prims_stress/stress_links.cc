#include "stress_links.h"

#include "device/common/protocols.h"
#include "device/host/wait.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <thread>

namespace tutti::stress {
namespace {

constexpr size_t kCtrlBytes = 4096;
size_t pageRound(size_t n) { return (n + 4095) & ~size_t{4095}; }

uint64_t mix64(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

size_t largestSlot() {
  size_t s = 0;
  for (size_t b : kGeometry) s = std::max(s, b / TUTTI_STEPS);
  return s;
}

tuttiConnector_t connector(const FifoMemory& m, int view, bool landing, int shared, uint32_t flags) {
  tuttiConnector_t c{};
  for (int p = 0; p < TUTTI_NUM_PROTOCOLS; ++p) {
    c.buffSizes[p] = kGeometry[p];
    c.buffs[p] = m.region(view, landing ? TUTTI_PROTO_SIMPLE : p);
  }
  c.ctrl = m.ctrl(view);
  c.shared = shared;
  c.flags = flags;
  return c;
}

}  // namespace

const char* transportName(Transport t) {
  switch (t) {
    case Transport::P2p: return "p2p";
    case Transport::ShmTwice: return "shm";
    default: return "proxied";
  }
}

const char* protoName(int proto) {
  return proto == TUTTI_PROTO_LL ? "LL" : proto == TUTTI_PROTO_LL128 ? "LL128" : "Simple";
}

std::unique_ptr<FifoMemory> FifoMemory::create(const size_t regionBytes[TUTTI_NUM_PROTOCOLS], bool twice,
                                               std::string* err) {
  std::unique_ptr<FifoMemory> m(new FifoMemory());
  m->bytes_ = kCtrlBytes;
  for (int p = 0; p < TUTTI_NUM_PROTOCOLS; ++p) {
    m->offset_[p] = m->bytes_;
    m->regionBytes_[p] = regionBytes[p];
    m->bytes_ += pageRound(regionBytes[p]);
  }
  if (!twice) {
    // Anonymous pages read as zero: like a freshly allocated, zeroed FIFO.
    void* p = mmap(nullptr, m->bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      *err = std::string("mmap: ") + std::strerror(errno);
      return nullptr;
    }
    m->views_[0] = m->views_[1] = static_cast<char*>(p);
    return m;
  }
  static std::atomic<unsigned> counter{0};
  char name[64];
  std::snprintf(name, sizeof name, "/tutti-tsan-stress-%d-%u", static_cast<int>(getpid()), counter.fetch_add(1));
  const int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) {
    *err = std::string("shm_open: ") + std::strerror(errno);
    return nullptr;
  }
  shm_unlink(name);  // both views below keep the segment alive
  bool ok = ftruncate(fd, static_cast<off_t>(m->bytes_)) == 0;
  for (int v = 0; ok && v < 2; ++v) {
    void* p = mmap(nullptr, m->bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ok = p != MAP_FAILED;
    if (ok) m->views_[v] = static_cast<char*>(p);
  }
  const int saved = errno;
  close(fd);
  if (!ok) {
    *err = std::string("shared segment: ") + std::strerror(saved);
    return nullptr;  // the destructor unmaps whatever view was made
  }
  return m;
}

FifoMemory::~FifoMemory() {
  if (views_[0]) munmap(views_[0], bytes_);
  if (views_[1] && views_[1] != views_[0]) munmap(views_[1], bytes_);
}

char* FifoMemory::region(int view, int proto) const {
  return regionBytes_[proto] ? views_[view] + offset_[proto] : nullptr;
}

std::unique_ptr<Link> makeLink(Transport kind, int sendRank, int recvRank, std::string* err) {
  auto l = std::make_unique<Link>();
  l->kind = kind;
  if (kind == Transport::Proxied) {
    // Receive end: one landing region of largest-slot x TUTTI_STEPS; send end: every protocol's FIFO.
    const size_t landing[TUTTI_NUM_PROTOCOLS] = {0, 0, largestSlot() * TUTTI_STEPS};
    l->recvMem = FifoMemory::create(landing, false, err);
    l->sendMem = FifoMemory::create(kGeometry, false, err);
    if (!l->recvMem || !l->sendMem) return nullptr;
    l->send.conn = connector(*l->sendMem, 0, false, 0, TUTTI_CONN_PROXIED);
    l->recv.conn = connector(*l->recvMem, 1, true, 0, TUTTI_CONN_PROXIED);
  } else {
    const bool twice = kind == Transport::ShmTwice;
    l->recvMem = FifoMemory::create(kGeometry, twice, err);
    if (!l->recvMem) return nullptr;
    l->send.conn = connector(*l->recvMem, 0, false, twice, TUTTI_CONN_LL128_SAFE);
    l->recv.conn = connector(*l->recvMem, 1, false, twice, TUTTI_CONN_LL128_SAFE);
  }
  l->send.peer = recvRank;
  l->recv.peer = sendRank;
  return l;
}

std::string forwardSteps(Link* link, uint64_t steps, const host::WaitContext& wait) {
  tuttiConnCtrl_t* from = link->send.conn.ctrl;  // the sender's control block (its tail, our head)
  tuttiConnCtrl_t* to = link->recv.conn.ctrl;    // the receiver's (our tail, its head)
  const size_t stride = largestSlot();
  char* landing = link->recvMem->region(1, TUTTI_PROTO_SIMPLE);
  for (uint64_t s = 0; s < steps; ++s) {
    const int slot = static_cast<int>(s % TUTTI_STEPS);
    if (host::waitAtLeast(&from->tail, &from->tailWaiters, &from->tailSeq, &from->senderClosed, s + 1, wait) !=
        host::WaitStatus::Ready)
      return "wire: no data from the sender for step " + std::to_string(s);
    if (s >= TUTTI_STEPS &&
        host::waitAtLeast(&to->head, &to->headWaiters, &to->headSeq, &to->receiverClosed, s + 1 - TUTTI_STEPS,
                          wait) != host::WaitStatus::Ready)
      return "wire: receiver never freed its landing slot for step " + std::to_string(s);
    const int64_t bytes = std::atomic_ref<int64_t>(from->sizes[slot]).load(std::memory_order_relaxed);
    const int32_t proto = std::atomic_ref<int32_t>(from->protos[slot]).load(std::memory_order_relaxed);
    if (proto < 0 || proto >= TUTTI_NUM_PROTOCOLS || bytes < 0)
      return "wire: step " + std::to_string(s) + " has protocol " + std::to_string(proto);
    const size_t wire = lineWireBytes(proto, static_cast<size_t>(bytes));
    if (wire > stride) return "wire: step " + std::to_string(s) + " carries " + std::to_string(wire) + " bytes";
    const char* src = link->sendMem->region(0, proto) + slot * (kGeometry[proto] / TUTTI_STEPS);
    std::memcpy(landing + slot * stride, src, wire);
    std::atomic_ref<int64_t>(to->sizes[slot]).store(static_cast<int64_t>(wire), std::memory_order_relaxed);
    std::atomic_ref<int32_t>(to->protos[slot]).store(-1, std::memory_order_relaxed);
    host::publish(&to->tail, &to->tailWaiters, &to->tailSeq, s + 1, false);
    // The bytes are on the wire: the sender may reuse its slot.
    host::publish(&from->head, &from->headWaiters, &from->headSeq, s + 1, false);
  }
  return "";
}

std::vector<PlannedOp> makePlan(int proto, size_t slotData, int nOps, int nThreads, uint64_t seed, int bigEvery) {
  std::mt19937_64 rng(seed);
  const size_t line = proto == TUTTI_PROTO_LL ? kLLDataPerLine : proto == TUTTI_PROTO_LL128 ? kLL128DataPerLine : 64;
  // Short budgets send waits to the futex sleep paths; long ones keep a reader polling line flags while
  // the writer is still writing the slot, which is where a line read too early would show.
  static constexpr int kSpins[] = {0, 1, 16, 2000, 20000};
  std::vector<PlannedOp> plan(nOps);
  for (int i = 0; i < nOps; ++i) {
    PlannedOp& op = plan[i];
    op.seed = mix64(seed ^ (static_cast<uint64_t>(i) << 20));
    const uint64_t r = rng();
    if (bigEvery > 0 && r % bigEvery == 0) {
      switch ((r >> 8) % 4) {
        case 0: op.bytes = slotData; break;
        case 1: op.bytes = slotData - 1; break;
        case 2: op.bytes = slotData + 1; break;  // one full slot, then one byte
        default: op.bytes = (2 + (r >> 16) % 2) * slotData + (r >> 20) % (2 * line); break;
      }
    } else {
      const size_t k = 1 + (r >> 12) % 12;
      switch ((r >> 8) % 8) {
        case 0: op.bytes = 0; break;
        case 1: op.bytes = 1; break;
        case 2: op.bytes = 2 * ((r >> 16) % 100) + 1; break;  // odd
        case 3: op.bytes = k * line - 1; break;
        case 4: op.bytes = k * line; break;
        case 5: op.bytes = k * line + 1; break;
        default: op.bytes = (r >> 16) % 4096; break;
      }
    }
    op.spinCount = kSpins[(r >> 40) % std::size(kSpins)];
    if ((r >> 44) % 16 == 0) {
      // Now and then one thread arrives late, so the other end fills the FIFO or sleeps on the counter.
      op.pauser = static_cast<int>((r >> 48) % nThreads);
      op.pauseUs = 20 + static_cast<int>((r >> 52) % 200);
    }
    op.copyOut = (r >> 62) & 1;
    if (rng() % 3 == 0) {
      op.rendezvous = true;
      op.spinCount = kSpins[std::size(kSpins) - 1];
      op.pauser = -1;
    }
  }
  return plan;
}

std::vector<PlannedOp> makeLinePlan(int proto, int nOps, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const size_t line = proto == TUTTI_PROTO_LL ? kLLDataPerLine : proto == TUTTI_PROTO_LL128 ? kLL128DataPerLine : 64;
  const size_t sizes[] = {1, line - 1, line, line + 1, 2 * line};
  std::vector<PlannedOp> plan(nOps);
  for (int i = 0; i < nOps; ++i) {
    PlannedOp& op = plan[i];
    op.seed = mix64(seed ^ (static_cast<uint64_t>(i) << 20));
    op.bytes = sizes[rng() % std::size(sizes)];
    op.spinCount = 20000;
    op.rendezvous = true;
  }
  return plan;
}

std::vector<PlannedOp> makeTinyPlan(int nOps, uint64_t seed) {
  std::mt19937_64 rng(seed);
  static constexpr int kSpins[] = {0, 16, 2000, 20000};
  // Data bytes per lane size: packets of data plus one header word in lanes of 16, 32 and 64 bytes.
  static constexpr size_t kLo[] = {1, 9, 25}, kHi[] = {8, 24, 56};
  std::vector<PlannedOp> plan(nOps);
  size_t cls = 0;
  int left = 0, spins = 0;
  for (int i = 0; i < nOps; ++i) {
    if (left == 0) {
      cls = rng() % 3;
      left = 20 + static_cast<int>(rng() % 381);
      spins = kSpins[rng() % std::size(kSpins)];
    }
    --left;
    PlannedOp& op = plan[i];
    op.seed = mix64(seed ^ (static_cast<uint64_t>(i) << 20));
    op.bytes = kLo[cls] + rng() % (kHi[cls] - kLo[cls] + 1);
    op.spinCount = spins;
    if (rng() % 512 == 0) {  // now and then one end is late: the sender fills every lane or the receiver sleeps
      op.pauser = static_cast<int>(rng() % 2);
      op.pauseUs = 20 + static_cast<int>(rng() % 200);
    }
  }
  return plan;
}

size_t maxBytes(const std::vector<PlannedOp>& plan) {
  size_t m = 0;
  for (const PlannedOp& op : plan) m = std::max(m, op.bytes);
  return m;
}

uint64_t planSteps(const std::vector<PlannedOp>& plan, size_t slotData) {
  host::HostStepCounter counter(slotData);
  for (const PlannedOp& op : plan) counter.recv(0, op.bytes);
  return counter.recvSteps();
}

void fillPattern(uint64_t seed, int who, char* out, size_t bytes) {
  const uint64_t base = mix64(seed + static_cast<uint64_t>(who) * 0x51ed2701u);
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    const uint64_t w = mix64(base + i);
    std::memcpy(out + i, &w, 8);
  }
  const uint64_t w = mix64(base + i);
  std::memcpy(out + i, &w, bytes - i);
}

std::string runThreads(const std::vector<std::function<std::string()>>& bodies, std::atomic<bool>* abort) {
  std::vector<std::string> errors(bodies.size());
  std::vector<std::thread> threads;
  for (size_t t = 0; t < bodies.size(); ++t) {
    threads.emplace_back([&, t] {
      errors[t] = bodies[t]();
      if (!errors[t].empty()) abort->store(true);
    });
  }
  for (std::thread& th : threads) th.join();
  std::string all;
  for (size_t t = 0; t < errors.size(); ++t)
    if (!errors[t].empty()) all += "thread " + std::to_string(t) + ": " + errors[t] + "\n";
  return all;
}

std::string compareBytes(const char* what, const char* got, const char* want, size_t bytes) {
  if (std::memcmp(got, want, bytes) == 0) return "";
  size_t i = 0;
  while (got[i] == want[i]) ++i;
  size_t bad = 0;
  for (size_t j = i; j < bytes; ++j) bad += got[j] != want[j];
  char buf[200];
  std::snprintf(buf, sizeof buf, "%s: byte %zu of %zu is 0x%02x, expected 0x%02x (%zu bytes wrong)", what, i, bytes,
                static_cast<unsigned char>(got[i]), static_cast<unsigned char>(want[i]), bad);
  return buf;
}

host::WaitContext stressWait(int spinCount, const std::atomic<bool>* abort) {
  host::WaitContext w;
  w.spinCount = spinCount;
  w.timeoutNs = 60'000'000'000;
  w.abortFlag = abort;
  return w;
}

}  // namespace tutti::stress
