// The device runtime: the one interface through which the engine (device/launch) and the transports touch a
// device. Two implementations:
//   - cuda (device/cuda/runtime.cc): the CUDA runtime, linked statically; it loads the driver only when first
//     asked, so libtutti loads and runs its host and sim backends on a machine without one.
//   - sim (device/sim/runtime.cc): the CPU. Streams are the host streams of tutti.h (one thread each, in
//     order), events are generation counters, device memory is host memory (memfd-backed where it must be
//     exported to another process), kernels run on the SIMT emulator, and stream capture records the
//     operations a stream (and every stream it pulls in through events) is given, to be replayed as a graph.
// Everything above this interface (enqueue, stream fan-in/fan-out, capture bookkeeping, staging) is shared,
// so what the sim runs in CI is the code a GPU runs.
//
// Handles are opaque pointers: a Stream is a cudaStream_t (the user's, or one made here), an Event a
// cudaEvent_t. Calls return ncclSuccess or an error already logged with what the runtime said.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace tutti::rt {

using Stream = cudaStream_t;
using Event = struct RtEvent*;
using HostFn = void (*)(void* arg);

enum class MemKind { Unknown, Host, PinnedHost, Device, Managed };
const char* memKindName(MemKind k);

// Where a stream stands with capture (cudaStreamCaptureStatus).
enum class Capture { None, Active, Invalidated };

// A shareable handle of device memory, for another process of the same host (sent through the bootstrap).
// The fd travels with SCM_RIGHTS (or pidfd_getfd); `opaque` is the runtime's own handle (a CUDA IPC handle).
struct MemExport {
  int32_t kind = 0;       // runtime-specific: what `fd` / `opaque` hold
  int32_t fd = -1;        // an fd of the exporting process (sim: memfd; cuda: the cuMem POSIX fd)
  int32_t pid = 0;        // the exporting process
  uint64_t pidNs = 0;     // its pid namespace (peer_fd.h): `pid` means that process only inside it
  uint64_t bytes = 0;     // size of the allocation
  uint64_t offset = 0;    // of the exported pointer within it
  unsigned char opaque[64] = {};
};

struct KernelLaunch {
  const void* fn = nullptr;  // cuda: the __global__ function; sim: a sim::SimKernelFn
  int grid = 1;
  int block = 32;
  size_t sharedBytes = 0;
  const void* args = nullptr;  // one argument, copied at the call (as CUDA copies kernel parameters)
  size_t argBytes = 0;
};

class Runtime {
 public:
  virtual ~Runtime() = default;
  virtual const char* name() const = 0;

  // Devices. usable() is false with *why set when there is no driver, no device, or none new enough.
  virtual bool usable(std::string* why) = 0;
  virtual ncclResult_t deviceCount(int* n) = 0;
  virtual ncclResult_t currentDevice(int* dev) = 0;
  virtual ncclResult_t setDevice(int dev) = 0;
  virtual ncclResult_t deviceArch(int dev, int* arch) = 0;  // major * 10 + minor
  virtual ncclResult_t deviceName(int dev, std::string* name) = 0;

