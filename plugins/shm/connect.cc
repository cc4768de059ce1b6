#include "connect.h"

#include <fcntl.h>
#include <sanitizer/asan_interface.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <random>

namespace tutti::shm {

ncclDebugLogger_t gLogger = nullptr;

namespace {

// A new mapping is fresh memory whatever AddressSanitizer's shadow remembers of the range (in a child forked
// from a multi-threaded parent it may still mark the redzones of a parent thread's unmapped stack there).
void* freshMapping(void* p, size_t len) {
  if (p != MAP_FAILED) ASAN_UNPOISON_MEMORY_REGION(p, len);
  return p;
}

constexpr uint64_t kInfoMagic = 0x7475747469736d31ull;  // "tuttism1"
constexpr size_t kCtrlBytes = 4096;                     // control block page; buffers start page-aligned
// Simple slots start this far into a page, not on a page boundary (see protoSkew).
constexpr size_t kSimpleSkew = 3072;

#define SHM_WARN(...) \
  do { if (gLogger) gLogger(NCCL_LOG_WARN, NCCL_SHM, __FILE__, __LINE__, __VA_ARGS__); } while (0)

struct Info {
  uint64_t magic;
  uint64_t bytes;                           // of the shared segment
  uint64_t buffSizes[TUTTI_NUM_PROTOCOLS];
  char name[64];
  uint64_t devBytes;                        // > 0: the FIFOs are device memory, `dev` its handle
  unsigned char dev[TUTTI_DEVMEM_HANDLE_BYTES];
};
static_assert(sizeof(Info) <= TUTTI_CONNECT_INFO_BYTES, "connect info too large");

struct End {
  bool recv = false;
  bool unlinked = false;
  char name[64] = {};
  void* base = nullptr;
  size_t bytes = 0;
  size_t buffSizes[TUTTI_NUM_PROTOCOLS] = {};
  // Device backends: the FIFOs live in the core's device memory (the receiver allocates and exports it, the
  // sender maps it); the segment holds the control block only.
  const tuttiDeviceMem_t* devMem = nullptr;
  void* dev = nullptr;
  size_t devBytes = 0;
};

size_t pageRound(size_t n) { return (n + 4095) & ~size_t{4095}; }

// Where protocol `proto`'s buffer starts inside its pages, and how many bytes of pages it takes. Each
// step's data starts at the beginning of its slot; with page-aligned slots, a chunk of a page-multiple size
// (every chunk of a power-of-two AllReduce) fills whole pages, and such steps measured markedly slower
// than their neighbours: ring AllReduce of 16 KiB over shm, forced Simple, 4 ranks 17.9 us against 13.1 us
// at 16448 B. Starting the Simple slots 1 KiB before a page boundary removes the step (same call 14.1 us;
// plugins/shm/README.md has the figures). LL and LL128 lines stay page-aligned.
size_t protoSkew(int proto) { return proto == TUTTI_PROTO_SIMPLE ? kSimpleSkew : 0; }
size_t protoPages(int proto, size_t bytes) { return bytes ? pageRound(bytes + protoSkew(proto)) : 0; }

void fill(const End* e, tuttiConnector_t* conn) {
  std::memset(conn, 0, sizeof *conn);
  char* p = e->dev ? static_cast<char*>(e->dev) : static_cast<char*>(e->base) + kCtrlBytes;
  for (int i = 0; i < TUTTI_NUM_PROTOCOLS; ++i) {
    conn->buffSizes[i] = e->buffSizes[i];
    conn->buffs[i] = e->buffSizes[i] ? p + protoSkew(i) : nullptr;
    p += protoPages(i, e->buffSizes[i]);
  }
  conn->ctrl = static_cast<tuttiConnCtrl_t*>(e->base);
  conn->shared = 1;
  // Coherent shared memory on one host: a flag acquired after its data was released is never early.
  conn->flags = TUTTI_CONN_LL128_SAFE;
}

// Faults in the pages of the control block and the LL and Simple FIFOs now (on each end's mapping), rather than
// during the first calls that reach them: a 4 MiB Simple FIFO is 1024 faults (2 ranks, AllGather 1 MiB, 20 calls
// after 3 warm-ups: ~300 us each -> ~60 us). LL128, which the host backend's tuner seldom picks, is left to fault
// in on first use. Best effort: a kernel without MADV_POPULATE_WRITE (before 5.14) faults as it goes.
void prefault(const End* e) {
#ifdef MADV_POPULATE_WRITE
  if (e->dev || !e->base) return;  // the FIFOs are device memory
  char* base = static_cast<char*>(e->base);
  const size_t ll = protoPages(TUTTI_PROTO_LL, e->buffSizes[TUTTI_PROTO_LL]);
  const size_t ll128 = protoPages(TUTTI_PROTO_LL128, e->buffSizes[TUTTI_PROTO_LL128]);
  const size_t simple = protoPages(TUTTI_PROTO_SIMPLE, e->buffSizes[TUTTI_PROTO_SIMPLE]);
  (void)madvise(base, kCtrlBytes + ll, MADV_POPULATE_WRITE);
  if (simple) (void)madvise(base + kCtrlBytes + ll + ll128, simple, MADV_POPULATE_WRITE);
#else
  (void)e;
#endif
}

}  // namespace

ncclResult_t recvSetup(const tuttiConnectRequest_t* req, const tuttiPeerInfo_t* self, void* info, void** res) {
  static_assert(sizeof(tuttiConnCtrl_t) <= kCtrlBytes, "control block does not fit its page");
  auto* e = new (std::nothrow) End();
  if (!e) return ncclSystemError;
  e->recv = true;
  e->bytes = kCtrlBytes;
  e->devMem = req->devMem;
  size_t fifoBytes = 0;
  for (int i = 0; i < TUTTI_NUM_PROTOCOLS; ++i) {
    e->buffSizes[i] = req->buffSizes[i];
    fifoBytes += protoPages(i, req->buffSizes[i]);
  }
  if (e->devMem) {
    if (e->devMem->alloc(&e->dev, fifoBytes) != ncclSuccess) {
      SHM_WARN("shm: cannot allocate %zu bytes of device memory for the FIFOs", fifoBytes);
      delete e;
      return ncclSystemError;
    }
    e->devBytes = fifoBytes;
  } else {
    e->bytes += fifoBytes;
  }
  static std::atomic<unsigned> counter{0};
  std::random_device rd;
  std::snprintf(e->name, sizeof e->name, "/tutti-shm-%d-%u-%08x-r%dc%dp%d", self->pid, counter.fetch_add(1), rd(),
                self->rank, req->channel, req->peer);
  int fd = shm_open(e->name, O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) {
    SHM_WARN("shm: shm_open(%s) failed: %s", e->name, std::strerror(errno));
    e->name[0] = '\0';  // not ours to unlink
    freeEnd(e);
    return ncclSystemError;
  }
  if (ftruncate(fd, static_cast<off_t>(e->bytes)) != 0) {
    SHM_WARN("shm: cannot size %s to %zu bytes: %s (is /dev/shm large enough?)", e->name, e->bytes,
             std::strerror(errno));
    close(fd);
    freeEnd(e);
    return ncclSystemError;
  }
  e->base = freshMapping(mmap(nullptr, e->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), e->bytes);
  close(fd);
  if (e->base == MAP_FAILED) {
    SHM_WARN("shm: mmap of %s failed: %s", e->name, std::strerror(errno));
    e->base = nullptr;
    freeEnd(e);
    return ncclSystemError;
  }
  prefault(e);
  Info i{};
  if (e->dev) {
    i.devBytes = e->devBytes;
    if (e->devMem->exportHandle(e->dev, i.dev) != ncclSuccess) {
      SHM_WARN("shm: cannot export the FIFOs' device memory");
      freeEnd(e);
      return ncclSystemError;
    }
  }
  i.magic = kInfoMagic;
  i.bytes = e->bytes;
  for (int p = 0; p < TUTTI_NUM_PROTOCOLS; ++p) i.buffSizes[p] = e->buffSizes[p];
  std::memcpy(i.name, e->name, sizeof i.name);
  std::memcpy(info, &i, sizeof i);
  *res = e;
  return ncclSuccess;
}

ncclResult_t sendSetup(const tuttiConnectRequest_t* req, void*, void** res) {
  auto* e = new (std::nothrow) End();
  if (!e) return ncclSystemError;
  e->devMem = req->devMem;
  *res = e;
  return ncclSuccess;
}

ncclResult_t recvConnect(void* res, const void*, tuttiConnector_t* conn) {
  fill(static_cast<End*>(res), conn);
  return ncclSuccess;
}

ncclResult_t sendConnect(void* res, const void* peerInfo, tuttiConnector_t* conn) {
  auto* e = static_cast<End*>(res);
  Info i;
  std::memcpy(&i, peerInfo, sizeof i);
  i.name[sizeof i.name - 1] = '\0';
  size_t fifoBytes = 0;
  for (int p = 0; p < TUTTI_NUM_PROTOCOLS; ++p) fifoBytes += protoPages(p, i.buffSizes[p]);
  const size_t expect = kCtrlBytes + (i.devBytes ? 0 : fifoBytes);
  if (i.magic != kInfoMagic || i.bytes != expect || std::strncmp(i.name, "/tutti-shm-", 11) != 0 ||
      (i.devBytes && (i.devBytes != fifoBytes || !e->devMem))) {
    SHM_WARN("shm: malformed connect info (magic %llx, %llu bytes)", static_cast<unsigned long long>(i.magic),
             static_cast<unsigned long long>(i.bytes));
    return ncclInternalError;
  }
  int fd = shm_open(i.name, O_RDWR, 0600);
  if (fd < 0) {
    SHM_WARN("shm: cannot open %s: %s", i.name, std::strerror(errno));
    return ncclSystemError;
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < i.bytes) {
    SHM_WARN("shm: %s is smaller than announced (%llu bytes)", i.name, static_cast<unsigned long long>(i.bytes));
    close(fd);
    return ncclInternalError;
  }
  e->base = freshMapping(mmap(nullptr, i.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), i.bytes);
  close(fd);
  if (e->base == MAP_FAILED) {
    e->base = nullptr;
    SHM_WARN("shm: mmap of %s failed: %s", i.name, std::strerror(errno));
    return ncclSystemError;
  }
  if (i.devBytes && e->devMem->importHandle(i.dev, &e->dev) != ncclSuccess) {
    SHM_WARN("shm: cannot map the receiver's device memory (%s)", i.name);
    munmap(e->base, i.bytes);
    e->base = nullptr;
    return ncclSystemError;
  }
  // Both ends are mapped now: the name is no longer needed.
  shm_unlink(i.name);
  e->bytes = i.bytes;
  for (int p = 0; p < TUTTI_NUM_PROTOCOLS; ++p) e->buffSizes[p] = i.buffSizes[p];
  std::memcpy(e->name, i.name, sizeof e->name);
  e->unlinked = true;
  prefault(e);
  fill(e, conn);
  return ncclSuccess;
}

ncclResult_t freeEnd(void* res) {
  auto* e = static_cast<End*>(res);
  if (!e) return ncclSuccess;
  if (e->base) munmap(e->base, e->bytes);
  if (e->dev) {  // the receiver's allocation, or the sender's mapping of it
    if (e->recv) e->devMem->free(e->dev);
    else e->devMem->closeImport(e->dev);
  }
  // The sender normally unlinks; if it never connected, the receiver removes the name (ENOENT is fine).
  if (e->recv) shm_unlink(e->name);
  delete e;
  return ncclSuccess;
}

}  // namespace tutti::shm
