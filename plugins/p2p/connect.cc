#include "connect.h"

#include <sanitizer/asan_interface.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

namespace tutti::p2p {

ncclDebugLogger_t gLogger = nullptr;

namespace {

constexpr uint64_t kInfoMagic = 0x7032702d686f7374ull;  // "p2p-host"

// The receiver's memory for one connection. Shared by both ends (same process); the last end to be freed
// releases it, so neither end can touch freed memory whatever order the ranks tear down in.
struct Fifo {
  std::atomic<int> refs{1};
  tuttiConnCtrl_t* ctrl = nullptr;
  void* buffs[TUTTI_NUM_PROTOCOLS] = {};
  size_t sizes[TUTTI_NUM_PROTOCOLS] = {};
  // Device backends: the buffers are the core's device memory (the kernels of both ranks reach it directly,
  // as NCCL's P2P transport does with cudaMalloc'd FIFOs); the control block stays in host memory, where the
  // host's waiters and proxies read it.
  const tuttiDeviceMem_t* devMem = nullptr;
};

struct Info {
  uint64_t magic;
  int pid;
  Fifo* fifo;
};
static_assert(sizeof(Info) <= TUTTI_CONNECT_INFO_BYTES, "connect info too large");

struct End {
  bool recv = false;
  Fifo* fifo = nullptr;  // owned reference (recv: from setup; send: from connect)
};

constexpr size_t kPage = 4096;
constexpr size_t pageRounded(size_t bytes) { return (bytes + kPage - 1) & ~(kPage - 1); }

// A host FIFO buffer of `bytes`: fresh anonymous pages, which read as zero until written. LL / LL128 readers trust
// a line whose flag matches the step, and steps restart at 0 on every connection, so a buffer must never hold an
// earlier connection's lines; fresh pages never do. They fault in as calls reach them, so a communicator costs
// only the memory its calls use: 8 ranks as threads, one matrix test, kept 520 MiB resident (0.5 s of page zeroing)
// with every buffer written at setup, 250 MiB with LL and Simple prefaulted (as the shm plugin does for processes),
// 12 MiB this way. A benchmark's warm-up calls reach the pages its timed calls use. The page after the buffer is
// inaccessible: an overrun faults at once.
void* mapBuffer(size_t bytes) {
  const size_t len = pageRounded(bytes);
  void* p = mmap(nullptr, len + kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  if (mprotect(static_cast<char*>(p) + len, kPage, PROT_NONE) != 0) {
    munmap(p, len + kPage);
    return nullptr;
  }
  // Fresh memory, whatever AddressSanitizer's shadow remembers of the range (see the shm plugin).
  ASAN_UNPOISON_MEMORY_REGION(p, len);
  return p;
}

void unmapBuffer(void* p, size_t bytes) { munmap(p, pageRounded(bytes) + kPage); }

void releaseFifo(Fifo* f) {
  if (!f || f->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  for (int p = 0; p < TUTTI_NUM_PROTOCOLS; ++p) {
    if (!f->buffs[p]) continue;
    if (f->devMem) f->devMem->free(f->buffs[p]);
    else unmapBuffer(f->buffs[p], f->sizes[p]);
  }
  std::free(f->ctrl);
  delete f;
}

void fillConnector(const Fifo* f, tuttiConnector_t* conn) {
  std::memset(conn, 0, sizeof *conn);
  for (int p = 0; p < TUTTI_NUM_PROTOCOLS; ++p) {
    conn->buffs[p] = f->buffs[p];
    conn->buffSizes[p] = f->sizes[p];
  }
  conn->ctrl = f->ctrl;
  conn->shared = 0;
  // Plain coherent host memory: a reader that acquires the flag sees the data written before it.
  conn->flags = TUTTI_CONN_LL128_SAFE;
}

}  // namespace

ncclResult_t recvSetup(const tuttiConnectRequest_t* req, const tuttiPeerInfo_t* self, void* info, void** res) {
  auto* fifo = new (std::nothrow) Fifo();
  auto* end = new (std::nothrow) End();
  if (!fifo || !end) {
    delete fifo;
    delete end;
    return ncclSystemError;
  }
  // A page of its own: device backends register the control block's pages with the runtime, and a registered
  // page must hold nothing of the application's (a cudaMemcpy of a buffer that starts in it and runs past it
  // fails). aligned_alloc wants a size that is a multiple of the alignment (C11; ASan enforces it).
  constexpr size_t kCtrlBytes = pageRounded(sizeof(tuttiConnCtrl_t));
  fifo->ctrl = static_cast<tuttiConnCtrl_t*>(std::aligned_alloc(kPage, kCtrlBytes));
  bool ok = fifo->ctrl != nullptr;
  if (ok) std::memset(fifo->ctrl, 0, sizeof(tuttiConnCtrl_t));
  fifo->devMem = req->devMem;
  for (int p = 0; ok && p < TUTTI_NUM_PROTOCOLS; ++p) {
    size_t bytes = req->buffSizes[p];
    if (bytes == 0) continue;
    fifo->sizes[p] = bytes;
    if (fifo->devMem) {  // zeroed by the core
      ok = fifo->devMem->alloc(&fifo->buffs[p], pageRounded(bytes)) == ncclSuccess;
      continue;
    }
    fifo->buffs[p] = mapBuffer(bytes);
    ok = fifo->buffs[p] != nullptr;
  }
  if (!ok) {
    if (gLogger)
      gLogger(NCCL_LOG_WARN, NCCL_P2P, __FILE__, __LINE__, "p2p: cannot allocate %zu bytes of FIFO for rank %d",
              req->buffSizes[TUTTI_PROTO_SIMPLE], req->peer);
    releaseFifo(fifo);
    delete end;
    return ncclSystemError;
  }
  Info i{kInfoMagic, self->pid, fifo};
  std::memcpy(info, &i, sizeof i);
  end->recv = true;
  end->fifo = fifo;
  *res = end;
  return ncclSuccess;
}

ncclResult_t sendSetup(const tuttiConnectRequest_t*, const tuttiPeerInfo_t*, void*, void** res) {
  auto* end = new (std::nothrow) End();
  if (!end) return ncclSystemError;
  *res = end;
  return ncclSuccess;
}

ncclResult_t recvConnect(void* res, const void*, tuttiConnector_t* conn) {
  fillConnector(static_cast<End*>(res)->fifo, conn);
  return ncclSuccess;
}

ncclResult_t sendConnect(void* res, const void* peerInfo, tuttiConnector_t* conn) {
  Info i;
  std::memcpy(&i, peerInfo, sizeof i);
  // A pointer is only meaningful in the process that made it: refuse anything else.
  if (i.magic != kInfoMagic || i.pid != getpid() || i.fifo == nullptr) {
    if (gLogger)
      gLogger(NCCL_LOG_WARN, NCCL_P2P, __FILE__, __LINE__,
              "p2p: connect info is not from this process (magic %llx, pid %d)",
              static_cast<unsigned long long>(i.magic), i.pid);
    return ncclInternalError;
  }
  auto* end = static_cast<End*>(res);
  i.fifo->refs.fetch_add(1, std::memory_order_relaxed);
  end->fifo = i.fifo;
  fillConnector(i.fifo, conn);
  return ncclSuccess;
}

ncclResult_t freeEnd(void* res) {
  auto* end = static_cast<End*>(res);
  if (!end) return ncclSuccess;
  releaseFifo(end->fifo);
  delete end;
  return ncclSuccess;
}

}  // namespace tutti::p2p
