// The sim runtime (device/runtime.h): a GPU's runtime on the CPU. Streams and events are host streams
// (device/host/stream.h), device memory is host memory, kernels run on the SIMT emulator.
//
// Device allocations are memfd-backed shared mappings, so one can be exported to another process: the
// handle carries the memfd's number and the exporter's pid, and the importer takes its own copy of the
// descriptor (pidfd_getfd, or /proc/<pid>/fd) and maps the same pages. The null stream is the legacy
// default stream of a CPU: work given to it runs at once on the calling thread.
#include "device/runtime.h"

#include "device/peer_fd.h"

#include "device/host/stream.h"
#include "plugin/params.h"
#include "util/check.h"

#ifdef TUTTI_HAVE_SIM
#include "device/sim/kernels.h"
#include "device/simt/emulator.h"
#endif

#include <fcntl.h>
#include <sanitizer/asan_interface.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace tutti::rt {

const char* memKindName(MemKind k) {
  switch (k) {
    case MemKind::Host: return "host memory";
    case MemKind::PinnedHost: return "pinned host memory";
    case MemKind::Device: return "device memory";
    case MemKind::Managed: return "managed memory";
    default: return "unknown memory";
  }
}

namespace {

// A new mapping is fresh memory, whatever AddressSanitizer remembers of the range: in a process forked
// from a multi-threaded parent, the C library unmaps the stacks of the threads that did not come along,
// and ASan's shadow still marks their frames' redzones, so the first write to a mapping placed there was
// reported (and the report itself aborted). No-op without ASan.
void* freshMapping(void* p, size_t len) {
  if (p != MAP_FAILED) ASAN_UNPOISON_MEMORY_REGION(p, len);
  return p;
}

using host::HostStream;
using host::StreamEvent;

constexpr int32_t kExportMemfd = 1;

struct Region {
  size_t bytes;
  MemKind kind;
  int fd;        // memfd of a device allocation, else -1
  bool mapped;   // unmap (device allocation, import) rather than free
};

class SimRuntime final : public Runtime {
 public:
  const char* name() const override { return "sim"; }

  bool usable(std::string* why) override {
#ifdef TUTTI_HAVE_SIM
    (void)why;
    return true;
#else
    *why = "this build has no sim backend (configured with TUTTI_WITH_SIM=OFF)";
    return false;
#endif
  }
  ncclResult_t deviceCount(int* n) override {
    *n = 1;
    return ncclSuccess;
  }
  ncclResult_t currentDevice(int* dev) override {
    *dev = 0;
    return ncclSuccess;
  }
  ncclResult_t setDevice(int dev) override {
    if (dev != 0) TUTTI_FAIL(ncclInvalidArgument, "sim runtime: device {} does not exist (the CPU is device 0)", dev);
    return ncclSuccess;
  }
  ncclResult_t deviceArch(int, int* arch) override {
    *arch = static_cast<int>(paramInt("TUTTI_SIM_ARCH"));
    return ncclSuccess;
  }
  ncclResult_t deviceName(int, std::string* name) override {
    *name = fmt::format("Tutti sim (sm_{}, CPU)", paramInt("TUTTI_SIM_ARCH"));
    return ncclSuccess;
  }