  // Memory. alloc() with shareable gives memory export() can hand to another process.
  virtual ncclResult_t alloc(void** ptr, size_t bytes, bool shareable) = 0;
  // Whether alloc() returns memory that reads as zero (fresh pages), so a caller that needs zeroed memory can
  // leave it untouched rather than memset (and so fault in) all of it.
  virtual bool allocIsZeroed() const { return false; }
  virtual ncclResult_t free(void* ptr) = 0;
  virtual ncclResult_t hostAlloc(void** ptr, size_t bytes) = 0;  // pinned, mapped into the device
  virtual ncclResult_t hostFree(void* ptr) = 0;
  virtual ncclResult_t hostRegister(void* ptr, size_t bytes) = 0;  // existing host memory (a shm segment)
  virtual ncclResult_t hostUnregister(void* ptr) = 0;
  virtual ncclResult_t pointerKind(const void* ptr, MemKind* kind) = 0;
  virtual ncclResult_t exportMem(void* ptr, MemExport* out) = 0;
  // Maps memory another process exported; *ptr points at the exported byte. closeImport unmaps it.
  virtual ncclResult_t importMem(const MemExport& handle, void** ptr) = 0;
  virtual ncclResult_t closeImport(void* ptr) = 0;
  // A DMA-BUF fd of [ptr, ptr + bytes) of a device allocation, for a NIC to register (regMrDmaBuf): *fd is the
  // caller's to close, *offset where ptr lies in it. *fd = -1 (and ncclSuccess) when this runtime or driver
  // cannot make one: the caller then registers the pointer as CUDA memory.
  virtual ncclResult_t dmabufFd(void* ptr, size_t bytes, int* fd, uint64_t* offset) = 0;
  virtual ncclResult_t memcpyAsync(void* dst, const void* src, size_t bytes, Stream s) = 0;
  virtual ncclResult_t memset(void* ptr, int value, size_t bytes) = 0;  // device memory, done on return

  // Streams and events.
  virtual ncclResult_t streamCreate(Stream* s) = 0;
  virtual ncclResult_t streamDestroy(Stream s) = 0;  // after its pending work
  virtual ncclResult_t streamSynchronize(Stream s) = 0;
  virtual ncclResult_t streamQuery(Stream s) = 0;  // ncclSuccess, ncclInProgress, or the stream's error
  virtual ncclResult_t eventCreate(Event* e) = 0;
  virtual ncclResult_t eventDestroy(Event e) = 0;
  virtual ncclResult_t eventRecord(Event e, Stream s) = 0;
  virtual ncclResult_t streamWaitEvent(Stream s, Event e) = 0;
  // External record and wait (cudaEventRecordExternal / cudaEventWaitExternal), ordering only. Outside a
  // capture they are a record and a wait. In a capture they do not join it: they become graph nodes that
  // record the event, or wait for its newest record, each time the graph runs, so a replayed graph and work
  // queued outside it order themselves through the event (NCCL_GRAPH_MIXING_SUPPORT).
  virtual ncclResult_t eventRecordExternal(Event e, Stream s) = 0;
  virtual ncclResult_t streamWaitEventExternal(Stream s, Event e) = 0;
  virtual ncclResult_t eventQuery(Event e) = 0;  // ncclSuccess when done, ncclInProgress while pending
  virtual ncclResult_t eventSynchronize(Event e) = 0;
  virtual ncclResult_t launchHostFunc(Stream s, HostFn fn, void* arg) = 0;
  virtual ncclResult_t launchKernel(const KernelLaunch& k, Stream s) = 0;
  // Loads `fn` (a KernelLaunch::fn) on the current device now, with leave to use `sharedBytes` of dynamic shared
  // memory. cuda: CUDA loads a kernel lazily at its first launch by default, and a load may wait for the kernels
  // already running; a rank's kernel that spins for a peer whose first launch waits for it would never end, so
  // communicators load theirs before any runs. The sim has nothing to load.
  virtual ncclResult_t loadKernel(const void* fn, size_t sharedBytes) = 0;

  // Capture. *id names the capture (same id: same graph). keepWithCapture hands `obj` to the graph being
  // captured on `s`: `destroy(obj)` runs when that graph (and every executable made of it) is gone.
  virtual ncclResult_t captureStatus(Stream s, Capture* status, uint64_t* id) = 0;
  virtual ncclResult_t keepWithCapture(Stream s, void* obj, HostFn destroy) = 0;

  // Marks the work running now on this runtime's stream thread as failed (sim: the stream's error, carried
  // by the events recorded after it, so the user's stream reports it). cuda: nothing (kernel failures reach
  // the user through ncclCommGetAsyncError, as in NCCL).
  virtual void failCurrentWork(ncclResult_t res) = 0;
};

Runtime* simRuntime();   // always present (the emulator's kernels may be missing: sim::available())
Runtime* cudaRuntime();  // present in every build; usable() says why not where the build or machine lacks CUDA

}  // namespace tutti::rt
