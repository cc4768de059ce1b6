// net-socket internals shared by its files: logging through the core's logger, the device list, the comm
// objects behind the opaque pointers of the ABI, and the v12-shaped entry points the exported tables use.
#pragma once

#include "wire.h"

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <tutti/net.h>

namespace tutti::netsock {

// ---- logging: only through the logger handed to init; silent before the first init.
void logMsg(ncclDebugLogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));
void setLogger(ncclDebugLogger_t logger);
#define SOCK_WARN(...) ::tutti::netsock::logMsg(NCCL_LOG_WARN, NCCL_ALL, __FILE__, __LINE__, __VA_ARGS__)
#define SOCK_INFO(flags, ...) ::tutti::netsock::logMsg(NCCL_LOG_INFO, (flags), __FILE__, __LINE__, __VA_ARGS__)
#define SOCK_TRACE(flags, ...) ::tutti::netsock::logMsg(NCCL_LOG_TRACE, (flags), __FILE__, __LINE__, __VA_ARGS__)

// ---- devices (plugin.cc): one per selected network interface.
struct Device {
  std::string name;
  SockAddr addr;  // port 0; listen() binds here
  std::string pciPath;
  int speedMbps;
};
int deviceCount();
const Device* device(int dev);  // nullptr when dev is out of range
std::string addrToString(const SockAddr& a);
socklen_t addrLen(const SockAddr& a);

// ---- comms (connect.cc / transfer.cc).
struct Comm;

// One piece of a message on one data socket, progressed by the helper thread owning that socket.
struct Task {
  char* data = nullptr;
  size_t size = 0;
  size_t offset = 0;
  struct Request* req = nullptr;
};

enum class ReqState { Free, Ctrl, Data };

// One posted isend/irecv. Slots live in their comm (NCCL_NET_MAX_REQUESTS of them).
struct Request {
  Comm* comm = nullptr;
  ReqState state = ReqState::Free;
  char* data = nullptr;
  size_t size = 0;        // send: message size; recv: posted capacity, then the size received
  MsgHeader hdr{};
  size_t hdrOffset = 0;   // bytes of hdr moved so far (inline sends: of hdr and payload together)
  size_t inlineOffset = 0;
  std::atomic<int> pendingTasks{0};  // chunks still in flight on helper threads
  Task tasks[kMaxSockets];
};

// A helper thread with the data sockets it owns (socket i belongs to thread i % nThreads).
struct Worker {
  std::thread thread;
  int wakeFd = -1;  // eventfd: new task or stop
  std::mutex mu;
  bool stop = false;
  std::vector<int> sockIdx;                // indices into Comm::dataFds
  std::vector<std::deque<Task*>> queues;   // parallel to sockIdx, FIFO per socket
};

struct Comm {
  bool isSend = false;
  int dev = 0;
  int ctrlFd = -1;
  std::vector<int> dataFds;
  int nThreads = 0;
  int nextSock = 0;  // next data socket in the round-robin; advances identically on both ends
  size_t inlineBytes = 0;
  size_t minChunkBytes = 0;
  bool delayAcks = false;  // receiving comm: re-enter delayed-ACK mode after reads (keepAcksDelayed)
  int64_t ackArmedNs = 0;  // when a short read last did (steady clock; 0: never)
  // Receiving comm of a process that sends nothing (transfer.cc kPollFirstNs), as of its last read
  // that took data; and whether its last read found nothing. Both set: the next read polls the socket first.
  bool oneWay = false;
  bool drained = false;
  // Sending comm: whether its control socket holds short segments (TCP_NODELAY off, transfer.cc holdSmall), the
  // process's read count its last send saw, and its sends since that count last moved.
  bool holdAllowed = false;  // TUTTI_NET_SOCKET_HOLD_SMALL
  bool holding = false;
  uint64_t readsSeen = 0;
  uint32_t sendsUnheard = 0;
  // Receiving comm: the last header said the sender holds (kMsgHeld); a read took data since the last ACK forced.
  bool peerHolds = false;
  bool unacked = false;
  std::atomic<int> error{ncclSuccess};  // first failure; every later call on the comm reports it
  std::deque<Request*> ctrlQueue;       // requests whose header/inline phase is not finished, in post order
  uint32_t pollsSincePeerCheck = 0;     // test() calls on unfinished sends since the last peerGone()
  // Receive side: bytes read from the control socket ahead of the request that needs them, [rxBegin, rxEnd) of
  // rxBuf. One recv then takes a small message's header and payload together (and whatever follows).
  std::unique_ptr<char[]> rxBuf;
  size_t rxBegin = 0, rxEnd = 0;
  std::vector<std::unique_ptr<Worker>> workers;  // started on the first chunked message
  std::atomic<bool> chunked{false};              // workers started: data moves on helper threads too
  Request requests[NCCL_NET_MAX_REQUESTS];
};

// Records the first failure of a comm (later ones are consequences) and returns it.
ncclResult_t failComm(Comm* comm, ncclResult_t code);

// Creates a comm around connected sockets (ownership of the fds passes to it).
Comm* newComm(bool isSend, int dev, int ctrlFd, std::vector<int> dataFds, int nThreads);
ncclResult_t closeComm(Comm* comm);

// ---- v12-shaped entry points.
ncclResult_t pluginInit(ncclDebugLogger_t logger);
ncclResult_t pluginFinalize();
ncclResult_t netDevices(int* ndev);
ncclResult_t netGetProperties(int dev, ncclNetProperties_v12_t* props);
ncclResult_t netListen(int dev, void* handle, void** listenComm);
ncclResult_t netConnect(int dev, void* handle, void** sendComm);
ncclResult_t netAccept(void* listenComm, void** recvComm);
ncclResult_t netRegMr(void* comm, void* data, size_t size, int type, void** mhandle);
ncclResult_t netDeregMr(void* comm, void* mhandle);
ncclResult_t netIsend(void* sendComm, void* data, size_t size, void** request);
ncclResult_t netIrecv(void* recvComm, int n, void** data, size_t* sizes, void** request);
ncclResult_t netIflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
ncclResult_t netTest(void* request, int* done, int* sizes);
ncclResult_t netCloseSend(void* sendComm);
ncclResult_t netCloseRecv(void* recvComm);
ncclResult_t netCloseListen(void* listenComm);
// tuttiNetWait_v1 (tutti/net_wait.h).
ncclResult_t netWaitComms(void* const* comms, int nComms, int timeoutUs, int* ready);

// ---- socket helpers (connect.cc).
enum class Io { Done, Again, Error };
// Moves bytes [*offset, size) of buf on a non-blocking socket; advances *offset. Error sets *code
// (ncclRemoteError when the peer closed or reset, ncclSystemError otherwise) and logs.
Io progressIo(int fd, bool send, void* buf, size_t size, size_t* offset, ncclResult_t* code);
// Sends bytes [*offset, aSize + bSize) of the concatenation a|b with one sendmsg per try; advances *offset.
Io progressIo2(int fd, const void* a, size_t aSize, const void* b, size_t bSize, size_t* offset, ncclResult_t* code);
// True when the peer of a socket we only write to has closed or reset it.
bool peerGone(int fd);

}  // namespace tutti::netsock