  ncclResult_t alloc(void** ptr, size_t bytes, bool) override {
    const size_t len = bytes ? bytes : 1;
    const int fd = memfd_create("tutti-sim-device", MFD_CLOEXEC);
    if (fd < 0) TUTTI_FAIL(ncclSystemError, "sim runtime: memfd_create: {}", strerror(errno));
    if (ftruncate(fd, static_cast<off_t>(len)) != 0) {
      const int err = errno;
      close(fd);
      TUTTI_FAIL(ncclSystemError, "sim runtime: cannot size a {}-byte device allocation: {}", bytes, strerror(err));
    }
    void* p = freshMapping(mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), len);
    if (p == MAP_FAILED) {
      const int err = errno;
      close(fd);
      TUTTI_FAIL(ncclSystemError, "sim runtime: cannot map a {}-byte device allocation: {}", bytes, strerror(err));
    }
    add(p, {len, MemKind::Device, fd, true});
    *ptr = p;
    return ncclSuccess;
  }
  bool allocIsZeroed() const override { return true; }  // a new memfd's pages
  ncclResult_t free(void* ptr) override { return release(ptr, MemKind::Device, "free"); }
  ncclResult_t hostAlloc(void** ptr, size_t bytes) override {
    void* p = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096 + (bytes == 0 ? 4096 : 0));
    if (!p) TUTTI_FAIL(ncclSystemError, "sim runtime: cannot allocate {} bytes of pinned host memory", bytes);
    add(p, {bytes, MemKind::PinnedHost, -1, false});
    *ptr = p;
    return ncclSuccess;
  }
  ncclResult_t hostFree(void* ptr) override { return release(ptr, MemKind::PinnedHost, "hostFree"); }
  ncclResult_t hostRegister(void* ptr, size_t bytes) override {
    if (!ptr || bytes == 0) TUTTI_FAIL(ncclInvalidArgument, "sim runtime: hostRegister of an empty range");
    std::lock_guard<std::mutex> lock(mutex_);
    if (find(ptr)) TUTTI_FAIL(ncclInvalidArgument, "sim runtime: {} is already registered", ptr);
    regions_[reinterpret_cast<uintptr_t>(ptr)] = {bytes, MemKind::PinnedHost, -2, false};  // -2: registered
    return ncclSuccess;
  }
  ncclResult_t hostUnregister(void* ptr) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = regions_.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == regions_.end() || it->second.fd != -2)
      TUTTI_FAIL(ncclInvalidArgument, "sim runtime: {} is not registered host memory", ptr);
    regions_.erase(it);
    return ncclSuccess;
  }
  ncclResult_t pointerKind(const void* ptr, MemKind* kind) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const Region* r = find(ptr);
    *kind = r ? r->kind : MemKind::Host;  // the CPU reaches any other address: ordinary host memory
    return ncclSuccess;
  }
  ncclResult_t exportMem(void* ptr, MemExport* out) override {
    std::lock_guard<std::mutex> lock(mutex_);
    uintptr_t base = 0;
    const Region* r = find(ptr, &base);
    if (!r || r->fd < 0)
      TUTTI_FAIL(ncclInvalidArgument, "sim runtime: {} is not device memory of this process (only device allocations "
                 "can be exported)", ptr);
    *out = MemExport{};
    out->kind = kExportMemfd;
    out->fd = r->fd;
    out->pid = getpid();
    out->pidNs = pidNamespaceId();
    out->bytes = r->bytes;
    out->offset = reinterpret_cast<uintptr_t>(ptr) - base;
    return ncclSuccess;
  }
  // The memfd behind a device allocation stands in for a GPU's DMA-BUF: same memory, another mapping.
  ncclResult_t dmabufFd(void* ptr, size_t bytes, int* fd, uint64_t* offset) override {
    std::lock_guard<std::mutex> lock(mutex_);
    uintptr_t base = 0;
    const Region* r = find(ptr, &base);
    if (!r || r->fd < 0 || reinterpret_cast<uintptr_t>(ptr) + bytes > base + r->bytes)
      TUTTI_FAIL(ncclInvalidArgument, "sim runtime: dmabufFd: {} + {} bytes is not inside a device allocation of this "
                 "process", ptr, bytes);
    *fd = fcntl(r->fd, F_DUPFD_CLOEXEC, 0);
    if (*fd < 0) TUTTI_FAIL(ncclSystemError, "sim runtime: dmabufFd: dup: {}", std::strerror(errno));
    *offset = reinterpret_cast<uintptr_t>(ptr) - base;
    return ncclSuccess;
  }
  ncclResult_t importMem(const MemExport& h, void** ptr) override {
    if (h.kind != kExportMemfd)
      TUTTI_FAIL(ncclInvalidArgument, "sim runtime: the handle (kind {}) was not exported by the sim runtime", h.kind);
    if (h.offset >= h.bytes)
      TUTTI_FAIL(ncclInvalidArgument, "sim runtime: handle offset {} is outside its {}-byte allocation", h.offset, h.bytes);
    std::string error;
    const int fd = borrowPeerFd(h.pid, h.pidNs, h.fd, &error);
    if (fd < 0)
      TUTTI_FAIL(ncclSystemError, "sim runtime: cannot import device memory of process {} (fd {}): {}", h.pid, h.fd,
                 error);
    void* p = freshMapping(mmap(nullptr, h.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), h.bytes);
    const int err = errno;
    close(fd);  // the mapping keeps the pages
    if (p == MAP_FAILED)
      TUTTI_FAIL(ncclSystemError, "sim runtime: cannot map {} bytes of process {}'s device memory: {}", h.bytes, h.pid,
                 strerror(err));
    add(p, {h.bytes, MemKind::Device, -3, true});  // -3: imported
    *ptr = static_cast<char*>(p) + h.offset;
    return ncclSuccess;
  }
  ncclResult_t closeImport(void* ptr) override {
    void* base = nullptr;
    size_t bytes = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      uintptr_t b = 0;
      const Region* r = find(ptr, &b);
      if (!r || r->fd != -3) TUTTI_FAIL(ncclInvalidArgument, "sim runtime: {} is not imported memory", ptr);
      base = reinterpret_cast<void*>(b);
      bytes = r->bytes;
      regions_.erase(b);
    }
    munmap(base, bytes);
    return ncclSuccess;
  }
  ncclResult_t memcpyAsync(void* dst, const void* src, size_t bytes, Stream s) override {
    return run(s, "memcpyAsync", [dst, src, bytes] {
      std::memcpy(dst, src, bytes);
      return ncclSuccess;
    });
  }

  ncclResult_t memset(void* ptr, int value, size_t bytes) override {
    std::memset(ptr, value, bytes);
    return ncclSuccess;
  }

  ncclResult_t streamCreate(Stream* s) override {
    *s = (new HostStream())->handle();
    return ncclSuccess;
  }
  ncclResult_t streamDestroy(Stream s) override {
    HostStream* hs = nullptr;
    TUTTI_CHECK(stream(s, "streamDestroy", &hs));
    delete hs;
    return ncclSuccess;
  }
  ncclResult_t streamSynchronize(Stream s) override {
    if (!s) return ncclSuccess;
    HostStream* hs = nullptr;
    TUTTI_CHECK(stream(s, "streamSynchronize", &hs));
    return hs->synchronize();
  }
  ncclResult_t streamQuery(Stream s) override {
    if (!s) return ncclSuccess;
    HostStream* hs = nullptr;
    TUTTI_CHECK(stream(s, "streamQuery", &hs));
    return hs->query();
  }
  ncclResult_t eventCreate(Event* e) override {
    *e = reinterpret_cast<Event>(new StreamEvent());
    return ncclSuccess;
  }
  ncclResult_t eventDestroy(Event e) override {
    StreamEvent* ev = nullptr;
    TUTTI_CHECK(event(e, "eventDestroy", &ev));
    delete ev;
    return ncclSuccess;
  }
  ncclResult_t eventRecord(Event e, Stream s) override {
    StreamEvent* ev = nullptr;
    TUTTI_CHECK(event(e, "eventRecord", &ev));
    if (!s) return ncclSuccess;  // the null stream has run everything given to it already
    HostStream* hs = nullptr;
    TUTTI_CHECK(stream(s, "eventRecord", &hs));
    return hs->recordEvent(ev);
  }
  ncclResult_t streamWaitEvent(Stream s, Event e) override {
    StreamEvent* ev = nullptr;
    TUTTI_CHECK(event(e, "streamWaitEvent", &ev));
    if (!s) return ev->synchronize();
    HostStream* hs = nullptr;
    TUTTI_CHECK(stream(s, "streamWaitEvent", &hs));
    return hs->waitEvent(ev);
  }
  ncclResult_t eventRecordExternal(Event e, Stream s) override {
    StreamEvent* ev = nullptr;
    TUTTI_CHECK(event(e, "eventRecordExternal", &ev));
    if (!s) return ncclSuccess;
    HostStream* hs = nullptr;
    TUTTI_CHECK(stream(s, "eventRecordExternal", &hs));
    return hs->recordEventExternal(ev);
  }
  ncclResult_t streamWaitEventExternal(Stream s, Event e) override {
    StreamEvent* ev = nullptr;
    TUTTI_CHECK(event(e, "streamWaitEventExternal", &ev));
    if (!s) {
      ev->synchronize();  // ordering only
      return ncclSuccess;
    }
    HostStream* hs = nullptr;
    TUTTI_CHECK(stream(s, "streamWaitEventExternal", &hs));
    return hs->waitEventExternal(ev);
  }
  ncclResult_t eventQuery(Event e) override {
    StreamEvent* ev = nullptr;
    TUTTI_CHECK(event(e, "eventQuery", &ev));
    return ev->query();
  }
  ncclResult_t eventSynchronize(Event e) override {
    StreamEvent* ev = nullptr;
    TUTTI_CHECK(event(e, "eventSynchronize", &ev));
    return ev->synchronize();
  }
  ncclResult_t launchHostFunc(Stream s, HostFn fn, void* arg) override {
    return run(s, "launchHostFunc", [fn, arg] {
      fn(arg);
      return ncclSuccess;
    });
  }
  ncclResult_t launchKernel(const KernelLaunch& k, Stream s) override {
#ifdef TUTTI_HAVE_SIM
    if (!k.fn || k.grid < 1 || k.block < 32 || k.block % 32 != 0)
      TUTTI_FAIL(ncclInvalidArgument, "sim runtime: bad kernel launch (grid {}, block {})", k.grid, k.block);
    simt::emu::LaunchParams params;
    params.grid = k.grid;
    params.block = k.block;
    params.sharedBytes = k.sharedBytes;
    params.seed = static_cast<uint64_t>(paramInt("TUTTI_SIM_SEED"));
    // The argument is copied now, as CUDA copies kernel parameters at the launch (or the capture).
    auto args = std::make_shared<std::vector<char>>(static_cast<const char*>(k.args),
                                                    static_cast<const char*>(k.args) + k.argBytes);
    auto fn = reinterpret_cast<sim::SimKernelFn>(const_cast<void*>(k.fn));
    return run(s, "launchKernel", [params, args, fn]() -> ncclResult_t {
      std::string error;
      if (!simt::emu::launch(params, fn, args->data(), &error))
        TUTTI_FAIL(ncclInternalError, "sim kernel failed: {}", error);
      return ncclSuccess;
    });
#else
    (void)k;
    (void)s;
    TUTTI_FAIL(ncclInvalidUsage, "this build has no sim backend (configured with TUTTI_WITH_SIM=OFF)");
#endif
  }
  ncclResult_t loadKernel(const void*, size_t) override { return ncclSuccess; }  // the emulator's are plain functions

  ncclResult_t captureStatus(Stream s, Capture* status, uint64_t* id) override {
    *status = Capture::None;
    *id = 0;
    if (!s) return ncclSuccess;
    HostStream* hs = nullptr;
    TUTTI_CHECK(stream(s, "captureStatus", &hs));
    if (hs->capturing(id)) *status = Capture::Active;
    return ncclSuccess;
  }
  ncclResult_t keepWithCapture(Stream s, void* obj, HostFn destroy) override {
    HostStream* hs = nullptr;
    TUTTI_CHECK(stream(s, "keepWithCapture", &hs));
    return hs->keepWithCapture(obj, destroy);
  }
  void failCurrentWork(ncclResult_t res) override { HostStream::failCurrent(res); }

 private:
  static ncclResult_t stream(Stream s, const char* call, HostStream** out) {
    *out = HostStream::fromHandle(s);
    if (!*out)
      TUTTI_FAIL(ncclInvalidArgument, "sim runtime: {}: {} is not a live stream (tuttiStreamCreate)", call,
                 static_cast<void*>(s));
    return ncclSuccess;
  }
  static ncclResult_t event(Event e, const char* call, StreamEvent** out) {
    *out = StreamEvent::fromHandle(e);
    if (!*out)
      TUTTI_FAIL(ncclInvalidArgument, "sim runtime: {}: {} is not a live event (tuttiEventCreate)", call,
                 static_cast<void*>(e));
    return ncclSuccess;
  }
  // Runs `work` in stream order: queued on a stream, at once on the null stream.
  static ncclResult_t run(Stream s, const char* call, host::WorkItem work) {
    if (!s) return work();
    HostStream* hs = nullptr;
    TUTTI_CHECK(stream(s, call, &hs));
    hs->enqueue(std::move(work));
    return ncclSuccess;
  }

  void add(void* p, Region r) {
    std::lock_guard<std::mutex> lock(mutex_);
    regions_[reinterpret_cast<uintptr_t>(p)] = r;
  }
  // The region containing p (caller holds mutex_).
  const Region* find(const void* p, uintptr_t* base = nullptr) {
    const auto a = reinterpret_cast<uintptr_t>(p);
    auto it = regions_.upper_bound(a);
    if (it == regions_.begin()) return nullptr;
    --it;
    if (a >= it->first + std::max<size_t>(it->second.bytes, 1)) return nullptr;
    if (base) *base = it->first;
    return &it->second;
  }
  ncclResult_t release(void* ptr, MemKind kind, const char* call) {
    Region r{};
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = regions_.find(reinterpret_cast<uintptr_t>(ptr));
      if (it == regions_.end() || it->second.kind != kind || it->second.fd == -2 || it->second.fd == -3)
        TUTTI_FAIL(ncclInvalidArgument, "sim runtime: {}: {} is not {} allocated here", call, ptr, memKindName(kind));
      r = it->second;
      regions_.erase(it);
    }
    if (r.mapped) {
      munmap(ptr, r.bytes);
      if (r.fd >= 0) close(r.fd);
    } else {
      std::free(ptr);
    }
    return ncclSuccess;
  }

  std::mutex mutex_;
  std::map<uintptr_t, Region> regions_;  // by start address
};

}  // namespace

Runtime* simRuntime() {
  static auto* r = new SimRuntime();
  return r;
}

}  // namespace tutti::rt
