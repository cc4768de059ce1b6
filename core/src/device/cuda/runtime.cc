// The CUDA runtime (device/runtime.h). It uses the CUDA runtime API linked statically (cudart_static), which
// loads libcuda.so.1 only at the first CUDA call: on a machine without a driver libtutti still loads, and
// usable() says why this backend cannot run. What the runtime API lacks (cuMem allocations exported as POSIX
// fds) comes from driver entry points fetched at run time, so libcuda is never linked.
//
// Built without TUTTI_HAVE_CUDA_RUNTIME (no CUDA toolkit at configure time), every call fails saying so.
#include "device/runtime.h"

#include "device/peer_fd.h"

#include "util/check.h"

#ifdef TUTTI_HAVE_CUDA_RUNTIME
#include <cuda.h>  // types and enums only: the driver's functions come from cudaGetDriverEntryPointByVersion
#include <cuda_runtime.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <string_view>
#include <thread>
#include <utility>
#endif

namespace tutti::rt {
namespace {

#ifdef TUTTI_HAVE_CUDA_RUNTIME

// "cudaMalloc" of "cudaMalloc(&p, n)", "cuMemMap" of "d.cuMemMap(...)": the call a message names.
std::string_view callName(std::string_view call) {
  call = call.substr(0, call.find('('));
  return call.substr(call.rfind('.') + 1);
}

// ncclSuccess, or ncclUnhandledCudaError logged (at the caller's line) with the call and CUDA's words.
ncclResult_t cudaResult(cudaError_t e, std::string_view call, const char* file, int line) {
  if (e == cudaSuccess) return ncclSuccess;
  reportError(ncclUnhandledCudaError, file, line, fmt::format("cuda runtime: {} failed: {} ({})", callName(call),
                                                              cudaGetErrorName(e), cudaGetErrorString(e)));
  return ncclUnhandledCudaError;
}
#define TUTTI_CUDA(call) cudaResult((call), #call, __FILE__, __LINE__)
#define TUTTI_CUDA_NAMED(err, name) cudaResult((err), (name), __FILE__, __LINE__)
#define TUTTI_CUDA_TRY(call) TUTTI_CHECK(TUTTI_CUDA(call))

// The driver functions behind shareable allocations (cuMem with POSIX fds).
#define TUTTI_DRIVER_FNS(X)                                                                                 \
  X(cuGetErrorName) X(cuDeviceGet) X(cuDeviceGetAttribute) X(cuMemGetAllocationGranularity) X(cuMemCreate) \
  X(cuMemRelease) X(cuMemAddressReserve) X(cuMemAddressFree) X(cuMemMap) X(cuMemUnmap) X(cuMemSetAccess)  \
  X(cuMemExportToShareableHandle) X(cuMemImportFromShareableHandle)

struct Driver {
#define TUTTI_DRIVER_FIELD(fn) decltype(&::fn) fn = nullptr;
  TUTTI_DRIVER_FNS(TUTTI_DRIVER_FIELD)
#undef TUTTI_DRIVER_FIELD
  std::string error;  // why an entry point is missing; empty when all were found
};

// Fetched once, at first need.
const Driver& driver() {
  static Driver d;
  static std::once_flag once;
  std::call_once(once, [] {
    auto load = [](const char* symbol, void** fn) -> std::string {
      cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
      // 12000: the ABI of these declarations since CUDA 12 (the cuMem calls have not changed since 10.2).
      const cudaError_t e = cudaGetDriverEntryPointByVersion(symbol, fn, 12000, cudaEnableDefault, &found);
      if (e == cudaSuccess && found == cudaDriverEntryPointSuccess && *fn) return {};
      *fn = nullptr;
      cudaGetLastError();
      if (e != cudaSuccess)
        return fmt::format("cannot reach the driver's {}: {} ({})", symbol, cudaGetErrorName(e), cudaGetErrorString(e));
      return fmt::format("the NVIDIA driver has no {} (too old)", symbol);
    };
#define TUTTI_DRIVER_LOAD(fn) \
  if (d.error.empty()) d.error = load(#fn, reinterpret_cast<void**>(&d.fn));
    TUTTI_DRIVER_FNS(TUTTI_DRIVER_LOAD)
#undef TUTTI_DRIVER_LOAD
  });
  return d;
}

std::string cuErrorText(CUresult r) {
  const char* name = nullptr;
  if (driver().cuGetErrorName && driver().cuGetErrorName(r, &name) == CUDA_SUCCESS && name) return name;
  return fmt::format("CUresult {}", static_cast<int>(r));
}

ncclResult_t cuResult(CUresult r, std::string_view call, const char* file, int line) {
  if (r == CUDA_SUCCESS) return ncclSuccess;
  reportError(ncclUnhandledCudaError, file, line,
              fmt::format("cuda runtime: {} failed: {}", callName(call), cuErrorText(r)));
  return ncclUnhandledCudaError;
}
#define TUTTI_CU_TRY(call) TUTTI_CHECK(cuResult((call), #call, __FILE__, __LINE__))

// Maps the allocation `h` at a new address, read/write for device `dev`. `h` is released on failure.
ncclResult_t mapHandle(const Driver& d, CUmemGenericAllocationHandle h, size_t bytes, int dev, CUdeviceptr* va) {
  CUmemAccessDesc access = {};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = dev;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CUdeviceptr base = 0;
  const char* call = "cuMemAddressReserve";
  CUresult r = d.cuMemAddressReserve(&base, bytes, 0, 0, 0);
  if (r == CUDA_SUCCESS) {
    call = "cuMemMap";
    r = d.cuMemMap(base, bytes, 0, h, 0);
    if (r == CUDA_SUCCESS) {
      call = "cuMemSetAccess";
      r = d.cuMemSetAccess(base, bytes, &access, 1);
      if (r == CUDA_SUCCESS) {
        *va = base;
        return ncclSuccess;
      }
      d.cuMemUnmap(base, bytes);
    }
    d.cuMemAddressFree(base, bytes);
  }
  d.cuMemRelease(h);
  TUTTI_FAIL(ncclUnhandledCudaError, "cuda runtime: mapping {} bytes of device memory on GPU {}: {} failed: {}", bytes,
             dev, call, cuErrorText(r));
}

// Undoes mapHandle; the first failure is reported, every step is tried.
ncclResult_t unmapHandle(const Driver& d, CUdeviceptr va, size_t bytes, CUmemGenericAllocationHandle h) {
  const CUresult r[] = {d.cuMemUnmap(va, bytes), d.cuMemAddressFree(va, bytes), d.cuMemRelease(h)};
  const char* calls[] = {"cuMemUnmap", "cuMemAddressFree", "cuMemRelease"};
  for (int i = 0; i < 3; ++i)
    if (r[i] != CUDA_SUCCESS)
      TUTTI_FAIL(ncclUnhandledCudaError, "cuda runtime: unmapping {} bytes at {:#x}: {} failed: {}", bytes, va,
                 calls[i], cuErrorText(r[i]));
  return ncclSuccess;
}

// What keepWithCapture hands a graph. CUDA runs user-object destructors on a thread of its own where CUDA
// calls are forbidden, and `destroy` may free pinned memory: it runs on another thread.
struct Kept {
  void* obj;  // null: the graph never took it
  HostFn destroy;
};

void releaseKept(void* arg) {
  auto* k = static_cast<Kept*>(arg);
  if (!k->obj) {
    delete k;
    return;
  }
  try {
    std::thread([k] {
      k->destroy(k->obj);
      delete k;
    }).detach();
  } catch (...) {
    TUTTI_WARN("cuda runtime: no thread to release what a destroyed CUDA graph kept: it is leaked");
  }
}

constexpr int32_t kExportCuMemFd = 1;
constexpr int32_t kExportCudaIpc = 2;
static_assert(sizeof(cudaIpcMemHandle_t) <= sizeof(MemExport::opaque), "a CUDA IPC handle must fit MemExport");

enum class Region { Malloc, CuMem, ImportedCuMem, ImportedIpc };

struct Entry {
  Region what;
  size_t bytes;
  CUmemGenericAllocationHandle handle = 0;  // cuMem allocations and imports
  int fd = -1;                              // a cuMem allocation's exported POSIX fd, once exported
};

class CudaRuntime final : public Runtime {
 public:
  const char* name() const override { return "cuda"; }

  bool usable(std::string* why) override {
    std::call_once(probed_, [this] { unusable_ = probe(); });
    if (!unusable_.empty() && why) *why = unusable_;
    return unusable_.empty();
  }
  ncclResult_t deviceCount(int* n) override { return TUTTI_CUDA(cudaGetDeviceCount(n)); }
  ncclResult_t currentDevice(int* dev) override { return TUTTI_CUDA(cudaGetDevice(dev)); }
  ncclResult_t setDevice(int dev) override { return TUTTI_CUDA(cudaSetDevice(dev)); }
  ncclResult_t deviceArch(int dev, int* arch) override {
    int major = 0, minor = 0;
    TUTTI_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    TUTTI_CUDA_TRY(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    *arch = major * 10 + minor;
    return ncclSuccess;
  }
  ncclResult_t deviceName(int dev, std::string* name) override {
    cudaDeviceProp prop;
    TUTTI_CUDA_TRY(cudaGetDeviceProperties(&prop, dev));
    *name = prop.name;
    return ncclSuccess;
  }

  ncclResult_t alloc(void** ptr, size_t bytes, bool shareable) override {
    bool done = false;
    if (shareable) TUTTI_CHECK(allocCuMem(ptr, bytes, &done));
    if (done) return ncclSuccess;
    // Without cuMem, a plain allocation: exportMem hands it out as a CUDA IPC handle.
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e != cudaSuccess)
      TUTTI_FAIL(ncclUnhandledCudaError, "cuda runtime: cudaMalloc of {} bytes failed: {} ({})", bytes,
                 cudaGetErrorName(e), cudaGetErrorString(e));
    std::lock_guard<std::mutex> lock(mutex_);
    regions_[reinterpret_cast<uintptr_t>(p)] = {Region::Malloc, bytes ? bytes : 1};
    *ptr = p;
    return ncclSuccess;
  }
  ncclResult_t free(void* ptr) override { return drop(ptr, false); }
  ncclResult_t hostAlloc(void** ptr, size_t bytes) override {
    return TUTTI_CUDA(cudaHostAlloc(ptr, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
  }
  ncclResult_t hostFree(void* ptr) override { return TUTTI_CUDA(cudaFreeHost(ptr)); }
  ncclResult_t hostRegister(void* ptr, size_t bytes) override {
    return TUTTI_CUDA(cudaHostRegister(ptr, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable));
  }
  ncclResult_t hostUnregister(void* ptr) override { return TUTTI_CUDA(cudaHostUnregister(ptr)); }
  ncclResult_t pointerKind(const void* ptr, MemKind* kind) override {
    cudaPointerAttributes attr = {};
    *kind = MemKind::Unknown;
    if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
      cudaGetLastError();  // else the next CUDA call would report this failure
      return ncclSuccess;
    }
    switch (attr.type) {
      case cudaMemoryTypeDevice: *kind = MemKind::Device; break;
      case cudaMemoryTypeManaged: *kind = MemKind::Managed; break;
      case cudaMemoryTypeHost: *kind = MemKind::PinnedHost; break;
      case cudaMemoryTypeUnregistered: *kind = MemKind::Host; break;
      default: break;
    }
    return ncclSuccess;
  }
  // A cuMem allocation goes out as a POSIX fd of this process, made once and open until free(): the importer
  // takes its own copy (pidfd_getfd) while the allocation lives. A cudaMalloc one goes as a CUDA IPC handle.
  ncclResult_t exportMem(void* ptr, MemExport* out) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = find(ptr);
    if (it == regions_.end() || (it->second.what != Region::Malloc && it->second.what != Region::CuMem))
      TUTTI_FAIL(ncclInvalidArgument, "cuda runtime: exportMem: {} is not in a device allocation of this runtime "
                 "(only memory from alloc() can be exported)", ptr);
    Entry& e = it->second;
    MemExport h;
    h.pid = getpid();
    h.pidNs = pidNamespaceId();
    h.bytes = e.bytes;
    h.offset = reinterpret_cast<uintptr_t>(ptr) - it->first;
    if (e.what == Region::CuMem) {
      if (e.fd < 0) {
        int fd = -1;
        TUTTI_CU_TRY(driver().cuMemExportToShareableHandle(&fd, e.handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
        e.fd = fd;
      }
      h.kind = kExportCuMemFd;
      h.fd = e.fd;
    } else {
      cudaIpcMemHandle_t ipc;
      TUTTI_CUDA_TRY(cudaIpcGetMemHandle(&ipc, reinterpret_cast<void*>(it->first)));
      std::memcpy(h.opaque, &ipc, sizeof(ipc));
      h.kind = kExportCudaIpc;
    }
    *out = h;
    return ncclSuccess;
  }
  ncclResult_t dmabufFd(void* ptr, size_t bytes, int* fd, uint64_t* offset) override {
    *fd = -1;
    *offset = 0;
    // Optional: a driver without DMA-BUF export (before 515, or a GPU without it) leaves CUDA registration.
    static const auto getHandle = [] {
      void* fn = nullptr;
      cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
      if (cudaGetDriverEntryPointByVersion("cuMemGetHandleForAddressRange", &fn, 12000, cudaEnableDefault, &found) !=
              cudaSuccess || found != cudaDriverEntryPointSuccess) {
        cudaGetLastError();
        fn = nullptr;
      }
      return reinterpret_cast<decltype(&::cuMemGetHandleForAddressRange)>(fn);
    }();
    const Driver& d = driver();
    int dev = 0, supported = 0;
    CUdevice cu = 0;
    if (!getHandle || !d.cuDeviceGet || !d.cuDeviceGetAttribute || cudaGetDevice(&dev) != cudaSuccess ||
        d.cuDeviceGet(&cu, dev) != CUDA_SUCCESS ||
        d.cuDeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, cu) != CUDA_SUCCESS || !supported) {
      cudaGetLastError();
      return ncclSuccess;
    }
    // The range must cover whole host pages.
    static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const uintptr_t start = reinterpret_cast<uintptr_t>(ptr) & ~(page - 1);
    const uintptr_t end = (reinterpret_cast<uintptr_t>(ptr) + bytes + page - 1) & ~(page - 1);
    int got = -1;
    if (getHandle(&got, static_cast<CUdeviceptr>(start), end - start, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0) !=
        CUDA_SUCCESS)
      return ncclSuccess;
    *fd = got;
    *offset = reinterpret_cast<uintptr_t>(ptr) - start;
    return ncclSuccess;
  }
  ncclResult_t importMem(const MemExport& h, void** ptr) override {
    if (h.kind != kExportCuMemFd && h.kind != kExportCudaIpc)
      TUTTI_FAIL(ncclInvalidArgument, "cuda runtime: the handle (kind {}) was not exported by this runtime", h.kind);
    if (h.offset >= h.bytes)
      TUTTI_FAIL(ncclInvalidArgument, "cuda runtime: handle offset {} is outside its {}-byte allocation", h.offset,
                 h.bytes);
    uintptr_t base = 0;
    Entry entry{Region::ImportedIpc, h.bytes};
    if (h.kind == kExportCudaIpc) {
      cudaIpcMemHandle_t ipc;
      std::memcpy(&ipc, h.opaque, sizeof(ipc));
      void* p = nullptr;
      TUTTI_CUDA_TRY(cudaIpcOpenMemHandle(&p, ipc, cudaIpcMemLazyEnablePeerAccess));
      base = reinterpret_cast<uintptr_t>(p);
    } else {
      const Driver& d = driver();
      if (!d.error.empty()) TUTTI_FAIL(ncclUnhandledCudaError, "cuda runtime: cannot import cuMem memory: {}", d.error);
      int dev = 0;
      TUTTI_CUDA_TRY(cudaGetDevice(&dev));
      TUTTI_CUDA_TRY(cudaFree(nullptr));  // makes the device's primary context current for the driver calls
      std::string error;
      const int fd = borrowPeerFd(h.pid, h.pidNs, h.fd, &error);
      if (fd < 0)
        TUTTI_FAIL(ncclSystemError, "cuda runtime: cannot import device memory of process {} (its fd {}): {}", h.pid,
                   h.fd, error);
      entry.what = Region::ImportedCuMem;
      const CUresult r = d.cuMemImportFromShareableHandle(
          &entry.handle, reinterpret_cast<void*>(static_cast<uintptr_t>(fd)), CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
      close(fd);  // the handle holds the memory
      if (r != CUDA_SUCCESS)
        TUTTI_FAIL(ncclUnhandledCudaError, "cuda runtime: cuMemImportFromShareableHandle of process {}'s memory "
                   "failed: {}", h.pid, cuErrorText(r));
      CUdeviceptr va = 0;
      TUTTI_CHECK(mapHandle(d, entry.handle, h.bytes, dev, &va));
      base = static_cast<uintptr_t>(va);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    regions_[base] = entry;
    *ptr = reinterpret_cast<char*>(base) + h.offset;
    return ncclSuccess;
  }
  ncclResult_t closeImport(void* ptr) override { return drop(ptr, true); }
  ncclResult_t memcpyAsync(void* dst, const void* src, size_t bytes, Stream s) override {
    return TUTTI_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s));
  }
  ncclResult_t memset(void* ptr, int value, size_t bytes) override {
    return TUTTI_CUDA(cudaMemset(ptr, value, bytes));
  }

  ncclResult_t streamCreate(Stream* s) override {
    return TUTTI_CUDA(cudaStreamCreateWithFlags(s, cudaStreamNonBlocking));
  }
  ncclResult_t streamDestroy(Stream s) override { return TUTTI_CUDA(cudaStreamDestroy(s)); }
  ncclResult_t streamSynchronize(Stream s) override { return TUTTI_CUDA(cudaStreamSynchronize(s)); }
  ncclResult_t streamQuery(Stream s) override {
    const cudaError_t e = cudaStreamQuery(s);
    return e == cudaErrorNotReady ? ncclInProgress : TUTTI_CUDA_NAMED(e, "cudaStreamQuery");
  }
  ncclResult_t eventCreate(Event* e) override {
    cudaEvent_t ev = nullptr;
    TUTTI_CUDA_TRY(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    *e = reinterpret_cast<Event>(ev);
    return ncclSuccess;
  }
  ncclResult_t eventDestroy(Event e) override { return TUTTI_CUDA(cudaEventDestroy(event(e))); }
  ncclResult_t eventRecord(Event e, Stream s) override { return TUTTI_CUDA(cudaEventRecord(event(e), s)); }
  ncclResult_t streamWaitEvent(Stream s, Event e) override { return TUTTI_CUDA(cudaStreamWaitEvent(s, event(e), 0)); }
  // The external flags are for captures only: outside one these are the plain calls.
  ncclResult_t eventRecordExternal(Event e, Stream s) override {
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    TUTTI_CUDA_TRY(cudaStreamIsCapturing(s, &st));
    if (st != cudaStreamCaptureStatusActive) return TUTTI_CUDA(cudaEventRecord(event(e), s));
    return TUTTI_CUDA(cudaEventRecordWithFlags(event(e), s, cudaEventRecordExternal));
  }
  ncclResult_t streamWaitEventExternal(Stream s, Event e) override {
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    TUTTI_CUDA_TRY(cudaStreamIsCapturing(s, &st));
    return TUTTI_CUDA(cudaStreamWaitEvent(s, event(e), st == cudaStreamCaptureStatusActive ? cudaEventWaitExternal : 0));
  }
  ncclResult_t eventQuery(Event e) override {
    const cudaError_t r = cudaEventQuery(event(e));
    return r == cudaErrorNotReady ? ncclInProgress : TUTTI_CUDA_NAMED(r, "cudaEventQuery");
  }
  ncclResult_t eventSynchronize(Event e) override { return TUTTI_CUDA(cudaEventSynchronize(event(e))); }
  ncclResult_t launchHostFunc(Stream s, HostFn fn, void* arg) override {
    return TUTTI_CUDA(cudaLaunchHostFunc(s, fn, arg));
  }
  ncclResult_t launchKernel(const KernelLaunch& k, Stream s) override {
    if (!k.fn || k.grid <= 0 || k.block <= 0)
      TUTTI_FAIL(ncclInvalidArgument, "cuda runtime: bad kernel launch (function {}, grid {}, block {})", k.fn, k.grid,
                 k.block);
    TUTTI_CHECK(loadKernel(k.fn, k.sharedBytes));  // nothing to do after the communicator's init loaded it
    void* args[] = {const_cast<void*>(k.args)};  // the kernel's one by-value parameter, copied at the call
    return TUTTI_CUDA(cudaLaunchKernel(k.fn, dim3(static_cast<unsigned>(k.grid)),
                                       dim3(static_cast<unsigned>(k.block)), args, k.sharedBytes, s));
  }

  ncclResult_t loadKernel(const void* fn, size_t sharedBytes) override {
    if (!fn) TUTTI_FAIL(ncclInvalidArgument, "cuda runtime: loadKernel of a null function");
    int dev = 0;
    TUTTI_CUDA_TRY(cudaGetDevice(&dev));
    std::lock_guard<std::mutex> lock(mutex_);
    size_t& allowed = loaded_[{dev, fn}];  // 0: not loaded on `dev` yet
    if (allowed != 0 && allowed >= sharedBytes) return ncclSuccess;
    cudaFuncAttributes attr{};
    TUTTI_CUDA_TRY(cudaFuncGetAttributes(&attr, fn));  // loads it (and its module) on this device
    constexpr size_t kDefaultShared = 48 << 10;          // more needs the function's opt-in
    if (sharedBytes > kDefaultShared)
      TUTTI_CUDA_TRY(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(sharedBytes)));
    TUTTI_CHECK(reserveLocalMemory(dev, attr.localSizeBytes));
    allowed = std::max({allowed, sharedBytes, size_t{1}});
    return ncclSuccess;
  }
  // A thread's local memory (stack frame, spills) comes from a per-device reservation that CUDA grows at the first
  // launch of a kernel needing more than it holds, and growing it waits for every kernel running on the device. A
  // first launch of the kernel with the largest frame (on sm_90, 1728 bytes for fp32 against 1712 for int8), queued
  // while another rank's kernel spins for this rank, would wait for that kernel, which waits for this launch: the
  // ranks sharing a GPU then time out one after the other. So the stack limit is raised to the largest frame of the
  // loaded kernels here, at communicator init, before any of them runs. It reserves what the first launch would
  // have (the frame times the device's resident threads), only earlier. mutex_ held.
  ncclResult_t reserveLocalMemory(int dev, size_t frameBytes) {
    size_t& reserved = localBytes_[dev];
    if (frameBytes <= reserved) return ncclSuccess;
    size_t limit = 0;
    TUTTI_CUDA_TRY(cudaDeviceGetLimit(&limit, cudaLimitStackSize));
    reserved = std::max(limit, frameBytes);  // a failure below is reported once, not at every load
    if (limit >= frameBytes) return ncclSuccess;
    // Not fatal (a device short of memory): the first launch then reserves it, or fails with CUDA's error.
    if (const cudaError_t e = cudaDeviceSetLimit(cudaLimitStackSize, frameBytes); e != cudaSuccess) {
      (void)cudaGetLastError();
      TUTTI_WARN("cuda runtime: device {}: cannot raise the stack limit from {} to {} bytes ({}): the first launch "
                 "of a kernel with that frame will wait for every kernel running on the device, and ranks sharing "
                 "it may time out", dev, limit, frameBytes, cudaGetErrorString(e));
      return ncclSuccess;
    }
    TUTTI_INFO(NCCL_INIT, "cuda runtime: device {}: stack limit raised from {} to {} bytes (the largest frame of the "
               "kernels), reserved before any runs", dev, limit, frameBytes);
    return ncclSuccess;
  }

  ncclResult_t captureStatus(Stream s, Capture* status, uint64_t* id) override {
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    unsigned long long cid = 0;
    TUTTI_CUDA_TRY(cudaStreamGetCaptureInfo(s, &st, &cid));
    *status = st == cudaStreamCaptureStatusActive        ? Capture::Active
              : st == cudaStreamCaptureStatusInvalidated ? Capture::Invalidated
                                                         : Capture::None;
    *id = cid;
    return ncclSuccess;
  }
  ncclResult_t keepWithCapture(Stream s, void* obj, HostFn destroy) override {
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    unsigned long long id = 0;
    cudaGraph_t graph = nullptr;
    TUTTI_CUDA_TRY(cudaStreamGetCaptureInfo(s, &st, &id, &graph));
    if (st != cudaStreamCaptureStatusActive || !graph)
      TUTTI_FAIL(ncclInternalError, "cuda runtime: keepWithCapture: stream {} is not capturing", static_cast<void*>(s));
    auto* kept = new Kept{obj, destroy};
    cudaUserObject_t uo = nullptr;
    const cudaError_t e = cudaUserObjectCreate(&uo, kept, releaseKept, 1, cudaUserObjectNoDestructorSync);
    if (e != cudaSuccess) delete kept;
    TUTTI_CHECK(TUTTI_CUDA_NAMED(e, "cudaUserObjectCreate"));
    const cudaError_t r = cudaGraphRetainUserObject(graph, uo, 1, cudaGraphUserObjectMove);
    if (r != cudaSuccess) {
      kept->obj = nullptr;  // the caller keeps obj: releasing the user object frees only `kept`
      cudaUserObjectRelease(uo, 1);
    }
    return TUTTI_CUDA_NAMED(r, "cudaGraphRetainUserObject");
  }

  // Kernel failures reach the user through ncclCommGetAsyncError.
  void failCurrentWork(ncclResult_t) override {}

 private:
  static cudaEvent_t event(Event e) { return reinterpret_cast<cudaEvent_t>(e); }

  // Why this machine cannot run the CUDA backend; empty when it can.
  static std::string probe() {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    cudaGetLastError();
    if (e == cudaErrorInsufficientDriver) {
      int drv = 0;
      cudaDriverGetVersion(&drv);  // stays 0 where no driver could be loaded
      cudaGetLastError();
      if (drv == 0) return "no NVIDIA driver found (libcuda.so.1 could not be loaded: cudaErrorInsufficientDriver)";
      return fmt::format("the NVIDIA driver supports CUDA {}.{}, older than this build's CUDA runtime {}.{} "
                         "(cudaErrorInsufficientDriver)", drv / 1000, drv % 1000 / 10, CUDART_VERSION / 1000,
                         CUDART_VERSION % 1000 / 10);
    }
    if (e == cudaErrorNoDevice || (e == cudaSuccess && n == 0)) return "the NVIDIA driver reports no CUDA device";
    if (e != cudaSuccess)
      return fmt::format("the CUDA runtime cannot use the driver: cudaGetDeviceCount failed: {} ({})",
                         cudaGetErrorName(e), cudaGetErrorString(e));
    int firstArch = 0;
    for (int dev = 0; dev < n; ++dev) {
      int major = 0, minor = 0;
      cudaError_t a = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
      if (a == cudaSuccess) a = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
      if (a != cudaSuccess) {
        cudaGetLastError();
        return fmt::format("cannot read GPU {}'s compute capability: {} ({})", dev, cudaGetErrorName(a),
                           cudaGetErrorString(a));
      }
      if (major * 10 + minor >= 80) return {};
      if (dev == 0) firstArch = major * 10 + minor;
    }
    cudaDeviceProp prop;
    const std::string name = cudaGetDeviceProperties(&prop, 0) == cudaSuccess ? prop.name : "name unknown";
    cudaGetLastError();
    return fmt::format("GPU 0 ({}) is sm_{}{}; the kernels need sm_80 or newer", name, firstArch,
                       n > 1 ? fmt::format(" and none of the other {} is newer", n - 1) : "");
  }

  // A cuMem allocation, shareable as a POSIX fd; *done stays false (nothing allocated) where the driver or
  // device cannot make one.
  ncclResult_t allocCuMem(void** ptr, size_t bytes, bool* done) {
    const Driver& d = driver();
    if (!d.error.empty()) return ncclSuccess;
    int dev = 0, vmm = 0, fds = 0;
    CUdevice cu = 0;
    TUTTI_CUDA_TRY(cudaGetDevice(&dev));
    TUTTI_CUDA_TRY(cudaFree(nullptr));  // makes the device's primary context current for the driver calls
    TUTTI_CU_TRY(d.cuDeviceGet(&cu, dev));
    TUTTI_CU_TRY(d.cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, cu));
    TUTTI_CU_TRY(d.cuDeviceGetAttribute(&fds, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, cu));
    if (!vmm || !fds) return ncclSuccess;
    CUmemAllocationProp prop = {};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    size_t granularity = 0;
    TUTTI_CU_TRY(d.cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    const size_t size = ((bytes ? bytes : 1) + granularity - 1) / granularity * granularity;
    CUmemGenericAllocationHandle h = 0;
    const CUresult c = d.cuMemCreate(&h, size, &prop, 0);
    if (c != CUDA_SUCCESS)
      TUTTI_FAIL(ncclUnhandledCudaError, "cuda runtime: cuMemCreate of {} bytes on GPU {} failed: {}", size, dev,
                 cuErrorText(c));
    CUdeviceptr va = 0;
    TUTTI_CHECK(mapHandle(d, h, size, dev, &va));
    std::lock_guard<std::mutex> lock(mutex_);
    regions_[static_cast<uintptr_t>(va)] = {Region::CuMem, size, h};
    *ptr = reinterpret_cast<void*>(va);
    *done = true;
    return ncclSuccess;
  }

  // free (an allocation, by its base) or closeImport (an import, by any pointer into it).
  ncclResult_t drop(void* ptr, bool imported) {
    uintptr_t base = 0;
    Entry e;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = find(ptr);
      const bool isImport = it != regions_.end() && (it->second.what == Region::ImportedCuMem ||
                                                     it->second.what == Region::ImportedIpc);
      if (it == regions_.end() || isImport != imported || (!imported && it->first != reinterpret_cast<uintptr_t>(ptr)))
        TUTTI_FAIL(ncclInvalidArgument, "cuda runtime: {}: {} is not {}", imported ? "closeImport" : "free", ptr,
                   imported ? "memory imported by importMem" : "a device allocation of alloc()");
      base = it->first;
      e = it->second;
      regions_.erase(it);
    }
    switch (e.what) {
      case Region::Malloc: return TUTTI_CUDA(cudaFree(ptr));
      case Region::ImportedIpc: return TUTTI_CUDA(cudaIpcCloseMemHandle(reinterpret_cast<void*>(base)));
      default:
        if (e.fd >= 0) close(e.fd);
        return unmapHandle(driver(), static_cast<CUdeviceptr>(base), e.bytes, e.handle);
    }
  }

  // The entry whose range holds p, or end(); mutex_ held.
  std::map<uintptr_t, Entry>::iterator find(const void* p) {
    const auto a = reinterpret_cast<uintptr_t>(p);
    auto it = regions_.upper_bound(a);
    if (it == regions_.begin()) return regions_.end();
    --it;
    return a < it->first + it->second.bytes ? it : regions_.end();
  }

  std::once_flag probed_;
  std::string unusable_;
  std::mutex mutex_;
  std::map<uintptr_t, Entry> regions_;         // allocations and imports, by base address
  // Kernels loaded, by device: the dynamic shared memory each was opened to (at least 1).
  std::map<std::pair<int, const void*>, size_t> loaded_;
  std::map<int, size_t> localBytes_;  // device -> the stack limit known to cover the loaded kernels
};

#else  // no CUDA toolkit

constexpr const char* kNoCuda = "this build has no CUDA backend (configured without the CUDA toolkit)";

#define TUTTI_NO_CUDA(call) TUTTI_FAIL(ncclInvalidUsage, "cuda runtime: {} is unavailable: {}", call, kNoCuda)

class CudaRuntime final : public Runtime {
 public:
  const char* name() const override { return "cuda"; }
  bool usable(std::string* why) override {
    if (why) *why = kNoCuda;
    return false;
  }
  ncclResult_t deviceCount(int*) override { TUTTI_NO_CUDA("deviceCount"); }
  ncclResult_t currentDevice(int*) override { TUTTI_NO_CUDA("currentDevice"); }
  ncclResult_t setDevice(int) override { TUTTI_NO_CUDA("setDevice"); }
  ncclResult_t deviceArch(int, int*) override { TUTTI_NO_CUDA("deviceArch"); }
  ncclResult_t deviceName(int, std::string*) override { TUTTI_NO_CUDA("deviceName"); }
  ncclResult_t alloc(void**, size_t, bool) override { TUTTI_NO_CUDA("alloc"); }
  ncclResult_t free(void*) override { TUTTI_NO_CUDA("free"); }
  ncclResult_t hostAlloc(void**, size_t) override { TUTTI_NO_CUDA("hostAlloc"); }
  ncclResult_t hostFree(void*) override { TUTTI_NO_CUDA("hostFree"); }
  ncclResult_t hostRegister(void*, size_t) override { TUTTI_NO_CUDA("hostRegister"); }
  ncclResult_t hostUnregister(void*) override { TUTTI_NO_CUDA("hostUnregister"); }
  ncclResult_t pointerKind(const void*, MemKind*) override { TUTTI_NO_CUDA("pointerKind"); }
  ncclResult_t exportMem(void*, MemExport*) override { TUTTI_NO_CUDA("exportMem"); }
  ncclResult_t importMem(const MemExport&, void**) override { TUTTI_NO_CUDA("importMem"); }
  ncclResult_t closeImport(void*) override { TUTTI_NO_CUDA("closeImport"); }
  ncclResult_t dmabufFd(void*, size_t, int* fd, uint64_t*) override {
    *fd = -1;
    return ncclSuccess;
  }
  ncclResult_t memcpyAsync(void*, const void*, size_t, Stream) override { TUTTI_NO_CUDA("memcpyAsync"); }
  ncclResult_t memset(void*, int, size_t) override { TUTTI_NO_CUDA("memset"); }
  ncclResult_t streamCreate(Stream*) override { TUTTI_NO_CUDA("streamCreate"); }
  ncclResult_t streamDestroy(Stream) override { TUTTI_NO_CUDA("streamDestroy"); }
  ncclResult_t streamSynchronize(Stream) override { TUTTI_NO_CUDA("streamSynchronize"); }
  ncclResult_t streamQuery(Stream) override { TUTTI_NO_CUDA("streamQuery"); }
  ncclResult_t eventCreate(Event*) override { TUTTI_NO_CUDA("eventCreate"); }
  ncclResult_t eventDestroy(Event) override { TUTTI_NO_CUDA("eventDestroy"); }
  ncclResult_t eventRecord(Event, Stream) override { TUTTI_NO_CUDA("eventRecord"); }
  ncclResult_t streamWaitEvent(Stream, Event) override { TUTTI_NO_CUDA("streamWaitEvent"); }
  ncclResult_t eventRecordExternal(Event, Stream) override { TUTTI_NO_CUDA("eventRecordExternal"); }
  ncclResult_t streamWaitEventExternal(Stream, Event) override { TUTTI_NO_CUDA("streamWaitEventExternal"); }
  ncclResult_t eventQuery(Event) override { TUTTI_NO_CUDA("eventQuery"); }
  ncclResult_t eventSynchronize(Event) override { TUTTI_NO_CUDA("eventSynchronize"); }
  ncclResult_t launchHostFunc(Stream, HostFn, void*) override { TUTTI_NO_CUDA("launchHostFunc"); }
  ncclResult_t launchKernel(const KernelLaunch&, Stream) override { TUTTI_NO_CUDA("launchKernel"); }
  ncclResult_t loadKernel(const void*, size_t) override { TUTTI_NO_CUDA("loadKernel"); }
  ncclResult_t captureStatus(Stream, Capture*, uint64_t*) override { TUTTI_NO_CUDA("captureStatus"); }
  ncclResult_t keepWithCapture(Stream, void*, HostFn) override { TUTTI_NO_CUDA("keepWithCapture"); }
  void failCurrentWork(ncclResult_t) override {}
};

#endif

}  // namespace

Runtime* cudaRuntime() {
  static auto* r = new CudaRuntime;  // never destroyed: other singletons may still use it while the process exits
  return r;
}

}  // namespace tutti::rt
